// A container on an engine that does not see this machine's files (another host's docker or
// podman, `engine: { shares_files: false }`): nothing is bind-mounted. Before the run the
// container is created and its work copied in by the engine's API (`cp`): the run's folder, with
// the job's branch as a git bundle the worktree layer put there (src/jobs/worktree/engine-branch.ts),
// the CLI's login folder and the mounts the user lists, each at the path it has here. The runner
// then starts it attached, so its output is the run's log as it comes. In it a small script clones
// the branch where the job's worktree is, runs the CLI there, commits what it left and bundles
// the branch; after the run that bundle (and the files the CLI writes for the server) is copied
// out into the run's folder, and only then is the container removed. What the container sends
// back is the agent's: read as a tar of one regular file, at most MAX_OUTPUT_BYTES.
import { execFile, spawn } from 'node:child_process';
import { closeSync, createReadStream, createWriteStream, openSync, readSync, rmSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { engineName } from '../../config/sandbox.js';
import { isInside } from '../../lib/fs.js';
import { MAX_BUNDLE_BYTES, RESULT_BUNDLE, WORK_BUNDLE } from '../worktree/engine-branch.js';
import {
  containerEnvArgs,
  containerFailure,
  containerOptions,
  engineClient,
  engineCommand,
  removeArgs,
  sandboxBinds,
  SandboxError,
  type SandboxRun,
  type WrappedCommand,
} from './sandbox.js';

/** A file copied back from a container past this is refused (the bundle's bound): its branch or answer is hostile input. */
const MAX_OUTPUT_BYTES = MAX_BUNDLE_BYTES;
/** How long one engine step (create, copy in, copy out) may take before it is given up. */
const ENGINE_STEP_MS = 120_000;

/**
 * In the container, with the worktree's path, its branch, the agent's folder and the command: the
 * branch cloned from the bundle, the CLI run, what it left committed and the branch bundled back.
 * Its exit code is the CLI's; git says nothing on stdout (the CLI's output is the log).
 */
const IN_CONTAINER = `
w=$1 b=$2 d=$3 in=$4 out=$5; shift 5
g() { git -c core.hooksPath=/dev/null -c commit.gpgSign=false -c user.name=polyspawn -c user.email=polyspawn@localhost "$@" >&2; }
command -v git >/dev/null || { echo "polyspawn: the image has no git, which an engine that shares no files needs to bring the work in and out: install git in the image" >&2; exit 125; }
g -c init.templateDir= clone -q -b "$b" "$in" "$w" || { echo "polyspawn: the job's branch could not be cloned in the container" >&2; exit 125; }
base=$(git -C "$w" rev-parse HEAD)
cd "$d" 2>/dev/null || cd "$w" || exit 125
"$@"; code=$?
cd "$w" && g add -A && { git diff --cached --quiet || g commit -q --no-verify -m "polyspawn: what the agent left uncommitted in its container"; }
if [ "$(git rev-parse HEAD)" != "$base" ]; then g update-ref "refs/heads/$b" HEAD && g bundle create -q "$out" "$base..refs/heads/$b"; fi
exit $code
`;

/**
 * The CLI's command on an engine that shares no files: the runner starts the container attached
 * (`start -a -i`); `prepare` creates it and copies the work in, `collect` copies the work out.
 */
export function wrapForRemoteEngine(run: SandboxRun): WrappedCommand {
  const engine = run.sandbox.mode;
  const client = engineClient(run);
  if (!run.worktree || !run.branch)
    throw new SandboxError(
      `an engine that shares no files gets the agent's work as a branch: run it with isolation "worktree"`,
    );
  const writable = run.sandbox.mounts.find((m) => m.write);
  if (writable)
    throw new SandboxError(
      `mount ${writable.path} is writable, but an engine that shares no files gets a copy that is never brought back: make it read-only, or use an engine that runs here`,
    );
  const { binds } = sandboxBinds(run, run.env.HOME, []);
  const worktree = binds.find((b) => b.what === "the agent's folder")!.path;
  // Copied in at the paths they have here: the run's folder, the CLI's login folder, the mounts.
  // The worktree goes as the bundle, never its folder nor its repository's.
  const copied = binds.filter((b) => b.as !== 'hide' && !b.git && !isInside(worktree, b.path));
  const hidden = binds.filter((b) => b.as === 'hide' && copied.some((c) => isInside(c.path, b.path)));
  const cwd = join(worktree, relative(run.worktree, run.cwd));
  const engineRun = (args: string[]) => [...client.args, ...args];
  const remove = () => engineCommand(client.file, engineRun(removeArgs(engine, run.container)), run.env);
  const explain = (exitCode: number | null, stderr: string) =>
    containerFailure(engine, run.sandbox.image!, run.executable, exitCode, stderr);

  const prepare = async (deadline: number) => {
    const within = () => stepMs(deadline);
    /** Past the time-out after a step: the container (which a late engine may have made) removed, and the job timed out. */
    const giveUpIfLate = async () => {
      if (Date.now() < deadline) return;
      await remove();
      const error = new SandboxError(
        `the ${engine} engine did not make the container and take its work within the job's time-out; raise timeout_s, or see why the engine is slow`,
      );
      error.timedOut = true;
      throw error;
    };
    const create = [
      'create',
      // As the image's user: no file of this machine is there for the user's uid to own.
      ...containerOptions(run, false),
      '-w',
      worktree,
      ...containerEnvArgs(run.env),
      run.sandbox.image!,
      'sh',
      '-c',
      IN_CONTAINER,
      'sh',
      worktree,
      run.branch!,
      cwd,
      join(run.runDir, WORK_BUNDLE),
      join(run.runDir, RESULT_BUNDLE),
      run.executable,
      ...run.args,
    ];
    const created = await engineStep(client.file, engineRun(create), run.env, within());
    await giveUpIfLate();
    // As `run` would exit: 125, the engine could not make the container.
    if (created.code !== 0) {
      // An engine that answered late may have made it all the same.
      await remove();
      throw new SandboxError(explain(125, created.stderr) ?? `${engine} create failed: ${created.stderr.trim()}`);
    }
    const copiedIn = await copyIn(
      client.file,
      engineRun(['cp', '-a', '-', `${run.container}:/`]),
      run.env,
      {
        dirs: [...new Set([worktree, ...(run.env.HOME ? [run.env.HOME] : [])])],
        trees: copied.map((b) => b.path),
        excluded: hidden.map((b) => b.path),
      },
      within(),
    );
    await giveUpIfLate();
    if (copiedIn) {
      await remove();
      throw new SandboxError(`the work could not be copied into the container on the ${engine} engine: ${copiedIn}`);
    }
  };

  /**
   * Copies the agent's branch and its files out by `deadline` (what is left of the job's time-out);
   * the container is removed once they are here, else kept and named (a SandboxError, timedOut
   * when the time-out came first).
   */
  const collect = async (deadline: number): Promise<SandboxError | undefined> => {
    const problems: string[] = [];
    let late = false;
    for (const path of [join(run.runDir, RESULT_BUNDLE), ...(run.outputs ?? [])]) {
      late = Date.now() >= deadline;
      if (late) break;
      const problem = await copyOut(
        client.file,
        engineRun(['cp', `${run.container}:${path}`, '-']),
        run.env,
        path,
        stepMs(deadline),
      );
      if (problem) problems.push(problem);
    }
    // A copy given up at the deadline: the time-out's, not the engine's.
    late ||= problems.length > 0 && Date.now() >= deadline;
    if (problems.length === 0 && !late) {
      await remove();
      return undefined;
    }
    const host = engineName(run.sandbox.engine) ? ` at ${engineName(run.sandbox.engine)}` : '';
    const by = [engine, ...engineRun([])].join(' ');
    const when = late ? " within the job's time-out" : '';
    const error = new SandboxError(
      `its work could not be copied out of its container${when} (${problems.join('; ') || 'the time-out came first'}): the container ${run.container} is kept on the ${engine} engine${host} with the work in ${worktree}; copy it out (\`${by} cp ${run.container}:${worktree} .\`), then remove it (\`${by} rm ${run.container}\`)${late ? '; raise timeout_s, or see why the engine is slow' : ''}`,
    );
    error.timedOut = late;
    return error;
  };

  return {
    file: client.file,
    args: engineRun(['start', '-a', '-i', run.container]),
    prepare,
    collect,
    stop: remove,
    explainFailure: ({ exitCode, stderr }) => explain(exitCode, stderr),
  };
}

type StepResult = { code: number | null; stderr: string };

/** An engine step's time: its own bound, or what is left of the job's time-out. */
const stepMs = (deadline: number) => Math.max(1, Math.min(ENGINE_STEP_MS, deadline - Date.now()));

/** One engine command, its error kept; a slow engine is given up after ENGINE_STEP_MS, saying so. */
function engineStep(file: string, args: string[], env: SandboxRun['env'], ms = ENGINE_STEP_MS): Promise<StepResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: ms, maxBuffer: 1024 * 1024 }, (error, _stdout, stderr) => {
      const err = error as (NodeJS.ErrnoException & { killed?: boolean; code?: unknown }) | null;
      if (err?.killed) resolve({ code: 125, stderr: `${stderr}\nthe engine did not answer within ${ms / 1000} s` });
      else resolve({ code: err ? (typeof err.code === 'number' ? err.code : 125) : 0, stderr: String(stderr) });
    });
  });
}

