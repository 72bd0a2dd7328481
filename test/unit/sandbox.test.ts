// The sandbox's settings (src/config/sandbox.ts, the config) and the wrapped commands
// (src/jobs/process/sandbox.ts): bwrap's arguments on this machine's filesystem, and docker's
// and podman's, which no engine here runs (test/e2e/sandbox.test.ts runs them through a fake).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { npmInstall } from '../../backends/sandbox-paths.js';
import type { CliBackend } from '../../backends/types.js';
import { loadConfig } from '../../src/config/config.js';
import { effectiveSandbox, sandboxSchema, sandboxSettings, type SandboxSettings } from '../../src/config/sandbox.js';
import { currentDockerContext } from '../../src/jobs/process/docker-context.js';
import { checkDefinition } from '../../src/jobs/agents/definitions.js';
import { shippedModels } from '../../src/config/models.js';
import {
  containerFailure,
  containerName,
  engineArgs,
  SandboxError,
  wrapInSandbox,
  type SandboxRun,
} from '../../src/jobs/process/sandbox.js';
import { fakeBinDir, repoRoot } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';
import { bwrapWorks } from '../helpers/tools.js';

const cli = (name: string) => backends.find((b) => b.name === name) as CliBackend;
const TOKEN = 'psp_secret-token-value-0123456789';

function layout() {
  const root = tempDir('sandbox-unit');
  const home = join(root, 'home');
  const project = join(root, 'project');
  const runDir = join(project, '.polyspawn', 'runs', 'abc234');
  for (const dir of [home, runDir]) mkdirSync(dir, { recursive: true });
  return { root, home, project, runDir };
}

function run(sandbox: Partial<SandboxSettings>, over: Partial<SandboxRun> = {}): SandboxRun {
  const { home, project, runDir } = layout();
  const backend = cli('claude');
  return {
    sandbox: { mode: 'bwrap', network: true, mounts: [], ...sandbox },
    paths: backend.sandboxPaths,
    modelEndpointEnv: backend.modelEndpointEnv,
    executable: backend.executable,
    file: 'claude',
    args: ['-p', '--model', 'm'],
    env: {
      HOME: home,
      PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
      POLYSPAWN_PARENT_TOKEN: TOKEN,
      ANTHROPIC_API_KEY: 'sk-ant-api03-unit-test-key',
    },
    cwd: project,
    runDir,
    hidden: [join(project, '.polyspawn'), join(project, '.polyspawn', 'agents'), join(project, 'api_keys.json')],
    container: containerName(join(project, '.polyspawn'), 'abc234'),
    store: join(project, '.polyspawn'),
    ...over,
  };
}

/** The paths of a bwrap command line bound `flag path path`, or by descriptor, `flag-fd N path`. */
const binds = (args: string[], flag: string) =>
  args.flatMap((a, i) => ((a === flag && args[i + 1] === args[i + 2]) || a === `${flag}-fd` ? [args[i + 2]!] : []));

