// One job of an ACP agent (backends/acp.ts): the agent started in its own process group (the
// runner, with pipes), `initialize`, `session/new` (or `session/load` to resume) with the channel
// to the orchestrator among its MCP servers, one `session/prompt`, then the process ended. Every
// message either way is one JSON line of stdout.log (AcpLogLine), which the backend's parse()
// reads the answer from. Permission requests follow the job's policy (./permission.ts), the file
// methods stay in the job's folder (./files.ts). A cancel, a budget passed: `session/cancel`, and
// the process group ended if the turn has not ended a few seconds later.
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import {
  client,
  ndJsonStream,
  PROTOCOL_VERSION,
  RequestError,
  type AnyMessage,
  type ClientContext,
  type McpServer,
  type NewSessionResponse,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
} from '@agentclientprotocol/sdk';
import type { AcpBackend, AcpLogLine, PermissionAnswer } from '../../../backends/acp.js';
import type { McpServerSpec } from '../../../backends/types.js';
import { PRIVATE_FILE } from '../../lib/fs.js';
import { REDACTED } from '../../lib/redact.js';
import { VERSION } from '../../lib/version.js';
import { budgetOf, thisRunsCost, turnMeter, type BudgetHit } from '../budget.js';
import { PARENT_PROMPT, PARENT_SERVER, type ChannelLease } from '../conversation.js';
import { readNewest } from '../process/log-reader.js';
import { readStdoutLog, runProcess, type RunResult, type RunSpec } from '../process/runner.js';
import type { Executor, JobRecord } from '../table.js';
import { OutsideFolder, readTextFile, writeTextFile } from './files.js';
import { allowOnce, askPermission, rejectOnce, type Questions } from './permission.js';

/** What one run needs: the process to start (as the CLI executor built it) and what its turn may reach. */
type AcpRun = {
  backend: AcpBackend;
  job: Readonly<JobRecord>;
  /** file, args, env, the sandbox's stop and fds: as runProcess takes them. */
  process: Pick<RunSpec, 'file' | 'args' | 'env' | 'baseEnv' | 'stop' | 'passFds' | 'graceMs'>;
  logs: { stdout: string; stderr: string };
  control: Parameters<Executor>[1];
  lease?: ChannelLease;
  /** The job's permission answer (its mode's, narrowed by the spawn). */
  permission: PermissionAnswer;
  questions?: Questions;
};

/** After `session/cancel`, how long the turn may take to end before its process group is ended. */
const CANCEL_GRACE_MS = 5000;
/** A flood: more messages than this from the agent in one run, or a log past MAX_LOG_BYTES. */
const MAX_AGENT_MESSAGES = 200_000;
const MAX_LOG_BYTES = 64 * 1024 * 1024;
/** How long a closed connection waits for the agent's exit, to say how it ended rather than that it closed. */
const EXIT_NOTICE_MS = 2000;
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
/** Permission requests one run may make, whatever answers them. */
const MAX_PERMISSION_REQUESTS = 200;

const LOG_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/**
 * The message as the log keeps it: the MCP servers a session starts with lose their headers' and
 * environment's values (an agent definition's tokens, the channel's), as their files do for a CLI.
 */
function withoutServerSecrets(message: AnyMessage): Record<string, unknown> {
  const method = 'method' in message ? message.method : undefined;
  const params = 'params' in message ? (message.params as { mcpServers?: unknown } | undefined) : undefined;
  if ((method !== 'session/new' && method !== 'session/load') || !Array.isArray(params?.mcpServers)) return message;
  const hidden = (pairs: unknown) =>
    Array.isArray(pairs) ? pairs.map((p: { name?: unknown }) => ({ name: p.name, value: REDACTED })) : pairs;
  const mcpServers = params.mcpServers.map((server: Record<string, unknown>) => ({
    ...server,
    ...('headers' in server ? { headers: hidden(server.headers) } : {}),
    ...('env' in server ? { env: hidden(server.env) } : {}),
  }));
  return { ...message, params: { ...params, mcpServers } };
}

