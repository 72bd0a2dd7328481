// The terminal commands beside `serve`, for src/cli.ts to dispatch to. Each returns its exit code;
// a UsageError prints its message and the command's usage, with exit code 2.
import { doctorCommand, DOCTOR_USAGE } from './doctor.js';
import { initCommand, INIT_USAGE } from './init.js';
import { UsageError, type CommandIo } from './io.js';
import { runCommand, RUN_USAGE } from './run.js';
import { statusCommand, STATUS_USAGE } from './status.js';

type Command = { summary: string; usage: string; run: (argv: string[], io: CommandIo) => Promise<number> };

export const commands: Record<string, Command> = {
  init: { summary: 'write the MCP config for Claude Code, VS Code and Codex', usage: INIT_USAGE, run: initCommand },
  doctor: { summary: 'check which backends are usable here, and why not', usage: DOCTOR_USAGE, run: doctorCommand },
  run: { summary: 'run one agent from the terminal: polyspawn run codex "..."', usage: RUN_USAGE, run: runCommand },
  status: { summary: 'the running agents and the newest history of this project', usage: STATUS_USAGE, run: statusCommand },
};

/** The lines of the top-level usage that list the commands. */
export const commandUsageLines = (): string[] => Object.entries(commands).map(([name, c]) => `  polyspawn ${name.padEnd(12)}${c.summary}`);

export async function runNamedCommand(name: string, argv: string[], io: CommandIo): Promise<number> {
  const command = commands[name]!;
  try {
    return await command.run(argv, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`polyspawn ${name}: ${error.message}\n\n${command.usage}`);
    return 2;
  }
}

export { UsageError, type CommandIo };
