// The terminal commands beside `serve`, for src/cli.ts to dispatch to. Each returns its exit code;
// an error it ends with is reported as src/lib/errors.ts says (an InputError: with the usage, exit 2).
//
// Each command's module loads when that command runs: `serve`, which MCP clients start for every
// session, never evaluates them nor what only they use (jsonc-parser, smol-toml, ...).
import { reportFailure, type CommandIo } from './io.js';

type Loaded = { usage: string; run: (argv: string[], io: CommandIo) => Promise<number> };
type Command = { summary: string; load: () => Promise<Loaded> };

export const commands: Record<string, Command> = {
  init: {
    summary: 'write the MCP config that starts polyspawn, for each MCP client',
    load: () => import('./init.js').then((m) => ({ usage: m.INIT_USAGE, run: m.initCommand })),
  },
  doctor: {
    summary: 'check which backends are usable here, and why not',
    load: () => import('./doctor.js').then((m) => ({ usage: m.DOCTOR_USAGE, run: m.doctorCommand })),
  },
  run: {
    summary: 'run one agent from the terminal: polyspawn run <backend> "..."',
    load: () => import('./run.js').then((m) => ({ usage: m.RUN_USAGE, run: m.runCommand })),
  },
  daemon: {
    summary: "start, stop or check the project's shared server (every client relays to it)",
    load: () => import('./daemon.js').then((m) => ({ usage: m.DAEMON_USAGE, run: m.daemonCommand })),
  },
  dashboard: {
    summary: "print the address of the project's dashboard (its daemon serves it)",
    load: () => import('./daemon.js').then((m) => ({ usage: m.DASHBOARD_USAGE, run: m.dashboardCommand })),
  },
  status: {
    summary: 'the running agents and the newest history of this project',
    load: () => import('./status.js').then((m) => ({ usage: m.STATUS_USAGE, run: m.statusCommand })),
  },
};

/** The lines of the top-level usage that list the commands. */
export const commandUsageLines = (): string[] =>
  Object.entries(commands).map(([name, c]) => `  polyspawn ${name.padEnd(12)}${c.summary}`);

export async function runNamedCommand(name: string, argv: string[], io: CommandIo): Promise<number> {
  const command = await commands[name]!.load();
  try {
    return await command.run(argv, io);
  } catch (error) {
    return reportFailure(io, name, error, command.usage);
  }
}
