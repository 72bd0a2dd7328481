// MCP beyond tools: IAC.md and every job's record and output log as resources (the URIs are in
// docs/ARCHITECTURE.md), and the notifications that follow the jobs. All of it travels as
// JSON-RPC on the transport: nothing here writes to stdout.
import { existsSync, readFileSync, unwatchFile, watch, watchFile, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import {
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  type LoggingLevel,
  type McpServer,
  type ServerNotifier,
} from '@modelcontextprotocol/server';
import type { App } from '../app.js';
import { runFolder } from '../lib/run-folder.js';
import { isFinished, type JobRecord, type JobState } from '../jobs/table.js';
import { DEFAULT_LOG_BYTES, readLogPage } from '../jobs/process/log-page.js';
import { fullResult, redactedTask } from '../jobs/result.js';
import { LOGGING_LEVELS, replaceSetLevel } from './sdk-seam.js';

const IAC_URI = 'polyspawn://IAC.md';
const agentUri = (id: string) => `polyspawn://agents/${id}`;
const agentLogUri = (id: string) => `polyspawn://agents/${id}/log`;

/** How many finished agents the resource list shows (all of them can be read by URI). */
const LISTED_FINISHED = 50;
/** list_changed is coalesced over this window, so a burst of spawns sends one. */
const LIST_CHANGED_MS = 50;
const IAC_CHANGED_MS = 50;

const ID = /^[a-z0-9]{1,64}$/;

function notFound(id: string): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `no agent with id "${id}": list the resources, or call the list tool, for the ids of current and recent agents`,
  );
}

function agentOf(app: App, id: unknown): JobRecord {
  const text = String(id);
  const job = ID.test(text) ? app.jobs.get(text) : undefined;
  if (!job) throw notFound(text);
  return job;
}

/** The agents the list shows: every active one (any server's), then the newest finished. */
function listedAgents(app: App): JobRecord[] {
  const all = app.jobs.all();
  const active = all.filter((j) => !isFinished(j.state));
  const ids = new Set(active.map((j) => j.id));
  for (const line of app.iac.store.active()) {
    if (ids.has(line.id)) continue;
    const job = app.jobs.get(line.id);
    // (A dead server's job reads as interrupted: it is listed with the finished.)
    if (job && !isFinished(job.state)) {
      active.push(job);
      ids.add(job.id);
    }
  }
  const finished = all
    .filter((j) => isFinished(j.state) && !ids.has(j.id))
    .slice(-LISTED_FINISHED)
    .reverse();
  return [...active.reverse(), ...finished];
}

const label = (job: JobRecord) => `${job.id} · ${job.backend}/${job.model} · ${job.state.replace('_', ' ')}`;

/**
 * Which resource change notifications a server sends itself: those its 2025 client subscribed to
 * (resources/subscribe); every one ("routed"), where the serving entry routes them onto a 2026
 * client's subscriptions/listen streams, each filtered by what it listens to (serveStdio); or none
 * ("published"), where a server lives for one request and the entry's notifier carries them
 * instead (the shared server's 2026 leg: publishChanges).
 */
export type ResourceUpdates = 'subscribed' | 'routed' | 'published';

/** Registers them on the server; the function it returns removes what it added to the app (the server closed). */
export function registerResources(server: McpServer, app: App, updates: ResourceUpdates): () => void {
  registerIacResource(server, app);
  registerAgentResources(server, app);
  return registerSubscriptions(server, app, updates);
}

function registerIacResource(server: McpServer, app: App): void {
  server.registerResource(
    'IAC.md',
    IAC_URI,
    {
      title: 'IAC.md: Inter-Agent Context',
      description:
        "The project's audit file: agents running now, then the history of every interaction (prompt, result, tokens, cost), newest first.",
      mimeType: 'text/markdown',
    },
    async (uri) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'text/markdown',
          text: existsSync(app.iac.file)
            ? readFileSync(app.iac.file, 'utf8')
            : `# IAC.md: Inter-Agent Context\n\n_No agent has run in this project yet (${app.iac.file} is written with the first one)._\n`,
        },
      ],
    }),
  );
}