describe.skipIf(!bwrapWorks)('bwrap', () => {
  test("the system read-only, the folder and the run's folder read-write, the store hidden, the CLI's own folders; the rest of home gone", () => {
    const r = run({});
    const home = r.env.HOME!;
    const store = join(r.cwd, '.polyspawn');
    const { file, args } = wrapInSandbox(r);
    expect(file).toMatch(/\/bwrap$/);
    // The CLI's installation outside node_modules is its file alone, not the folder it lies in.
    expect(binds(args, '--ro-bind')).toEqual(expect.arrayContaining(['/usr', '/etc', join(fakeBinDir, 'claude')]));
    expect(binds(args, '--ro-bind')).not.toContain(join(repoRoot, 'test', 'fakes'));
    // In order of depth: a parent before what is bound inside it.
    expect(binds(args, '--bind')).toEqual([r.cwd, join(home, '.claude'), r.runDir]);
    // ~/.claude exists now (made for it); ~/.claude.json did not, so it is not bound.
    expect(existsSync(join(home, '.claude'))).toBe(true);
    expect(args.join(' ')).toContain(`--proc /proc --dev /dev --tmpfs /tmp --tmpfs ${home}`);
    // Parents before children: the store an empty tmpfs, then the run's folder in it read-write.
    expect(args.join(' ')).toContain(`--tmpfs ${store}`);
    expect(args.indexOf(r.runDir)).toBeGreaterThan(args.indexOf(store));
    expect(args.indexOf(store)).toBeGreaterThan(args.indexOf(r.cwd));
    expect(args).toEqual(expect.arrayContaining(['--die-with-parent', '--unshare-pid']));
    // Bound by descriptors this bwrap (0.8 on) takes, each open on the path it binds, for the runner to pass.
    expect(args).toContain('--bind-fd');
    const { fds } = wrapInSandbox(r);
    expect(fds!.map((fd) => readlinkSync(`/proc/self/fd/${fd}`))).toEqual(
      args.flatMap((a, i) => (a === '--bind-fd' || a === '--ro-bind-fd' ? [args[i + 2]] : [])),
    );
    expect(args).not.toContain('--unshare-net');
    const command = args.slice(args.indexOf('--') + 1);
    expect(command).toEqual([join(fakeBinDir, 'claude'), '-p', '--model', 'm']);
    expect(args.slice(args.indexOf('--chdir'), args.indexOf('--chdir') + 2)).toEqual(['--chdir', r.cwd]);
    // The environment is inherited, never written: no --setenv, no value.
    expect(args).not.toContain('--setenv');
    expect(args.join(' ')).not.toContain(TOKEN);
    expect(args.join(' ')).not.toContain('sk-ant-');
  });

  test('network: false unshares the network; mounts are bound as said, ~ is the home folder', () => {
    const r = run({});
    const home = r.env.HOME!;
    mkdirSync(join(home, 'notes'));
    const data = tempDir('sandbox-data');
    const { args } = wrapInSandbox({
      ...r,
      // A model API on the sandbox's own loopback (else network: false is refused, below).
      env: { ...r.env, ANTHROPIC_BASE_URL: 'http://127.0.0.1:8080' },
      sandbox: {
        mode: 'bwrap',
        network: false,
        mounts: [
          { path: '~/notes', write: true },
          { path: data, write: false },
        ],
      },
    });
    expect(args).toContain('--unshare-net');
    expect(binds(args, '--bind')).toContain(join(home, 'notes'));
    expect(binds(args, '--ro-bind')).toContain(data);
  });

  test('the state a variable moves (CLAUDE_CONFIG_DIR) is what is bound; ~/.claude.json beside ~/.claude when it exists', () => {
    const r = run({});
    const home = r.env.HOME!;
    writeFileSync(join(home, '.claude.json'), '{}');
    expect(binds(wrapInSandbox(r).args, '--bind')).toContain(join(home, '.claude.json'));
    const moved = join(home, 'elsewhere');
    const args = wrapInSandbox({ ...r, env: { ...r.env, CLAUDE_CONFIG_DIR: moved } }).args;
    expect(binds(args, '--bind')).toEqual([r.cwd, moved, r.runDir]);
  });

  test('what cannot run says what to change: no bwrap, no CLI, a missing mount, a folder that holds the home folder', () => {
    const r = run({});
    const noBwrap = { ...r, env: { ...r.env, PATH: fakeBinDir } };
    expect(() => wrapInSandbox(noBwrap)).toThrow(
      /bwrap \(bubblewrap\) is not on PATH: install bubblewrap \(`apt-get install bubblewrap`/,
    );
    expect(() => wrapInSandbox({ ...r, file: 'no-such-cli-here' })).toThrow(
      expect.objectContaining({ missingCli: true, message: 'no-such-cli-here is not on PATH' }),
    );
    expect(() =>
      wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: '/no/such/path', write: false }] } }),
    ).toThrow(/mount \/no\/such\/path does not exist/);
    expect(() => wrapInSandbox({ ...r, cwd: join(r.env.HOME!, '..') })).toThrow(SandboxError);
    expect(() => wrapInSandbox({ ...r, cwd: join(r.env.HOME!, '..') })).toThrow(/holds your home folder/);
  });
});

