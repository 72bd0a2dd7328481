// The sandbox a CLI agent runs in, as the user's config, an agent definition and (where the user
// lets them) a spawn call say it, and how they combine: the user's config is the floor, so a
// definition or a caller may change the sandbox but never turn off one the user's config set,
// nor give back the network it took. How each mode starts the CLI: src/jobs/process/sandbox.ts.
import { isAbsolute } from 'node:path';
import { z } from 'zod';

export const SANDBOX_MODES = ['none', 'bwrap', 'docker', 'podman'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];
/** The modes that run the CLI in a container engine's image. */
export const CONTAINER_MODES: readonly SandboxMode[] = ['docker', 'podman'];

/** An extra path the agent sees at the same place: read-only unless `write`. */
type SandboxMount = { path: string; write: boolean };

export type SandboxSettings = {
  mode: SandboxMode;
  /** false: no network at all (and no channel to the orchestrator, which is reached over it). */
  network: boolean;
  mounts: SandboxMount[];
  /** docker/podman: the image with the CLI in it (polyspawn ships none). */
  image?: string;
  /** docker/podman: the engine, when not the one the environment names (DOCKER_HOST, CONTAINER_HOST, docker's current context). */
  engine?: SandboxEngine;
};

/**
 * A container engine: where it listens (`host`: `-H` for docker, `--remote --url` for podman) or
 * the docker context that says so (`context`: `--context`), and whether it sees this machine's
 * files. One that does not (another host's) gets no bind mount at all: the agent's work goes in as
 * a git bundle and comes back as its branch (src/jobs/process/remote-engine.ts). `sharesFiles` is
 * left out only for a context the config did not say it of: the spawn asks the context's endpoint
 * (src/jobs/process/docker-context.ts), which may change between spawns.
 */
export type SandboxEngine = { host?: string; context?: string; sharesFiles?: boolean };

/** A docker context's name as docker itself allows it: one argument, never read as an option. */
export const CONTEXT_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.+-]{0,99}$/;

/**
 * Whether an engine at `host` (an address, a docker context's endpoint) sees this machine's files,
 * when the config does not say: a local socket (or none named) does; ssh:// and tcp:// name another
 * machine's, which does not.
 */
export const sharesFilesAt = (host: string | undefined): boolean => !host || host.startsWith('unix://');

export const NO_SANDBOX: SandboxSettings = { mode: 'none', network: true, mounts: [] };

const modeSchema = z.enum(SANDBOX_MODES);
const mountSchema = z
  .object({
    path: z
      .string()
      .min(1)
      .max(4096)
      .refine((p) => isAbsolute(p) || p.startsWith('~/'), 'must be an absolute path or start with ~/'),
    write: z.boolean().optional(),
  })
  .strict();
/** A mode, or the mode with its options. */
export const sandboxSchema = z.union([
  modeSchema,
  z
    .object({
      mode: modeSchema,
      network: z.boolean().optional(),
      mounts: z.array(mountSchema).max(50).optional(),
      // A reference an engine takes as one argument, never read as an option.
      image: z
        .string()
        .max(500)
        .regex(/^[A-Za-z0-9][A-Za-z0-9._/:@-]*$/, 'must be an image reference (e.g. ghcr.io/me/agents:1)')
        .optional(),
      engine: z
        .object({
          // An engine's address, one argument; never read as an option.
          host: z
            .string()
            .max(500)
            .regex(/^(unix|ssh|tcp):\/\/[^\s]+$/, 'must be unix:///path, ssh://[user@]host or tcp://host:port')
            .optional(),
          context: z
            .string()
            .regex(CONTEXT_NAME, 'must be a docker context name (letters, digits, _ . + -; `docker context ls`)')
            .optional(),
          shares_files: z.boolean().optional(),
        })
        .strict()
        .refine((e) => !(e.host && e.context), {
          message: 'names both a host and a context: keep one (a context already says where its engine listens)',
        })
        .optional(),
    })
    .strict()
    .refine((s) => !(s.engine?.context && s.mode !== 'docker'), {
      message: `engine.context names a docker context, which only mode docker has: use engine.host (podman's --url), or mode docker`,
      path: ['engine', 'context'],
    }),
]);
type SandboxInput = z.infer<typeof sandboxSchema>;

