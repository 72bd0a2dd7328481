// The run store: every job of every server on the project, on disk (the layout is in
// docs/ARCHITECTURE.md). index.jsonl is what makes it cheap: a server loads the whole history from
// it without opening the record files, and follows the other servers' jobs by reading only the
// bytes appended since its last read.
import { closeSync, fstatSync, mkdirSync, openSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CostSource } from '../backends/types.js';
import { isFinished, JOB_ID, JOB_STATES, type JobRecord, type JobStore, type JobState } from '../src/jobs/table.js';
import { InputError } from '../src/lib/errors.js';
import { z } from 'zod';
import { worktreePlace } from '../src/jobs/worktree/report.js';
import { processStart, sameProcessAlive, type ProcessIdentity } from '../src/lib/proc.js';
import type { Redactor } from '../src/lib/redact.js';
import { runFolder, runsDir } from '../src/lib/run-folder.js';
import { taskLine } from '../src/lib/text.js';
import { makeDirs, openRegularFile, PRIVATE_DIR, PRIVATE_FILE, readRegularFile, writeAtomic } from '../src/lib/fs.js';
import {
  appendToIndex,
  BASE_FILE,
  compactIndex,
  eachLine,
  indexDamage,
  LIVE_FILE,
  rank,
  readHeader,
  readLines,
  type IndexHeader,
} from './index-file.js';
import { DamagedLines, quickKey, readIndexLine, type IndexLine } from './index-line.js';

export type { IndexLine } from './index-line.js';

type StoredGroup = { pgid: number; start?: string; mark?: string };

export type StoredRecord = JobRecord & {
  v: 1;
  /** The server that ran (or runs) the job. */
  owner: ProcessIdentity;
  /** The job's process group, its leader's start and its processes' mark, once it runs. */
  group?: StoredGroup;
};

/** An index line with readable names, for the IAC.md active table and `polyspawn status`. */
export type IndexRow = {
  id: string;
  state: JobState;
  backend: string;
  model: string;
  task: string;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  costUsd?: number;
  costSource?: CostSource;
  inputTokens?: number;
  outputTokens?: number;
};

export const indexRow = (l: IndexLine): IndexRow => ({
  id: l.id,
  state: l.st,
  backend: l.b,
  model: l.m,
  task: l.t,
  createdAt: l.c,
  startedAt: l.s,
  endedAt: l.e,
  costUsd: l.usd,
  costSource: l.cs,
  inputTokens: l.in,
  outputTokens: l.out,
});

export type Recovered = { record: StoredRecord; ownerPid: number | undefined };

/** A record.json past this is damaged unread: a record holds an answer, bounded far below it. */
const MAX_RECORD_BYTES = 256 * 1024 * 1024;
/** What a record.json must hold to be read back as a run's record (the rest is as it was written). */
const storedRecordSchema = z.looseObject({
  v: z.literal(1),
  id: z.string(),
  state: z.enum(JOB_STATES),
  backend: z.string(),
  model: z.string(),
  prompt: z.string(),
  owner: z.looseObject({ pid: z.number().int().nonnegative(), start: z.string().optional() }),
});
/** The live index file's size past which the store lock's holder compacts it (iac/index-file.ts). */
const COMPACT_AT_BYTES = 1 << 20;

export class RunStore implements JobStore {
  readonly dir: string;
  readonly runsDir: string;
  readonly indexPath: string;
  private readonly redactor: Redactor;
  private readonly identity: ProcessIdentity;

  /** Bytes of index.jsonl already read, in the file of this generation and inode, and how many lines. */
  private offset = 0;
  private lineNumber = 0;
  /** Lines skipped as damaged since this generation was first read, and whether the log has heard of them. */
  private damaged = new DamagedLines();
  private damagedInBase = new DamagedLines();
  private damageReported = false;
  private readonly onDamage: ((message: string) => void) | undefined;
  private generation = -1;
  private inode = -1;
  /** The newest line of every job: its state at once, the rest parsed when first needed. */
  private readonly latest = new Map<string, Slot>();
  /** Ids in the order of their final lines; `finalAt` says which position is current. */
  private order: string[] = [];
  private readonly finalAt = new Map<string, number>();
  /** Ids whose newest line is queued or running. */
  private readonly activeIds = new Set<string>();
  private summaries: JobRecord[] | undefined;
  private loaded = false;
  /** How many finished jobs are held in memory; older ones are left to their record.json. */
  private readonly keepFinished: number;
  private readonly compactAtBytes: number;
  /** Finished jobs let go of (`keepFinished`), and where in `order` the held ones begin. */
  private forgotten = 0;
  private head = 0;

