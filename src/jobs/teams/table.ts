// The team table: run_team makes a team, its topology starts member jobs through the job table
// and writes the team's answer. Members are ordinary jobs (their own ids, logs, records), tagged
// with the team; the team keeps their states, the order of events and the answer.
import { EventEmitter } from 'node:events';
import { randomInt } from 'node:crypto';
import type { Supervisor } from '../spawn.js';
import { InputError } from '../../lib/errors.js';
import { waitUntil } from '../../lib/wait.js';
import { isFinished, type JobRecord, type JobTable } from '../table.js';
import { isTeamFinished, MAX_EVENTS, type TeamEvent, type TeamRecord, type TeamState } from './record.js';
import { childSpec, type TeamSpec } from './spec.js';
import { namedMembers, topologyNamed } from './options.js';
import { LimitReached, type TeamRun, type TopologyOutcome } from './topology.js';
import { labelled, succeeded, type MemberAnswer } from './topologies/answers.js';
import { stepsByRole, type TeamView } from './view.js';

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
  /** A child team's member: the supervisor that started the team, whose sandbox and permission it may narrow, never widen. */
  supervisor?: Supervisor;
};

/** What the team table needs of the app: start a member's job, and the job table to follow it. */
export type TeamHost = {
  /** Checks that a member can run here (a usable backend, or a named agent on one); throws what to change. */
  checkMember(
    member: string,
    options: { needsChannel?: boolean; caller: string | undefined; supervisor?: Supervisor },
  ): void;
  /** Submits a member's job (the spawn use case); throws InputError or SetupError. */
  spawnMember(member: string, request: MemberRequest): JobRecord;
  jobs: Pick<JobTable, 'get' | 'cancel' | 'whenFinished' | 'onStateChange' | 'guardStart'>;
  /** Where teams are kept (the run store's team records), so a restarted server answers for them. */
  store?: TeamStore;
  /** How many levels of teams may run below one (supervisor_tree). */
  maxTeamDepth: number;
  /** How many agents a team may start in all, the teams below it included (the config's team_max_agents). */
  maxAgents: number;
};

export type TeamStore = {
  claimId(id: string): boolean;
  save(team: TeamRecord): void;
  /** A stored team (one its server left running is returned as interrupted). */
  get(id: string): TeamRecord | undefined;
  /** The newest stored teams, newest first. */
  recent(n: number): TeamRecord[];
};

const ID_ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';

type Entry = {
  record: TeamRecord;
  controller: AbortController;
  done: Promise<void>;
  /** What its topology's members share (its `state()`), if it keeps any. */
  state: unknown;
  /** Why the team stopped starting members (its budget or the agent bound), once it has. */
  stopped?: string;
};

export class TeamTable {
  private readonly entries = new Map<string, Entry>();
  /** Member job id → its team, while the team is this table's. */
  private readonly teamOfJob = new Map<string, string>();
  private readonly events = new EventEmitter();

  constructor(private readonly host: TeamHost) {
    this.events.setMaxListeners(0);
    host.jobs.onStateChange((job) => this.memberChanged(job));
    // A team's budget is held where a member starts, not only where it was submitted: a member
    // queued behind the concurrency limit is checked when the queue starts it. (The agent bound
    // counts members as they are submitted, so the submit is its place.)
    host.jobs.guardStart((job) => {
      const entry = job.team && this.entries.get(job.team.id);
      const why = entry && this.budgetOver(entry);
      if (!why) return undefined;
      this.stop(entry, `${why}, so its queued members were not started`, 'budget');
      return why;
    });
  }

