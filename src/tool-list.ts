// tools/list as an orchestrating model pays for it: every byte of it sits in the model's context
// for the whole session, once per tool (bench/coldstart.mjs measures it). The SDK's own list
// converts each zod schema to JSON Schema on every call and sends all of it; this one sends,
// once computed, what a model and a client act on:
//
//   inputSchema   types, enums, required fields and the descriptions; not the `$schema` tag and
//                 not the pure size limits (maxLength, minimum, ...): the server still enforces
//                 them, and a call past one gets an error that names the limit;
//   outputSchema  {"type": "object"}: the spec requires only that structuredContent conform to
//                 it, clients use it only to validate, and the model reads the result itself;
//                 the server still checks every result against the full zod schema;
//   annotations   only the hints that differ from the spec's defaults (readOnlyHint false,
//                 destructiveHint true, idempotentHint false, openWorldHint true): the same
//                 meaning, fewer bytes.
//
// POLYSPAWN_TOOL_SCHEMAS=full serves the SDK's list unchanged (the README's tool reference is
// generated from it, output fields and limits included).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema, type Tool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const DROPPED_KEYWORDS = new Set(['$schema', 'maxLength', 'minLength', 'maximum', 'minimum', 'exclusiveMaximum', 'exclusiveMinimum', 'maxItems', 'minItems']);
const DEFAULT_HINTS: Required<Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>> = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
};

/** What McpServer keeps of a registered tool (the fields read here). */
type Registered = {
  title?: string;
  description?: string;
  inputSchema?: unknown;
  annotations?: ToolAnnotations;
  _meta?: Record<string, unknown>;
  enabled: boolean;
};

/** Keywords that say nothing: every JSON object key is a string; `{}` allows anything. */
const redundant = (key: string, value: unknown) =>
  (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') || (key === 'additionalProperties' && JSON.stringify(value) === '{}');

/** A JSON Schema without the keywords that only bound sizes, nor those that say nothing. */
function trim(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(trim);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (DROPPED_KEYWORDS.has(key) || redundant(key, value)) continue;
    // Under `properties` the keys are field names, never keywords.
    out[key] = key === 'properties' && value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, trim(v)])) : trim(value);
  }
  return out;
}

function compact(name: string, tool: Registered): Tool {
  const input = tool.inputSchema instanceof z.ZodType ? z.toJSONSchema(tool.inputSchema, { target: 'draft-7', io: 'input' }) : { type: 'object' };
  const hints: ToolAnnotations = {};
  for (const [key, value] of Object.entries(tool.annotations ?? {})) {
    if (DEFAULT_HINTS[key as keyof typeof DEFAULT_HINTS] !== value) Object.assign(hints, { [key]: value });
  }
  return {
    name,
    ...(tool.title ? { title: tool.title } : {}),
    ...(tool.description ? { description: tool.description } : {}),
    inputSchema: trim(input) as Tool['inputSchema'],
    outputSchema: { type: 'object' },
    ...(Object.keys(hints).length ? { annotations: hints } : {}),
    ...(tool._meta ? { _meta: tool._meta } : {}),
  };
}

/** Serves tools/list from the registered tools, compacted. Call after registering them. */
export function compactToolList(server: McpServer, env: NodeJS.ProcessEnv = process.env): void {
  if (env.POLYSPAWN_TOOL_SCHEMAS === 'full') return;
  const registered = (server as unknown as { _registeredTools?: Record<string, Registered> })._registeredTools;
  if (!registered || typeof registered !== 'object') return; // another SDK: keep its own list
  // Per registered tool: one registered later is computed anew, and so is one whose fields
  // changed (RegisteredTool.update() changes them in place).
  const cache = new WeakMap<Registered, { from: unknown[]; listed: Tool }>();
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(registered)
      .filter(([, tool]) => tool.enabled)
      .map(([name, tool]) => {
        const from = [name, tool.title, tool.description, tool.inputSchema, tool.annotations, tool._meta];
        const cached = cache.get(tool);
        if (cached && cached.from.every((v, i) => v === from[i])) return cached.listed;
        const listed = compact(name, tool);
        cache.set(tool, { from, listed });
        return listed;
      }),
  }));
}