  /** What this store last indexed for each of its own jobs. */
  private readonly indexedState = new Map<string, JobState>();
  private readonly redactedPrompts = new Map<string, string>();
  private readonly groups = new Map<string, StoredGroup>();
  /** This server's finished records, kept until IAC.md has rendered them once. */
  private readonly fresh = new Map<string, StoredRecord>();
  /** Servers (`pid:start`) found gone: a process that has ended stays ended. */
  private readonly goneOwners = new Set<string>();
  /**
   * When this server first answered that a dead server's job was interrupted (before the
   * recovery wrote it): the recovery writes the same end time, so no answer contradicts another.
   */
  private readonly presumedEnd = new Map<string, string>();

  constructor(options: {
    stateDir: string;
    redactor: Redactor;
    identity: ProcessIdentity;
    /**
     * Finished jobs held in memory, newest first (default: all). A server sets a bound so that
     * its size does not grow with the history: `list` shows at most 1,000, IAC.md its N, and
     * `get` reads any job's record.json.
     */
    keepFinished?: number;
    /** The live index file's size past which `compact()` compacts it (default 1 MiB). */
    compactAtBytes?: number;
    /** Told once, the first time a read finds damaged lines in the index. */
    onDamage?: (message: string) => void;
  }) {
    this.onDamage = options.onDamage;
    this.keepFinished = options.keepFinished ?? Infinity;
    this.compactAtBytes = options.compactAtBytes ?? COMPACT_AT_BYTES;
    this.dir = options.stateDir;
    this.runsDir = runsDir(this.dir);
    this.indexPath = join(this.dir, LIVE_FILE);
    this.redactor = options.redactor;
    this.identity = options.identity;
  }

  runDir(id: string): string {
    return join(this.runsDir, id);
  }

  /**
   * The JobStore's claim (the JobTable's, for every id it draws): claims `id` by creating its run folder, which succeeds in
   * exactly one process, so two servers never hand out the same id, nor one that is stored.
   * A store that cannot be written claims nothing and refuses nothing: the job still runs
   * (an id is one of 32^6, and this server's own are checked by the table).
   */
  claimId(id: string): boolean {
    try {
      mkdirSync(this.runDir(id), PRIVATE_DIR);
      return false;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return true;
      if (code !== 'ENOENT') return false;
    }
    try {
      makeDirs(this.runsDir);
      mkdirSync(this.runDir(id), PRIVATE_DIR);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EEXIST';
    }
  }

  /**
   * Records a change of one of this server's jobs: record.json, and an index line if its state
   * changed. The record goes first, so whoever reads a line can read its record.
   */
  save(job: JobRecord): void {
    const prompt = this.savePrompt(job);
    const group = job.processGroup;
    if (group && this.groups.get(job.id)?.pgid !== group.pgid)
      this.groups.set(job.id, { pgid: group.pgid, start: processStart(group.pgid), mark: group.mark });
    const { prompt: _raw, processGroup: _group, ...rest } = job;
    const record: StoredRecord = {
      v: 1,
      ...this.redactor.deep(rest),
      prompt,
      owner: this.identity,
      group: this.groups.get(job.id),
    };
    this.writeRecord(record);
    if (this.indexedState.get(job.id) !== job.state) {
      this.indexedState.set(job.id, job.state);
      this.append(record);
    }
    if (isFinished(job.state)) {
      this.fresh.set(job.id, record);
      this.redactedPrompts.delete(job.id);
      this.groups.delete(job.id);
      this.indexedState.delete(job.id);
    }
  }

