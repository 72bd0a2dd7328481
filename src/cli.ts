#!/usr/bin/env node
// The `polyspawn` command: its arguments, then `serve` (the default: MCP on stdio, src/mcp/serve.ts)
// or a terminal command (src/commands/).
import { commandUsageLines, commands, runNamedCommand } from './commands/index.js';
import { commandFailure } from './lib/errors.js';
import { VERSION } from './lib/version.js';
import { serveStdio } from './mcp/serve.js';

const log = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);

const USAGE = `polyspawn ${VERSION}: an MCP server that delegates work to other coding agents

Usage:
  polyspawn [serve]     speak MCP on stdio (what the MCP client configs run; relays to the
                        project's daemon when one runs)
  polyspawn serve --http [--port N] [--host H [--allow-remote]]
                        serve every client of this project over MCP Streamable HTTP
${commandUsageLines().join('\n')}
  polyspawn --version
  polyspawn <command> --help
`;

/** What `polyspawn serve` says on stderr when started from a terminal, not by an MCP client. */
const terminalNotice = (
  cli: string,
) => `this is an MCP server: it speaks JSON-RPC on stdin and stdout, and an MCP client starts it.
  To connect your clients, run \`polyspawn init\` in your project's folder, then restart them
  (polyspawn not on PATH? \`node ${cli} init <project folder>\`, or \`npm link\` in the checkout).
  \`polyspawn doctor\` shows which backends are usable here. Ctrl-C ends this server.`;

async function main(argv: string[]): Promise<void> {
  const [command = 'serve'] = argv;
  if (command === '--help' || command === '-h' || (command === 'help' && !Object.hasOwn(commands, argv[1] ?? '')))
    return void process.stdout.write(USAGE);
  if (command === '--version' || command === '-v') return void process.stdout.write(`${VERSION}\n`);
  if (command === 'serve') {
    if (argv.includes('--help') || argv.includes('-h')) return void process.stdout.write(USAGE);
    const options = argv.slice(1);
    if (options.length === 0) {
      // Someone typed `npm start` or `polyspawn`: say what this is. A client's pipe is no TTY, so it never sees this.
      if (process.stdin.isTTY) log(terminalNotice(process.argv[1] ?? 'dist/src/cli.js'));
      return serveStdio(log);
    }
    return (await import('./mcp/serve-http.js')).serveHttpCommand(options, log);
  }
  const name = command === 'help' ? argv[1] : command;
  if (name && Object.hasOwn(commands, name)) {
    const io = {
      stdout: process.stdout,
      stderr: process.stderr,
      stdin: process.stdin,
      env: process.env,
      cwd: process.cwd(),
    };
    process.exitCode = await runNamedCommand(name, command === 'help' ? ['--help'] : argv.slice(1), io);
    return;
  }
  process.stderr.write(`polyspawn: unknown command "${command}"\n\n${USAGE}`);
  process.exitCode = 2;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const failure = commandFailure(error);
  log(failure?.message ?? String((error as Error)?.stack ?? error));
  process.exit(failure?.exitCode ?? 1);
});
