// The models table: per backend a default model, aliases and prices (USD per million tokens).
// Each backend ships its own entry (`models` in its file in backends/); vendors rename models and
// change prices every few months, so the user's and the project's models.json override any part
// of it without touching code. Prices are used only where the CLI or API reports no cost, and
// results mark such costs as estimates.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { Backend, BackendModels, Usage } from '../../backends/types.js';
import { ConfigError } from '../lib/errors.js';
import { isModelName, PLAIN_NAME_RULE } from '../lib/text.js';
import { describeZodError, readJsonFile } from './config.js';

const modelName = z.string().refine(isModelName, { message: `a model name: ${PLAIN_NAME_RULE}` });

const priceSchema = z
  .object({ input: z.number().min(0), output: z.number().min(0), cachedInput: z.number().min(0).optional() })
  .strict();
const entrySchema = z
  .object({
    default: modelName,
    aliases: z.record(z.string(), modelName),
    // Keys checked on the record: zod reports a bad record key without the refinement's message.
    prices: z
      .record(z.string(), priceSchema)
      .refine((prices) => Object.keys(prices).every(isModelName), { message: `each a model name: ${PLAIN_NAME_RULE}` }),
  })
  .partial()
  .strict();
// Each entry checked on its own, so that an error names the field at fault (a union only says it failed).
const fileSchema = z.record(z.string(), z.unknown());

export type ModelsTable = Record<string, BackendModels>;

/** The table as the backends ship it: each one's own `models`. */
export function shippedModels(backends: readonly Backend[]): ModelsTable {
  // Shared, not copied: loadModels builds a new entry for each backend an override names.
  return Object.fromEntries(backends.map(({ name, models }) => [name, models]));
}

/** The models.json files that override the shipped table, in the order they apply (those that exist). */
export function modelsOverrideFiles(projectDir: string, userConfigDir: string, env: NodeJS.ProcessEnv): string[] {
  const overrides = env.POLYSPAWN_MODELS
    ? [resolve(projectDir, env.POLYSPAWN_MODELS)]
    : [join(userConfigDir, 'models.json'), join(projectDir, '.polyspawn', 'models.json')];
  return overrides.filter((f) => existsSync(f));
}

/**
 * The backends' shipped table with each override file applied over it in turn: a default
 * replaces, aliases and prices merge (a file may also add a backend's entry; "$comment" is skipped).
 */
export function loadModels(backends: readonly Backend[], overrideFiles: string[]): ModelsTable {
  const table = shippedModels(backends);
  for (const file of overrideFiles) {
    const parsed = fileSchema.safeParse(readJsonFile(file));
    if (!parsed.success) throw new ConfigError(`${file}: ${describeZodError(parsed.error)}`);
    for (const [backend, raw] of Object.entries(parsed.data)) {
      if (typeof raw === 'string') continue; // "$comment"
      const checked = entrySchema.safeParse(raw);
      if (!checked.success) throw new ConfigError(`${file}: ${backend}: ${describeZodError(checked.error)}`);
      const entry = checked.data;
      const current = table[backend] ?? { default: '', aliases: {}, prices: {} };
      table[backend] = {
        default: entry.default ?? current.default,
        aliases: { ...current.aliases, ...entry.aliases },
        prices: { ...current.prices, ...entry.prices },
      };
    }
  }
  return table;
}

/**
 * Every backend given must have a default model in the table (its spawn tool names it, and a
 * spawn without a model runs it): a ConfigError that says where to add the missing ones.
 */
export function checkDefaultModels(table: ModelsTable, backends: readonly Backend[]): void {
  const missing = backends.filter((b) => !table[b.name]?.default).map((b) => b.name);
  if (!missing.length) return;
  const where = missing.map((name) => `models.default in backends/${name}.ts`).join(', ');
  const entries = missing.map((name) => `"${name}": { "default": "<model>" }`).join(', ');
  throw new ConfigError(
    `no default model for ${missing.join(', ')}: set ${where} (shipped with the backend), ` +
      `or add ${entries} to a models.json override (see README, "Models")`,
  );
}

/** The models the table names for a backend: its default, its aliases' models, the priced ones. */
function knownModels(entry: BackendModels): Set<string> {
  return new Set([entry.default, ...Object.values(entry.aliases), ...Object.keys(entry.prices)]);
}

/** Whether the table names this model (then it has a price, or its backend reports the cost). */
export function isKnownModel(table: ModelsTable, backend: string, model: string): boolean {
  const entry = table[backend];
  return entry !== undefined && knownModels(entry).has(model);
}

/**
 * The model to run: the backend's default, an alias, a model the table knows, or any other plain
 * model name, passed on as named with `known: false` (the CLI or API knows its vendor's models;
 * polyspawn knows no price for it).
 */
export function resolveModel(
  table: ModelsTable,
  backend: string,
  requested: string | undefined,
): { model: string; known: boolean } | { error: string } {
  const entry = table[backend];
  if (!entry?.default) return { error: `no default model for ${backend}: add one to models.json` };
  if (requested === undefined || requested === '') return { model: entry.default, known: true };
  const alias = entry.aliases[requested];
  if (alias) return { model: alias, known: true };
  const known = knownModels(entry);
  if (known.has(requested)) return { model: requested, known: true };
  if (isModelName(requested)) return { model: requested, known: false };
  return {
    error:
      `unknown model "${requested}" for ${backend}, and not a plain model name (${PLAIN_NAME_RULE}): use one of ${[...new Set([...Object.keys(entry.aliases), ...known])].join(', ')}, ` +
      `or the vendor's name of the model`,
  };
}

/** USD estimate from the price table, or undefined when the model has no price. */
export function estimateCost(table: ModelsTable, backend: string, model: string, usage: Usage): number | undefined {
  const price = table[backend]?.prices[model];
  if (!price) return undefined;
  const uncached = Math.max(0, usage.inputTokens - usage.cachedInputTokens);
  const cachedPrice = price.cachedInput ?? price.input;
  return (uncached * price.input + usage.cachedInputTokens * cachedPrice + usage.outputTokens * price.output) / 1e6;
}

/** The estimate for a run that used several models: undefined unless every one has a price. */
export function estimateCostByModel(
  table: ModelsTable,
  backend: string,
  byModel: Readonly<Record<string, Usage>>,
): number | undefined {
  let total = 0;
  for (const [model, usage] of Object.entries(byModel)) {
    const cost = estimateCost(table, backend, model, usage);
    if (cost === undefined) return undefined;
    total += cost;
  }
  return total;
}
