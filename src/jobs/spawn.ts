// The spawn use case, the one path of spawn_<backend>, spawn_<agent> and `polyspawn run`: check
// that the backend can run here, resolve the model, the output schema, the folder and the
// session to resume, and submit the job. Waiting for it is the caller's (the MCP tools send
// progress notifications, `run` draws its live line).
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import which from 'which';
import type { Backend } from '../../backends/types.js';
import type { Availability } from '../config/availability.js';
import type { Config, Isolation } from '../config/config.js';
import type { Context } from '../config/context.js';
import {
  effectiveSandbox,
  NO_SANDBOX,
  sharesFilesAt,
  sharesNoFiles,
  type SandboxMode,
  type SandboxSettings,
} from '../config/sandbox.js';
import { resolveModel, type ModelsTable } from '../config/models.js';
import { InputError, SetupError } from '../lib/errors.js';
import { isInside } from '../lib/fs.js';
import {
  agentSettings,
  callerAllowed,
  namedAgentSettings,
  systemPromptProblem,
  type AgentDefinition,
} from './agents/definitions.js';
import type { AgentSessions } from './agents/sessions.js';
import { dockerContextEndpoint } from './process/docker-context.js';
import { ENGINE_INSTALL } from './process/sandbox.js';
import { costBudgetProblem, spawnBudget } from './budget.js';
import { schemaProblem, type JsonSchema } from './structured-output.js';
import type { JobRecord, JobRequest, JobTable } from './table.js';

const JOB_ID = /^[a-z2-9]{6}$/;
/**
 * A session id as the CLIs report them: a UUID. `resume` lands in a CLI's argv, so nothing
 * else is passed on, least of all what the CLI could read as an option (`--last`).
 */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const RESUME_SHAPE =
  'resume: pass an agent_id (from list) or a session id (a UUID, such as 0d015625-59b7-42be-8b73-06e0c652483f)';

/** What spawning needs of the app (src/app.ts's App is one). */
export type SpawnContext = {
  config: Pick<
    Config,
    | 'projectDir'
    | 'timeoutS'
    | 'allowCwdOutsideProject'
    | 'userConfigDir'
    | 'isolation'
    | 'backends'
    | 'allowCallerSandbox'
  >;
  /** The server's environment: where docker's contexts are (DOCKER_CONFIG, HOME) and its client (PATH). */
  env: Context['env'];
  models: ModelsTable;
  jobs: Pick<JobTable, 'get' | 'latestInSession' | 'submit'>;
  sessions: Pick<AgentSessions, 'submit'>;
  availability(backend: Backend): Availability;
};

export type SpawnRequest = {
  backend: Backend;
  /** What the messages call this spawn: the tool (spawn_codex, spawn_reviewer), or the backend from a terminal. */
  label: string;
  /**
   * Who asks: the MCP client's name (its initialize clientInfo.name), which a named agent's
   * allowed_callers is checked against; undefined for a terminal or a client that gave none. A
   * team's members are asked for by the client that ran the team (a supervisor's child team: the
   * client of the team at its root).
   */
  caller?: string;
  prompt: string;
  /** A model name or alias (default: the backend's default). */
  model?: string;
  /** The folder to work in, absolute or relative to the project (default: the project). */
  cwd?: string;
  systemPrompt?: string;
  /** An earlier agent_id of this backend, or a session id, to continue. */
  resume?: string;
  timeoutS?: number;
  /** The caller's JSON Schema for the answer, unchecked. */
  outputSchema?: unknown;
  /** The backend's own inputs (Backend.extraInput). */
  extra?: Record<string, unknown>;
  /** false: the agent gets no channel to ask the orchestrator (a definition's false holds). */
  askParent?: boolean;
  /** The budget (src/jobs/budget.ts); a named agent's definition sets a ceiling on each. */
  maxTurns?: number;
  maxBudgetUsd?: number;
  /** "worktree": a CLI agent works in a git worktree of its own (default: the definition's, then the config's). */
  isolation?: Isolation;
  /** The commit or ref its worktree starts from (default HEAD). */
  base?: string;
  /** The caller's sandbox, honoured only where the user's config allows callers to choose. */
  sandbox?: SandboxMode;
  /**
   * The agent that asked, when a supervisor starts a team of its own: the job runs within what
   * that agent may do (`supervisorSandbox`, `permissionProblem`).
   */
  supervisor?: Supervisor;
  /**
   * A named agent's spawn. Its definition fixes the system prompt and rules, and the model,
   * output schema and timeout where it sets them; a session agent continues its conversation
   * (newSession: starts over) and takes no `resume`.
   */
  agent?: { definition: AgentDefinition; newSession?: boolean };
  /** A team's member: the team, the member as named, its part (src/jobs/teams/). */
  team?: JobRequest['team'];
};

