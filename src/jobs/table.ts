// The job table: every spawn becomes a job with one short id, queued behind a concurrency
// limit, run by an executor, and watched through change events (no polling anywhere).
import { EventEmitter } from 'node:events';
import { randomInt } from 'node:crypto';
import PQueue from 'p-queue';
import type { McpServerSpec, Outcome, Usage } from '../../backends/types.js';
import type { SandboxSettings } from '../config/sandbox.js';
import { InputError } from '../lib/errors.js';
import { waitUntil } from '../lib/wait.js';
import {
  answeredBy,
  answerTo,
  checkLength,
  checkQuestion,
  CONVERSATION_LIMITS,
  countOf,
  findQuestion,
  oneLine,
  openQuestions,
  type Addressee,
  type AnswerSource,
  type ConversationEntry,
  type Question,
} from './conversation.js';
import type { Isolation } from '../config/config.js';
import type { JobWorktree } from './worktree/report.js';

export const JOB_STATES = [
  'queued',
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'interrupted',
] as const;
export type JobState = (typeof JOB_STATES)[number];
type FinalState = Exclude<JobState, 'queued' | 'running'>;

export const isFinished = (state: JobState): state is FinalState => state !== 'queued' && state !== 'running';

/** What an agent's job carries (JobRequest.agent): what its definition fixes for the run. */
export type NamedAgentSettings = {
  name: string;
  session?: boolean;
  permission?: string;
  allowTools?: string[];
  denyTools?: string[];
  mcpServers?: Record<string, McpServerSpec>;
  nesting?: number;
  /** Variables its CLI gets by name, beyond what the CLI signs in with (agent.md's `env`). */
  env?: string[];
};

export type JobRequest = {
  backend: string;
  model: string;
  prompt: string;
  cwd: string;
  timeoutS: number;
  systemPrompt?: string;
  resumeSessionId?: string;
  /** When resuming: the session's running token totals after the turn before this one. */
  previousSessionTotals?: Usage;
  /** When resuming: the session's cost so far, where its agent reports one over the session (Outcome.sessionCostUsd). */
  previousSessionCostUsd?: number;
  /** Backend-specific inputs (API backends: temperature, max_output_tokens). */
  extra: Record<string, unknown>;
  /** Set when a named agent (agents/<name>/agent.md) made the job: what its definition fixes. */
  agent?: NamedAgentSettings;
  /** A JSON Schema the answer must match (src/jobs/structured-output.ts). */
  outputSchema?: Record<string, unknown>;
  /** false: the agent gets no channel to ask the orchestrator (src/jobs/conversation.ts). */
  askParent?: boolean;
  /** Set when a team (src/jobs/teams/) started the job: the team, the member as named, its part. */
  team?: { id: string; member: string; role: string };
  /** Its budget (src/jobs/budget.ts): the most model requests, and the most USD, it may spend. */
  maxTurns?: number;
  maxBudgetUsd?: number;
  /** "worktree": a CLI job runs in a git worktree of its own (src/jobs/worktree/). */
  isolation?: Isolation;
  /** The commit or ref its worktree starts from (default: HEAD); a resumed job's, its earlier base. */
  base?: string;
  /** A resumed job continues in the worktree of this earlier job (that job's id names it). */
  worktreeOf?: string;
  /** The sandbox its CLI runs in (src/jobs/process/sandbox.ts); unset: none. */
  sandbox?: SandboxSettings;
};

/** How a job waits for others before it may start (a session's turns run one at a time). */
type SubmitOptions = {
  /** The job stays queued, outside the concurrency limit, until this settles. */
  after?: Promise<unknown>;
  /** Called just before it runs, to fill in what earlier jobs decide (the session to resume). */
  prepare?: (record: JobRecord) => void;
};