/** A config's or a definition's `sandbox`, with its defaults filled in. */
export function sandboxSettings(input: SandboxInput): SandboxSettings {
  if (typeof input === 'string') return { ...NO_SANDBOX, mode: input };
  return {
    mode: input.mode,
    network: input.network ?? true,
    mounts: (input.mounts ?? []).map((m) => ({ path: m.path, write: m.write ?? false })),
    ...(input.image ? { image: input.image } : {}),
    ...(input.engine
      ? {
          engine: {
            ...(input.engine.host ? { host: input.engine.host } : {}),
            ...(input.engine.context ? { context: input.engine.context } : {}),
            // A context's endpoint is asked at spawn time (it is docker's state, not the config's).
            ...(input.engine.shares_files !== undefined || !input.engine.context
              ? { sharesFiles: input.engine.shares_files ?? sharesFilesAt(input.engine.host) }
              : {}),
          },
        }
      : {}),
  };
}

/** How a message names an engine: its address, or `context <name>`; '' for the environment's. */
export const engineName = (engine: SandboxEngine | undefined): string =>
  engine?.host ?? (engine?.context ? `context ${engine.context}` : '');

/** One line for people: `bwrap`, `docker (no network)`. */
export function sandboxLabel(s: Pick<SandboxSettings, 'mode' | 'network' | 'engine'>): string {
  const notes = [
    ...(s.network ? [] : ['no network']),
    ...(s.engine?.sharesFiles === false
      ? [`an engine sharing no files${engineName(s.engine) ? `: ${engineName(s.engine)}` : ''}`]
      : []),
  ];
  return notes.length ? `${s.mode} (${notes.join(', ')})` : s.mode;
}

/**
 * The sandbox a job runs in: the caller's mode (when the user lets callers choose), else the
 * definition's, else the configured one; network only if both the config and the definition
 * allow it; the config's mounts and the definition's; the definition's image, else the config's.
 * A problem (one sentence on what to change) when the result would loosen the user's config or
 * cannot run.
 */
export function effectiveSandbox(
  configured: SandboxSettings,
  where: { backend: string; userFile: string },
  definition?: { name: string; sandbox?: SandboxSettings },
  callerMode?: SandboxMode,
): { sandbox: SandboxSettings } | { problem: string } {
  const fromDefinition = definition?.sandbox;
  const mode = callerMode ?? fromDefinition?.mode ?? configured.mode;
  if (mode === 'none' && configured.mode !== 'none') {
    const who = callerMode ? 'sandbox: none' : `agent ${definition!.name}'s sandbox: none`;
    return {
      problem: `your config runs ${where.backend} in ${configured.mode} (${where.userFile}): ${who} cannot turn it off; remove it or choose another sandbox`,
    };
  }
  const image = fromDefinition?.image ?? configured.image;
  const engine = fromDefinition?.engine ?? configured.engine;
  if (engine?.context && mode === 'podman')
    return {
      problem: `sandbox podman cannot use the docker context ${engine.context} (${definition ? `agent ${definition.name}'s` : `backends.${where.backend}.sandbox`} engine): podman has no contexts; give the engine's address as engine.host, or run this agent with docker`,
    };
  if (CONTAINER_MODES.includes(mode) && !image) {
    return {
      problem: `sandbox ${mode} needs an image with the ${where.backend} CLI in it: set image in ${definition ? `agent ${definition.name}'s sandbox` : `backends.${where.backend}.sandbox`} (polyspawn ships none)`,
    };
  }
  return {
    sandbox: {
      mode,
      network: configured.network && (fromDefinition?.network ?? true),
      mounts: [...configured.mounts, ...(fromDefinition?.mounts ?? [])],
      ...(image ? { image } : {}),
      ...(engine && CONTAINER_MODES.includes(mode) ? { engine } : {}),
    },
  };
}

/** A container run on an engine that does not see this machine's files: its work travels as a branch. */
export const sharesNoFiles = (sandbox: SandboxSettings | undefined): boolean =>
  sandbox !== undefined && CONTAINER_MODES.includes(sandbox.mode) && sandbox.engine?.sharesFiles === false;