/** The run's log: one line per message, the channel's token never in it, at most MAX_LOG_BYTES of messages. */
function eventLog(path: string, token: string | undefined) {
  const fd = openSync(path, LOG_FLAGS, PRIVATE_FILE);
  let bytes = 0;
  let open = true;
  const append = (line: AcpLogLine) => {
    if (!open) return;
    let text = `${JSON.stringify(line)}\n`;
    if (token) text = text.replaceAll(token, REDACTED);
    bytes += Buffer.byteLength(text);
    writeSync(fd, text);
  };
  return {
    /** false once the log is full: the message is not written. */
    message(from: 'client' | 'agent', message: AnyMessage): boolean {
      if (bytes > MAX_LOG_BYTES) return false;
      append({ from, message: withoutServerSecrets(message) });
      return true;
    },
    say(said: { error: string } | { note: string }) {
      append({ polyspawn: said });
    },
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

export async function runAcpSession(run: AcpRun): Promise<{ run: RunResult; hit?: BudgetHit }> {
  const { backend, job, control } = run;
  const agent = backend.acp;
  const log = eventLog(run.logs.stdout, run.lease?.token);
  const stop = new AbortController();
  const running = runProcess({
    ...run.process,
    cwd: job.cwd,
    stdin: '',
    stdoutLog: run.logs.stdout,
    stderrLog: run.logs.stderr,
    timeoutMs: job.timeoutS * 1000,
    signal: stop.signal,
    pipes: true,
  });
  control.onOutputTail(running.tail);
  if (running.pid !== undefined) control.onProcessGroup?.({ pgid: running.pid, mark: running.mark });
  if (!running.pipes) {
    log.close();
    return { run: await running.done };
  }

  let failure: string | undefined;
  let hit: BudgetHit | undefined;
  let sessionId: string | undefined;
  let prompting = false;
  let connection: ClientContext | undefined;
  const turnOver = new AbortController();
  // Aborted by a cancel (or a budget passed): a permission request waiting, or made after, is answered `cancelled`.
  const cancelling = new AbortController();
  const endProcess = () => stop.abort();
  const fail = (why: string) => {
    if (failure) return;
    failure = why;
    log.say({ error: why });
    endProcess();
  };
  // session/cancel, and the process ended if the turn does not end within the grace period.
  const interrupt = () => {
    cancelling.abort();
    if (!prompting || !connection || !sessionId) return endProcess();
    void connection.notify('session/cancel', { sessionId }).catch(() => endProcess());
    setTimeout(endProcess, CANCEL_GRACE_MS).unref();
  };
  const onCancel = () => interrupt();
  control.signal.addEventListener('abort', onCancel, { once: true });

  const meter = job.maxTurns !== undefined ? turnMeter(backend, job.maxTurns) : undefined;
  const overBudget = (budget: BudgetHit | undefined) => {
    if (!budget || hit) return;
    hit = budget;
    log.say({ note: budget.error });
    interrupt();
  };
  let agentMessages = 0;
  let foreignUpdates = 0;
  const seen = (from: 'client' | 'agent', message: AnyMessage) => {
    if (from === 'agent' && ++agentMessages > MAX_AGENT_MESSAGES)
      return fail(`${agent.name} sent more than ${MAX_AGENT_MESSAGES} messages in one run: stopped as a flood`);
    // An update of a session this run did not start is no part of its answer, usage or turns: left out of the log.
    const about = from === 'agent' && sessionId ? updateOf(message) : undefined;
    if (about !== undefined && about !== sessionId) {
      if (foreignUpdates++ === 0)
        log.say({ note: `${agent.name} sent updates of another session (${about}): left out` });
      return;
    }
    if (!log.message(from, message))
      return fail(`${agent.name}'s messages passed ${MAX_LOG_BYTES / 2 ** 20} MiB in one run: stopped as a flood`);
    overBudget(meter?.add({ from, message }));
    overBudget(costHit(job, message));
  };
  const stream = tapped(
    ndJsonStream(
      Writable.toWeb(running.pipes.stdin),
      Readable.toWeb(running.pipes.stdout) as ReadableStream<Uint8Array>,
    ),
    seen,
  );

  let permissionRequests = 0;
  const answerPermission = async (request: RequestPermissionRequest): Promise<RequestPermissionResponse> => {
    if (++permissionRequests > MAX_PERMISSION_REQUESTS) {
      fail(`${agent.name} asked for permission more than ${MAX_PERMISSION_REQUESTS} times in one run: stopped`);
      return { outcome: { outcome: 'cancelled' } };
    }
    ownSession(request.sessionId);
    // After session/cancel every permission request is answered `cancelled` (the protocol's rule), whatever the policy.
    if (cancelling.signal.aborted) return { outcome: { outcome: 'cancelled' } };
    if (run.permission === 'allow') return allowOnce(request);
    if (run.permission === 'deny' || !run.questions) return rejectOnce(request);
    try {
      const asked = await askPermission(
        run.questions,
        job.id,
        request,
        AbortSignal.any([turnOver.signal, cancelling.signal]),
      );
      log.say({
        note: `permission ${asked.question.messageId} answered ${JSON.stringify(asked.answer ?? null)}: ${JSON.stringify(asked.response.outcome)}`,
      });
      return asked.response;
    } catch (error) {
      // A question the conversation's limits refuse: the agent is told no, and the run goes on.
      log.say({ note: `permission refused: ${(error as Error).message}` });
      return rejectOnce(request);
    }
  };
  /** A request about a session this run did not start is refused. */
  const ownSession = (asked: string) => {
    if (sessionId && asked !== sessionId)
      throw RequestError.invalidParams(undefined, `session ${asked} is not this run's (${sessionId})`);
  };
  const inFolder = <T>(asked: string, method: () => T): T => {
    ownSession(asked);
    try {
      return method();
    } catch (error) {
      if (error instanceof OutsideFolder) log.say({ note: error.message });
      throw RequestError.invalidParams(undefined, (error as Error).message);
    }
  };

  const app = client({ name: 'polyspawn' }).onRequest('session/request_permission', ({ params }) =>
    answerPermission(params),
  );
  if (agent.fs) {
    app
      .onRequest('fs/read_text_file', ({ params }) => inFolder(params.sessionId, () => readTextFile(job.cwd, params)))
      .onRequest('fs/write_text_file', ({ params }) =>
        inFolder(params.sessionId, () => writeTextFile(job.cwd, params)),
      );
  }

  const exited = running.done.then((result) => {
    if (!stop.signal.aborted) {
      const stderr = readNewest(run.logs.stderr, 600).trim();
      fail(
        `${agent.name} exited (${result.exitSignal ?? `code ${result.exitCode}`}) ${sessionId ? 'during its turn' : 'before its session began'}` +
          (stderr ? `; stderr: ${stderr}` : ''),
      );
    }
    return result;
  });

  try {
    await Promise.race([
      exited,
      app.connectWith(stream, async (context) => {
        connection = context;
        sessionId = await startSession(run, context);
        if (failure || control.signal.aborted) return;
        prompting = true;
        // ACP has no system prompt: the instructions (a named agent's, the channel's line) come first in the prompt.
        const prompt = [job.systemPrompt, run.lease && agent.mcp === 'http' && PARENT_PROMPT, job.prompt]
          .filter(Boolean)
          .join('\n\n');
        await context.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: prompt }] });
        prompting = false;
      }),
    ]);
  } catch (error) {
    // The connection closes when the agent's stdout does: an agent that exited says so (`exited`).
    if (!stop.signal.aborted) await Promise.race([exited, delay(EXIT_NOTICE_MS)]);
    if (!stop.signal.aborted) fail(errorText(error));
  } finally {
    prompting = false;
    control.signal.removeEventListener('abort', onCancel);
    turnOver.abort();
    endProcess(); // some agents never exit on their own (the codex adapter keeps running when stdin closes)
  }
  const result = await exited;
  log.close();
  const output = readStdoutLog(run.logs.stdout);
  const end =
    result.end === 'timeout' ? 'timeout' : control.signal.aborted || (hit && !failure) ? 'cancelled' : 'exited';
  return { run: { ...result, end, stdout: output.text, stdoutTruncated: output.truncated }, hit };
}