describe.skipIf(!bwrapWorks)('what the agent may not reach', () => {
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, stdio: 'ignore' });
  const repo = (r: SandboxRun) => {
    git(r.cwd, 'init', '-q');
    writeFileSync(join(r.cwd, 'a.txt'), 'a\n');
    git(r.cwd, 'add', 'a.txt');
    git(r.cwd, 'commit', '-qm', 'init');
  };

  test("the run store is an empty tmpfs but for the run's own folder; other hidden folders and files too", () => {
    const r = run({});
    const store = join(r.cwd, '.polyspawn');
    mkdirSync(join(store, 'agents'), { recursive: true });
    writeFileSync(join(r.cwd, 'api_keys.json'), '{}');
    const { args } = wrapInSandbox(r);
    const line = args.join(' ');
    expect(line).toContain(`--tmpfs ${store}`);
    expect(line).toContain(`--ro-bind /dev/null ${join(r.cwd, 'api_keys.json')}`);
    // The agents folder is in the store: hidden with it, not said again. Then read-only, once the run's folder is in it.
    expect(args).not.toContain(join(store, 'agents'));
    expect(line).toContain(`--remount-ro ${store}`);
    expect(args.indexOf(`--remount-ro`)).toBeGreaterThan(args.indexOf(r.runDir));
    expect(args.indexOf(r.runDir)).toBeGreaterThan(args.indexOf(store));
    // A mount that holds the store (an agent's or the config's) hides it the same way.
    const elsewhereCwd = tempDir('sandbox-cwd');
    const mounted = wrapInSandbox({
      ...r,
      cwd: elsewhereCwd,
      sandbox: { ...r.sandbox, mounts: [{ path: join(r.cwd, 'sub', '..'), write: false }] },
    }).args;
    expect(binds(mounted, '--ro-bind')).toContain(r.cwd);
    expect(mounted.join(' ')).toContain(`--tmpfs ${store}`);
    // A folder outside every bind is not there at all: nothing to hide.
    const elsewhere = tempDir('sandbox-store');
    expect(wrapInSandbox({ ...r, hidden: [elsewhere] }).args).not.toContain(elsewhere);
  });

  test('an agent folder, mount or CLI state in the store (or a link to it) is refused; its own worktree is not', () => {
    const r = run({});
    const store = join(r.cwd, '.polyspawn');
    const other = join(store, 'worktrees', 'other2');
    const own = join(store, 'worktrees', 'mine23');
    for (const dir of [other, join(own, 'sub')]) mkdirSync(dir, { recursive: true });
    symlinkSync(store, join(r.cwd, 'link-to-store'));
    const refusal = /lies in .*\.polyspawn, which a sandbox hides from agents/;
    expect(() => wrapInSandbox({ ...r, cwd: store })).toThrow(refusal);
    expect(() => wrapInSandbox({ ...r, cwd: join(r.cwd, 'link-to-store') })).toThrow(refusal);
    expect(() => wrapInSandbox({ ...r, cwd: join(store, 'worktrees') })).toThrow(refusal);
    expect(() => wrapInSandbox({ ...r, cwd: other, worktree: own })).toThrow(refusal);
    expect(() =>
      wrapInSandbox({
        ...r,
        sandbox: { ...r.sandbox, mounts: [{ path: join(r.cwd, 'link-to-store'), write: false }] },
      }),
    ).toThrow(refusal);
    expect(() =>
      wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: `${own}/../other2`, write: false }] } }),
    ).toThrow(refusal);
    expect(() => wrapInSandbox({ ...r, env: { ...r.env, CLAUDE_CONFIG_DIR: join(store, 'sessions') } })).toThrow(
      refusal,
    );
    // Its own worktree, whole, though the agent works in a folder of it.
    const { args } = wrapInSandbox({ ...r, cwd: join(own, 'sub'), worktree: own });
    expect(binds(args, '--bind')).toEqual(expect.arrayContaining([own, r.runDir]));
    expect(binds(args, '--bind')).not.toContain(r.cwd);
    expect(args.slice(args.indexOf('--chdir'), args.indexOf('--chdir') + 2)).toEqual(['--chdir', join(own, 'sub')]);
  });

  test("the repository's .git is read-only in a read-write folder; a folder in a git folder cannot be written", () => {
    const r = run({});
    repo(r);
    const data = tempDir('sandbox-data');
    mkdirSync(join(data, '.git'));
    const { args } = wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: data, write: true }] } });
    expect(binds(args, '--ro-bind')).toEqual(expect.arrayContaining([join(r.cwd, '.git'), join(data, '.git')]));
    expect(args.indexOf(join(r.cwd, '.git'))).toBeGreaterThan(args.indexOf(r.cwd));
    const inGit = /lies in the git folder .*, which a sandbox keeps read-only/;
    expect(() => wrapInSandbox({ ...r, cwd: join(r.cwd, '.git') })).toThrow(inGit);
    expect(() => wrapInSandbox({ ...r, cwd: join(r.cwd, '.git', 'hooks') })).toThrow(inGit);
    expect(() =>
      wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: join(r.cwd, '.git'), write: true }] } }),
    ).toThrow(inGit);
    // A bare repository is a git folder too.
    const bare = tempDir('sandbox-bare');
    git(bare, 'init', '-q', '--bare');
    expect(() => wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: bare, write: true }] } })).toThrow(
      inGit,
    );
    // A .git that is a link could be repointed under the mount: refused.
    const linked = tempDir('sandbox-linked');
    symlinkSync(join(r.cwd, '.git'), join(linked, '.git'));
    expect(() => wrapInSandbox({ ...r, sandbox: { ...r.sandbox, mounts: [{ path: linked, write: true }] } })).toThrow(
      /\.git is a link/,
    );
  });

  test("a worktree: its .git file read-only, the repository's git folder read-only with the other worktrees' hidden", () => {
    const r = run({});
    repo(r);
    const store = join(r.cwd, '.polyspawn');
    const own = join(store, 'worktrees', 'mine23');
    git(r.cwd, 'worktree', 'add', '-q', '-b', 'polyspawn/mine23', own);
    git(r.cwd, 'worktree', 'add', '-q', '-b', 'polyspawn/other2', join(store, 'worktrees', 'other2'));
    const common = join(r.cwd, '.git');
    const { args } = wrapInSandbox({ ...r, cwd: own, worktree: own });
    expect(binds(args, '--ro-bind')).toEqual(
      expect.arrayContaining([join(own, '.git'), common, join(common, 'worktrees', 'mine23')]),
    );
    expect(args.join(' ')).toContain(`--tmpfs ${join(common, 'worktrees')}`);
    expect(args.indexOf(join(common, 'worktrees', 'mine23'))).toBeGreaterThan(args.indexOf(join(common, 'worktrees')));
    expect(binds(args, '--bind')).not.toContain(common);
    // A .git file repointed at a folder that does not name it back binds nothing of it.
    const planted = join(own, 'planted', 'worktrees', 'x');
    mkdirSync(planted, { recursive: true });
    writeFileSync(join(own, '.git'), `gitdir: ${planted}\n`);
    const repointed = wrapInSandbox({ ...r, cwd: own, worktree: own }).args;
    expect(binds(repointed, '--ro-bind')).toContain(join(own, '.git'));
    expect(repointed).not.toContain(common);
  });

  test("a CLI or node outside node_modules: the file alone, never the folder that holds it (the home folder's bin)", () => {
    const r = run({});
    const home = r.env.HOME!;
    const bin = join(home, 'bin');
    mkdirSync(bin);
    for (const name of ['claude', 'node']) writeFileSync(join(bin, name), '#!/bin/sh\n', { mode: 0o755 });
    // Node as if installed with the home folder as its prefix: the binary alone still.
    mkdirSync(join(home, 'lib', 'node_modules'), { recursive: true });
    const { args } = wrapInSandbox({ ...r, env: { ...r.env, PATH: `${bin}${delimiter}${r.env.PATH}` } });
    expect(binds(args, '--ro-bind')).toEqual(expect.arrayContaining([join(bin, 'claude'), join(bin, 'node')]));
    expect(binds(args, '--ro-bind')).not.toContain(home);
    expect(binds(args, '--ro-bind')).not.toContain(bin);
    // A CLI in /tmp/x: not /tmp.
    const loose = tempDir('sandbox-cli');
    writeFileSync(join(loose, 'claude'), '#!/bin/sh\n', { mode: 0o755 });
    const fromTmp = wrapInSandbox({ ...r, env: { ...r.env, PATH: `${loose}${delimiter}${r.env.PATH}` } }).args;
    expect(binds(fromTmp, '--ro-bind')).toContain(join(loose, 'claude'));
    expect(binds(fromTmp, '--ro-bind')).not.toContain(tmpdir());
    // An npm package: the node_modules it is installed in.
    expect(npmInstall('/opt/n/lib/node_modules/@x/cli/bin/cli.js')).toBe('/opt/n/lib/node_modules');
  });

  test('network: false is refused unless the CLI is pointed at a model API on the loopback', () => {
    const r = run({ network: false });
    const refusal =
      /^network: false leaves claude no way to its model API .*: allow the network in this sandbox, or set ANTHROPIC_BASE_URL to a model server on the sandbox's own loopback/;
    expect(() => wrapInSandbox(r)).toThrow(refusal);
    expect(() => wrapInSandbox({ ...r, env: { ...r.env, ANTHROPIC_BASE_URL: 'https://api.example.com' } })).toThrow(
      refusal,
    );
    for (const url of ['http://127.0.0.1:11434', 'http://localhost:8080/v1', 'http://[::1]:9000'])
      expect(wrapInSandbox({ ...r, env: { ...r.env, ANTHROPIC_BASE_URL: url } }).args).toContain('--unshare-net');
  });
});

