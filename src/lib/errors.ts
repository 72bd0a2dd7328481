// The errors polyspawn raises on purpose, in every layer, and how each one ends a tool call or a
// command. Every message says what to change.
//
// A tool call: the MCP SDK turns an error a tool handler throws into an isError result whose
// text is the error's message, so tools just throw these. A command: commandFailure below.

/**
 * What the caller gave cannot be used: a tool's arguments, a command's arguments or options
 * (an unknown model, a missing folder, a wrong flag). A command prints its usage after it.
 */
export class InputError extends Error {}

/**
 * The request is right, but this machine cannot carry it out as it is set up: a CLI not
 * installed or not logged in, an API key not set.
 */
export class SetupError extends Error {}

/** A configuration file or variable of polyspawn's that it cannot use. */
export class ConfigError extends Error {}

type CommandFailure = { message: string; exitCode: number; withUsage: boolean };

/**
 * How a command (or the server at start-up) that ended with `error` reports it: the sentence
 * for stderr, the exit code, and whether the command's usage follows. Undefined for an error
 * polyspawn did not raise on purpose (a bug): its stack is printed and the process exits 1.
 */
export function commandFailure(error: unknown): CommandFailure | undefined {
  if (error instanceof InputError) return { message: error.message, exitCode: 2, withUsage: true };
  if (error instanceof SetupError) return { message: error.message, exitCode: 1, withUsage: false };
  if (error instanceof ConfigError)
    return { message: `configuration error: ${error.message}`, exitCode: 1, withUsage: false };
  return undefined;
}
