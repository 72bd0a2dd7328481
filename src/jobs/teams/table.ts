// The team table: run_team makes a team, its topology starts member jobs through the job table
// and writes the team's answer. Members are ordinary jobs (their own ids, logs, records), tagged
// with the team; the team keeps their states, the order of events and the answer.
import { EventEmitter } from 'node:events';
import { randomInt } from 'node:crypto';
import { InputError } from '../../lib/errors.js';
import { isFinished, type JobRecord, type JobTable } from '../table.js';
import { isTeamFinished, MAX_EVENTS, teamTotals, type TeamEvent, type TeamRecord, type TeamState } from './record.js';
import type { TeamSpec, Topology } from './spec.js';
import { TeamWorkspace } from './workspace.js';
import { BudgetReached, type TeamRun, type TopologyOutcome } from './run.js';
import { runMapReduce } from './topologies/map-reduce.js';
import { runPipeline } from './topologies/pipeline.js';
import { runPeerRing } from './topologies/peer-ring.js';
import { runLeaderTeammate } from './topologies/leader-teammate.js';
import { runBlackboard } from './topologies/blackboard.js';
import { runSupervisorTree } from './topologies/supervisor-tree.js';

/** What a member's job is asked to do, and how it is tagged. */
export type MemberRequest = {
  prompt: string;
  team: { id: string; member: string; role: string };
  timeoutS?: number;
  maxTurns?: number;
  isolation?: 'none' | 'worktree';
  /** The member talks to its team over the channel: it must be a CLI agent with the channel on. */
  needsChannel?: boolean;
  /** The MCP client the team runs for (TeamSpec.caller): a named agent's allowed_callers is checked against it. */
  caller: string | undefined;
};

/** What the team table needs of the app: start a member's job, and the job table to follow it. */
export type TeamHost = {
  /** Checks that a member can run here (a usable backend, or a named agent on one); throws what to change. */
  checkMember(member: string, options: { needsChannel?: boolean; caller: string | undefined }): void;
  /** Submits a member's job (the spawn use case); throws InputError or SetupError. */
  spawnMember(member: string, request: MemberRequest): JobRecord;
  jobs: Pick<JobTable, 'get' | 'cancel' | 'whenFinished' | 'onChange'>;
  /** Where teams are kept (the run store's team records), so a restarted server answers for them. */
  store?: TeamStore;
  /** How many levels of teams may run below one (supervisor_tree). */
  maxTeamDepth: number;
};

export type TeamStore = {
  claimId(id: string): boolean;
  save(team: TeamRecord): void;
  /** A stored team (one its server left running is returned as interrupted). */
  get(id: string): TeamRecord | undefined;
  /** The newest stored teams, newest first. */
  recent(n: number): TeamRecord[];
};

const TOPOLOGY_RUNNERS: Record<Topology, (run: TeamRun) => Promise<TopologyOutcome>> = {
  map_reduce: runMapReduce,
  pipeline: runPipeline,
  peer_ring: runPeerRing,
  leader_teammate: runLeaderTeammate,
  blackboard: runBlackboard,
  supervisor_tree: runSupervisorTree,
};

/** Which topologies talk over the channel, and so need CLI members. */
export const CHANNEL_TOPOLOGIES: readonly Topology[] = ['leader_teammate', 'blackboard', 'supervisor_tree'];

export const TEAM_ID = /^team-[a-z2-9]{6}$/;
const ID_ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';

type Entry = { record: TeamRecord; controller: AbortController; done: Promise<void>; workspace: TeamWorkspace };

export class TeamTable {
  private readonly entries = new Map<string, Entry>();
  /** Member job id → its team, while the team is this table's. */
  private readonly teamOfJob = new Map<string, string>();
  private readonly events = new EventEmitter();

  constructor(private readonly host: TeamHost) {
    this.events.setMaxListeners(0);
    host.jobs.onChange((job) => this.memberChanged(job));
  }