/**
 * A tar of these paths (folders whole, `dirs` alone, `excluded` left out) streamed into the
 * engine's `cp -a`, which makes them the container's user's; a problem, or undefined once copied.
 */
async function copyIn(
  file: string,
  args: string[],
  env: SandboxRun['env'],
  what: { dirs: string[]; trees: string[]; excluded: string[] },
  ms = ENGINE_STEP_MS,
): Promise<string | undefined> {
  const rel = (path: string) => path.slice(1);
  const tarArgs = [
    '-c',
    '--anchored',
    ...what.excluded.map((path) => `--exclude=${rel(path)}`),
    '-C',
    sep,
    '--no-recursion',
    ...what.dirs.map(rel),
    '--recursion',
    ...what.trees.map(rel),
  ];
  const tar = spawn('tar', tarArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  const cp = spawn(file, args, { env, stdio: ['pipe', 'ignore', 'pipe'] });
  const errors = { tar: '', cp: '' };
  tar.stderr.on('data', (chunk: Buffer) => (errors.tar += chunk.toString()));
  cp.stderr.on('data', (chunk: Buffer) => (errors.cp += chunk.toString()));
  const timer = setTimeout(() => {
    errors.cp += `the engine did not take the copy within ${ms / 1000} s`;
    tar.kill('SIGKILL');
    cp.kill('SIGKILL');
  }, ms);
  tar.stdout.pipe(cp.stdin);
  cp.stdin.on('error', () => undefined);
  const [tarCode, cpCode] = await Promise.all([exitOf(tar), exitOf(cp)]);
  clearTimeout(timer);
  if (tarCode !== 0) return `tar failed: ${errors.tar.trim().slice(0, 500)}`;
  if (cpCode !== 0) return errors.cp.trim().slice(0, 500) || `${basename(file)} cp exited ${cpCode}`;
  return undefined;
}

const exitOf = (child: ReturnType<typeof spawn>) =>
  new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(null));
    child.on('close', (code) => resolve(code));
  });