export type JobRecord = JobRequest & {
  id: string;
  state: JobState;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  exitCode?: number | null;
  outcome?: Outcome;
  /**
   * The process group of a CLI job once it runs, and the mark its processes carry (RUN_MARK_ENV):
   * the run store records both, so a later server can end what a dead one left.
   */
  processGroup?: { pgid: number; mark: string };
  /** What the agent asked the orchestrator, the answers, and its progress lines, in order. */
  conversation?: ConversationEntry[];
  /** The agent's newest progress line (report_progress). */
  progress?: { text: string; at: string };
  /** An isolated job's worktree and branch, and its changes once it ended. */
  worktree?: JobWorktree;
};

export type ExecutionResult = { state: Exclude<FinalState, 'interrupted'>; outcome: Outcome; exitCode?: number | null };

export type Executor = (
  job: Readonly<JobRecord>,
  control: {
    signal: AbortSignal;
    onOutputTail: (tail: (maxChars: number) => string) => void;
    /** A CLI executor reports its child's process group once started. */
    onProcessGroup?: (group: { pgid: number; mark: string }) => void;
    /** An isolated job reports its worktree once made, and again with its changes. */
    onWorktree?: (worktree: JobWorktree) => void;
    /**
     * A file on disk that holds exactly `text` (the run store's copy of the prompt, when it holds
     * no secret): a CLI whose stdin is that text reads it from the file instead of a pipe.
     */
    promptFile?: { path: string; text: string };
  },
) => Promise<ExecutionResult>;

/**
 * The job layer's one port to where jobs are kept (the run store, iac/store.ts, implements it):
 * ids claimed across servers, records saved, stored jobs read back. The table claims ids and
 * reads back; the recorder (src/jobs/recorder.ts) saves and hands a CLI its prompt file.
 */
export type JobStore = {
  /** Its folder (said when a save fails). */
  readonly dir: string;
  /** Claims `id` for a new job: true when it is taken (stored, or claimed by another server). */
  claimId(id: string): boolean;
  /** Saves a job's record as it is now (and an index line when its state changed). */
  save(job: JobRecord): void;
  /** The stored prompt of a job, when that file holds exactly its prompt (no secret taken out). */
  promptFile(job: JobRecord): { path: string; text: string } | undefined;
  /** The folder of a job's run: its logs and the files its CLI wrote. */
  runDir(id: string): string;
  /** The full record of a stored job (earlier or other servers'), or undefined. */
  get(id: string): JobRecord | undefined;
  /** Summaries of the stored finished jobs (the newest ones it holds in memory), oldest first. */
  finished(): JobRecord[];
  /** The state a job is stored in, where known without reading its whole record (else `get`'s). */
  storedState?(id: string): JobState | undefined;
};

/** What the table needs of the store: claiming ids, and the jobs it did not run (earlier or other servers'). */
type TableStore = Pick<JobStore, 'claimId' | 'get' | 'finished' | 'storedState'>;

type Entry = {
  record: JobRecord;
  controller: AbortController;
  tail?: (maxChars: number) => string;
  finished: Promise<void>;
};

/**
 * A check made just before a queued job starts, where the state is what it is then (not when
 * the job was submitted: it may have waited behind the concurrency limit): a reason refuses the
 * start, and the job ends `cancelled` with it. A team's budget and agent bound are held here.
 */
type StartGuard = (record: Readonly<JobRecord>) => string | undefined;

/** `questioned`: the wait returned questions no wait had returned before (they woke it, or came with it). */
export type WaitResult = { finished: JobRecord[]; pending: JobRecord[]; questioned?: boolean };

type AnswerWait = { status: 'answered'; answer: string } | { status: 'pending' };

/**
 * How long one wait for jobs lasts unless the caller says: below the strictest common MCP client
 * cut-off (the SDK client's 60 s default). `polyspawn init` sets the clients' tool time-outs above it.
 */
export const DEFAULT_WAIT_S = 50;