  /** Checks the spec and its members, then starts the team; returns at once. */
  start(asked: TeamSpec): TeamRecord {
    const parent = asked.parent && this.entries.get(asked.parent.teamId);
    if (asked.parent && (!parent || isTeamFinished(parent.record.state)))
      throw new InputError(`team ${asked.parent.teamId} that would run this team has ended`);
    const spec = parent ? childSpec(parent.record.spec, asked) : asked;
    const topology = topologyNamed(spec.topology);
    const needsChannel = topology.channel === true;
    const supervisor = this.supervisorOf(spec);
    for (const m of namedMembers(spec))
      this.host.checkMember(m, {
        needsChannel: needsChannel && spec.members.includes(m),
        caller: spec.caller,
        supervisor,
      });
    const depth = spec.parent ? this.depthOf(spec.parent.teamId) + 1 : 0;
    // A supervisor at the deepest level could start no team: refused as well.
    if (depth > this.host.maxTeamDepth || (depth > 0 && depth === this.host.maxTeamDepth && topology.runsTeams))
      throw new InputError(
        `a ${spec.topology} team inside team ${spec.parent!.teamId} would go past the nesting limit of ${this.host.maxTeamDepth} level(s) of teams below a supervisor: use another topology, or do the work in this team's members`,
      );
    const started = parent ? this.agentsIn(this.root(parent)) : 0;
    const planned = topology.plannedAgents(spec);
    if (started + planned > this.host.maxAgents)
      throw new InputError(
        `this ${spec.topology} team would start ${planned} agent(s)${started ? ` where its tree has started ${started}` : ''}, ` +
          `past the ${this.host.maxAgents} a team may start in all, the teams below it included (team_max_agents in the config): ` +
          'use fewer members, items or rounds',
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
    const state = topology.state?.((kind, text, jobId) => this.event(record, kind, text, jobId));
    let settle!: () => void;
    const entry: Entry = { record, controller, state, done: new Promise<void>((r) => (settle = r)) };
    this.entries.set(record.id, entry);
    if (parent) {
      parent.record.children = [...(parent.record.children ?? []), record.id];
      const by = spec.parent!.jobId;
      this.event(
        parent.record,
        'team',
        `${by} started team ${record.id} (${spec.topology}, ${spec.members.length} member(s))`,
        by,
      );
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
      outcome = await topologyNamed(record.spec.topology).run(run);
    } catch (error) {
      if (error instanceof LimitReached) {
        // No member starts any more; those running finish, and what they answer is kept.
        await Promise.all(
          record.members
            .filter((m) => !isFinished(m.state))
            .map((m) => this.host.jobs.whenFinished(m.jobId, controller.signal)),
        );
        outcome = { ok: false, answer: '', error: error.message };
      } else outcome = { ok: false, answer: '', error: `the team could not go on: ${(error as Error).message}` };
    }
    // A team that ends ends its whole tree: the teams its supervisor started, and whatever the
    // topology left running (teammates when the leader ends).
    for (const child of record.children ?? []) await this.cancel(child);
    await run.cancelMembers();
    record.state = controller.signal.aborted ? 'cancelled' : outcome.ok && !entry.stopped ? 'succeeded' : 'failed';
    // Stopped by a limit, the team keeps what its members answered.
    record.answer = outcome.answer || (entry.stopped ? this.answerSoFar(record) : '');
    const error = entry.stopped ?? outcome.error;
    if (error) record.error = error;
    if (outcome.note) record.note = outcome.note;
    record.endedAt = new Date().toISOString();
    this.event(record, 'end', `the team ${record.state}${error ? `: ${error}` : ''}`);
  }

  private teamRun(entry: Entry): TeamRun {
    const { record, controller, state } = entry;
    const spec = record.spec;
    const running = new Set<string>();
    return {
      id: record.id,
      spec,
      signal: controller.signal,
      state,
      start: (member, role, prompt, options = {}) => {
        if (controller.signal.aborted) throw new Error('the team was cancelled');
        const next = `so no new member was started (${role}: ${member} was next)`;
        const overBudget = this.budgetOver(entry);
        if (overBudget) throw new LimitReached(this.stop(entry, `${overBudget}, ${next}`, 'budget'));
        const root = this.root(entry);
        if (this.agentsIn(root) >= this.host.maxAgents)
          throw new LimitReached(
            this.stop(
              entry,
              `agent bound reached: team ${root.record.id} and the teams below it started ${this.host.maxAgents} agents, the most a team may (team_max_agents), ${next}`,
              'limit',
            ),
          );
        // A supervisor's team runs its members within what the supervisor may do.
        const supervisor = this.supervisorOf(spec);
        const job = this.host.spawnMember(member, {
          prompt,
          team: { id: record.id, member, role },
          timeoutS: spec.timeoutS,
          maxTurns: spec.maxTurns,
          isolation: spec.isolation,
          needsChannel: options.needsChannel,
          caller: spec.caller,
          supervisor,
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

  /** A member job's state changed: its state, cost and tokens on the team's record. */
  private memberChanged(job: JobRecord): void {
    const teamId = this.teamOfJob.get(job.id);
    const entry = teamId && this.entries.get(teamId);
    if (!entry) return;
    const member = entry.record.members.find((m) => m.jobId === job.id);
    if (!member) return;
    member.state = job.state;
    const o = job.outcome;
    if (o?.costUsd !== undefined) member.costUsd = o.costUsd;
    if (o?.usage) {
      member.inputTokens = o.usage.inputTokens;
      member.outputTokens = o.usage.outputTokens;
      member.cachedInputTokens = o.usage.cachedInputTokens;
    }
    this.changed(entry.record);
    if (isFinished(job.state)) {
      this.teamOfJob.delete(job.id);
      this.cancelQueuedOverBudget(this.root(entry));
    }
  }

  /**
   * A member ended, and its cost is known: every team of the tree whose budget (or one above it)
   * is now reached has its queued members cancelled, so none starts and the team ends.
   */
  private cancelQueuedOverBudget(root: Entry): void {
    for (const entry of this.tree(root)) {
      if (isTeamFinished(entry.record.state)) continue;
      const queued = entry.record.members.filter((m) => m.state === 'queued');
      const why = queued.length ? this.budgetOver(entry) : undefined;
      if (!why) continue;
      this.stop(entry, `${why}, so its queued members were not started`, 'budget');
      for (const m of queued) void this.host.jobs.cancel(m.jobId, `not started: ${why}`);
    }
  }

  /**
   * Why no member of the team may start for its budget, or undefined: the cost of its tree, or of
   * the tree of a team above it, has reached that team's max_budget_usd. A finished member counts
   * its cost; a running one, whose cost most backends report only at its end, its own
   * max_budget_usd when it has one (what it may still spend), else nothing until it ends.
   */
  private budgetOver(entry: Entry): string | undefined {
    for (const owner of this.lineage(entry)) {
      const max = owner.record.spec.maxBudgetUsd;
      if (max === undefined) continue;
      let spent = 0;
      let committed = 0;
      for (const m of this.tree(owner).flatMap((e) => e.record.members)) {
        if (m.costUsd !== undefined) spent += m.costUsd;
        else if (m.state === 'running') committed += this.host.jobs.get(m.jobId)?.maxBudgetUsd ?? 0;
      }
      if (spent + committed < max) continue;
      const own = owner === entry;
      const whose = own ? 'its members' : `the members of team ${owner.record.id} and of the teams below it`;
      const running = committed
        ? ` and its running members may spend $${committed.toFixed(4)} more (their own max_budget_usd)`
        : '';
      return `budget reached: ${whose} spent $${spent.toFixed(4)}${running} of ${own ? '' : `team ${owner.record.id}'s `}max_budget_usd $${max}`;
    }
    return undefined;
  }

  /** The team stops starting members: said once in its events; returns why. */
  private stop(entry: Entry, why: string, kind: 'budget' | 'limit'): string {
    if (entry.stopped) return entry.stopped;
    entry.stopped = why;
    if (kind === 'budget') entry.record.budgetReached = true;
    this.event(entry.record, kind, why);
    return why;
  }

  /** What the members of a team stopped by a limit answered, labelled. */
  private answerSoFar(record: TeamRecord): string {
    const answers: MemberAnswer[] = record.members.flatMap((m) => {
      const job = this.host.jobs.get(m.jobId);
      return job ? [{ role: m.role, member: m.member, job }] : [];
    });
    return labelled(answers.filter(succeeded));
  }

  /** The supervisor job that started a child team. */
  private supervisorOf(spec: TeamSpec): Supervisor | undefined {
    return spec.parent && this.host.jobs.get(spec.parent.jobId);
  }

  /** The team and the teams above it (this table's), nearest first. */
  private lineage(entry: Entry): Entry[] {
    const above = entry.record.spec.parent && this.entries.get(entry.record.spec.parent.teamId);
    return [entry, ...(above ? this.lineage(above) : [])];
  }

  private root(entry: Entry): Entry {
    return this.lineage(entry).at(-1)!;
  }

  /** The team and every team below it. */
  private tree(entry: Entry): Entry[] {
    return [
      entry,
      ...(entry.record.children ?? []).flatMap((id) => {
        const child = this.entries.get(id);
        return child ? this.tree(child) : [];
      }),
    ];
  }

  /** The agents a team and the teams below it have started. */
  private agentsIn(entry: Entry): number {
    return this.tree(entry).reduce((n, e) => n + e.record.members.length, 0);
  }

  private event(record: TeamRecord, kind: TeamEvent['kind'], text: string, jobId?: string): void {
    if (record.events.length < MAX_EVENTS || kind === 'end')
      record.events.push({ at: new Date().toISOString(), kind, text, jobId });
    this.changed(record);
  }

  get(id: string): TeamRecord | undefined {
    return this.entries.get(id)?.record ?? this.host.store?.get(id);
  }

  /** The team a running member job belongs to, with what its members share (the channel's member tools). */
  teamOf(jobId: string): { team: TeamRecord; state: unknown } | undefined {
    const id = this.teamOfJob.get(jobId);
    const entry = id ? this.entries.get(id) : undefined;
    return entry && !isTeamFinished(entry.record.state) ? { team: entry.record, state: entry.state } : undefined;
  }

  /** How the team is drawn: its topology's view, with what its members share while this table runs it. */
  view(team: TeamRecord): TeamView {
    const topology = topologyNamed(team.spec.topology);
    const state = this.entries.get(team.id)?.state;
    return topology.view?.(team, state) ?? { steps: stepsByRole(team), tables: [] };
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
    return waitUntil({
      subscribe: (wake) => this.onChange((team) => team.id === id && wake()),
      ready: () => {
        const now = current();
        return isTeamFinished(now.state) ? now : undefined;
      },
      expired: current,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
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
