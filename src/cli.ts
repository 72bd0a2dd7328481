#!/usr/bin/env node
// The `polyspawn` command. `serve` (the default) speaks MCP on stdio: stdout carries only
// JSON-RPC, every log line goes to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createApp } from './app.js';
import { ConfigError } from './config.js';
import { killAllGroupsNow } from './runner.js';
import { createServer } from './server.js';
import { VERSION } from './version.js';

const log = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);

async function serve(): Promise<void> {
  const app = createApp();
  const server = createServer(app);
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(`shutting down (${why}): ending ${app.jobs.counts.running} running and ${app.jobs.counts.queued} queued agents`);
    // Give each group its grace period, but never hang the exit on it.
    const deadline = new Promise((r) => setTimeout(r, app.config.killGraceMs + 2000).unref());
    await Promise.race([app.jobs.shutdown(), deadline]);
    killAllGroupsNow();
    process.exit(0);
  };
  process.stdin.once('end', () => void shutdown('stdin closed'));
  process.stdin.once('close', () => void shutdown('stdin closed'));
  process.stdout.on('error', () => void shutdown('stdout closed'));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => void shutdown(signal));
  process.once('exit', killAllGroupsNow);
  await server.connect(new StdioServerTransport());
  log(`${VERSION} serving on stdio for ${app.config.projectDir} (${app.backends.map((b) => b.name).join(', ')})`);
}

const USAGE = `polyspawn ${VERSION}: an MCP server that delegates work to other coding agents

Usage:
  polyspawn [serve]     speak MCP on stdio (what .mcp.json and .vscode/mcp.json run)
  polyspawn --version
  polyspawn --help
`;

async function main(argv: string[]): Promise<void> {
  const [command = 'serve'] = argv;
  if (command === '--help' || command === '-h' || command === 'help') return void process.stdout.write(USAGE);
  if (command === '--version' || command === '-v') return void process.stdout.write(`${VERSION}\n`);
  if (command === 'serve') return serve();
  process.stderr.write(`polyspawn: unknown command "${command}"\n\n${USAGE}`);
  process.exitCode = 2;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  log(error instanceof ConfigError ? `configuration error: ${error.message}` : String((error as Error)?.stack ?? error));
  process.exit(1);
});