// No 0/o/1/l: ids are read aloud and typed by people too.
const ID_ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';
const ID_LENGTH = 6;
/** What a job id looks like: what the store accepts of what it reads back. */
export const JOB_ID = new RegExp(`^[${ID_ALPHABET}]{${ID_LENGTH}}$`);
/**
 * Finished jobs kept in memory; older ones are answered by the run store (options.store), so
 * a server that runs thousands of jobs stays the size it was after the first hundred.
 */
const KEEP_FINISHED = 100;

export class JobTable {
  private readonly entries = new Map<string, Entry>();
  /** This table's finished jobs, oldest first, until they are left to the store. */
  private readonly finishedOrder: string[] = [];
  private readonly queue: PQueue;
  private readonly events = new EventEmitter();
  /**
   * `<job id>/<message id>` of the questions a wait has returned (waitFor), while their jobs run,
   * with the waiters it returned them to: each client of a shared server is woken once by each.
   */
  private readonly reportedQuestions = new Map<string, Set<string>>();
  /** Checks made just before a queued job starts (StartGuard). */
  private readonly startGuards: StartGuard[] = [];

  constructor(
    private readonly options: {
      concurrency: number;
      execute: Executor;
      /** The run store: a new id is claimed in it, and its jobs are seen by get, list, wait and resume. */
      store?: TableStore;
    },
  ) {
    this.queue = new PQueue({ concurrency: options.concurrency });
    this.events.setMaxListeners(0);
  }

  submit(request: JobRequest, options: SubmitOptions = {}): JobRecord {
    const record: JobRecord = { ...request, id: this.newId(), state: 'queued', createdAt: new Date().toISOString() };
    const controller = new AbortController();
    let settle!: () => void;
    const entry: Entry = { record, controller, finished: new Promise<void>((r) => (settle = r)) };
    this.entries.set(record.id, entry);
    this.stateChanged(record);
    const enqueue = () =>
      void this.queue.add(async () => {
        try {
          await this.run(entry, options.prepare);
        } finally {
          settle();
        }
      });
    if (options.after) void options.after.then(enqueue, enqueue);
    else enqueue();
    return record;
  }

  private async run(entry: Entry, prepare?: (record: JobRecord) => void): Promise<void> {
    const { record, controller } = entry;
    if (record.state !== 'queued') return; // cancelled while queued
    for (const guard of this.startGuards) {
      const refusal = guard(record);
      if (refusal) return this.endUnstarted(record, 'cancelled', `not started: ${refusal}`);
    }
    try {
      prepare?.(record);
    } catch (error) {
      return this.endUnstarted(record, 'failed', `could not prepare the job: ${(error as Error).message}`);
    }
    record.state = 'running';
    record.startedAt = new Date().toISOString();
    this.stateChanged(record);
    let result: ExecutionResult;
    try {
      result = await this.options.execute(record, {
        signal: controller.signal,
        onOutputTail: (tail) => (entry.tail = tail),
        onProcessGroup: (group) => {
          record.processGroup = group;
          this.changed(record);
        },
        onWorktree: (worktree) => {
          record.worktree = worktree;
          this.changed(record);
        },
      });
    } catch (error) {
      // An executor bug must still end the job with a record of why.
      result = {
        state: 'failed',
        outcome: { ok: false, text: '', error: `internal error: ${(error as Error).message}`, costSource: 'unknown' },
      };
    }
    record.state = controller.signal.aborted && result.state !== 'succeeded' ? 'cancelled' : result.state;
    record.outcome = result.outcome;
    if (result.exitCode !== undefined) record.exitCode = result.exitCode;
    record.endedAt = new Date().toISOString();
    // The live tail holds the run's output buffers: a finished job needs neither.
    entry.tail = undefined;
    for (const q of openQuestions(record.conversation)) this.reportedQuestions.delete(`${record.id}/${q.messageId}`);
    this.stateChanged(record);
    this.retire(record.id);
  }

