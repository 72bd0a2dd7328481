// The V8 start-up snapshot (src/snapshot.ts, src/lib/start-snapshot.ts), on a copy of the built
// installation with a cache folder of its own: a client that starts the launcher gets a server
// started from the snapshot, which serves everything the bundle loads lazily (the per-run channel,
// the commands, the HTTP SDKs, ajv); a blob that is missing, damaged, another's, or a bundle that
// changed, only mean a start without it; a `serve` without one has it made in the background;
// `polyspawn init` writes the launcher into the configs when there is one.
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startFakeModelApi, type FakeModelApi } from '../fakes/model-api.js';
import { repoRoot, startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';

type Job = { agent_id: string; state: string; text?: string; structured?: unknown; error?: string };
type Waited = { finished: Job[]; questions?: { message_id: string; question: string }[] };

const root = mkdtempSync(join(tmpdir(), 'polyspawn-snapshot-'));
const install = join(root, 'install');
const dist = join(install, 'dist', 'src');
const cli = join(dist, 'cli.js');
const cache = join(root, 'cache');
let launcher = '';
let blob = '';

/** The snapshot of the copy for this node, made in `folder`: the launcher's path, or the maker's output. */
function makeSnapshot(folder: string): string {
  const made = spawnSync(process.execPath, [join(dist, 'snapshot.cjs')], {
    env: { ...process.env, POLYSPAWN_SNAPSHOT: folder },
    encoding: 'utf8',
    timeout: 240_000,
  });
  const found = /^start-up snapshot: (\/.*\.sh)$/m.exec(made.stderr)?.[1];
  if (!found) throw new Error(`no snapshot: ${made.stdout}${made.stderr}`);
  return found;
}

/** Whether the server process (the launcher execs node) was given the snapshot. */
const fromSnapshot = (s: TestServer) =>
  readFileSync(`/proc/${s.transport.pid}/cmdline`, 'utf8').split('\0').includes('--snapshot-blob');

const viaLauncher = (env: Record<string, string> = {}) =>
  startServer({ command: ['/bin/sh', launcher], env: { POLYSPAWN_SNAPSHOT: cache, ...env } });

beforeAll(() => {
  mkdirSync(install);
  cpSync(join(repoRoot, 'dist'), join(install, 'dist'), { recursive: true });
  cpSync(join(repoRoot, 'package.json'), join(install, 'package.json'));
  symlinkSync(join(repoRoot, 'node_modules'), join(install, 'node_modules'));
  launcher = makeSnapshot(cache);
  blob = readdirSync(cache)
    .filter((f) => f.endsWith('.blob'))
    .map((f) => join(cache, f))[0]!;
}, 300_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(process.platform !== 'linux')('started from the snapshot', () => {
  let server: TestServer;
  let api: FakeModelApi;
  beforeAll(async () => {
    api = await startFakeModelApi();
    server = await viaLauncher({
      XAI_API_KEY: 'xai-test-key-0123456789',
      POLYSPAWN_GROK_BASE_URL: `${api.url}/v1`,
      GEMINI_API_KEY: 'gemini-test-key-0123456789',
      POLYSPAWN_GEMINI_BASE_URL: api.url,
      MISTRAL_API_KEY: 'mistral-test-key-0123456789',
      POLYSPAWN_MISTRAL_BASE_URL: api.url,
    });
  });
  afterAll(async () => {
    await server.close();
    await api.close();
  });

  test('it serves initialize and tools/list from the snapshot, in the working folder it was started in', async () => {
    expect(fromSnapshot(server)).toBe(true);
    const { tools } = await server.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['spawn_codex', 'spawn_grok', 'wait_for_agents']));
    // The working folder is the client's, not the one the snapshot was made in.
    await waitFor('the serving line', () => server.stderr().includes(`serving on stdio for ${server.projectDir}`));
  });

  test('a CLI job asks the orchestrator over the per-run channel', async () => {
    const { agent_id: id } = await server.callOk<Job>('spawn_codex', {
      prompt: 'pick one [[cli:ask:Which database?]]',
    });
    const waited = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 60 });
    expect(waited.questions?.[0]?.question, JSON.stringify(waited)).toBe('Which database?');
    await server.callOk('reply_subagent', {
      agent_id: id,
      message_id: waited.questions![0]!.message_id,
      answer: 'postgres',
    });
    const done = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 60 });
    expect(done.finished[0], JSON.stringify(done)).toMatchObject({ state: 'succeeded', text: 'ANSWER postgres' });
  });

  test('a CLI job with an output schema (ajv, loaded by require)', async () => {
    const job = await server.callOk<Job>('spawn_claude', {
      prompt: 'look [[cli:read:missing.txt]]',
      output_schema: { type: 'object', required: ['read:missing.txt'] },
      wait_s: 60,
    });
    expect(job, JSON.stringify(job)).toMatchObject({
      state: 'succeeded',
      structured: { 'read:missing.txt': 'ENOENT' },
    });
  });

  test.each(['grok', 'gemini', 'mistral'])('an API job (%s: its SDK loaded by require)', async (backend) => {
    const job = await server.callOk<Job>(`spawn_${backend}`, { prompt: 'hello api', wait_s: 60 });
    expect(job, JSON.stringify(job)).toMatchObject({ state: 'succeeded' });
    expect(job.text).toContain('FAKE REPLY (turn 1): hello api');
  });
});

