// Writes IAC.md: coalesced, under a lock held across processes, by temp file + rename. A reader
// sees the old file or the new one, never half of one; and since every write starts from the
// whole index, the last write shows every server's jobs.
import {
  closeSync,
  fstatSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, dirname, join, parse, relative, sep } from 'node:path';
import { lock } from '../src/lib/lock.js';
import { END_MARK, renderDocument, renderEntry, TITLE, type ActiveRow } from './render.js';
import { indexRow, type IndexLine, type Recovered, type RunStore } from './store.js';
import { openQuestions } from '../src/jobs/conversation.js';
import type { TeamRecord } from '../src/jobs/teams/record.js';
import { renderTeam } from './render-team.js';
import { makeDirs, tempNameBeside } from '../src/lib/fs.js';

/**
 * Whether polyspawn may write IAC.md at `path`: nothing is there, an empty file, or a document
 * it wrote (its title line first, its end marker last). A project's own IAC.md is never replaced.
 */
export function mayWriteIac(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return true;
    const read = (length: number, position: number) => {
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - position)));
      return buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, position)).toString('utf8');
    };
    const head = `${TITLE}\n`;
    const tail = `${END_MARK}\n`;
    return read(head.length, 0) === head && read(tail.length, Math.max(0, size - tail.length)) === tail;
  } catch {
    return false; // a folder, or unreadable: not a document polyspawn wrote
  } finally {
    closeSync(fd);
  }
}

/**
 * Where IAC.md goes: the configured file, unless something polyspawn did not write is there;
 * then beside it, `<name>.polyspawn.md` (the same folder, so its links to the run store hold and
 * it is found next to the other), with one sentence for the instructions and `doctor`.
 */
export function iacTarget(configured: string): { file: string; problem?: string } {
  if (mayWriteIac(configured)) return { file: configured };
  const { dir, name, ext } = parse(configured);
  const file = join(dir, `${name}.polyspawn${ext}`);
  return {
    file,
    problem:
      `${configured} was not written by polyspawn (it lacks IAC.md's title line and end marker), so it is left alone ` +
      `and polyspawn's record of this project's agents is ${file}. To choose another place, set iac_file in ` +
      'polyspawn.config.json or POLYSPAWN_IAC_FILE.',
  };
}

type IacWriterOptions = {
  /** IAC.md's path. */
  file: string;
  /** How many finished interactions it shows. */
  entries: number;
  /** Coalescing window. */
  debounceMs?: number;
  /** Stale lock age (a holder that died): at least 2000 (proper-lockfile's minimum). */
  staleLockMs?: number;
  log?: (message: string) => void;
  /** Called (under the lock) with the jobs just marked interrupted. */
  onRecovered?: (recovered: Recovered[]) => void;
  /** Tests: called after each write with the document written. */
  afterWrite?: (document: string) => void;
  /** Tests: awaited between writing the new document aside and putting it in place. */
  beforeReplace?: () => Promise<void>;
  /** The newest teams to show, newest first (iac/teams.ts). */
  teams?: () => TeamRecord[];
};

/** Temp files this process made: two writers in one process (tests) never share one. */
let temps = 0;

