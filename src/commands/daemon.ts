// `polyspawn daemon start|stop|status`: the project's shared server (`serve --http`) as a
// background process. start detaches it and returns once it answers; stop ends it as SIGTERM
// does (its agents ended, IAC.md written); status says where it listens, or that it is gone.
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { backends } from '../../backends/registry.js';
import { loadConfig, projectDaemonOf } from '../config/config.js';
import { projectToken, tokenFile, type DaemonInfo } from '../lib/daemon-file.js';
import { InputError, SetupError } from '../lib/errors.js';
import { makeDirs } from '../lib/fs.js';
import { sameProcessAlive } from '../lib/proc.js';
import { installedCli } from './init.js';
import { parseCommandArgs, type CommandIo } from './io.js';

export const DAEMON_USAGE = `Usage: polyspawn daemon start [--port N] [--host H [--allow-remote]]
       polyspawn daemon stop
       polyspawn daemon status

The project's shared polyspawn: one job table and one concurrency limit for every MCP client
of this project. While it runs, \`polyspawn serve\` (what the clients' configs start) relays to
it. Its token is in .polyspawn/http-token (or POLYSPAWN_TOKEN); its log in .polyspawn/daemon.log.
`;

/** How long start waits for the daemon to answer. */
const START_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether the daemon's HTTP endpoint answers at all (a 401 without a token is an answer). */
async function answers(url: string): Promise<boolean> {
  try {
    await fetch(url, { method: 'GET', signal: AbortSignal.timeout(2000) });
    return true;
  } catch {
    return false;
  }
}

/** The daemon's log, opened to append, never through a link: a repository could ship one pointing at a file of the user's. */
function openLog(file: string): number {
  try {
    return openSync(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ELOOP') throw error;
    throw new SetupError(`${file} is a link, which polyspawn does not write through: remove it`);
  }
}

const describe = (d: DaemonInfo) => `pid ${d.pid}, ${d.url}, started ${d.started_at}`;

export async function daemonCommand(argv: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, {
    port: { type: 'string' },
    host: { type: 'string' },
    'allow-remote': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return (void io.stdout.write(DAEMON_USAGE), 0);
  const [action, ...rest] = positionals;
  if (rest.length || !['start', 'stop', 'status'].includes(action ?? '')) {
    throw new InputError(`daemon takes one of start, stop, status${action ? `, not "${positionals.join(' ')}"` : ''}`);
  }
  const config = loadConfig(backends, io.env, io.cwd);
  const stateDir = config.stateDir;
  // Only a daemon.json that proves to name this user's daemon for this project is believed: a
  // planted one must not get another process signalled, nor keep a daemon from starting.
  const daemon = projectDaemonOf(backends, stateDir);
  const running = daemon.state === 'running' ? daemon.info : undefined;
  const notRunning =
    daemon.state === 'ended'
      ? `not running (daemon.json names pid ${daemon.info.pid}, which has ended)`
      : daemon.state === 'untrusted'
        ? `not running (${daemon.why}: not taken for this project's daemon)`
        : 'not running';

  if (action === 'status') {
    if (running) return (void io.stdout.write(`running: ${describe(running)}\n`), 0);
    io.stdout.write(`${notRunning}\n`);
    return 3;
  }

  if (action === 'stop') {
    if (!running) return (void io.stdout.write(`${notRunning}\n`), 0);
    process.kill(running.pid, 'SIGTERM');
    // Its agents get their grace period, then IAC.md is written: wait past both.
    const deadline = Date.now() + config.killGraceMs + 15_000;
    while (sameProcessAlive(running.pid, running.start)) {
      if (Date.now() > deadline)
        throw new SetupError(`the daemon (pid ${running.pid}) did not stop: kill -9 ${running.pid}`);
      await sleep(50);
    }
    io.stdout.write(`stopped (pid ${running.pid})\n`);
    return 0;
  }

  if (running) return (void io.stdout.write(`already running: ${describe(running)}\n`), 0);
  makeDirs(stateDir);
  const logFile = join(stateDir, 'daemon.log');
  const out = openLog(logFile);
  const args = ['serve', '--http'];
  if (values.port) args.push('--port', values.port);
  if (values.host) args.push('--host', values.host);
  if (values['allow-remote']) args.push('--allow-remote');
  const child = spawn(process.execPath, [installedCli(), ...args], {
    cwd: io.cwd,
    env: io.env,
    detached: true,
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  let exited = false;
  child.once('exit', () => (exited = true));
  child.unref();
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const started = projectDaemonOf(backends, stateDir);
    if (started.state === 'running' && started.info.pid === child.pid && (await answers(started.endpoint))) {
      io.stdout.write(`started: ${describe(started.info)}\n`);
      return 0;
    }
    if (exited || Date.now() > deadline) break;
    await sleep(50);
  }
  const tail = readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join('\n');
  // Two started at once: the other one won, and serves.
  const winner = projectDaemonOf(backends, stateDir);
  if (winner.state === 'running') return (void io.stdout.write(`already running: ${describe(winner.info)}\n`), 0);
  throw new SetupError(`the daemon did not start${exited ? '' : ` within ${START_TIMEOUT_MS / 1000} s`}:\n${tail}`);
}

export const DASHBOARD_USAGE = `Usage: polyspawn dashboard

Prints the address of the project's dashboard (served by its daemon: polyspawn daemon start).
The address holds the project's token once: the browser that opens it keeps a cookie instead.
`;

export async function dashboardCommand(argv: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommandArgs(argv, { help: { type: 'boolean', short: 'h' } }, false);
  if (values.help) return (void io.stdout.write(DASHBOARD_USAGE), 0);
  const stateDir = loadConfig(backends, io.env, io.cwd).stateDir;
  const daemon = projectDaemonOf(backends, stateDir);
  if (daemon.state !== 'running')
    throw new SetupError('no daemon serves this project: start one with `polyspawn daemon start`');
  const token = projectToken(stateDir, io.env, false);
  if (!token) throw new SetupError(`no token to open the dashboard with: ${tokenFile(stateDir)} is missing`);
  const origin = new URL(daemon.endpoint).origin;
  io.stdout.write(`${origin}/?token=${encodeURIComponent(token)}\n`);
  return 0;
}