/** What a supervisor runs with, which the members of a team it starts may narrow, never widen. */
export type Supervisor = Pick<JobRecord, 'id' | 'backend' | 'agent' | 'sandbox'>;

/** Checks the request and submits its job; an InputError or SetupError says what to change. */
export function spawnJob(ctx: SpawnContext, request: SpawnRequest): JobRecord {
  const { backend, agent } = request;
  const definition = agent?.definition;
  if (definition) checkCaller(request.label, definition, request.caller);
  const availability = ctx.availability(backend);
  if (!availability.usable) {
    throw new SetupError(
      `${request.label} cannot run here: ${definition ? `its backend ${backend.name} is not usable: ` : ''}${availability.detail}`,
    );
  }
  const model = resolveModel(ctx.models, backend.name, definition?.model ?? request.model);
  if ('error' in model) throw new InputError(model.error);
  const outputSchema = definition?.outputSchema ?? checkOutputSchema(request.outputSchema, backend);
  const systemPrompt = definition ? definition.systemPrompt : request.systemPrompt;
  const tooLarge = request.systemPrompt && systemPromptProblem(request.systemPrompt, backend);
  if (tooLarge) throw new InputError(`system_prompt is ${tooLarge}`);
  const budget = spawnBudget(request, definition);
  const costProblem = budget.maxBudgetUsd !== undefined && costBudgetProblem(backend, ctx.models, model.model);
  if (costProblem) throw new InputError(costProblem);
  const sandbox = withContextAsked(ctx.env, supervisorSandbox(request, sandboxOf(ctx.config, request)));
  const job: JobRequest = {
    backend: backend.name,
    model: model.model,
    prompt: request.prompt,
    cwd: resolveCwd(ctx.config, request.cwd),
    timeoutS: request.timeoutS ?? definition?.timeoutS ?? ctx.config.timeoutS,
    systemPrompt: systemPrompt || undefined,
    agent: definition && namedAgentSettings(definition, backend),
    outputSchema,
    askParent: definition?.askParent === false || request.askParent === false ? false : undefined,
    team: request.team,
    ...budget,
    ...isolationOf(ctx, request, sharesNoFiles(sandbox)),
    sandbox: sandbox.mode !== 'none' ? sandbox : undefined,
    extra: request.extra ?? {},
  };
  const wider = request.supervisor && permissionProblem(ctx.config, job, request.supervisor);
  if (wider) throw new InputError(`${request.label}: ${wider}`);
  // A session agent's turns run one at a time, each continuing the one before.
  if (definition?.session) return ctx.sessions.submit({ ...job, agent: job.agent! }, agent!.newSession === true);
  return ctx.jobs.submit({ ...job, ...resumeOf(ctx.jobs, backend, request.resume) });
}

/** Refuses a caller the agent's allowed_callers does not name, with what to change (every door's one check). */
export function checkCaller(label: string, definition: AgentDefinition, caller: string | undefined): void {
  if (callerAllowed(definition, caller)) return;
  throw new InputError(
    `${label} refused: agent "${definition.name}" may be used only by the MCP clients ${definition.allowedCallers!.map((c) => JSON.stringify(c)).join(', ')}, ` +
      `and this client is ${caller ? JSON.stringify(caller) : 'unnamed'} (the name it gave in initialize). ` +
      `To allow it, add it to allowed_callers in ${definition.file}.`,
  );
}

/**
 * Where a CLI job works: the call's isolation, else its definition's, else the config's (a session
 * agent's turns stay in the project: one conversation, one folder). An API backend has no folder.
 * A container on an engine that shares no files works on a branch: always a worktree.
 */