describe('docker and podman', () => {
  const withEngine = (mode: 'docker' | 'podman', sandbox: Partial<SandboxSettings> = {}) => {
    const r = run({ mode, image: 'ghcr.io/me/agents:1', ...sandbox });
    return {
      r,
      ...wrapInSandbox({
        ...r,
        env: {
          ...r.env,
          PATH: `${join(repoRoot, 'test', 'fakes', 'engine')}${delimiter}${r.env.PATH}`,
          // A model server the image runs on its own loopback: what lets network: false run.
          ANTHROPIC_BASE_URL: 'http://localhost:8080',
        },
      }),
    };
  };

  test('run --rm of the image, named after the run, folders at the same path, environment by name only', () => {
    const { r, file, args, stop } = withEngine('docker');
    expect(file).toMatch(/engine\/docker$/);
    // Never pulled while an agent waits; labelled with its store (a project's containers can be listed).
    expect(args.slice(0, 10)).toEqual([
      'run',
      '--rm',
      '-i',
      '--init',
      '--pull',
      'never',
      '--name',
      r.container,
      '--label',
      `polyspawn.store=${r.store}`,
    ]);
    expect(r.container).toMatch(/^polyspawn-abc234-[0-9a-f]{8}$/);
    expect(args).toEqual(expect.arrayContaining(['-v', `${r.cwd}:${r.cwd}`, '-v', `${r.runDir}:${r.runDir}`]));
    expect(args).toEqual(
      expect.arrayContaining(['-v', `${join(r.env.HOME!, '.claude')}:${join(r.env.HOME!, '.claude')}`]),
    );
    expect(args.slice(args.indexOf('-w'), args.indexOf('-w') + 2)).toEqual(['-w', r.cwd]);
    expect(args).toEqual(
      expect.arrayContaining(['-e', 'POLYSPAWN_PARENT_TOKEN', '-e', 'ANTHROPIC_API_KEY', '-e', 'HOME']),
    );
    // The host's PATH is not the image's.
    expect(args).not.toContain('PATH');
    expect(args.join(' ')).not.toContain(TOKEN);
    expect(args.join(' ')).not.toContain('sk-ant-');
    expect(args.slice(-5)).toEqual(['ghcr.io/me/agents:1', 'claude', '-p', '--model', 'm']);
    // The host's network, as bwrap shares it: the channel listens on the host's loopback.
    expect(args.slice(args.indexOf('--network'), args.indexOf('--network') + 6)).toEqual([
      '--network',
      'host',
      '--cap-drop',
      'ALL',
      '--security-opt',
      'no-new-privileges',
    ]);
    expect(stop).toBeTypeOf('function');
  });

  test('podman the same; network: false is --network none; read-only mounts say :ro', () => {
    const data = tempDir('sandbox-data');
    const { file, args } = withEngine('podman', { network: false, mounts: [{ path: data, write: false }] });
    expect(file).toMatch(/engine\/podman$/);
    expect(args.slice(0, 2)).toEqual(['run', '--rm']);
    expect(args).toEqual(expect.arrayContaining(['--network', 'none', '-v', `${data}:${data}:ro`]));
    // podman copies what lies below a tmpfs into it unless told not to: the store it hides would show.
    expect(args.filter((a, i) => args[i - 1] === '--tmpfs').every((a) => a.endsWith(':notmpcopyup'))).toBe(true);
    expect(args).toContain('--tmpfs');
  });

  test("the engine's failures, said as what to change; the CLI's own failure left to its backend", () => {
    const said = (code: number | null, stderr: string) => containerFailure('docker', 'img:1', 'claude', code, stderr);
    expect(said(125, "docker: Error response from daemon: No such image: img:1\n\nRun 'docker run --help'")).toBe(
      'the image img:1 is not on this docker engine (docker: Error response from daemon: No such image: img:1), and polyspawn does not pull one while an agent waits: `docker pull img:1` (or build it there), then spawn again',
    );
    expect(said(125, 'Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?')).toMatch(
      /^no docker engine answers \(Cannot connect .*\): start it/,
    );
    expect(
      said(
        125,
        'error during connect: Get "http://docker.example.com/v1.41/info": command [ssh -o ConnectTimeout=30 -T -l me -- build-box docker system dial-stdio] has exited with exit status 255, please make sure the URL is valid, and Docker 18.09 or later is installed on the remote host: stderr=me@build-box: Permission denied (publickey).',
      ),
    ).toMatch(
      /^ssh did not let the docker client reach its engine \(.*Permission denied \(publickey\).*\): make `ssh <user>@<host> docker version` work without a prompt/,
    );
    expect(said(127, '[FATAL tini (7)] exec claude failed: No such file or directory')).toMatch(
      /^the image img:1 cannot run `claude` \(\[FATAL tini/,
    );
    expect(said(1, 'ERROR (catatonit:6): failed to exec pid1: No such file or directory')).toMatch(
      /^the image img:1 cannot run `claude`/,
    );
    expect(said(137, '')).toMatch(/^its container was killed \(exit 137/);
    expect(said(143, '')).toMatch(
      /^its container was stopped \(exit 143: `docker stop`, or the engine stopped or restarted\)/,
    );
    // 126 is also the runtime's own failure, not only a CLI that cannot be run
    expect(said(126, 'Error: runc: runc create failed: error setting rlimits: OCI permission denied')).toBe(
      'docker could not run the container (Error: runc: runc create failed: error setting rlimits: OCI permission denied)',
    );
    expect(said(125, 'docker: invalid reference format')).toBe(
      'docker could not run the container (docker: invalid reference format)',
    );
    expect(said(1, 'Error: the model said no')).toBeUndefined();
    expect(said(0, '')).toBeUndefined();
  });

  test('no engine on PATH says what to install', () => {
    const r = run({ mode: 'podman', image: 'x' });
    expect(() => wrapInSandbox({ ...r, env: { ...r.env, PATH: fakeBinDir } })).toThrow(
      /podman is not on PATH: install Podman/,
    );
  });
});

describe('an engine that is not this machine', () => {
  test('engine.host and shares_files: inferred from the address (a local socket shares, ssh:// and tcp:// do not), said outright wins', () => {
    const engine = (e: Record<string, unknown>) =>
      sandboxSettings(sandboxSchema.parse({ mode: 'docker', image: 'ghcr.io/me/agents:1', engine: e })).engine;
    expect(engine({ host: 'ssh://me@build-box' })).toEqual({ host: 'ssh://me@build-box', sharesFiles: false });
    expect(engine({ host: 'tcp://10.0.0.2:2376' })).toEqual({ host: 'tcp://10.0.0.2:2376', sharesFiles: false });
    expect(engine({ host: 'unix:///run/docker.sock' })).toEqual({ host: 'unix:///run/docker.sock', sharesFiles: true });
    expect(engine({ host: 'unix:///run/vm.sock', shares_files: false })).toEqual({
      host: 'unix:///run/vm.sock',
      sharesFiles: false,
    });
    // An address is one argument, never an option of the client.
    for (const host of ['-H=evil', 'http://x', 'ssh://a b'])
      expect(sandboxSchema.safeParse({ mode: 'docker', engine: { host } }).success).toBe(false);
  });

  test("the client is pointed at the engine; a remote DOCKER_HOST, or podman's named connection, the sandbox does not declare is refused", () => {
    const r = run({
      mode: 'docker',
      image: 'ghcr.io/me/agents:1',
      engine: { host: 'unix:///run/e2.sock', sharesFiles: true },
    });
    const env = { ...r.env, PATH: `${join(repoRoot, 'test', 'fakes', 'engine')}${delimiter}${r.env.PATH}` };
    expect(wrapInSandbox({ ...r, env }).args.slice(0, 3)).toEqual(['-H', 'unix:///run/e2.sock', 'run']);
    const undeclared = run({ mode: 'docker', image: 'ghcr.io/me/agents:1' });
    expect(() => wrapInSandbox({ ...undeclared, env: { ...env, DOCKER_HOST: 'ssh://me@build-box' } })).toThrow(
      /the environment names the engine ssh:\/\/me@build-box, which may not see this machine's files: say so in the sandbox/,
    );
    // podman's named connection makes its client remote, as CONTAINER_HOST does.
    const podman = run({ mode: 'podman', image: 'ghcr.io/me/agents:1' });
    expect(() => wrapInSandbox({ ...podman, env: { ...env, CONTAINER_CONNECTION: 'build-box' } })).toThrow(
      /the environment names podman's connection build-box \(CONTAINER_CONNECTION\), whose engine may not see this machine's files: name that engine in the sandbox/,
    );
    const declared = run({ mode: 'podman', image: 'ghcr.io/me/agents:1', engine: { sharesFiles: true } });
    expect(wrapInSandbox({ ...declared, env: { ...env, CONTAINER_CONNECTION: 'build-box' } }).args).toContain('run');
  });
});

describe('a docker context', () => {
  const parse = (engine: Record<string, unknown>, mode = 'docker') =>
    sandboxSchema.safeParse({ mode, image: 'ghcr.io/me/agents:1', engine });
  const problem = (engine: Record<string, unknown>, mode = 'docker') => {
    const parsed = parse(engine, mode);
    return parsed.success ? undefined : parsed.error.issues.map((i) => i.message).join('; ');
  };

  test('engine.context: docker only, not with a host, a name docker allows (one argument, never an option)', () => {
    const settings = (engine: Record<string, unknown>) =>
      sandboxSettings(sandboxSchema.parse({ mode: 'docker', image: 'ghcr.io/me/agents:1', engine })).engine;
    // Whether it shares files is asked of the context at spawn time, unless said.
    expect(settings({ context: 'build-box' })).toEqual({ context: 'build-box' });
    expect(settings({ context: 'build-box', shares_files: true })).toEqual({ context: 'build-box', sharesFiles: true });
    expect(engineArgs('docker', { context: 'build-box' })).toEqual(['--context', 'build-box']);
    expect(problem({ context: 'b', host: 'ssh://me@b' })).toMatch(/names both a host and a context: keep one/);
    expect(problem({ context: 'b' }, 'podman')).toMatch(
      /engine.context names a docker context, which only mode docker has: use engine.host/,
    );
    for (const context of ['--host=evil', '-H', 'a b', 'a;rm -rf ~', '$(id)', '', 'x'.repeat(101), '../up'])
      expect(problem({ context }), context).toMatch(/must be a docker context name/);
    // A mode chosen elsewhere (a caller, a definition) with the config's context: said, not run.
    const configured = sandboxSettings(sandboxSchema.parse({ mode: 'docker', image: 'i:1', engine: { context: 'b' } }));
    expect(effectiveSandbox(configured, { backend: 'codex', userFile: '/u/config.json' }, undefined, 'podman')).toEqual(
      {
        problem:
          "sandbox podman cannot use the docker context b (backends.codex.sandbox engine): podman has no contexts; give the engine's address as engine.host, or run this agent with docker",
      },
    );
  });

  test('the current context, as docker resolves it: DOCKER_CONTEXT, else config.json\'s currentContext ($DOCKER_CONFIG, else ~/.docker); DOCKER_HOST and "default" are no context', () => {
    const root = tempDir('docker-context');
    const home = join(root, 'home');
    const config = join(root, 'docker-config');
    mkdirSync(join(home, '.docker'), { recursive: true });
    mkdirSync(config);
    writeFileSync(join(home, '.docker', 'config.json'), JSON.stringify({ currentContext: 'in-home' }));
    writeFileSync(join(config, 'config.json'), JSON.stringify({ auths: {}, currentContext: 'in-config' }));
    expect(currentDockerContext({ HOME: home })).toEqual({
      name: 'in-home',
      from: `currentContext in ${join(home, '.docker', 'config.json')}`,
    });
    expect(currentDockerContext({ HOME: home, DOCKER_CONFIG: config })).toMatchObject({ name: 'in-config' });
    expect(currentDockerContext({ HOME: home, DOCKER_CONTEXT: 'by-env' })).toEqual({
      name: 'by-env',
      from: 'DOCKER_CONTEXT',
    });
    expect(currentDockerContext({ HOME: home, DOCKER_CONTEXT: 'default' })).toBeUndefined();
    expect(currentDockerContext({ HOME: home, DOCKER_HOST: 'unix:///run/d.sock' })).toBeUndefined();
    // As docker does: a config file that is not JSON, or names no context, leaves the default one.
    for (const text of ['{not json', '[]', 'null', '{"currentContext": 7}', '{"currentContext": "default"}']) {
      writeFileSync(join(config, 'config.json'), text);
      expect(currentDockerContext({ DOCKER_CONFIG: config }), text).toBeUndefined();
    }
    expect(currentDockerContext({ DOCKER_CONFIG: join(root, 'none') })).toBeUndefined();
    // A hostile one: a pipe is not waited on, a huge file not read; neither is taken for the
    // default (docker would read the huge one, and its context may be another machine's).
    const fifo = join(root, 'fifo-config');
    mkdirSync(fifo);
    execFileSync('mkfifo', [join(fifo, 'config.json')]);
    expect(currentDockerContext({ DOCKER_CONFIG: fifo })).toEqual({
      problem: `docker's config file ${join(fifo, 'config.json')} cannot be read to tell which context docker uses (not a regular file): name the engine in the sandbox (engine: { host } or { context }), or fix the file`,
    });
    writeFileSync(join(config, 'config.json'), `{"currentContext":"big","pad":"${'x'.repeat(2 * 1024 * 1024)}"}`);
    expect(currentDockerContext({ DOCKER_CONFIG: config })).toMatchObject({
      problem: expect.stringMatching(/cannot be read to tell which context docker uses \(larger than 1 MiB\)/),
    });
  });

  test("a current context whose engine may be another machine's is refused, as a remote DOCKER_HOST is; a local one runs", () => {
    const engines = tempDir('fake-engine');
    const r = run({ mode: 'docker', image: 'ghcr.io/me/agents:1' });
    const env = (contextName: string) => ({
      ...r.env,
      PATH: `${join(repoRoot, 'test', 'fakes', 'engine')}${delimiter}${r.env.PATH}`,
      FAKE_ENGINE_DIR: engines,
      FAKE_ENGINE_CONTEXTS: JSON.stringify({
        'build-box': 'ssh://me@build-box',
        here: 'unix:///run/user/1/docker.sock',
      }),
      DOCKER_CONTEXT: contextName,
    });
    expect(() => wrapInSandbox({ ...r, env: env('build-box') })).toThrow(
      'docker\'s current context build-box (DOCKER_CONTEXT) points at ssh://me@build-box, which may not see this machine\'s files: say so in the sandbox (engine: { context: "build-box", shares_files: false }, or shares_files: true if it runs here)',
    );
    expect(wrapInSandbox({ ...r, env: env('here') }).args[0]).toBe('run');
    expect(() => wrapInSandbox({ ...r, env: env('gone') })).toThrow(
      /^the docker context "gone" \(DOCKER_CONTEXT\) cannot be read \(context "gone": context not found.*\): create it/,
    );
    // A name from a config file that docker would not take is never handed to the client as an option.
    const before = readFileSync(join(engines, 'calls.jsonl'), 'utf8');
    expect(() => wrapInSandbox({ ...r, env: env('--host=tcp://evil:2375') })).toThrow(
      /^the docker context "--host=tcp:\/\/evil:2375" \(DOCKER_CONTEXT\) is not a context name docker allows/,
    );
    expect(readFileSync(join(engines, 'calls.jsonl'), 'utf8')).toBe(before);
    // A sandbox that names its engine is not second-guessed.
    const declared = run({ mode: 'docker', image: 'ghcr.io/me/agents:1', engine: { sharesFiles: true } });
    expect(wrapInSandbox({ ...declared, env: env('build-box') }).args[0]).toBe('run');
  });
});

describe('settings', () => {
  const project = () => {
    const dir = tempDir('sandbox-config');
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    return { dir, env: { XDG_CONFIG_HOME: join(dir, 'xdg') } as NodeJS.ProcessEnv };
  };

  test("backends.<name>.sandbox and allow_caller_sandbox: from the user's config or the environment, never the project's", () => {
    const { dir, env } = project();
    const sandbox = { mode: 'bwrap', network: false, mounts: [{ path: '~/data' }] };
    writeFileSync(
      join(dir, 'polyspawn.config.json'),
      JSON.stringify({ allow_caller_sandbox: true, backends: { codex: { sandbox: 'none' } } }),
    );
    writeFileSync(join(dir, 'xdg', 'polyspawn', 'config.json'), JSON.stringify({ backends: { codex: { sandbox } } }));
    const c = loadConfig(backends, env, dir);
    expect(c.backends.codex!.sandbox).toEqual({
      mode: 'bwrap',
      network: false,
      mounts: [{ path: '~/data', write: false }],
    });
    expect(c.allowCallerSandbox).toBe(false);
    expect(c.projectConfig!.ignored).toEqual(['allow_caller_sandbox', 'backends.codex.sandbox']);
    // The environment's mode keeps the file's options.
    const fromEnv = loadConfig(
      backends,
      { ...env, POLYSPAWN_CODEX_SANDBOX: 'podman', POLYSPAWN_ALLOW_CALLER_SANDBOX: '1' },
      dir,
    );
    expect(fromEnv.backends.codex!.sandbox).toMatchObject({ mode: 'podman', network: false });
    expect(fromEnv.allowCallerSandbox).toBe(true);
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_CODEX_SANDBOX: 'jail' }, dir)).toThrow(
      /POLYSPAWN_CODEX_SANDBOX=jail is not one of none, bwrap, docker, podman/,
    );
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_GROK_SANDBOX: 'bwrap' }, dir)).toThrow(
      /grok: sandbox .* applies only to CLI backends/,
    );
    writeFileSync(
      join(dir, 'xdg', 'polyspawn', 'config.json'),
      JSON.stringify({ backends: { codex: { sandbox: { mode: 'docker', image: '--privileged' } } } }),
    );
    expect(() => loadConfig(backends, env, dir)).toThrow(/image: must be an image reference/);
  });

  test("an agent definition's sandbox: checked, with its defaults; not for an API backend", () => {
    const { dir, env } = project();
    const ctx = { config: loadConfig(backends, env, dir), models: shippedModels(backends), backends };
    const where = { scope: 'project' as const, file: join(dir, 'agent.md') };
    const checked = checkDefinition(
      'offline',
      { description: 'd', backend: 'codex', sandbox: { mode: 'bwrap', network: false } },
      'You work.',
      where,
      ctx,
    );
    expect(checked).toMatchObject({ definition: { sandbox: { mode: 'bwrap', network: false, mounts: [] } } });
    const api = checkDefinition(
      'web',
      { description: 'd', backend: 'grok', sandbox: 'bwrap' },
      'You search.',
      where,
      ctx,
    );
    expect(api).toEqual({ problems: [expect.stringMatching(/^sandbox: backend grok is an HTTP API/)] });
    const relative = checkDefinition(
      'rel',
      { description: 'd', backend: 'codex', sandbox: { mode: 'bwrap', mounts: [{ path: 'data' }] } },
      'You work.',
      where,
      ctx,
    );
    expect(relative).toEqual({ problems: [expect.stringMatching(/must be an absolute path or start with ~\//)] });
  });

  test("a project's definition (it came with the repository) mounts only folders inside the project; a user's may mount any", () => {
    const { dir, env } = project();
    mkdirSync(join(dir, 'data'));
    symlinkSync(tmpdir(), join(dir, 'leads-out'));
    const ctx = { config: loadConfig(backends, env, dir), models: shippedModels(backends), backends };
    const define = (scope: 'project' | 'user', mounts: { path: string; write?: boolean }[]) =>
      checkDefinition(
        'mounted',
        { description: 'd', backend: 'codex', sandbox: { mode: 'bwrap', mounts } },
        'You work.',
        { scope, file: join(dir, 'agent.md') },
        ctx,
      );
    const outside =
      /^sandbox\.mounts: .* is outside the project, and a project's agent .* mounts only folders inside it/;
    expect(define('project', [{ path: '~/.ssh' }])).toEqual({ problems: [expect.stringMatching(outside)] });
    expect(define('project', [{ path: '/etc', write: true }])).toEqual({ problems: [expect.stringMatching(outside)] });
    expect(define('project', [{ path: join(dir, 'leads-out') }])).toEqual({
      problems: [expect.stringMatching(outside)],
    });
    expect(define('project', [{ path: join(dir, 'data'), write: true }])).toHaveProperty('definition');
    expect(define('user', [{ path: '~/.ssh' }])).toHaveProperty('definition');
  });

  test("a project's definition may not name the engine (it is given the login folder and environment); a user's may", () => {
    const { dir, env } = project();
    const ctx = { config: loadConfig(backends, env, dir), models: shippedModels(backends), backends };
    const define = (scope: 'project' | 'user') =>
      checkDefinition(
        'elsewhere',
        {
          description: 'd',
          backend: 'codex',
          sandbox: { mode: 'docker', image: 'me/agents:1', engine: { host: 'tcp://attacker.example:2375' } },
        },
        'You work.',
        { scope, file: join(dir, 'agent.md') },
        ctx,
      );
    expect(define('project')).toEqual({
      problems: [expect.stringMatching(/^sandbox\.engine: a project's agent .* may not choose the container engine/)],
    });
    expect(define('user')).toHaveProperty('definition');
  });
});
