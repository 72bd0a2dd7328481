// tools/list as an orchestrating model pays for it: every byte sits in its context all session
// (budget: 450 B a tool, test/unit/tool-list.test.ts). This list keeps what a model acts on and
// drops what only bounds or decorates; the server still checks every call and result against the
// full zod schemas. POLYSPAWN_TOOL_SCHEMAS=full serves the SDK's list unchanged (the README's
// tool reference is generated from it).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema, type Tool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/** Pure size limits: a call past one still gets the zod error that names it. */
const DROPPED_KEYWORDS = new Set([
  '$schema',
  'maxLength',
  'minLength',
  'maximum',
  'minimum',
  'exclusiveMaximum',
  'exclusiveMinimum',
  'maxItems',
  'minItems',
]);
/** The spec's defaults: only hints that differ are listed (the same meaning, fewer bytes). */
const DEFAULT_HINTS: Required<
  Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>
> = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
};

/** What McpServer keeps of a registered tool (the fields read here). */
type Registered = {
  description?: string;
  inputSchema?: unknown;
  annotations?: ToolAnnotations;
  _meta?: Record<string, unknown>;
  enabled: boolean;
};

/** How the compact list shows a schema: a shorter description ('' for none), or a JSON Schema that stands in for it. */
type Brief = string | Record<string, unknown>;
const briefs = new WeakMap<z.ZodType, Brief>();

/**
 * Lists `schema` briefly in the compact tools/list: with the description `listed` ('' for none),
 * or as the JSON Schema `listed`. The full list (and so the README), and the server's
 * validation, keep the schema whole. Apply it last: .optional() and .describe() make new schemas.
 */
export function brief<T extends z.ZodType>(schema: T, listed: Brief): T {
  briefs.set(schema, listed);
  return schema;
}

function applyBrief({ zodSchema, jsonSchema }: { zodSchema: unknown; jsonSchema: Record<string, unknown> }): void {
  const listed = briefs.get(zodSchema as z.ZodType);
  if (listed === undefined) return;
  if (typeof listed === 'string') {
    if (listed) jsonSchema.description = listed;
    else delete jsonSchema.description;
    return;
  }
  for (const key of Object.keys(jsonSchema)) delete jsonSchema[key];
  Object.assign(jsonSchema, listed);
}

/** Keywords that say nothing a model needs: every JSON object key is a string; `{}` allows anything; the server refuses unknown fields anyway. */
const redundant = (key: string, value: unknown) =>
  (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') ||
  (key === 'additionalProperties' && (value === false || JSON.stringify(value) === '{}'));

/** `anyOf` of bare types (what is left once the limits are gone) as one `type` list: the same meaning. */
const bareType = (branch: unknown): branch is { type: string } =>
  !!branch &&
  typeof branch === 'object' &&
  Object.keys(branch).join() === 'type' &&
  typeof (branch as { type: unknown }).type === 'string';
function foldTypes(schema: Record<string, unknown>): Record<string, unknown> {
  const { anyOf, ...rest } = schema;
  if (!Array.isArray(anyOf) || !anyOf.every(bareType)) return schema;
  return { ...rest, type: anyOf.map((branch) => branch.type) };
}

/** A JSON Schema without the keywords that only bound sizes, nor those that say nothing. */
function trim(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(trim);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (DROPPED_KEYWORDS.has(key) || redundant(key, value)) continue;
    // Under `properties` the keys are field names, never keywords.
    out[key] =
      key === 'properties' && value && typeof value === 'object'
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, trim(v)]))
        : trim(value);
  }
  return foldTypes(out);
}

/**
 * One tool as listed. No title (a display name for people; the name says as much to a model)
 * and no outputSchema (optional: a client only validates structuredContent with it, and the
 * model reads the result itself); the full list keeps both.
 */
function compact(name: string, tool: Registered): Tool {
  const input =
    tool.inputSchema instanceof z.ZodType
      ? z.toJSONSchema(tool.inputSchema, { target: 'draft-7', io: 'input', override: applyBrief })
      : { type: 'object' };
  const hints: ToolAnnotations = {};
  for (const [key, value] of Object.entries(tool.annotations ?? {})) {
    if (DEFAULT_HINTS[key as keyof typeof DEFAULT_HINTS] !== value) Object.assign(hints, { [key]: value });
  }
  return {
    name,
    ...(tool.description ? { description: tool.description } : {}),
    inputSchema: trim(input) as Tool['inputSchema'],
    ...(Object.keys(hints).length ? { annotations: hints } : {}),
    ...(tool._meta ? { _meta: tool._meta } : {}),
  };
}

/** Serves tools/list from the registered tools, compacted. Call after registering them. */
export function compactToolList(server: McpServer, env: NodeJS.ProcessEnv): void {
  if (env.POLYSPAWN_TOOL_SCHEMAS === 'full') return;
  const registered = (server as unknown as { _registeredTools?: Record<string, Registered> })._registeredTools;
  if (!registered || typeof registered !== 'object') return; // another SDK: keep its own list
  // The SDK's own list converts every zod schema on every call; this one once per registered
  // tool, and anew for one registered later or whose fields changed (RegisteredTool.update()
  // changes them in place).
  const cache = new WeakMap<Registered, { from: unknown[]; listed: Tool }>();
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(registered)
      .filter(([, tool]) => tool.enabled)
      .map(([name, tool]) => {
        const from = [name, tool.description, tool.inputSchema, tool.annotations, tool._meta];
        const cached = cache.get(tool);
        if (cached && cached.from.every((v, i) => v === from[i])) return cached.listed;
        const listed = compact(name, tool);
        cache.set(tool, { from, listed });
        return listed;
      }),
  }));
}
