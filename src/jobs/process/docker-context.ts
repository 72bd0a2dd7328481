// docker's contexts: a named engine endpoint kept in docker's config folder ($DOCKER_CONFIG, else
// ~/.docker), which the docker client uses when no -H, no DOCKER_HOST names one. A sandbox may name
// one (`engine.context`: the client is given `--context <name>`), and a current context the sandbox
// does not name is the environment's engine, which may be another machine's. Both are read at
// spawn time, where docker keeps them (a context may be repointed between two spawns); cheaply: the
// config file is read here, and the client is asked only about a context other than "default".
import { execFileSync } from 'node:child_process';
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONTEXT_NAME } from '../../config/sandbox.js';

type Env = Readonly<Record<string, string | undefined>>;

/** docker's config file is small; past this it is not read (nor is it docker's). */
const MAX_CONFIG_BYTES = 1024 * 1024;
const INSPECT_MS = 10_000;

/**
 * The context the docker client uses when told none (`--context`, `-H`): DOCKER_CONTEXT, else the
 * config file's currentContext, as docker resolves them; undefined for "default" (DOCKER_HOST, or
 * the local socket), which the caller checks by DOCKER_HOST. `from` says where it was named. A
 * config file docker would read but this cannot (not a regular file, past 1 MiB, unreadable) is a
 * problem, never taken for the default: its context may be another machine's.
 */
export function currentDockerContext(env: Env): { name: string; from: string } | { problem: string } | undefined {
  if (env.DOCKER_HOST) return undefined;
  if (env.DOCKER_CONTEXT)
    return env.DOCKER_CONTEXT === 'default' ? undefined : { name: env.DOCKER_CONTEXT, from: 'DOCKER_CONTEXT' };
  const dir = env.DOCKER_CONFIG || (env.HOME ? join(env.HOME, '.docker') : undefined);
  if (!dir) return undefined;
  const file = join(dir, 'config.json');
  let text: string;
  try {
    text = readSmallFile(file, MAX_CONFIG_BYTES);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return {
      problem: `docker's config file ${file} cannot be read to tell which context docker uses (${(error as Error).message}): name the engine in the sandbox (engine: { host } or { context }), or fix the file`,
    };
  }
  // As docker does: a config file that is not JSON leaves the default context.
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const name = (parsed as { currentContext?: unknown } | null)?.currentContext;
  if (typeof name !== 'string' || name === '' || name === 'default') return undefined;
  return { name, from: `currentContext in ${file}` };
}

/**
 * A context's docker endpoint (`unix:///…`, `ssh://…`, `tcp://…`), as `docker context inspect`
 * says it; a problem saying what to change when the name is not one or docker has no such context.
 */
export function dockerContextEndpoint(
  client: string,
  name: string,
  env: Env,
  from?: string,
): { endpoint: string } | { problem: string } {
  const named = `the docker context ${JSON.stringify(name.slice(0, 100))}${from ? ` (${from})` : ''}`;
  // Whatever names it (a config file may be anyone's), it is one argument, never an option.
  if (!CONTEXT_NAME.test(name))
    return {
      problem: `${named} is not a context name docker allows: name one \`docker context ls\` shows, or remove it`,
    };
  let out: string;
  try {
    out = execFileSync(client, ['context', 'inspect', '--format', '{{json .Endpoints.docker.Host}}', '--', name], {
      env,
      encoding: 'utf8',
      timeout: INSPECT_MS,
      maxBuffer: 64 * 1024,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const said = String((error as { stderr?: unknown }).stderr ?? (error as Error).message)
      .trim()
      .split('\n')
      .at(-1)
      ?.slice(0, 300);
    return {
      problem: `${named} cannot be read (${said}): create it (\`docker context create ${name} --docker host=…\`), or name one \`docker context ls\` shows`,
    };
  }
  let host: unknown;
  try {
    host = JSON.parse(out.trim());
  } catch {
    host = undefined;
  }
  if (typeof host !== 'string' || !/^[a-z]+:\/\/\S+$/.test(host))
    return {
      problem: `${named} has no docker endpoint docker reports (${out.trim().slice(0, 100)}): recreate it with --docker host=…`,
    };
  return { endpoint: host };
}

/** A regular file's text, when it is one of at most `max` bytes; throws otherwise (never waits on a pipe). */
function readSmallFile(file: string, max: number): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new Error('not a regular file');
    if (stat.size > max) throw new Error(`larger than ${max / 1024 / 1024} MiB`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}