  /**
   * prompt.txt, written once per job: the prompt, redacted. When it held no secret the file is
   * the prompt itself, and a CLI reads its stdin from it (`promptFile`): the prompt is kept once.
   */
  private savePrompt(job: JobRecord): string {
    const saved = this.redactedPrompts.get(job.id);
    if (saved !== undefined) return saved;
    const prompt = this.redactor.text(job.prompt);
    const path = runFolder(this.dir, job.id).prompt;
    try {
      // Its folder was just made by claimId, and nothing else writes this file: no temp file.
      writeFileSync(path, prompt, { mode: PRIVATE_FILE, flag: 'wx' });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'EEXIST') throw error;
      makeDirs(this.runDir(job.id));
      writeAtomic(path, prompt);
    }
    this.redactedPrompts.set(job.id, prompt);
    return prompt;
  }

  /**
   * prompt.txt of one of this server's jobs, written now if it was not yet, when it holds the
   * job's prompt exactly (no secret was taken out of it): the executor's `promptFile`.
   */
  promptFile(job: JobRecord): { path: string; text: string } | undefined {
    try {
      return this.savePrompt(job) === job.prompt
        ? { path: runFolder(this.dir, job.id).prompt, text: job.prompt }
        : undefined;
    } catch {
      return undefined; // not written: the prompt goes through a pipe, and save() reports the failure
    }
  }

  private writeRecord(record: StoredRecord): void {
    writeAtomic(runFolder(this.dir, record.id).record, `${JSON.stringify(record, null, 2)}\n`);
  }

  private append(record: StoredRecord): void {
    // The server that runs it, while it is queued or running (its recovery needs it).
    const line = indexLine(record, taskLine(record.prompt), isFinished(record.state) ? undefined : record.owner);
    makeDirs(this.dir);
    appendToIndex(this.indexPath, `${JSON.stringify(line)}\n`);
  }

  /**
   * The whole stored record of a job, or undefined. A queued or running job whose server is gone
   * reads as interrupted at once, as the recovery (recoverOrphans, in the background) will write it.
   * A record.json that cannot be read back (truncated, not JSON, another run's, not a file) reads
   * as what the index says of the run, with an error saying the record is damaged; a run the
   * index does not know either gets that error (an InputError) instead of "no agent".
   */
  get(id: string): StoredRecord | undefined {
    const read = this.stored(id);
    if (read === undefined) return undefined;
    // A final state in the index is final: a record.json that says otherwise was written by someone else.
    this.ensureLoaded();
    const final = this.latest.get(id)?.st;
    const disagrees = 'record' in read && final !== undefined && isFinished(final) && read.record.state !== final;
    const record =
      'damaged' in read || disagrees
        ? this.fromIndex(id, 'damaged' in read ? read.damaged : `its state (${read.record.state}) is not the index's`)
        : read.record;
    if (isFinished(record.state) || !this.ownerGone(record.owner?.pid, record.owner?.start)) return record;
    return interrupted(record, this.dir, record.owner?.pid, this.presumedEndOf(id));
  }

  /** A run whose record.json is damaged, as the index has it. */
  private fromIndex(id: string, why: string): StoredRecord {
    this.ensureLoaded();
    const slot = this.latest.get(id);
    const line = slot && this.lineOf(slot);
    const problem = `the record of agent ${id} (${runFolder(this.dir, id).record}) is damaged: ${why}`;
    if (!line) throw new InputError(`${problem}, and the run store's index does not list it: its state is not known`);
    const summary = summaryOf(line);
    return {
      ...summary,
      v: 1,
      owner: ownerOf(line),
      ...(isFinished(line.st)
        ? {
            outcome: {
              ...(summary.outcome ?? { costSource: 'unknown' as const }),
              ok: false,
              text: '',
              error: `${problem}: what the index says of it is shown`,
            },
          }
        : {}),
    };
  }

  /** A run's record.json: undefined when there is none, else the record or why it cannot be used. */
  private stored(id: string): { record: StoredRecord } | { damaged: string } | undefined {
    if (!JOB_ID.test(id)) return undefined;
    const text = readRegularFile(runFolder(this.dir, id).record, MAX_RECORD_BYTES);
    if (text === undefined) return undefined;
    if (typeof text !== 'string') return { damaged: text.problem };
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      return { damaged: `not JSON (${(error as Error).message})` };
    }
    const checked = storedRecordSchema.safeParse(json);
    if (!checked.success)
      return {
        damaged: `not a run's record (${checked.error.issues[0]?.path.join('.') || 'the whole'}: ${checked.error.issues[0]?.message})`,
      };
    if (checked.data.id !== id) return { damaged: `it holds the record of another run (${checked.data.id})` };
    return { record: json as StoredRecord };
  }

  /** Whether the server `pid` started at `start` is gone (never this one). */
  private ownerGone(pid: number | undefined, start: string | undefined, alive?: Map<string, boolean>): boolean {
    if (pid === this.identity.pid && start === this.identity.start) return false;
    const key = `${pid}:${start}`;
    if (this.goneOwners.has(key)) return true;
    let live = alive?.get(key);
    if (live === undefined) {
      // Where this server knows its own start (Linux), every polyspawn there writes its own: an
      // owner without one was written by no server here (a cloned or edited store), whatever
      // process has that pid now.
      const unproven = start === undefined && this.identity.start !== undefined;
      live = pid !== undefined && !unproven && sameProcessAlive(pid, start);
      alive?.set(key, live);
    }
    if (!live) this.goneOwners.add(key);
    return !live;
  }

  private presumedEndOf(id: string): string {
    let at = this.presumedEnd.get(id);
    if (at === undefined) {
      at = new Date().toISOString();
      this.presumedEnd.set(id, at);
    }
    return at;
  }

  /** A final state read from the index needs no record: it never changes again. */
  storedState(id: string): JobState | undefined {
    const st = this.latest.get(id)?.st;
    return st !== undefined && isFinished(st) ? st : this.getOrUndefined(id)?.state;
  }

  /** get(), with a run neither its record nor the index can say anything of as undefined. */
  private getOrUndefined(id: string): StoredRecord | undefined {
    try {
      return this.get(id);
    } catch {
      return undefined;
    }
  }

  /** This server's record of a job finished since the last call, or the stored one. */
  recordForRender(id: string): StoredRecord | undefined {
    const fresh = this.fresh.get(id);
    if (fresh) return fresh;
    return this.getOrUndefined(id);
  }

  /** Forgets the finished records kept for IAC.md (once it has rendered them). */
  clearFresh(): void {
    this.fresh.clear();
  }

  /**
   * Reads the lines appended to the index since the last read; all of it (the base's newest
   * `keepFinished`, then the live file) the first time and after a compaction replaced the file.
   * Returns how many lines were applied.
   */
  refresh(): number {
    let fd: number;
    try {
      fd = openRegularFile(this.indexPath);
    } catch {
      this.loaded = true;
      return 0;
    }
    let applied = 0;
    try {
      const stat = fstatSync(fd);
      const { header, bytes, damaged } = readHeader(fd, this.dir);
      // Replaced (a compaction: the new file may be as long as the old one, or longer) or truncated.
      if (header.gen !== this.generation || stat.ino !== this.inode || stat.size < this.offset) {
        this.reset();
        this.generation = header.gen;
        this.inode = stat.ino;
        this.offset = bytes;
        this.lineNumber = bytes ? 1 : 0;
        if (damaged) this.damaged.add(1);
        applied += this.loadBase(header);
      }
      // Only whole lines: a line still being written is read next time.
      this.offset = eachLine(fd, this.offset, stat.size, (raw) => {
        this.lineNumber++;
        if (raw === undefined) this.noteDamage(this.lineNumber);
        else applied += this.take(raw, this.lineNumber);
      });
    } finally {
      closeSync(fd);
      this.loaded = true;
    }
    if (applied) this.summaries = undefined;
    this.reportDamage();
    return applied;
  }

  /** The damaged lines of the index's files, each read whole now (for `doctor`). */
  damage(): string[] {
    const { live, base } = indexDamage(this.dir);
    return [live.describe(LIVE_FILE), base.describe(BASE_FILE)].filter((d): d is string => d !== undefined);
  }

  /** The damaged lines this store found as it read (a line is checked whole when first used), logged once per server. */
  private damageFound(): string[] {
    return [this.damaged.describe(LIVE_FILE), this.damagedInBase.describe(BASE_FILE)].filter(
      (d): d is string => d !== undefined,
    );
  }

  /** `at`: the line's number in the live file, or minus its number in the base. */
  private noteDamage(at: number): void {
    if (at > 0) this.damaged.add(at);
    else this.damagedInBase.add(-at);
  }

  /**
   * Applies a line read back (1) or counts it damaged (0). A line of the shape this store writes
   * is applied on its id and state, and checked whole when first used (`lineOf`): loading
   * 10,000 runs parses only the lines shown, not the superseded ones.
   */
  private take(raw: string, at: number): number {
    const key = quickKey(raw);
    if (key) {
      this.apply(newSlot(key.id, key.st, at, raw, false));
      return 1;
    }
    const read = readIndexLine(raw);
    if (read.damaged) this.noteDamage(at);
    if (!read.line) return 0;
    this.apply(newSlot(read.line.id, read.line.st, at, read.text!, true));
    return 1;
  }

  /** A held line, checked whole the first time; a damaged one is let go of (its run is not shown) and counted. */
  private lineOf(slot: Slot): IndexLine | undefined {
    if (slot.raw === undefined) return indexLine(slot.summary!, slot.summary!.prompt);
    if (slot.checked) return JSON.parse(slot.raw) as IndexLine;
    const line = readIndexLine(slot.raw).line;
    if (line) {
      slot.checked = true;
      return line;
    }
    this.noteDamage(slot.at);
    this.latest.delete(slot.id);
    this.activeIds.delete(slot.id);
    this.finalAt.delete(slot.id); // (no summary holds it: a summary is made of a checked line)
    this.reportDamage();
    return undefined;
  }

  private reportDamage(): void {
    if (this.damageReported || !this.onDamage) return;
    const found = this.damageFound();
    if (!found.length) return;
    this.damageReported = true;
    this.onDamage(
      `run store ${this.dir}: ${found.join('; ')}; the runs they held are not shown (polyspawn doctor lists them)`,
    );
  }

  /** The base's newest finished runs (keepFinished of them); the older ones are counted, not read. */
  private loadBase(header: IndexHeader): number {
    if (header.base === 0) return 0;
    const lines = readLines(join(this.dir, BASE_FILE), header.base, this.keepFinished);
    let applied = 0;
    lines.forEach((raw, i) => (applied += this.take(raw, -(header.done - lines.length + i + 1))));
    this.forgotten += Math.max(0, header.done - applied);
    return applied;
  }

  /**
   * Compacts the index when its live file is past `compactAtBytes` (or always, `force`): see
   * iac/index-file.ts. Call it under the store lock. Returns whether it compacted.
   */
  compact(force = false): boolean {
    let size: number;
    try {
      size = statSync(this.indexPath).size;
    } catch {
      return false;
    }
    if (!force && size < this.compactAtBytes) return false;
    return compactIndex(this.dir, lineKey) !== undefined;
  }

  private reset(): void {
    this.offset = 0;
    this.damaged = new DamagedLines();
    this.damagedInBase = new DamagedLines();
    this.latest.clear();
    this.order = [];
    this.finalAt.clear();
    this.activeIds.clear();
    this.summaries = undefined;
    this.forgotten = 0;
    this.head = 0;
  }

  private apply(slot: Slot): void {
    const held = this.latest.get(slot.id);
    if (held && rank(held.st) > rank(slot.st)) return; // a copy made by a compaction, behind its run's newer line
    this.latest.set(slot.id, slot);
    if (isFinished(slot.st)) {
      this.activeIds.delete(slot.id);
      if (this.presumedEnd.size) this.presumedEnd.delete(slot.id);
      this.finalAt.set(slot.id, this.order.length);
      this.order.push(slot.id);
      this.forgetOldest();
      if (this.order.length > 1024 && this.order.length > 2 * this.finalAt.size) this.compactOrder();
    } else this.activeIds.add(slot.id);
  }

  /** Lets go of the oldest finished jobs beyond `keepFinished`. */
  private forgetOldest(): void {
    while (this.finalAt.size > this.keepFinished && this.head < this.order.length) {
      const id = this.order[this.head]!;
      if (this.finalAt.get(id) === this.head) {
        this.finalAt.delete(id);
        this.latest.delete(id);
        this.forgotten++;
      }
      this.head++;
    }
  }

  private compactOrder(): void {
    const order = this.order.filter((id, i) => this.finalAt.get(id) === i);
    this.order = order;
    this.head = 0;
    order.forEach((id, i) => this.finalAt.set(id, i));
  }

  private ensureLoaded(): void {
    if (!this.loaded) this.refresh();
  }

  line(id: string): IndexLine | undefined {
    const slot = this.latest.get(id);
    return slot && this.lineOf(slot);
  }

  /** Jobs queued or running in any server on the project, oldest first. */
  active(): IndexLine[] {
    this.ensureLoaded();
    const lines: IndexLine[] = [];
    for (const id of this.activeIds) {
      const line = this.lineOf(this.latest.get(id)!);
      if (line) lines.push(line);
    }
    return lines.sort((a, b) => (a.c < b.c ? -1 : a.c > b.c ? 1 : 0));
  }

  /** How many jobs have finished, in every server's history. */
  get finishedCount(): number {
    this.ensureLoaded();
    return this.finalAt.size + this.forgotten;
  }

  /** Ids of the newest `n` finished jobs (by when they finished), newest first. */
  newestFinished(n: number): string[] {
    this.ensureLoaded();
    const ids: string[] = [];
    for (let i = this.order.length - 1; i >= 0 && ids.length < n; i--) {
      const id = this.order[i]!;
      const slot = this.latest.get(id);
      if (this.finalAt.get(id) === i && slot && isFinished(slot.st) && this.lineOf(slot)) ids.push(id);
    }
    return ids;
  }

  /**
   * The JobStore's read back: summaries of the stored finished jobs held in memory (keepFinished),
   * oldest first; then the queued and running ones whose server is gone, as interrupted (see get).
   */
  finished(): JobRecord[] {
    this.refresh();
    if (!this.summaries) {
      const list: JobRecord[] = [];
      this.order.forEach((id, i) => {
        const slot = this.latest.get(id)!;
        if (this.finalAt.get(id) !== i || !isFinished(slot.st)) return;
        if (!slot.summary) {
          const line = this.lineOf(slot);
          if (!line) return;
          // From here on the summary is the slot's only copy of its line: a history of
          // thousands of jobs is held once, not three times (raw, parsed, summarized).
          slot.summary = summaryOf(line);
          slot.raw = undefined;
        }
        list.push(slot.summary);
      });
      this.summaries = list;
    }
    const orphans: JobRecord[] = [];
    const alive = new Map<string, boolean>();
    for (const id of this.activeIds) {
      const line = this.lineOf(this.latest.get(id)!);
      if (line && this.ownerGone(line.p, line.ps, alive))
        orphans.push(interrupted(summaryOf(line), this.dir, line.p, this.presumedEndOf(id)));
    }
    return orphans.length ? [...this.summaries, ...orphans] : this.summaries;
  }

  /**
   * Marks `interrupted` every queued or running job whose server is gone (its pid is not
   * running, or it is running but started at another time: a reused pid). Jobs of live
   * servers are left alone. Call it under the store lock, so two servers never recover the
   * same job.
   */
  recoverOrphans(now = new Date()): Recovered[] {
    this.refresh();
    const alive = new Map<string, boolean>();
    const recovered: Recovered[] = [];
    for (const id of [...this.activeIds]) {
      const line = this.lineOf(this.latest.get(id)!);
      if (!line || !this.ownerGone(line.p, line.ps, alive)) continue;
      const read = this.stored(line.id);
      const stored = read && 'record' in read ? read.record : undefined;
      const record = interrupted<StoredRecord>(
        stored ?? {
          ...summaryOf(line),
          v: 1,
          owner: ownerOf(line),
        },
        this.dir,
        line.p,
        this.presumedEnd.get(line.id) ?? now.toISOString(),
      );
      makeDirs(this.runDir(line.id));
      this.writeRecord(record);
      this.append(record);
      this.fresh.set(record.id, record);
      recovered.push({ record, ownerPid: line.p });
    }
    if (recovered.length) this.refresh();
    return recovered;
  }
}

