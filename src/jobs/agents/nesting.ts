// No runaway nesting. Every child polyspawn starts gets POLYSPAWN_DEPTH=<its depth> in its
// environment; a polyspawn that finds a depth of 1 or more (it was started inside an agent,
// e.g. by the project's .mcp.json) serves no spawn tools, unless the agent that started it
// was defined with `allow_nesting`: then the child's environment also carries
// POLYSPAWN_ALLOW_DEPTH, the deepest level whose polyspawn may still start agents. Whatever
// the allowance, a polyspawn at MAX_DEPTH or deeper never starts agents.
//
// The marker fails closed: a value that is not a whole number (an empty one too) counts as
// nested, and a client that starts polyspawn with a cleared environment (Codex does, for its MCP
// servers) does not clear it: the app also reads the marker of the nearest ancestor process that
// was started with one (src/lib/proc.ts, ancestorVariables), and the deeper of the two counts.
export const DEPTH_ENV = 'POLYSPAWN_DEPTH';
const ALLOW_DEPTH_ENV = 'POLYSPAWN_ALLOW_DEPTH';
/** Agents run at most this many levels below the outermost polyspawn. */
export const MAX_DEPTH = 3;

export type Nesting = {
  /** 0 for a polyspawn started by a person or an MCP client; n inside an agent n levels deep. */
  depth: number;
  /** The deepest level that may start agents, as granted by the environment. */
  allowDepth?: number;
  canSpawn: boolean;
  /** Why it cannot, in one sentence for the instructions and refusals. */
  reason?: string;
};

const wholeNumber = (raw: string | undefined): number | undefined =>
  raw !== undefined && /^\d{1,6}$/.test(raw.trim()) ? Number(raw.trim()) : undefined;

/** The variables that carry the marker, as ancestorVariables is asked for them. */
export const NESTING_ENV = [DEPTH_ENV, ALLOW_DEPTH_ENV] as const;

/**
 * How deep this polyspawn runs, from its own environment and the one its nearest marked
 * ancestor process was started with: the deeper counts, and one that cannot start agents wins a tie.
 */
export function nestingFrom(env: NodeJS.ProcessEnv, ancestor: NodeJS.ProcessEnv = {}): Nesting {
  const own = markerNesting(env);
  if (ancestor[DEPTH_ENV] === undefined) return own;
  const inherited = markerNesting(ancestor);
  if (env[DEPTH_ENV] === undefined) return inherited;
  if (inherited.depth !== own.depth) return inherited.depth > own.depth ? inherited : own;
  return own.canSpawn ? inherited : own;
}

function markerNesting(env: NodeJS.ProcessEnv): Nesting {
  const raw = env[DEPTH_ENV];
  if (raw === undefined) return { depth: 0, canSpawn: true };
  const depth = wholeNumber(raw);
  if (depth === undefined) {
    return {
      depth: MAX_DEPTH,
      canSpawn: false,
      reason: `${DEPTH_ENV}=${JSON.stringify(raw)} is not a whole number, so this polyspawn takes itself to be nested and starts no agents`,
    };
  }
  if (depth === 0) return { depth, canSpawn: true };
  const allowDepth = wholeNumber(env[ALLOW_DEPTH_ENV]);
  const allowed = allowDepth !== undefined ? { allowDepth } : {};
  if (depth >= MAX_DEPTH) {
    return {
      depth,
      ...allowed,
      canSpawn: false,
      reason: `it runs inside agents ${depth} levels deep (${DEPTH_ENV}=${depth}), and polyspawn never nests agents deeper than ${MAX_DEPTH}`,
    };
  }
  if (allowDepth !== undefined && depth <= allowDepth) return { depth, allowDepth, canSpawn: true };
  return {
    depth,
    ...allowed,
    canSpawn: false,
    reason: `it was started inside an agent that polyspawn runs (${DEPTH_ENV}=${depth}), and that agent's definition does not allow nesting (allow_nesting)`,
  };
}

/**
 * The variables a job's child gets: its depth, and the allowance it may pass on — the larger of
 * the one this polyspawn was given and the job's agent's own `allow_nesting` levels — capped
 * below MAX_DEPTH. With no allowance the variable is removed, so none leaks from our own env.
 */
export function childNestingEnv(nesting: Nesting, agentLevels = 0): Record<string, string | undefined> {
  const depth = nesting.depth + 1;
  const granted = agentLevels > 0 ? depth + agentLevels - 1 : -1;
  const allow = Math.min(Math.max(nesting.allowDepth ?? -1, granted), MAX_DEPTH - 1);
  return { [DEPTH_ENV]: String(depth), [ALLOW_DEPTH_ENV]: allow >= depth ? String(allow) : undefined };
}