describe.skipIf(process.platform !== 'linux')('the launcher', () => {
  test('runs the commands from the snapshot too', () => {
    const out = spawnSync('/bin/sh', ['-x', launcher, 'status'], {
      cwd: root,
      env: { ...process.env, POLYSPAWN_SNAPSHOT: cache },
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stderr).toContain(`exec ${process.execPath} --snapshot-blob ${blob} ${cli} status`);
  });

  /** Changes the installation or the cache with `change`, starts through the launcher, undoes the change. */
  async function startsWithout(change: () => () => void, env: Record<string, string> = {}): Promise<void> {
    const undo = change();
    try {
      // The launcher knows its blob by path; the server it falls back to has the snapshot it finds
      // missing made elsewhere (in the background: see 'made when missing' below).
      const server = await viaLauncher({ POLYSPAWN_SNAPSHOT: join(root, 'elsewhere'), ...env });
      try {
        expect(fromSnapshot(server)).toBe(false);
        expect((await server.client.listTools()).tools.length).toBeGreaterThan(10);
        await server.callOk('list');
      } finally {
        await server.close();
      }
    } finally {
      undo();
    }
    const server = await viaLauncher();
    expect(fromSnapshot(server)).toBe(true); // undone: from the snapshot again
    await server.close();
  }

  /** The blob moved away, `replacement` (if any) in its place; undo puts it back, the same file. */
  const replaceBlob = (replacement?: Buffer) => () => {
    renameSync(blob, `${blob}.kept`);
    if (replacement) writeFileSync(blob, replacement);
    return () => {
      rmSync(blob, { force: true });
      renameSync(`${blob}.kept`, blob);
    };
  };

  test('a missing blob: a start without it', () => startsWithout(replaceBlob()));

  test('a damaged blob (node itself would die of it): a start without it', () =>
    startsWithout(() => {
      const data = readFileSync(blob);
      for (let i = data.length >> 1; i < (data.length >> 1) + 512; i++) data[i]! ^= 0x5a;
      return replaceBlob(data)();
    }));

  test('a blob made from something else: a start without it', () => {
    const entry = join(root, 'other-entry.cjs');
    writeFileSync(entry, "require('node:v8').startupSnapshot.setDeserializeMainFunction(() => process.exit(3));\n");
    const other = join(root, 'other.blob');
    const made = spawnSync(process.execPath, ['--snapshot-blob', other, '--build-snapshot', entry], {
      encoding: 'utf8',
    });
    expect(made.status, made.stderr).toBe(0);
    return startsWithout(replaceBlob(readFileSync(other)));
  });

  test('a bundle that changed since (an upgrade): a start without it, through the code cache', () =>
    startsWithout(() => {
      const bundle = join(dist, 'cli.bundle.cjs');
      const before = readFileSync(bundle);
      appendFileSync(bundle, '\n// changed\n');
      return () => {
        writeFileSync(bundle, before);
        launcher = makeSnapshot(cache); // the bundle's file changed again: a new snapshot
      };
    }));

  test('NODE_OPTIONS (its V8 flags would not match): a start without it', () =>
    startsWithout(() => () => undefined, { NODE_OPTIONS: '--max-old-space-size=200' }));
});

describe.skipIf(process.platform !== 'linux')('made when missing', () => {
  test('a serve started without a snapshot has it made in the background; the next start uses it', async () => {
    const folder = join(root, 'fresh-cache');
    const server = await startServer({ command: [process.execPath, cli], env: { POLYSPAWN_SNAPSHOT: folder } });
    try {
      await server.callOk('list');
      await waitFor(
        'the launcher',
        () => existsSync(folder) && readdirSync(folder).some((f) => f.endsWith('.sh')),
        240_000,
      );
    } finally {
      await server.close();
    }
    const made = join(
      folder,
      readdirSync(folder).find((f) => f.endsWith('.sh'))!,
    );
    const next = await startServer({ command: ['/bin/sh', made], env: { POLYSPAWN_SNAPSHOT: folder } });
    expect(fromSnapshot(next)).toBe(true);
    await next.close();
  }, 300_000);

  test('polyspawn init writes the launcher when there is a snapshot, node and cli.js when it is off (the default)', () => {
    const initIn = ([command, ...args]: string[], env: Record<string, string>) => {
      const project = mkdtempSync(join(root, 'project-'));
      const out = spawnSync(command!, [...args, 'init', '--claude'], {
        cwd: project,
        env: { ...process.env, ...env },
        encoding: 'utf8',
      });
      expect(out.status, out.stderr).toBe(0);
      return { ...JSON.parse(readFileSync(join(project, '.mcp.json'), 'utf8')).mcpServers.agents, said: out.stderr };
    };
    expect(initIn(['/bin/sh', launcher], { POLYSPAWN_SNAPSHOT: cache })).toMatchObject({
      command: '/bin/sh',
      args: [launcher],
    });
    expect(initIn([process.execPath, cli], { POLYSPAWN_SNAPSHOT: '0' })).toMatchObject({
      command: process.execPath,
      args: [cli],
    });
    // Off unless asked for: no variable, no snapshot made, the plain command.
    const home = mkdtempSync(join(root, 'cache-'));
    const { POLYSPAWN_SNAPSHOT: _asked, ...unset } = process.env;
    const project = mkdtempSync(join(root, 'project-'));
    const out = spawnSync(process.execPath, [cli, 'init', '--claude'], {
      cwd: project,
      env: { ...unset, XDG_CACHE_HOME: home },
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(project, '.mcp.json'), 'utf8')).mcpServers.agents).toMatchObject({
      command: process.execPath,
      args: [cli],
    });
    expect(
      readdirSync(home)
        .flatMap((d) => readdirSync(join(home, d)))
        .filter((f) => /^snapshot-/.test(f)),
    ).toEqual([]);
  });
});