  /** Leaves the oldest finished jobs beyond KEEP_FINISHED to the store, once it answers for them. */
  private retire(id: string): void {
    const store = this.options.store;
    if (!store) return;
    this.finishedOrder.push(id);
    while (this.finishedOrder.length > KEEP_FINISHED) {
      const old = this.finishedOrder.shift()!;
      // A store that could not record it (unwritable, full) leaves it here, in memory.
      const stored = store.storedState ? store.storedState(old) : store.get(old)?.state;
      if (stored === this.entries.get(old)?.record.state) this.entries.delete(old);
    }
  }

  /** The newest finished job of a backend's session, to take its running totals. */
  latestInSession(backend: string, sessionId: string): JobRecord | undefined {
    return this.all().findLast(
      (j) => j.backend === backend && j.outcome?.sessionId === sessionId && isFinished(j.state),
    );
  }

  get(id: string): JobRecord | undefined {
    return this.entries.get(id)?.record ?? this.options.store?.get(id);
  }

  /** Stored finished jobs first (oldest first), then this table's own, in submission order. */
  all(): JobRecord[] {
    const stored = this.options.store?.finished().filter((r) => !this.entries.has(r.id)) ?? [];
    return [...stored, ...[...this.entries.values()].map((e) => e.record)];
  }

  outputTail(id: string, maxChars: number): string | undefined {
    return this.entries.get(id)?.tail?.(maxChars);
  }

  /** A queued job that will not run: its final state and why. */
  private endUnstarted(record: JobRecord, state: 'cancelled' | 'failed', error: string): void {
    record.state = state;
    record.endedAt = new Date().toISOString();
    record.outcome = { ok: false, text: '', error, costSource: 'unknown' };
    this.stateChanged(record);
  }

  /** Adds a check made just before each queued job starts, for the table's life. */
  guardStart(guard: StartGuard): void {
    this.startGuards.push(guard);
  }

  /** Stops a queued or running job and resolves once it has ended; `why` says why a queued one never started. */
  async cancel(id: string, why = 'cancelled before it started'): Promise<JobRecord | undefined> {
    const entry = this.entries.get(id);
    if (!entry) return this.options.store?.get(id); // not ours to stop: left as it is
    const { record } = entry;
    if (record.state === 'queued') {
      this.endUnstarted(record, 'cancelled', why);
    } else if (record.state === 'running') {
      entry.controller.abort();
      await entry.finished;
    }
    return record;
  }