/** A queued or running job of a server that is gone, as its recovery writes it. */
function interrupted<T extends JobRecord>(
  record: T,
  stateDir: string,
  ownerPid: number | undefined,
  endedAt: string,
): T {
  const log = runFolder(stateDir, record.id).stdout;
  return {
    ...record,
    state: 'interrupted',
    endedAt,
    outcome: {
      ...(record.outcome ?? {}),
      ok: false,
      text: record.outcome?.text ?? '',
      error:
        `interrupted: the polyspawn server that ran it (pid ${ownerPid ?? '?'}) ended before it finished; its output so far is in ${log}` +
        keptWorktree(stateDir, record),
      costSource: record.outcome?.costSource ?? 'unknown',
    },
  };
}

/** An interrupted isolated job's worktree stays where it was, as it was: said in its error. */
function keptWorktree(stateDir: string, record: JobRecord): string {
  if (record.isolation !== 'worktree') return '';
  const { path, branch } = worktreePlace(stateDir, record.worktreeOf ?? record.id);
  return `. Its worktree ${path} (branch ${branch}) is kept as it was: integrate commits what it left, or discard it`;
}

/**
 * An index line as held: its id and state, and its text, checked whole when first used
 * (`checked`), parsed again when needed; then its summary, the slot's only copy (a history of
 * thousands of jobs is held once). `at`: its line number in the live file, or minus its number in the base.
 */