/** `initialize`, then `session/new` or `session/load`, each within the agent's start time-out: the session id. */
async function startSession(run: AcpRun, context: ClientContext): Promise<string> {
  const agent = run.backend.acp;
  const within = <T>(what: string, promise: Promise<T>) => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `${agent.name} did not answer ${what} within ${agent.startTimeoutS} s: is \`${agent.command} ${agent.args.join(' ')}\` an ACP agent (some need an argument such as --acp), and does it start here?`,
            ),
          ),
        agent.startTimeoutS * 1000,
      );
    });
    return Promise.race([promise, late]).finally(() => clearTimeout(timer));
  };
  const init = await within(
    'initialize',
    context.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: agent.fs, writeTextFile: agent.fs }, terminal: false },
      clientInfo: { name: 'polyspawn', version: VERSION },
    }),
  );
  if (init.protocolVersion !== PROTOCOL_VERSION) {
    throw new Error(
      `${agent.name} speaks ACP protocol version ${JSON.stringify(init.protocolVersion)}; polyspawn speaks ${PROTOCOL_VERSION}: use a version of it that speaks ${PROTOCOL_VERSION}`,
    );
  }
  const mcpServers = sessionMcpServers(run);
  const { job } = run;
  let sessionId: string;
  let session: Pick<NewSessionResponse, 'modes' | 'configOptions'>;
  if (job.resumeSessionId) {
    if (!init.agentCapabilities?.loadSession) {
      throw new Error(`${agent.name} cannot load an earlier session (it has no loadSession): spawn it without resume`);
    }
    sessionId = job.resumeSessionId;
    session = await within(
      'session/load',
      context.request('session/load', { sessionId, cwd: job.cwd, mcpServers }).catch((error: unknown) => {
        throw new Error(`${agent.name} could not load session ${sessionId}: ${errorText(error)}`);
      }),
    );
  } else {
    session = await within('session/new', context.request('session/new', { cwd: job.cwd, mcpServers }));
    sessionId = (session as NewSessionResponse).sessionId;
  }
  await configureSession(run, context, sessionId, session);
  return sessionId;
}

