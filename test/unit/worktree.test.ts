// The pure pieces of isolation "worktree": git's -z output parsed, overlaps among siblings, the
// summary's count, IAC.md's worktree section with file names an agent chose, and which of a
// checkout's changes are polyspawn's own.
import { describe, expect, test } from 'vitest';
import { renderDocument, renderEntry, WORKTREE_FILES } from '../../iac/render.js';
import type { StoredRecord } from '../../iac/store.js';
import { summarize } from '../../src/jobs/result.js';
import { repositoryDrivers, statusPaths } from '../../src/jobs/worktree/git.js';
import { overlapsAmong, overlapsOfIds, siblingOverlaps, type OverlapJob } from '../../src/jobs/worktree/report.js';
import { withoutOwnFiles } from '../../src/jobs/worktree/worktree.js';
import { Redactor } from '../../src/lib/redact.js';
import { parseIac } from '../helpers/iac.js';

const changes = (files: string[]) => ({
  files,
  committed: [],
  uncommitted: files,
  agentCommitted: false,
  diffStat: `${files.length} files changed`,
  head: 'h',
  removed: files.length === 0,
});
const job = (id: string, from: number, to: number | undefined, files: string[]): OverlapJob => ({
  id,
  startedAt: new Date(from * 1000).toISOString(),
  ...(to !== undefined ? { endedAt: new Date(to * 1000).toISOString() } : {}),
  worktree: { path: `/w/${id}`, branch: `polyspawn/${id}`, base: 'b', changes: changes(files) },
});

describe('git output', () => {
  test('status -z: each path once; a rename gives its new and old path; names with spaces and newlines whole', () => {
    const z = [' M app.txt', '?? new file.txt', 'R  moved.txt', 'old.txt', 'A  odd\nname.txt', ''].join('\0');
    expect(statusPaths(z)).toEqual(['app.txt', 'new file.txt', 'moved.txt', 'old.txt', 'odd\nname.txt']);
    expect(statusPaths('')).toEqual([]);
  });
});

describe('the drivers a repository config defines', () => {
  test("filter and merge drivers of scopes local and worktree or of a file in the repository, by whole name (dots, `=`); the user's own and diff drivers left", () => {
    const z = [
      ['global', 'file:/home/u/.gitconfig', 'filter.lfs.process\ngit-lfs filter-process'],
      ['local', 'file:.git/config', 'filter.evil.clean\ntouch x'],
      ['local', 'file:.git/config', 'filter.evil.smudge\ntouch x'],
      ['local', 'file:/elsewhere/included', 'filter.a=b.c.clean\nrun'],
      ['worktree', 'file:/r/.git/worktrees/x/config.worktree', 'merge.ours.driver\ntrue'],
      ['global', 'file:/r/project.gitconfig', 'merge.included.driver\nrun'],
      ['local', 'file:.git/config', 'diff.evil.textconv\ncat'],
      ['local', 'file:.git/config', 'core.fsmonitor\nhook'],
      ['system', 'file:/etc/gitconfig', 'merge.sys.driver\nx'],
      ['command', 'command line:', 'filter.cmd.clean\nx'],
    ]
      .flat()
      .join('\0');
    const inRepository = (file: string) => file.startsWith('/r/');
    expect(repositoryDrivers(`${z}\0`, inRepository)).toEqual([
      { kind: 'filter', name: 'evil' },
      { kind: 'filter', name: 'a=b.c' },
      { kind: 'merge', name: 'ours' },
      { kind: 'merge', name: 'included' },
      { kind: 'filter', name: 'cmd' },
    ]);
    expect(repositoryDrivers('', inRepository)).toEqual([]);
  });
});

