// What a tool is: one declared object (name, title, description, schemas, hints, handler), the
// way a backend or a topology is. The registration loop (src/mcp/tool-server.ts) lists, checks
// and calls every tool from these declarations; a handler calls a use case in src/jobs/ and
// returns the structured result, which the loop turns into MCP's tool result.
import type { z } from 'zod';

/** The hints MCP defines; tools/list fills in the spec's defaults for those left out. */
type ToolHints = {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
};

/** What a handler gets of the call besides its arguments, whatever the protocol era or transport. */
export type ToolCall = {
  /** The client's name (its clientInfo), for a named agent's allowed_callers. */
  caller: string | undefined;
  /** Aborted when the client cancels the call or its session ends. */
  signal: AbortSignal;
  /** Sends notifications/progress; present only when the request asked for it (a progress token). */
  progress?: (update: { progress: number; total?: number; message?: string }) => void;
  /** Who waits, so that each client of a shared server is woken once by each question (its session). */
  waiter?: string;
};

/** What a tool that can run as a task starts: a job or a team, which the task then reports. */
export type Work = { kind: 'job'; id: string } | { kind: 'team'; id: string };

export type ToolDeclaration<S extends z.ZodObject = z.ZodObject> = {
  name: string;
  title: string;
  description: string;
  input: S;
  output: z.ZodType;
  annotations: ToolHints;
  /**
   * Served only where agents may start: a server at a depth that may not spawn
   * (src/jobs/agents/nesting.ts) leaves it out.
   */
  spawning?: true;
  /** The structured result (method syntax: each tool's own argument type stays assignable to the list's). */
  handler(args: z.output<S>, call: ToolCall): Promise<Record<string, unknown>> | Record<string, unknown>;
  /** A tool that can run as an MCP task (src/mcp/tasks.ts): starts its work and returns it at once. */
  start?(args: z.output<S>, call: ToolCall): Work;
};

/** Declares a tool, its handler typed by its input schema. */
export const tool = <S extends z.ZodObject>(declaration: ToolDeclaration<S>): ToolDeclaration<S> => declaration;
