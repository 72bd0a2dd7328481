#!/usr/bin/env node
// The `polyspawn` command. `serve` (the default) speaks MCP on stdio: stdout carries only
// JSON-RPC, every log line goes to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createApp } from './app.js';
import { commandUsageLines, commands, runNamedCommand } from './commands/index.js';
import { ConfigError } from './config/config.js';
import { collectWhenIdle } from './jobs/idle-gc.js';
import { killAllGroupsNow } from './jobs/process/runner.js';
import { createServer } from './mcp/server.js';
import { VERSION } from './lib/version.js';

const log = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);
/** The longest the exit waits for IAC.md (the lock of a dead writer goes stale in 5 s). */
const IAC_FLUSH_MS = 8000;

async function serve(): Promise<void> {
  const app = createApp(process.env, process.cwd());
  const server = createServer(app);
  collectWhenIdle(app.jobs);
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(`shutting down (${why}): ending ${app.jobs.counts.running} running and ${app.jobs.counts.queued} queued agents`);
    // Give each group its grace period, but never hang the exit on it.
    const deadline = new Promise((r) => setTimeout(r, app.config.killGraceMs + 2000).unref());
    await Promise.race([app.jobs.shutdown(), deadline]);
    killAllGroupsNow();
    // The jobs' final states are in the store; IAC.md gets them before the process ends.
    await Promise.race([app.iac.close(), new Promise((r) => setTimeout(r, IAC_FLUSH_MS).unref())]);
    process.exit(0);
  };
  process.stdin.once('end', () => void shutdown('stdin closed'));
  process.stdin.once('close', () => void shutdown('stdin closed'));
  process.stdout.on('error', () => void shutdown('stdout closed'));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => void shutdown(signal));
  process.once('exit', killAllGroupsNow);
  // The run store's history loads once the client has finished the handshake, so that a
  // long history never slows start-up (a tool call needing it first loads it at once).
  server.server.oninitialized = () => app.iac.start();
  setTimeout(() => app.iac.start(), 2000).unref();
  await server.connect(new StdioServerTransport());
  log(`${VERSION} serving on stdio for ${app.config.projectDir} (${app.backends.map((b) => b.name).join(', ')})`);
}

const USAGE = `polyspawn ${VERSION}: an MCP server that delegates work to other coding agents

Usage:
  polyspawn [serve]     speak MCP on stdio (what the MCP client configs run)
${commandUsageLines().join('\n')}
  polyspawn --version
  polyspawn <command> --help
`;

async function main(argv: string[]): Promise<void> {
  const [command = 'serve'] = argv;
  if (command === '--help' || command === '-h' || (command === 'help' && !Object.hasOwn(commands, argv[1] ?? ''))) return void process.stdout.write(USAGE);
  if (command === '--version' || command === '-v') return void process.stdout.write(`${VERSION}\n`);
  if (command === 'serve') return argv.includes('--help') || argv.includes('-h') ? void process.stdout.write(USAGE) : serve();
  const name = command === 'help' ? argv[1] : command;
  if (name && Object.hasOwn(commands, name)) {
    const io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, cwd: process.cwd() };
    process.exitCode = await runNamedCommand(name, command === 'help' ? ['--help'] : argv.slice(1), io);
    return;
  }
  process.stderr.write(`polyspawn: unknown command "${command}"\n\n${USAGE}`);
  process.exitCode = 2;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  log(error instanceof ConfigError ? `configuration error: ${error.message}` : String((error as Error)?.stack ?? error));
  process.exit(1);
});