/**
 * One file out of the container into the same path here: the engine's `cp` gives a tar, kept in a
 * file beside it up to MAX_OUTPUT_BYTES, and only a regular file's bytes are taken from it (a link,
 * a folder, anything else is refused). A file the container never wrote is no problem: there is none.
 */
async function copyOut(
  file: string,
  args: string[],
  env: SandboxRun['env'],
  path: string,
  ms: number,
): Promise<string | undefined> {
  const tarFile = `${path}.tar`;
  rmSync(tarFile, { force: true });
  const cp = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let bytes = 0;
  let tooLarge = false;
  cp.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const out = createWriteStream(tarFile, { flags: 'wx', mode: 0o600 });
  cp.stdout.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > MAX_OUTPUT_BYTES + 1024 && !tooLarge) {
      tooLarge = true;
      cp.kill('SIGKILL');
    }
  });
  const timer = setTimeout(() => cp.kill('SIGKILL'), ms);
  try {
    const [code] = await Promise.all([exitOf(cp), pipeline(cp.stdout, out).catch(() => undefined)]);
    if (tooLarge) return `${basename(path)} is larger than ${MAX_OUTPUT_BYTES / 1024 / 1024} MiB`;
    if (code !== 0) {
      // A path the container never wrote (no changes, no answer): nothing to take (docker's words, podman's).
      if (/could not find the file|no such container:path|could not be found on container/i.test(stderr))
        return undefined;
      // On one line: it goes into the job's error (podman's runs over two).
      return `${basename(path)}: ${stderr.trim().replace(/\s+/g, ' ').slice(0, 300) || (code === null ? `the engine did not answer within ${ms / 1000} s` : `cp exited ${code}`)}`;
    }
    return await takeRegularFile(tarFile, path);
  } finally {
    clearTimeout(timer);
    rmSync(tarFile, { force: true });
  }
}

/** The first entry of a tar, written to `to` when it is a regular file; a problem otherwise. */
async function takeRegularFile(tarFile: string, to: string): Promise<string | undefined> {
  const header = Buffer.alloc(512);
  const fd = openSync(tarFile, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, 512, 0);
  } finally {
    closeSync(fd);
  }
  const type = String.fromCharCode(header[156]!);
  if (read < 512 || !(type === '0' || header[156] === 0))
    return `${basename(to)} in the container is not a regular file (a link, a folder): not taken`;
  const size = parseInt(header.subarray(124, 136).toString('latin1').replace(/\0.*$/s, '').trim() || '0', 8);
  if (!Number.isFinite(size) || size > MAX_OUTPUT_BYTES)
    return `${basename(to)} is larger than ${MAX_OUTPUT_BYTES / 1024 / 1024} MiB`;
  rmSync(to, { force: true });
  // 'wx': a new file, never through a link left at its place.
  const target = createWriteStream(to, { flags: 'wx', mode: 0o600 });
  if (size === 0) {
    target.end();
    await new Promise<void>((resolve) => target.on('close', () => resolve()));
    return undefined;
  }
  await pipeline(createReadStream(tarFile, { start: 512, end: 512 + size - 1 }), target);
  return undefined;
}
