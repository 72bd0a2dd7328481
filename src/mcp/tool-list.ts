// tools/list as an orchestrating model pays for it. The clients that drive a model (Claude Code,
// Codex) send it each tool's name, description and inputSchema, which sit in its context all
// session (budget: 450 B a tool, test/unit/tool-list.test.ts); so the input schema keeps what a
// model acts on and drops what only bounds, and the server still checks every call against the
// full zod schema. title, outputSchema and annotations reach no model there but serve the
// clients that show or type results (the SDK's Client validates structuredContent against
// outputSchema): they are listed whole. POLYSPAWN_TOOL_SCHEMAS=full lists every schema whole
// (the README's tool reference is generated from it).
import { createHash } from 'node:crypto';
import type { Tool, ToolAnnotations } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { ToolDeclaration } from './tools/tool.js';

/**
 * What a model pays for a tool: the part its client sends it, as JSON (the budget's measure).
 * title, outputSchema and annotations stay with the client.
 */
export const modelVisibleBytes = (tool: { name: string; description?: string; inputSchema: unknown }): number =>
  Buffer.byteLength(JSON.stringify({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));

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
/** The spec's defaults, listed when a tool leaves a hint out: a client need not know them. */
const DEFAULT_HINTS: Required<
  Pick<ToolAnnotations, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint' | 'openWorldHint'>
> = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
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
 * Output schemas as listed, by zod schema, for the process: most tools share one (every spawn
 * tool's is the job's result), and converting them is most of a first tools/list's work.
 */
const outputs = new WeakMap<z.ZodType, Tool['outputSchema']>();
/** As the SDK converts it (io: output), so a client checks a result as the server does; no $schema tag. */
function listedOutput(schema: z.ZodType): Tool['outputSchema'] {
  let listed = outputs.get(schema);
  if (!listed) {
    listed = withSharedDefs(jsonSchema(schema, 'output')) as Tool['outputSchema'];
    outputs.set(schema, listed);
  }
  return listed;
}

const DRAFT7_DEFS = '#/definitions/';
/**
 * The shapes with an id (the job's result and summary, a team's, a question: src/jobs/result.ts)
 * held once under `$defs` and referred to wherever they recur: a client compiles a validator per
 * output schema (the SDK's Client, for every tool at tools/list), and a shared definition that
 * refers to another is compiled once per schema rather than at each place it appears. `$defs`
 * rather than draft 7's `definitions`: a listed schema has no `$schema`, so a client reads it as
 * 2020-12 (MCP's default), and either draft resolves the same JSON pointer. A root that is itself
 * a shared shape (spawn_*: the job's result) is written out, since MCP wants an object schema there.
 *
 * Each is named by its content (`$id`, a hash of the rest): the SDK's clients compile a schema
 * whose `$id` they have compiled before only once (AjvJsonSchemaValidator.getValidator), so the
 * spawn tools' one schema is compiled once, not once a tool; a schema that differs is named
 * differently, so a validator shared by two servers never checks one's results by the other's.
 */
function withSharedDefs(schema: Record<string, unknown>): Record<string, unknown> {
  const { definitions, ...root } = schema as { definitions?: Record<string, unknown> } & Record<string, unknown>;
  const defs = { ...definitions };
  let top = root;
  const rootRef = Object.keys(root).length === 1 && typeof root.$ref === 'string' ? root.$ref : undefined;
  if (rootRef?.startsWith(DRAFT7_DEFS)) {
    const name = rootRef.slice(DRAFT7_DEFS.length);
    top = defs[name] as Record<string, unknown>;
    delete defs[name];
    // Still referred to from inside (a team's member results are job results too): kept.
    if (JSON.stringify([top, defs]).includes(JSON.stringify(rootRef))) defs[name] = top;
  }
  // One of several object shapes (result: a job's or a team's) is an object too, as MCP wants a root to say.
  if (top.type === undefined && Array.isArray(top.anyOf)) top = { type: 'object', ...top };
  const text = JSON.stringify(Object.keys(defs).length ? { ...top, $defs: defs } : top).replaceAll(
    `"${DRAFT7_DEFS}`,
    '"#/$defs/',
  );
  return {
    $id: `urn:polyspawn:output:${createHash('sha256').update(text).digest('hex').slice(0, 16)}`,
    ...JSON.parse(text),
  };
}

/** A zod schema as JSON Schema (draft 7, as the clients validate), without its $schema tag. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output', override?: typeof applyBrief): Record<string, unknown> {
  const { $schema: _tag, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-7',
    io,
    ...(override ? { override } : {}),
  });
  return rest;
}

/**
 * One tool as listed: the compact input schema (what a model reads), and the title, output schema
 * and every hint (what a client reads), the spec's defaults filled in. A read-only tool destroys
 * nothing and may be called again: its hints say so rather than the defaults for tools that write.
 */
function compact(tool: ToolDeclaration): Tool {
  const hints: ToolAnnotations = { ...DEFAULT_HINTS, ...tool.annotations };
  if (hints.readOnlyHint) Object.assign(hints, { destructiveHint: false, idempotentHint: true });
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: trim(jsonSchema(tool.input, 'input', applyBrief)) as Tool['inputSchema'],
    outputSchema: listedOutput(tool.output),
    annotations: hints,
  };
}

/** One tool with every schema whole, its descriptions and limits included (the README's reference). */
function whole(tool: ToolDeclaration): Tool {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: jsonSchema(tool.input, 'input') as Tool['inputSchema'],
    outputSchema: listedOutput(tool.output),
    annotations: tool.annotations,
  };
}

const listedTools = { compact: new WeakMap<ToolDeclaration, Tool>(), full: new WeakMap<ToolDeclaration, Tool>() };

/**
 * A tool as tools/list serves it, converted once per declaration for the process (the tools of
 * every client's server are the same objects, but for the named agents' which change with their
 * files). POLYSPAWN_TOOL_SCHEMAS=full: whole.
 */
export function listedTool(tool: ToolDeclaration, env: NodeJS.ProcessEnv): Tool {
  const full = env.POLYSPAWN_TOOL_SCHEMAS === 'full';
  const cache = full ? listedTools.full : listedTools.compact;
  let listed = cache.get(tool);
  if (!listed) {
    listed = full ? whole(tool) : compact(tool);
    cache.set(tool, listed);
  }
  return listed;
}

/** The output schema a call's result is listed with, for the SDK's projection of tools/call results. */
export const listedOutputOf = (tool: ToolDeclaration) => listedOutput(tool.output);