type Slot = {
  id: string;
  st: JobState;
  at: number;
  raw: string | undefined;
  checked: boolean;
  summary: JobRecord | undefined;
};

/** Every slot made with the same shape: loading 10,000 runs' lines stays on V8's fast path. */
const newSlot = (id: string, st: JobState, at: number, raw: string, checked: boolean): Slot => ({
  id,
  st,
  at,
  raw,
  checked,
  summary: undefined,
});

/** A line's key for a compaction: what a reader would read of it. */
function lineKey(raw: string): { id: string; st: JobState; raw: string } | undefined {
  const { line, text } = readIndexLine(raw);
  return line && { id: line.id, st: line.st, raw: text! };
}

/**
 * A job's index line: `task` its task line, `owner` the server that runs it. A summary's prompt
 * is its task line already: a finished job's summary gives back the line it was made of.
 */
function indexLine(r: JobRecord, task: string, owner?: ProcessIdentity): IndexLine {
  const o = r.outcome;
  return {
    id: r.id,
    st: r.state,
    b: r.backend,
    m: r.model,
    t: task,
    c: r.createdAt,
    s: r.startedAt,
    e: r.endedAt,
    usd: o?.costUsd,
    cs: o?.costSource,
    in: o?.usage?.inputTokens,
    out: o?.usage?.outputTokens,
    p: owner?.pid,
    ps: owner?.start,
  };
}

/** The server an index line names (a line without one: pid 0, no process). */
const ownerOf = (line: IndexLine): ProcessIdentity =>
  line.p !== undefined ? { pid: line.p, start: line.ps } : { pid: 0 };

/** A JobRecord made of an index line: enough for `list` and wait_for_agents' summaries. */
function summaryOf(line: IndexLine): JobRecord {
  return {
    id: line.id,
    backend: line.b,
    model: line.m,
    prompt: line.t,
    cwd: '',
    timeoutS: 0,
    extra: {},
    state: line.st,
    createdAt: line.c,
    startedAt: line.s,
    endedAt: line.e,
    outcome: line.cs
      ? {
          ok: line.st === 'succeeded',
          text: '',
          costSource: line.cs,
          costUsd: line.usd,
          usage:
            line.in !== undefined
              ? { inputTokens: line.in, outputTokens: line.out ?? 0, cachedInputTokens: 0 }
              : undefined,
        }
      : undefined,
  };
}