function isolationOf(
  ctx: SpawnContext,
  request: SpawnRequest,
  branchOnly: boolean,
): Pick<JobRequest, 'isolation' | 'base'> {
  const definition = request.agent?.definition;
  const asked = request.isolation ?? definition?.isolation;
  if (request.backend.kind === 'api') {
    if (asked === 'worktree' || request.base)
      throw new InputError(`isolation: ${request.label} answers from the prompt alone and works in no folder`);
    return {};
  }
  if (branchOnly && (asked === 'none' || definition?.session))
    throw new InputError(
      `${request.label} runs on a container engine that shares no files with this machine, so it works on a branch of its own: isolation "none" ${definition?.session ? '(a session agent) ' : ''}cannot apply; leave isolation out, or use an engine that runs here`,
    );
  const isolation = branchOnly ? 'worktree' : (asked ?? (definition?.session ? 'none' : ctx.config.isolation));
  if (request.base !== undefined && isolation !== 'worktree')
    throw new InputError('base applies only with isolation "worktree": pass both, or neither');
  if (request.base?.startsWith('-')) throw new InputError(`base "${request.base}" must name a branch, tag or commit`);
  return isolation === 'worktree' ? { isolation, base: request.base || undefined } : {};
}

/**
 * A docker context the sandbox names without saying whether it shares files: its endpoint asked
 * now (docker's state, which may change between spawns), so the job records the answer and works
 * on a branch when the engine is another machine's; a SetupError when docker has no such context.
 */
function withContextAsked(env: SpawnContext['env'], sandbox: SandboxSettings): SandboxSettings {
  const engine = sandbox.engine;
  if (!engine?.context || engine.sharesFiles !== undefined) return sandbox;
  const client = which.sync('docker', { path: env.PATH, nothrow: true });
  if (!client)
    throw new SetupError(
      `the sandbox names the docker context ${engine.context}, but docker is not on PATH: ${ENGINE_INSTALL.docker}`,
    );
  const found = dockerContextEndpoint(client, engine.context, env);
  if ('problem' in found) throw new SetupError(found.problem);
  return { ...sandbox, engine: { ...engine, sharesFiles: sharesFilesAt(found.endpoint) } };
}

/** The job's sandbox: the user's config, the definition's, the caller's where allowed; or an InputError. */
function sandboxOf(config: SpawnContext['config'], request: SpawnRequest): SandboxSettings {
  const { backend, agent } = request;
  const userFile = join(config.userConfigDir, 'config.json');
  if (request.sandbox !== undefined && !config.allowCallerSandbox)
    throw new InputError(
      `sandbox: your config does not let callers choose the sandbox: leave it out, or set allow_caller_sandbox: true in ${userFile} (or POLYSPAWN_ALLOW_CALLER_SANDBOX=1 where the server is started)`,
    );
  const chosen = effectiveSandbox(
    config.backends[backend.name]?.sandbox ?? NO_SANDBOX,
    { backend: backend.name, userFile },
    agent?.definition,
    request.sandbox,
  );
  if ('problem' in chosen) throw new InputError(`${request.label}: ${chosen.problem}`);
  return chosen.sandbox;
}

/** A supervisor's member: in the supervisor's sandbox, or a tighter one of its own, never with more network. */
function supervisorSandbox(request: SpawnRequest, own: SandboxSettings): SandboxSettings {
  const floor = request.supervisor?.sandbox;
  // An API backend runs no process here: there is nothing to put in a sandbox.
  if (!floor || floor.mode === 'none' || request.backend.kind !== 'cli') return own;
  const chosen = own.mode === 'none' ? floor : own;
  return { ...chosen, network: chosen.network && floor.network };
}

/**
 * Why a supervisor's member would run with more than the supervisor may, or undefined. A
 * supervisor that is a named agent narrowing its backend's permission or tool lists holds its
 * members to the same: on its backend (the modes of two backends do not compare), with its
 * permission, an allow list within its own, and its deny list. Otherwise the members run as the
 * user's config says, as the supervisor does.
 */
export function permissionProblem(
  config: Pick<SpawnContext['config'], 'backends'>,
  member: Pick<JobRequest, 'backend' | 'agent'>,
  supervisor: Supervisor,
): string | undefined {
  const narrowed = supervisor.agent;
  if (!narrowed?.permission && !narrowed?.allowTools && !narrowed?.denyTools) return undefined;
  const settings = (job: Pick<JobRequest, 'backend' | 'agent'>) => {
    const { permission, allowTools, denyTools } = agentSettings(config.backends[job.backend]!, job.agent);
    return { permission, allow: allowTools, deny: denyTools };
  };
  const theirs = settings(supervisor);
  const mine = settings(member);
  const within =
    member.backend === supervisor.backend &&
    mine.permission === theirs.permission &&
    (theirs.allow.length === 0 || (mine.allow.length > 0 && mine.allow.every((t) => theirs.allow.includes(t)))) &&
    theirs.deny.every((t) => mine.deny.includes(t));
  if (within) return undefined;
  const lists = [
    theirs.allow.length ? `allow ${theirs.allow.join(', ')}` : '',
    theirs.deny.length ? `deny ${theirs.deny.join(', ')}` : '',
  ].filter(Boolean);
  return (
    `the supervisor that starts this team (agent ${supervisor.id}, ${narrowed.name}) runs ${supervisor.backend} with permission ${theirs.permission}` +
    `${lists.length ? ` (${lists.join('; ')})` : ''}, and its team may not run with more: name members on ${supervisor.backend} ` +
    'with that permission and those tool lists (named agents that set them)'
  );
}