/** An agent's record and its output log, one resource each per listed agent. */
function registerAgentResources(server: McpServer, app: App): void {
  const completeIds = (value: string) =>
    listedAgents(app)
      .map((j) => j.id)
      .filter((id) => id.startsWith(value));

  server.registerResource(
    'agent',
    new ResourceTemplate('polyspawn://agents/{agent_id}', {
      list: async () => ({
        resources: listedAgents(app).map((job) => ({
          uri: agentUri(job.id),
          name: `agent ${job.id}`,
          title: label(job),
          description: redactedTask(app, job.prompt),
          mimeType: 'application/json',
        })),
      }),
      complete: { agent_id: completeIds },
    }),
    {
      title: 'Agent record',
      description:
        "One agent's record: state, timing, answer, error, session id, tokens, cost, and its prompt (secrets redacted). The same as the result tool, readable as a resource.",
      mimeType: 'application/json',
    },
    async (uri, { agent_id }) => {
      const job = agentOf(app, agent_id);
      const record = {
        ...fullResult(app, job),
        prompt: app.secrets.text(job.prompt),
        system_prompt: job.systemPrompt ? app.secrets.text(job.systemPrompt) : undefined,
        cwd: job.cwd || undefined,
        resumed_session: job.resumeSessionId || undefined,
      };
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(record, null, 2) }] };
    },
  );

  server.registerResource(
    'agent-log',
    new ResourceTemplate('polyspawn://agents/{agent_id}/log', {
      list: async () => ({
        resources: listedAgents(app)
          .filter((job) => job.state !== 'queued' && !(job.state === 'cancelled' && !job.startedAt))
          .map((job) => ({
            uri: agentLogUri(job.id),
            name: `agent ${job.id} log`,
            title: `${label(job)} · output`,
            description: `What ${job.backend} printed: ${redactedTask(app, job.prompt)}`,
            mimeType: 'text/plain',
          })),
      }),
      complete: { agent_id: completeIds },
    }),
    {
      title: 'Agent output log',
      description: `The newest ${DEFAULT_LOG_BYTES / 1024} KB of an agent's raw output (its CLI's stdout, secrets redacted). Page through all of it with the logs tool.`,
      mimeType: 'text/plain',
    },
    async (uri, { agent_id }) => {
      const job = agentOf(app, agent_id);
      const page = readLogPage(runFolder(app.config.stateDir, job.id).stdout, { tail: DEFAULT_LOG_BYTES }, app.secrets);
      const cut =
        page.offset > 0
          ? `[${page.offset} earlier bytes not shown: the logs tool with agent_id "${job.id}" pages through all of them]\n`
          : '';
      return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: cut + page.text }] };
    },
  );
}

/** Subscriptions and the resources' notifications; returns what removes its listeners from the app. */
function registerSubscriptions(server: McpServer, app: App, updates: ResourceUpdates): () => void {
  server.server.registerCapabilities({ resources: { subscribe: true, listChanged: true } });
  if (updates === 'published') return () => undefined;
  const subscribed = new Set<string>();
  const changes = followChanges(app, {
    updated: (uri) => {
      if (updates === 'routed' || subscribed.has(uri))
        void server.server.sendResourceUpdated({ uri }).catch(() => undefined);
    },
    listChanged: () => void server.server.sendResourceListChanged().catch(() => undefined),
  });
  // A 2026 client names the URIs it listens to where this server cannot see them: IAC.md is watched.
  if (updates === 'routed') changes.watchIac.start();
  // resources/subscribe is 2025's (a 2026 client sends its URIs with subscriptions/listen).
  server.server.setRequestHandler('resources/subscribe', async ({ params }) => {
    subscribed.add(params.uri);
    if (params.uri === IAC_URI) changes.watchIac.start();
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', async ({ params }) => {
    subscribed.delete(params.uri);
    if (params.uri === IAC_URI) changes.watchIac.stop();
    return {};
  });
  return changes.stop;
}

/**
 * The resource notifications of the shared server's 2026 clients, published on the HTTP entry's
 * notifier, which sends each to the subscriptions/listen streams that listen for it; and the tool
 * list's (`toolsChanged`: a named agent defined, edited or removed).
 */
export function publishChanges(
  app: App,
  notify: ServerNotifier,
  toolsChanged: (listener: () => void) => () => void,
): () => void {
  const changes = followChanges(app, {
    updated: (uri) => notify.resourceUpdated(uri),
    listChanged: () => notify.resourcesChanged(),
  });
  changes.watchIac.start();
  const offTools = toolsChanged(() => notify.toolsChanged());
  return () => {
    offTools();
    changes.stop();
  };
}

/**
 * What changes, told to one receiver: the URIs of one of the app's jobs on each state change and
 * question, IAC.md when it is rewritten (while its watch is started), and the list (coalesced)
 * when a job is created or finishes.
 */
