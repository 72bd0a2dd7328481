// Installable as a package: `npm pack`, installed with `npm install <tarball>` into an empty
// folder (its dependencies from the registry; no dev dependency), gives a working `polyspawn`:
// --help, doctor, a stdio session that lists the tools, and `npx polyspawn`.
//
// Slow by nature (two npm installs, ~15 s each with a warm npm cache). It needs the npm registry,
// which this project's machines and CI reach; without it the test fails, it does not skip.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { usableLine } from '../helpers/backends.js';
import { fakeBinDir, repoRoot } from '../helpers/mcp.js';

const root = mkdtempSync(join(tmpdir(), 'polyspawn-pack-'));
const installDir = join(root, 'install');
const npxDir = join(root, 'npx');
const projectDir = join(root, 'project');
let tarball = '';

/** The environment of a user's shell: none of the npm_* variables `npm test` sets for its script. */
const env: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env))
  if (v !== undefined && !/^npm_/i.test(k) && k !== 'INIT_CWD' && !k.startsWith('POLYSPAWN_')) env[k] = v;
delete env.CLAUDECODE;
Object.assign(env, {
  XDG_CONFIG_HOME: join(root, 'xdg'),
  XDG_CACHE_HOME: join(root, 'xdg-cache'), // the code cache it writes
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
});

function run(
  command: string,
  args: string[],
  cwd: string,
  extra: Record<string, string> = {},
): SpawnSyncReturns<string> {
  const r = spawnSync(command, args, { cwd, env: { ...env, ...extra }, encoding: 'utf8', timeout: 120_000 });
  if (r.error) throw r.error;
  return r;
}
const ok = (r: SpawnSyncReturns<string>, what: string) => expect(r.status, `${what}:\n${r.stderr}`).toBe(0);

beforeAll(() => {
  for (const dir of [installDir, npxDir, projectDir]) mkdirSync(dir);
  // npm test has just built dist/; --ignore-scripts packs that build instead of building again.
  const pack = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], repoRoot);
  ok(pack, 'npm pack');
  const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  tarball = join(root, info!.filename);
  const files = info!.files.map((f) => f.path);
  expect(files).toEqual(
    expect.arrayContaining([
      'dist/src/cli.js',
      'dist/src/commands/run.js',
      'dist/backends/registry.js',
      'dist/iac/store.js',
      'README.md',
      // The pages the README links.
      'docs/tools.md',
      'docs/security.md',
      'api_keys.example.json',
    ]),
  );
  expect(files.filter((f) => f.startsWith('test/') || f.startsWith('src/') || f.endsWith('.ts'))).toEqual([]);
  ok(run('npm', ['install', tarball], installDir), 'npm install <tarball>');
}, 180_000);

afterAll(() => {
  // Two installs' node_modules: ~100 MB each.
  rmSync(root, { recursive: true, force: true });
});

describe('the packed tarball, installed into an empty folder', () => {
  const bin = () => join(installDir, 'node_modules', '.bin', 'polyspawn');

  test('installs the runtime dependencies only', () => {
    const modules = join(installDir, 'node_modules');
    for (const dep of ['@modelcontextprotocol/sdk', 'jsonc-parser', 'smol-toml', 'zod', 'markdown-it', 'diff'])
      expect(existsSync(join(modules, dep)), dep).toBe(true);
    for (const dev of ['typescript', 'vitest', 'playwright-core'])
      expect(existsSync(join(modules, dev)), dev).toBe(false);
    expect(JSON.parse(readFileSync(join(modules, 'polyspawn', 'package.json'), 'utf8')).bin).toEqual({
      polyspawn: 'dist/src/cli.js',
    });
  });

  test('polyspawn --help and doctor work', () => {
    const help = run(bin(), ['--help'], projectDir);
    ok(help, 'polyspawn --help');
    expect(help.stdout).toContain('polyspawn doctor');
    const path = [fakeBinDir, dirname(process.execPath), '/usr/bin', '/bin'].join(delimiter);
    const doctor = run(bin(), ['doctor'], projectDir, { PATH: path });
    ok(doctor, 'polyspawn doctor');
    expect(doctor.stdout).toMatch(/^claude +cli +ok /m);
    expect(doctor.stdout).toContain(usableLine(4));
  });

  test('a stdio session lists the tools', async () => {
    const transport = new StdioClientTransport({ command: bin(), args: [], cwd: projectDir, env, stderr: 'pipe' });
    const client = new Client({ name: 'package-test', version: '1' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(
        expect.arrayContaining([
          'spawn_claude',
          'spawn_codex',
          'spawn_copilot',
          'spawn_grok',
          'wait_for_agents',
          'result',
          'list',
          'cancel',
          'logs',
        ]),
      );
      expect(client.getServerVersion()).toMatchObject({
        name: 'polyspawn',
        version: JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version,
      });
    } finally {
      await client.close();
    }
  });

  test('npx polyspawn: in the folder it is installed in, and from the tarball anywhere', () => {
    const local = run('npx', ['polyspawn', '--version'], installDir);
    ok(local, 'npx polyspawn --version');
    expect(local.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const remote = run('npx', ['-y', `--package=${tarball}`, 'polyspawn', '--help'], npxDir);
    ok(remote, 'npx --package=<tarball> polyspawn --help');
    expect(remote.stdout).toContain('Usage:');
  }, 120_000);
});