/** A caller's output schema, checked: a compilable JSON Schema the backend can take, or an InputError. */
function checkOutputSchema(schema: unknown, backend: Backend): JsonSchema | undefined {
  if (schema === undefined) return undefined;
  const problem = schemaProblem(schema, backend);
  if (problem) throw new InputError(`output_schema: ${problem}`);
  return schema as JsonSchema;
}

/** The folder a CLI agent works in: an existing one, inside the project (links resolved) unless the config allows more. */
function resolveCwd(config: SpawnContext['config'], cwd: string | undefined): string {
  const { projectDir } = config;
  const dir = resolve(projectDir, cwd ?? '.');
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir)
    throw new InputError(
      `cwd "${dir}" is not an existing folder: pass an existing folder, absolute or relative to ${projectDir}`,
    );
  if (!config.allowCwdOutsideProject && !isInside(projectDir, dir))
    throw new InputError(
      `cwd "${dir}" is outside the project (${projectDir}): pass a folder inside it; to let agents work anywhere, ` +
        `set allow_cwd_outside_project: true in your own config (${join(config.userConfigDir, 'config.json')}) ` +
        'or POLYSPAWN_ALLOW_CWD_OUTSIDE_PROJECT=1 where the server is started',
    );
  return dir;
}

/**
 * The session `resume` names (an agent_id of this backend, or a session id), and its running
 * token totals after its newest turn, so that the new turn is billed only its own tokens: the
 * newest turn in the job table, else (after a restart) the stored record of the agent named.
 */
function resumeOf(
  jobs: SpawnContext['jobs'],
  backend: Backend,
  resume: string | undefined,
): Pick<
  JobRequest,
  'resumeSessionId' | 'previousSessionTotals' | 'previousSessionCostUsd' | 'isolation' | 'base' | 'worktreeOf'
> {
  if (resume === undefined) return {};
  const earlier = jobs.get(resume);
  let sessionId = resume;
  if (earlier) {
    if (earlier.backend !== backend.name) {
      throw new InputError(
        `agent ${resume} ran on ${earlier.backend}, not ${backend.name}: resume it with spawn_${earlier.backend}`,
      );
    }
    if (!earlier.outcome?.sessionId)
      throw new InputError(
        `agent ${resume} has no session to resume yet (state: ${earlier.state}): wait for it to finish`,
      );
    sessionId = earlier.outcome.sessionId;
  } else if (JOB_ID.test(resume)) {
    throw new InputError(`no agent with id "${resume}": pass an agent_id from list, or a session_id`);
  }
  if (!SESSION_ID.test(sessionId))
    throw new InputError(
      earlier ? `${RESUME_SHAPE} (agent ${resume} reported a session id of another shape)` : RESUME_SHAPE,
    );
  const latest = jobs.latestInSession(backend.name, sessionId);
  const totals = (latest ?? earlier)?.outcome?.sessionTotals;
  const cost = (latest ?? earlier)?.outcome?.sessionCostUsd;
  // The session goes on where it ran: a job isolated in a worktree, in that worktree and on its branch.
  const before = earlier ?? (latest && jobs.get(latest.id));
  const worktree: Pick<JobRequest, 'isolation' | 'base' | 'worktreeOf'> =
    before?.isolation === 'worktree'
      ? {
          isolation: 'worktree',
          worktreeOf: before.worktreeOf ?? before.id,
          ...(before.worktree ? { base: before.worktree.base } : {}),
        }
      : {};
  return {
    resumeSessionId: sessionId,
    ...(totals ? { previousSessionTotals: totals } : {}),
    ...(cost !== undefined ? { previousSessionCostUsd: cost } : {}),
    ...worktree,
  };
}