describe('overlaps', () => {
  test('files changed by more than one job, by path, each with its jobs', () => {
    const jobs = [job('a', 0, 10, ['x', 'y']), job('b', 0, 10, ['y', 'z']), job('c', 0, 10, ['y', 'x'])];
    expect(overlapsAmong(jobs)).toEqual([
      { file: 'x', agentIds: ['a', 'c'] },
      { file: 'y', agentIds: ['a', 'b', 'c'] },
    ]);
    expect(overlapsAmong([job('a', 0, 1, ['x'])])).toEqual([]);
    // By ids (what a team calls with its members): unknown ids change nothing.
    const byId = new Map(jobs.map((j) => [j.id, j]));
    expect(overlapsOfIds((id) => byId.get(id), ['b', 'c', 'nosuch'])).toEqual([{ file: 'y', agentIds: ['b', 'c'] }]);
  });

  test("a job's siblings are those whose runs overlapped its own in time; a running one counts", () => {
    const me = job('me', 100, 200, ['f', 'g']);
    const before = job('before', 0, 99, ['f']);
    const during = job('during', 150, 300, ['f']);
    const running = job('running', 190, undefined, ['g']);
    const after = job('after', 201, 250, ['f']);
    expect(siblingOverlaps(me, [before, during, running, after, me])).toEqual([
      { file: 'f', agentIds: ['me', 'during'] },
      { file: 'g', agentIds: ['me', 'running'] },
    ]);
    // Overlaps among siblings that this job did not touch are not its own.
    expect(siblingOverlaps(job('me', 100, 200, ['h']), [during, job('d2', 100, 200, ['f'])])).toEqual([]);
  });
});

const stored = (files: string[], over: Partial<StoredRecord> = {}): StoredRecord => ({
  v: 1,
  id: 'abc234',
  backend: 'codex',
  model: 'm',
  prompt: 'write things',
  cwd: '/p',
  timeoutS: 60,
  extra: {},
  state: 'succeeded',
  createdAt: '2026-05-01T12:00:00.000Z',
  startedAt: '2026-05-01T12:00:01.000Z',
  endedAt: '2026-05-01T12:00:31.500Z',
  owner: { pid: 1 },
  isolation: 'worktree',
  worktree: {
    path: '/p/.polyspawn/worktrees/abc234',
    branch: 'polyspawn/abc234',
    base: '0123456789abcdef',
    notes: ['your checkout has 1 uncommitted change (a|b.txt): the agent started from 0123456789 without them'],
    changes: changes(files),
  },
  ...over,
});

describe('where the worktree is shown', () => {
  test("list's summary: how many files the branch changes", () => {
    expect(summarize({ secrets: new Redactor() }, stored(['a', 'b'])).changed_files).toBe(2);
    expect(summarize({ secrets: new Redactor() }, stored([], { worktree: undefined })).changed_files).toBeUndefined();
  });

  test('IAC.md: branch, base, stat, the files (escaped, at most a screenful) and the notes; the document stays well formed', () => {
    const hostile = ['`x`.md', 'a|b.txt', '<script>.js', '*bold*_it_.md', '</details>.txt'];
    const many = [...hostile, ...Array.from({ length: WORKTREE_FILES + 5 }, (_, i) => `f${i}.txt`)];
    const entry = renderEntry(stored(many), { runPath: (id) => `.polyspawn/runs/${id}` });
    expect(entry).toContain('**Worktree:** branch polyspawn/abc234 from `0123456789` · 30 files changed; kept in');
    expect(entry).toContain('- \\`x\\`.md (left uncommitted; committed by polyspawn)');
    expect(entry).toContain('- a\\|b.txt');
    expect(entry).toContain(`- … and ${many.length - WORKTREE_FILES} more`);
    expect(entry).toContain('_your checkout has 1 uncommitted change (a\\|b.txt)');
    const doc = renderDocument({
      now: Date.now(),
      active: [],
      entries: [entry],
      totalFinished: 1,
      storePath: '.polyspawn',
    });
    expect(parseIac(doc).entries).toHaveLength(1);
    const none = renderEntry(stored([]), { runPath: (id) => id });
    expect(none).toContain('no changes: worktree and branch removed');
  });
});

test("a checkout's changes less polyspawn's own: its state folder, IAC.md and IAC.md's temp files", () => {
  const top = '/nowhere/project';
  const config = { projectDir: top, stateDir: `${top}/.polyspawn`, iacFile: `${top}/IAC.md` };
  const paths = [
    'IAC.md',
    'IAC.md.15240.1',
    'IAC.md.77.tmp',
    'IAC.md.x',
    'IAC.md.1.2.3',
    'notes.txt',
    '.polyspawn/runs/a',
  ];
  expect(withoutOwnFiles(top, config, paths)).toEqual(['IAC.md.x', 'IAC.md.1.2.3', 'notes.txt']);
});