/**
 * The session's mode the agent is declared to run in (where its permission requests come from),
 * and the model a spawn named, where the agent takes it as the session's `model` option rather
 * than as an argument (model_args).
 */
async function configureSession(
  { backend, job }: AcpRun,
  context: ClientContext,
  sessionId: string,
  session: Pick<NewSessionResponse, 'modes' | 'configOptions'>,
): Promise<void> {
  const agent = backend.acp;
  const mode = agent.sessionMode;
  if (mode && mode !== session.modes?.currentModeId) {
    const offered = session.modes?.availableModes.map((m) => m.id) ?? [];
    if (!offered.includes(mode))
      throw new Error(
        `${agent.name} offers no session mode "${mode}" (session_mode; it offers ${offered.join(', ') || 'none'})`,
      );
    await context.request('session/set_mode', { sessionId, modeId: mode });
  }
  if (agent.modelArgs || job.model === backend.models.default) return;
  const option = session.configOptions?.find((o) => o.id === 'model' && o.type === 'select');
  if (!option || option.type !== 'select') {
    throw new Error(
      `${agent.name} takes no model from its client (no "model" option in its session): spawn it without model, or declare model_args`,
    );
  }
  const values = option.options.flatMap((o) => ('group' in o ? o.options : [o])).map((o) => o.value);
  if (!values.includes(job.model))
    throw new Error(`${agent.name} has no model "${job.model}": it offers ${values.join(', ')}`);
  await context.request('session/set_config_option', { sessionId, configId: 'model', value: job.model });
}