  /** Checks the spec and its members, then starts the team; returns at once. */
  start(spec: TeamSpec): TeamRecord {
    const needsChannel = CHANNEL_TOPOLOGIES.includes(spec.topology);
    for (const m of new Set([...spec.members, spec.reduceWith, spec.judge].filter((m): m is string => !!m)))
      this.host.checkMember(m, { needsChannel: needsChannel && spec.members.includes(m), caller: spec.caller });
    const depth = spec.parent ? this.depthOf(spec.parent.teamId) + 1 : 0;
    // A supervisor at the deepest level could start no team: refused as well.
    if (
      depth > this.host.maxTeamDepth ||
      (depth > 0 && depth === this.host.maxTeamDepth && spec.topology === 'supervisor_tree')
    )
      throw new InputError(
        `a ${spec.topology} team inside team ${spec.parent!.teamId} would go past the nesting limit of ${this.host.maxTeamDepth} level(s) of teams below a supervisor: use another topology, or do the work in this team's members`,
      );
    const record: TeamRecord = {
      id: this.newId(),
      spec,
      state: 'running',
      createdAt: new Date().toISOString(),
      members: [],
      events: [],
    };
    const controller = new AbortController();
    const workspace = new TeamWorkspace((kind, text, jobId) => this.event(record, kind, text, jobId));
    let settle!: () => void;
    const entry: Entry = { record, controller, workspace, done: new Promise<void>((r) => (settle = r)) };
    this.entries.set(record.id, entry);
    if (spec.parent) {
      const parent = this.get(spec.parent.teamId);
      if (parent) {
        parent.children = [...(parent.children ?? []), record.id];
        this.changed(parent);
      }
    }
    this.changed(record);
    void this.run(entry).finally(settle);
    return record;
  }

  private async run(entry: Entry): Promise<void> {
    const { record, controller } = entry;
    const run = this.teamRun(entry);
    let outcome: TopologyOutcome;
    try {
      outcome = await TOPOLOGY_RUNNERS[record.spec.topology](run);
    } catch (error) {
      if (error instanceof BudgetReached) {
        record.budgetReached = true;
        outcome = { ok: false, answer: record.answer ?? '', error: error.message };
      } else outcome = { ok: false, answer: '', error: `the team could not go on: ${(error as Error).message}` };
    }
    // Whatever the topology left running (teammates when the leader ends) ends with the team.
    await run.cancelMembers();
    record.state = controller.signal.aborted ? 'cancelled' : outcome.ok ? 'succeeded' : 'failed';
    record.answer = outcome.answer;
    if (outcome.error) record.error = outcome.error;
    if (outcome.note) record.note = outcome.note;
    record.endedAt = new Date().toISOString();
    this.event(record, 'end', `the team ${record.state}${outcome.error ? `: ${outcome.error}` : ''}`);
  }

  private teamRun(entry: Entry): TeamRun {
    const { record, controller, workspace } = entry;
    const spec = record.spec;
    const running = new Set<string>();
    return {
      id: record.id,
      spec,
      signal: controller.signal,
      workspace,
      start: (member, role, prompt, options = {}) => {
        if (controller.signal.aborted) throw new Error('the team was cancelled');
        const spent = teamTotals(record).costUsd ?? 0;
        if (spec.maxBudgetUsd !== undefined && spent >= spec.maxBudgetUsd) {
          const why = `budget reached: its members spent $${spent.toFixed(4)} of max_budget_usd $${spec.maxBudgetUsd}, so no new member was started (${role}: ${member} was next)`;
          this.event(record, 'budget', why);
          throw new BudgetReached(why);
        }
        const job = this.host.spawnMember(member, {
          prompt,
          team: { id: record.id, member, role },
          ...(spec.timeoutS ? { timeoutS: spec.timeoutS } : {}),
          ...(spec.maxTurns ? { maxTurns: spec.maxTurns } : {}),
          ...(spec.isolation ? { isolation: spec.isolation } : {}),
          ...(options.needsChannel ? { needsChannel: true } : {}),
          caller: spec.caller,
        });
        running.add(job.id);
        this.teamOfJob.set(job.id, record.id);
        record.members.push({ jobId: job.id, member, role, state: job.state });
        this.event(record, 'started', `${role}: ${member} started as agent ${job.id}`, job.id);
        return job;
      },
      finished: async (job) => {
        const done = await this.host.jobs.whenFinished(job.id, controller.signal);
        if (isFinished(done.state)) running.delete(job.id);
        return done;
      },
      event: (kind, text, jobId) => this.event(record, kind, text, jobId),
      brief: () => (spec.instructions ? `${spec.instructions.trim()}\n\n---\n\n${spec.task}` : spec.task),
      cancelMembers: async (jobIds) => {
        const ids = (jobIds ?? [...running]).filter((id) => !isFinished(this.host.jobs.get(id)?.state ?? 'failed'));
        await Promise.all(ids.map((id) => this.host.jobs.cancel(id)));
      },
    };
  }