  /**
   * Waits until every job in `ids` (mode "all") or any of them (mode "any") has finished, or one
   * asks a question this `waiter` (a client; default: the one) has not been returned yet.
   */
  waitFor(
    ids: string[],
    options: { timeoutMs: number; mode: 'all' | 'any'; signal?: AbortSignal; waiter?: string },
  ): Promise<WaitResult> {
    const waiter = options.waiter ?? '';
    // Each record looked up once (a stored one is read from disk): this table's own are updated
    // in place, even once left to the store; a stored job of another live server never
    // finishes here: it stays pending.
    const records = new Map(ids.map((id) => [id, this.get(id)!]));
    const split = (): WaitResult => {
      const all = [...records.values()];
      return { finished: all.filter((r) => isFinished(r.state)), pending: all.filter((r) => !isFinished(r.state)) };
    };
    // A new question wakes the wait: its agent is blocked until it is answered. Once a wait has
    // returned it, it no longer wakes one (it is still listed), so a wait does not spin on it.
    const done = (r: WaitResult) =>
      r.pending.length === 0 ||
      (options.mode === 'any' && r.finished.length > 0) ||
      r.pending.some((p) => this.unreportedQuestions(p, waiter).length > 0);
    // The wait's result; the questions it returns count as returned to this waiter.
    const report = (): WaitResult => {
      const result = split();
      for (const job of result.pending) {
        for (const q of this.unreportedQuestions(job, waiter)) {
          const key = `${job.id}/${q.messageId}`;
          this.reportedQuestions.set(key, (this.reportedQuestions.get(key) ?? new Set()).add(waiter));
          result.questioned = true;
        }
      }
      return result;
    };
    return waitUntil({
      subscribe: (wake) =>
        this.onChange((record) => {
          if (!records.has(record.id)) return;
          if (isFinished(record.state)) records.set(record.id, record);
          wake();
        }),
      ready: () => (done(split()) ? report() : undefined),
      expired: report,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  }

  /**
   * The job once it has finished, or as it is when the signal aborts. Unlike waitFor, its
   * questions neither wake it nor count as returned (a team following its members must not take
   * a question from the orchestrator's wait).
   */
  whenFinished(id: string, signal?: AbortSignal): Promise<JobRecord> {
    const record = this.get(id);
    if (!record) return Promise.reject(new InputError(`no agent with id "${id}"`));
    let latest = record;
    return waitUntil({
      subscribe: (wake) =>
        this.onStateChange((changed) => {
          if (changed.id !== id) return;
          latest = changed;
          wake();
        }),
      ready: () => (isFinished(latest.state) ? latest : undefined),
      expired: () => this.get(id) ?? record,
      signal,
    });
  }

  /**
   * A running job's question to the orchestrator (its agent called ask_parent): the new message
   * id. Refused, with what to do, past the open and total question limits or the length limits.
   */
  ask(id: string, text: string, options?: string[], to: Addressee = 'orchestrator'): Question {
    const record = this.running(id);
    checkQuestion(text, options);
    const entries = (record.conversation ??= []);
    const open = openQuestions(entries);
    if (open.length >= CONVERSATION_LIMITS.openQuestions) {
      throw new InputError(
        `${open.length} questions (${open.map((q) => q.messageId).join(', ')}) are waiting for answers already: wait for them with check_message_status before asking more`,
      );
    }
    const asked = countOf(entries, 'question');
    if (asked >= CONVERSATION_LIMITS.questions) {
      throw new InputError(`this run has asked ${asked} questions, the most one run may: decide on your own`);
    }
    const question: Question = {
      kind: 'question',
      at: new Date().toISOString(),
      messageId: `q${asked + 1}`,
      text,
      options: options?.length ? options : undefined,
      ...(to === 'user' ? { to } : {}),
    };
    entries.push(question);
    this.changed(record);
    this.events.emit('question', record, question);
    return question;
  }

  /**
   * The answer to a running job's question, from `by`: reply_subagent, the dashboard's form, the
   * user's dialog. The first answer wins; a later one is refused, saying who answered and when.
   */
  reply(id: string, messageId: string, answer: string, by: AnswerSource = 'orchestrator'): JobRecord {
    const record = this.checkReply(id, messageId, answer);
    record.conversation!.push({ kind: 'answer', at: new Date().toISOString(), messageId, text: answer, by });
    this.changed(record);
    return record;
  }

  /** The running job whose question `reply` would answer; throws, saying why, where it would refuse. */
  checkReply(id: string, messageId: string, answer: string): JobRecord {
    const record = this.get(id);
    if (!record) throw new InputError(`no agent with id "${id}": pass an agent_id from list or wait_for_agents`);
    checkLength('the answer', answer, CONVERSATION_LIMITS.answerChars);
    const question = findQuestion(record.conversation, messageId);
    if (!question) {
      const open = openQuestions(record.conversation).map((q) => q.messageId);
      throw new InputError(
        `agent ${id} asked no question "${messageId}"${open.length ? `: its open questions are ${open.join(', ')}` : ''}`,
      );
    }
    const earlier = answerTo(record.conversation, messageId);
    if (earlier)
      throw new InputError(
        `question ${messageId} of agent ${id} was answered already, by ${answeredBy(earlier.by)} at ${earlier.at}`,
      );
    if (record.state === 'running' && !this.entries.has(id)) {
      throw new InputError(`agent ${id} runs in another polyspawn server on this project: answer it through that one`);
    }
    if (record.state !== 'running') {
      throw new InputError(
        `agent ${id} has ended (${record.state}): its question ${messageId} can no longer be answered`,
      );
    }
    return record;
  }

  /**
   * Waits for the answer to a running job's question, at most timeoutMs: "pending" then (ask
   * again), or when the job ends meanwhile.
   */
  waitForAnswer(id: string, messageId: string, timeoutMs: number, signal?: AbortSignal): Promise<AnswerWait> {
    const record = this.running(id);
    if (!findQuestion(record.conversation, messageId)) {
      throw new InputError(`no question "${messageId}" in this run: pass the message_id ask_parent returned`);
    }
    const check = (): AnswerWait | undefined => {
      const answer = answerTo(record.conversation, messageId);
      if (answer) return { status: 'answered', answer: answer.text };
      return record.state === 'running' ? undefined : { status: 'pending' };
    };
    return waitUntil({
      subscribe: (wake) => this.onChange((changed) => changed.id === id && wake()),
      ready: check,
      expired: () => ({ status: 'pending' }),
      timeoutMs,
      signal,
    });
  }

  /** A running job's status line (report_progress): the newest is shown; the first hundred are kept. */
  reportProgress(id: string, text: string): void {
    const record = this.running(id);
    checkLength('the progress line', text, CONVERSATION_LIMITS.progressInputChars);
    const line = { text: oneLine(text, CONVERSATION_LIMITS.progressChars), at: new Date().toISOString() };
    record.progress = line;
    const entries = (record.conversation ??= []);
    if (countOf(entries, 'progress') < CONVERSATION_LIMITS.progressLines) entries.push({ kind: 'progress', ...line });
    this.changed(record);
  }

  /** A running job's open questions that no wait of this waiter has returned yet. */
  private unreportedQuestions(job: JobRecord, waiter: string): Question[] {
    if (job.state !== 'running') return [];
    return openQuestions(job.conversation).filter(
      (q) => !this.reportedQuestions.get(`${job.id}/${q.messageId}`)?.has(waiter),
    );
  }

  /** This table's job, while it runs: only a running agent talks to the orchestrator. */
  private running(id: string): JobRecord {
    const record = this.entries.get(id)?.record;
    if (!record || record.state !== 'running') {
      throw new InputError(`agent ${id} is not running${record ? ` (${record.state})` : ''}: its run has ended`);
    }
    return record;
  }

  /** Called with a running job's record and its new question, the moment it is asked. */
  onQuestion(listener: (record: JobRecord, question: Question) => void): () => void {
    this.events.on('question', listener);
    return () => this.events.off('question', listener);
  }

  /**
   * Called with the live record on every change: its state, its process group or worktree
   * becoming known, a question, an answer, a progress line (the IAC record, the dashboard).
   */
  onChange(listener: (record: JobRecord) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  /**
   * Called with the live record when its state changes (queued, running, final), after the
   * onChange listeners (the IAC record has the final state before anyone hears of it).
   */
  onStateChange(listener: (record: JobRecord) => void): () => void {
    this.events.on('state', listener);
    return () => this.events.off('state', listener);
  }

  /** Cancels every queued and running job and waits until each has ended. */
  async shutdown(): Promise<void> {
    this.queue.pause();
    await Promise.all([...this.entries.keys()].map((id) => this.cancel(id)));
  }

  get counts(): { running: number; queued: number } {
    return { running: this.queue.pending, queued: this.queue.size };
  }

  private changed(record: JobRecord): void {
    this.events.emit('change', record);
  }

  private stateChanged(record: JobRecord): void {
    this.changed(record);
    this.events.emit('state', record);
  }

  private newId(): string {
    for (;;) {
      let id = '';
      for (let i = 0; i < ID_LENGTH; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
      if (!this.entries.has(id) && !this.options.store?.claimId(id)) return id;
    }
  }
}