function followChanges(app: App, receiver: { updated(uri: string): void; listChanged(): void }) {
  let listTimer: NodeJS.Timeout | undefined;
  const listChanged = () => {
    listTimer ??= setTimeout(() => {
      listTimer = undefined;
      receiver.listChanged();
    }, LIST_CHANGED_MS);
  };
  const updated = (id: string) => {
    for (const uri of [agentUri(id), agentLogUri(id)]) receiver.updated(uri);
  };
  const offChange = app.jobs.onStateChange((job) => {
    if (job.state === 'queued' || isFinished(job.state)) listChanged();
    updated(job.id);
  });
  const offQuestion = app.jobs.onQuestion((job) => updated(job.id));
  const watchIac = watchIacFile(app.iac.file, () => receiver.updated(IAC_URI));
  return {
    watchIac,
    stop: () => {
      offChange();
      offQuestion();
      watchIac.stop();
      clearTimeout(listTimer);
    },
  };
}

/** Calls `onChange` (coalesced) whenever the file is replaced or written, by any server, while started. */
function watchIacFile(file: string, onChange: () => void) {
  let watcher: FSWatcher | undefined;
  let polling = false;
  let timer: NodeJS.Timeout | undefined;
  const changed = () => {
    timer ??= setTimeout(() => {
      timer = undefined;
      onChange();
    }, IAC_CHANGED_MS);
  };
  return {
    start() {
      if (watcher || polling) return;
      try {
        // The folder, not the file: IAC.md is replaced by a rename on every write.
        watcher = watch(dirname(file), { persistent: false }, (_event, name) => {
          if (name === null || name.toString() === basename(file)) changed();
        });
        watcher.on('error', () => undefined);
      } catch {
        // The folder is not there (yet) or cannot be watched: fall back to polling its stat.
        polling = true;
        watchFile(file, { persistent: false, interval: 1000 }, changed);
      }
    },
    stop() {
      watcher?.close();
      watcher = undefined;
      if (polling) unwatchFile(file);
      polling = false;
    },
  };
}

const LEVELS: Record<JobState, LoggingLevel> = {
  queued: 'debug',
  running: 'debug',
  succeeded: 'info',
  cancelled: 'notice',
  failed: 'warning',
  timed_out: 'warning',
  interrupted: 'warning',
};

const SEVERITY = LOGGING_LEVELS;

/**
 * Each state change of this server's agents as an MCP logging message (never on stdout). Until
 * the client sets a level, the least severe sent is `info`: an agent's end, not its `debug`
 * queued and running (a burst of 200 agents would otherwise be 400 more messages for the
 * client to read). `logging/setLevel` with `debug` asks for them.
 */
export function registerJobNotifications(server: McpServer, app: App): () => void {
  let threshold = SEVERITY.indexOf('info');
  const inner = server.server;
  // The SDK's own handler keeps the level where nothing here can read it: kept here instead.
  replaceSetLevel(inner, (level) => (threshold = SEVERITY.indexOf(level)));
  const offChange = app.jobs.onStateChange((job) => {
    const level = LEVELS[job.state];
    if (SEVERITY.indexOf(level) < threshold) return;
    const elapsed = job.startedAt
      ? ((job.endedAt ? Date.parse(job.endedAt) : Date.now()) - Date.parse(job.startedAt)) / 1000
      : 0;
    const error = job.outcome?.error;
    const data = {
      message: `agent ${job.id} (${job.backend}, ${job.model}) ${job.state.replace('_', ' ')}${isFinished(job.state) && job.startedAt ? ` after ${elapsed.toFixed(1)} s` : ''}`,
      agent_id: job.id,
      backend: job.backend,
      model: job.model,
      state: job.state,
      task: redactedTask(app, job.prompt),
      elapsed_s: Math.round(elapsed * 10) / 10,
      ...(error && job.state !== 'succeeded'
        ? { error: app.secrets.text(error.length > 500 ? `${error.slice(0, 499)}…` : error) }
        : {}),
    };
    void inner.sendLoggingMessage({ level, logger: 'polyspawn', data }).catch(() => undefined);
  });
  // A question blocks its agent until answered: said at warning level, so a client shows it.
  const offQuestion = app.jobs.onQuestion((job, question) => {
    if (SEVERITY.indexOf('warning') < threshold) return;
    const data = app.secrets.deep({
      message: `agent ${job.id} (${job.backend}) asks: ${question.text} (answer with reply_subagent, message_id ${question.messageId})`,
      agent_id: job.id,
      message_id: question.messageId,
      question: question.text,
      options: question.options,
    });
    void inner.sendLoggingMessage({ level: 'warning', logger: 'polyspawn', data }).catch(() => undefined);
  });
  return () => {
    offChange();
    offQuestion();
  };
}
