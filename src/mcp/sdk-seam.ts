// Every use polyspawn makes of the MCP SDK beyond its documented surface, in one place, each
// checked by test/unit/sdk-seam.test.ts, which fails when an SDK upgrade changes what it relies on.
//
// - `replaceSetLevel`: the SDK's Server answers logging/setLevel itself and keeps the level in a
//   private map no caller can read; polyspawn replaces that handler (setRequestHandler replaces,
//   as documented) to keep the threshold where its notifications can read it. What it relies on:
//   the SDK installs its own handler when the server is built with the logging capability (so
//   this must run after construction), and the SDK's sendLoggingMessage sends whatever it is
//   given while the SDK's own map is empty.
// - `serveCustomMethod`: a request handler for a method outside the spec's set (the tasks
//   extension's tasks/get, tasks/update, tasks/cancel) through the 3-argument setRequestHandler;
//   its overloads are typed per SDK schema, so the method is given as a plain string here. The
//   SDK lifts a request's `inputResponses` out of its params (for any method, custom ones too)
//   into `ctx.mcpReq.inputResponses`: tasks/update's answers are read from there.
import type { LoggingLevel, Server } from '@modelcontextprotocol/server';
import type { z } from 'zod';

/** MCP's levels, least severe first (RFC 5424 order), as the spec defines them. */
export const LOGGING_LEVELS: readonly LoggingLevel[] = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
];

/** Replaces the SDK's logging/setLevel handler with one that hands the level to `onLevel`. */
export function replaceSetLevel(server: Server, onLevel: (level: LoggingLevel) => void): void {
  server.setRequestHandler('logging/setLevel', (request) => {
    onLevel(request.params.level);
    return {};
  });
}

/** What a custom method's handler gets of the request besides its params. */
type CustomRequest = {
  /** The request's `inputResponses` (tasks/update), as the client sent them: untrusted, each key checked by the handler. */
  inputResponses: Record<string, unknown> | undefined;
};

/** Serves a request method the spec does not define, its params checked by `params` (an invalid one: -32602). */
export function serveCustomMethod<P extends z.ZodType>(
  server: Server,
  method: string,
  params: P,
  handler: (params: z.output<P>, request: CustomRequest) => Promise<Record<string, unknown>>,
): void {
  // The SDK types a handler's params by Standard Schema and its result by the spec's Result;
  // zod's output type and a plain object are the same things, named otherwise.
  server.setRequestHandler(
    method,
    { params },
    (parsed, ctx) => handler(parsed as z.output<P>, { inputResponses: ctx.mcpReq.inputResponses }) as never,
  );
}