/** The MCP servers for `session/new`: the channel to the orchestrator and the named agent's own, as the agent takes them. */
function sessionMcpServers({ backend, job, lease }: AcpRun): McpServer[] {
  const transport = backend.acp.mcp;
  if (transport === 'none') return [];
  const servers: Record<string, McpServerSpec> = { ...job.agent?.mcpServers };
  if (lease && transport === 'http')
    servers[PARENT_SERVER] = { url: lease.url, headers: { Authorization: `Bearer ${lease.token}` } };
  const pairs = (record: Record<string, string> = {}) =>
    Object.entries(record).map(([name, value]) => ({ name, value }));
  return Object.entries(servers).flatMap(([name, spec]): McpServer[] => {
    if ('url' in spec)
      return transport === 'http' ? [{ type: 'http', name, url: spec.url, headers: pairs(spec.headers) }] : [];
    return [{ name, command: spec.command, args: spec.args ?? [], env: pairs(spec.env) }];
  });
}

/** An error as the agent sent it: its message, and what its data says (an agent's "Internal error" says little alone). */
function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const data = error instanceof RequestError ? error.data : undefined;
  if (data === undefined || data === null) return error.message;
  const details = typeof data === 'object' && 'details' in data ? data.details : data;
  const text = typeof details === 'string' ? details : JSON.stringify(details);
  return `${error.message}: ${text.length > 1000 ? `${text.slice(0, 1000)}…` : text}`;
}

/** The session a `session/update` is about; undefined for any other message. */
function updateOf(message: AnyMessage): string | undefined {
  if (!('method' in message) || message.method !== 'session/update') return undefined;
  return String((message.params as { sessionId?: unknown } | undefined)?.sessionId);
}

/** This run's share of the cost the agent reports (usage_update, USD, over the session) past the job's max_budget_usd. */
function costHit(job: Readonly<JobRecord>, message: AnyMessage): BudgetHit | undefined {
  const max = budgetOf(job)?.maxBudgetUsd;
  if (max === undefined || !('method' in message) || message.method !== 'session/update') return undefined;
  const update = (
    message.params as { update?: { sessionUpdate?: string; cost?: { amount?: number; currency?: string } } }
  ).update;
  const cost = update?.sessionUpdate === 'usage_update' ? update.cost : undefined;
  if (cost?.currency !== 'USD' || typeof cost.amount !== 'number') return undefined;
  const spent = thisRunsCost(cost.amount, job.previousSessionCostUsd);
  if (spent <= max) return undefined;
  const before = cost.amount === spent ? '' : ` ($${cost.amount} for the session, its earlier runs included)`;
  return { kind: 'cost', error: `stopped by polyspawn: it reported $${spent}${before}, past max_budget_usd ($${max})` };
}

/** The stream with every message either way handed to `seen` first (the log, the meters). */
function tapped(
  stream: ReturnType<typeof ndJsonStream>,
  seen: (from: 'client' | 'agent', message: AnyMessage) => void,
): ReturnType<typeof ndJsonStream> {
  const tap = (from: 'client' | 'agent') =>
    new TransformStream<AnyMessage, AnyMessage>({
      transform(message, controller) {
        seen(from, message);
        controller.enqueue(message);
      },
    });
  const outgoing = tap('client');
  void outgoing.readable.pipeTo(stream.writable).catch(() => undefined);
  return { readable: stream.readable.pipeThrough(tap('agent')), writable: outgoing.writable };
}