  /** A member job changed: its state, cost and tokens on the team's record. */
  private memberChanged(job: JobRecord): void {
    const teamId = this.teamOfJob.get(job.id);
    const entry = teamId && this.entries.get(teamId);
    if (!entry) return;
    const member = entry.record.members.find((m) => m.jobId === job.id);
    if (!member || member.state === job.state) return;
    member.state = job.state;
    const o = job.outcome;
    if (o?.costUsd !== undefined) member.costUsd = o.costUsd;
    if (o?.usage) {
      member.inputTokens = o.usage.inputTokens;
      member.outputTokens = o.usage.outputTokens;
      member.cachedInputTokens = o.usage.cachedInputTokens;
    }
    if (isFinished(job.state)) this.teamOfJob.delete(job.id);
    this.changed(entry.record);
  }

  private event(record: TeamRecord, kind: TeamEvent['kind'], text: string, jobId?: string): void {
    if (record.events.length < MAX_EVENTS || kind === 'end')
      record.events.push({ at: new Date().toISOString(), kind, text, ...(jobId ? { jobId } : {}) });
    this.changed(record);
  }

  get(id: string): TeamRecord | undefined {
    return this.entries.get(id)?.record ?? this.host.store?.get(id);
  }

  /** The team a running member job belongs to, with its shared workspace (the channel's team tools). */
  teamOf(jobId: string): { team: TeamRecord; workspace: TeamWorkspace } | undefined {
    const id = this.teamOfJob.get(jobId);
    const entry = id ? this.entries.get(id) : undefined;
    return entry && !isTeamFinished(entry.record.state)
      ? { team: entry.record, workspace: entry.workspace }
      : undefined;
  }

  /** This table's teams and the newest stored ones, newest first. */
  recent(n: number): TeamRecord[] {
    const own = [...this.entries.values()].map((e) => e.record).reverse();
    const stored = (this.host.store?.recent(n) ?? []).filter((t) => !this.entries.has(t.id));
    return [...own, ...stored].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1)).slice(0, n);
  }

  /** Cancels the team: no member starts after this, and every member still running is ended. */
  async cancel(id: string): Promise<TeamRecord | undefined> {
    const entry = this.entries.get(id);
    if (!entry) return this.get(id);
    if (!isTeamFinished(entry.record.state)) {
      for (const child of entry.record.children ?? []) await this.cancel(child);
      entry.controller.abort();
      await entry.done;
    }
    return entry.record;
  }

  /**
   * Resolves once the team has finished, or when the time is up or the signal aborts. A stored
   * team another server runs never finishes here: it is waited for until the time is up (as
   * JobTable.waitFor does with another server's job), never returned at once to be waited again.
   */
  waitFor(id: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<TeamRecord> {
    const entry = this.entries.get(id);
    const current = () => entry?.record ?? this.get(id)!;
    if (isTeamFinished(current().state) || options.signal?.aborted) return Promise.resolve(current());
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', finish);
        this.events.off('change', onChange);
        resolve(current());
      };
      const onChange = (team: TeamRecord) => {
        if (team.id === id && isTeamFinished(team.state)) finish();
      };
      const timer = setTimeout(finish, options.timeoutMs);
      options.signal?.addEventListener('abort', finish, { once: true });
      this.events.on('change', onChange);
    });
  }

  /** Member jobs still queued or running, of the given teams. */
  activeMembers(teamIds: string[]): string[] {
    return teamIds.flatMap((id) =>
      (this.entries.get(id)?.record.members ?? []).filter((m) => !isFinished(m.state)).map((m) => m.jobId),
    );
  }

  /** Cancels every running team (the server is shutting down). */
  async shutdown(): Promise<void> {
    await Promise.all([...this.entries.keys()].map((id) => this.cancel(id)));
  }

  onChange(listener: (team: TeamRecord) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  private changed(record: TeamRecord): void {
    this.events.emit('change', record);
  }

  private depthOf(teamId: string): number {
    let depth = 0;
    for (let t = this.get(teamId); t?.spec.parent; t = this.get(t.spec.parent.teamId)) depth++;
    return depth;
  }

  private newId(): string {
    for (;;) {
      let id = 'team-';
      for (let i = 0; i < 6; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
      if (!this.entries.has(id) && !this.host.store?.claimId(id)) return id;
    }
  }
}

export type { TeamState };