export class IacWriter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private dirty = false;
  private closed = false;
  private cleaned = false;
  private lastError = '';
  /** Entries rendered once and kept (a finished one does not change): a write costs O(entries shown), not O(history). */
  private readonly cache = new Map<string, { key: string; text: string }>();
  /** How many times IAC.md was written. */
  writes = 0;

  constructor(
    private readonly store: RunStore,
    private readonly options: IacWriterOptions,
  ) {}

  /**
   * Asks for a write soon. Asks that arrive while one is scheduled or running fold into the next,
   * so a burst of a hundred finishing jobs costs a handful of writes.
   */
  schedule(): void {
    this.dirty = true;
    if (this.timer || this.running || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, this.options.debounceMs ?? 200);
  }

  private run(): Promise<void> {
    this.running ??= (async () => {
      try {
        this.dirty = false;
        await this.write();
      } finally {
        this.running = undefined;
        if (this.dirty) this.schedule();
      }
    })();
    return this.running;
  }

  /** Writes now whatever is pending, and resolves once IAC.md is up to date. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
      if (this.running) {
        await this.running;
        continue;
      }
      if (!this.dirty) return;
      await this.run();
    }
  }

  /** Flushes, then ignores later changes. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private async write(): Promise<void> {
    const { file } = this.options;
    let release: (() => Promise<void>) | undefined;
    let compromised = false;
    try {
      makeDirs(this.store.dir);
      release = await lock(this.store.dir, {
        lockfilePath: join(this.store.dir, 'iac.lock'),
        realpath: false,
        stale: Math.max(2000, this.options.staleLockMs ?? 5000),
        retries: { retries: 400, factor: 1.2, minTimeout: 5, maxTimeout: 100 },
        onCompromised: (error) => {
          compromised = true;
          this.options.log?.(`the IAC.md lock was taken over: ${error.message}`);
        },
      });
      const before = version(file);
      const recovered = this.store.recoverOrphans();
      if (recovered.length) this.options.onRecovered?.(recovered);
      this.compactIndex();
      if (!this.cleaned) this.removeStaleTemps();
      // Checked on every write: a project's own file may appear while the server runs.
      if (!mayWriteIac(file))
        return this.report(
          `not writing ${file}: polyspawn did not write it (it lacks IAC.md's title line and end marker), so it is left as it is`,
        );
      const document = this.render(Date.now());
      makeDirs(dirname(file));
      const temp = tempNameBeside(file, ++temps);
      // No fsync: IAC.md is a view, rewritten whole from the store by the next write. The mode is
      // the one IAC.md has, or what the umask gives a new file: it is meant to be read.
      await writeFile(temp, document, { mode: modeOf(file) });
      await this.options.beforeReplace?.();
      // A writer stalled past the lock's stale age (a busy event loop, a stopped process) loses the
      // lock to another, which may since have written a newer document: ours, rendered from an
      // older view of the store, must not replace it. Checked and replaced in one synchronous step.
      if (compromised || version(file) !== before) {
        rmSync(temp, { force: true });
        this.dirty = true; // rendered again, under a lock of our own
        return;
      }
      renameSync(temp, file);
      this.writes++;
      this.lastError = '';
      this.options.afterWrite?.(document);
    } catch (error) {
      this.report(`could not write ${file}: ${(error as Error).message}`);
    } finally {
      await release?.().catch(() => undefined);
    }
  }

  /** A long index is compacted here: under the lock, in the background (iac/index-file.ts). */
  private compactIndex(): void {
    try {
      this.store.compact();
    } catch (error) {
      this.options.log?.(`could not compact ${this.store.indexPath}: ${(error as Error).message}`);
    }
  }

  /** Why IAC.md was not written, logged once until a write succeeds. */
  private report(message: string): void {
    if (message !== this.lastError) this.options.log?.(message);
    this.lastError = message;
  }

  /** The document as it stands: the active agents of every server and the newest N entries. */
  render(now: number): string {
    const { file } = this.options;
    const fromIac = (path: string) => {
      const rel = relative(dirname(file), path);
      return (rel.startsWith('..') ? path : rel).split(sep).join('/');
    };
    const ids = this.store.newestFinished(this.options.entries);
    const entries = ids.map((id) => {
      const line = this.store.line(id)!;
      const key = `${line.st}|${line.e}`;
      const cached = this.cache.get(id);
      if (cached?.key === key) return cached.text;
      const record = this.store.recordForRender(id);
      const text = record
        ? renderEntry(record, { runPath: (runId) => fromIac(this.store.runDir(runId)) })
        : `### \`${id}\` · ${line.st}\n\n_Its record is missing from the store._`;
      this.cache.set(id, { key, text });
      return text;
    });
    const shown = new Set(ids);
    for (const id of this.cache.keys()) if (!shown.has(id)) this.cache.delete(id);
    this.store.clearFresh();
    return renderDocument({
      now,
      active: this.store.active().map((line) => this.activeRow(line)),
      entries,
      teams: (this.options.teams?.() ?? []).map(renderTeam),
      totalFinished: this.store.finishedCount,
      storePath: fromIac(this.store.dir),
    });
  }

  /** An active agent's row; a running one's questions and progress come from its record. */
  private activeRow(line: IndexLine): ActiveRow {
    const row = indexRow(line);
    if (row.state !== 'running') return row;
    const record = this.store.get(row.id);
    const questions = openQuestions(record?.conversation);
    return { ...row, questions: questions.length ? questions : undefined, progress: record?.progress };
  }

  /** Temp files of a writer killed between write and rename (IAC.md.<pid>.<n>; write-file-atomic's IAC.md.<n> from older versions). */
  private removeStaleTemps(): void {
    this.cleaned = true;
    const dir = dirname(this.options.file);
    const pattern = new RegExp(
      `^${basename(this.options.file).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.\\d+(\\.\\d+)?$`,
    );
    try {
      for (const name of readdirSync(dir)) {
        if (!pattern.test(name)) continue;
        const path = join(dir, name);
        if (Date.now() - statSync(path).mtimeMs > 10_000) unlinkSync(path);
      }
    } catch {
      // best effort
    }
  }
}

/** Which document is at `path`: a rename puts a new file there (a new inode, a new mtime). */
function version(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.ino}:${s.mtimeNs}:${s.size}`;
  } catch {
    return 'none';
  }
}

function modeOf(path: string): number {
  try {
    return statSync(path).mode & 0o777;
  } catch {
    return 0o666;
  }
}
