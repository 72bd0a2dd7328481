// Structured output: a job (a named agent's, or one spawn's `output_schema`) can carry a JSON
// Schema. CLIs with a native flag get it (claude --json-schema, codex --output-schema: see
// backends/), every backend gets an instruction appended to the prompt, and the server always
// validates the answer itself: the answer text parsed as JSON (a fenced ```json block in it is
// fine), or the structured value the CLI reported (claude's structured_output). On a mismatch
// the job is retried once with the validation errors as feedback (resuming the same session
// where the backend can, else a fresh prompt holding the previous answer and the errors), then
// fails with them. The validated value lands in the outcome's `structured` field.
import { existsSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Ajv as AjvType, ErrorObject, Options, ValidateFunction } from 'ajv';
import type { Backend, Outcome, Usage } from '../../backends/types.js';
import type { Config } from '../config/config.js';
import { runFolder } from '../lib/run-folder.js';
import { jsonBytes } from '../lib/text.js';
import type { ExecutionResult, Executor, JobRecord } from './table.js';

// ajv and ajv-formats are CommonJS, loaded on the first schema (start-up never pays for them);
// require() gives their classes without default-import games.
const require = createRequire(import.meta.url);

export type JsonSchema = Record<string, unknown>;

/**
 * The largest schema any backend accepts: it is appended to the prompt and kept, compiled, in
 * the cache below, so both stay bounded. A backend that takes the schema somewhere smaller (a
 * command-line argument) declares its own, lower maxOutputSchemaBytes.
 */
export const MAX_SCHEMA_CHARS = 256 * 1024;
const MAX_ERRORS = 12;
const MAX_ANSWER_IN_FEEDBACK = 20_000;

let validators: { draft7: AjvType; draft2019: AjvType; draft2020: AjvType } | undefined;
const compiled = new Map<string, ValidateFunction>();

/** A schema's `pattern` that the linear-time engine cannot run. */
class UnsupportedPattern extends Error {
  constructor(pattern: string, reason: string) {
    super(
      `the output schema's pattern "${pattern}" cannot be used: polyspawn matches patterns with RE2, in linear time ` +
        `(no backreferences or lookaround), and RE2 says: ${reason}. Rewrite the pattern without them, or drop it`,
    );
  }
}

/**
 * ajv's `code.regExp`: patterns run on RE2 (re2js, pure JavaScript), whose time grows linearly
 * with the text. JavaScript's backtracking RegExp can take minutes on a model's answer (the
 * answer is untrusted) with a pattern such as ^(a+)+$, and validation runs on the main thread,
 * where it would stall every tool and time-out. JSON Schema patterns are ECMAScript's, whose
 * \uXXXX and \u{X} escapes RE2 spells \x{X}; the rest of the common syntax is shared.
 */
function linearRegExp(): NonNullable<Options['code']>['regExp'] {
  const { RE2JS } = require('re2js') as typeof import('re2js');
  const engine = (pattern: string) => {
    const translated = pattern.replace(
      /\\(\\|u\{([0-9A-Fa-f]{1,6})\}|u([0-9A-Fa-f]{4}))/g,
      (escape: string, _pair: string, braced?: string, four?: string) =>
        braced || four ? `\\x{${braced ?? four}}` : escape,
    );
    try {
      const re = RE2JS.compile(translated);
      // ajv keys its cache of patterns by toString().
      return { test: (text: string) => re.test(text), toString: () => pattern };
    } catch (error) {
      throw new UnsupportedPattern(pattern, (error as Error).message);
    }
  };
  // Names the engine in ajv's standalone code, which polyspawn does not generate.
  return Object.assign(engine, { code: 'require("re2js").RE2JS.compile' });
}

function ajvFor(schema: JsonSchema): AjvType {
  if (!validators) {
    const { Ajv } = require('ajv') as typeof import('ajv');
    const { Ajv2019 } = require('ajv/dist/2019.js') as typeof import('ajv/dist/2019.js');
    const { Ajv2020 } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
    const addFormats = require('ajv-formats') as (ajv: AjvType) => AjvType;
    const options: Options = { allErrors: true, strict: false, code: { regExp: linearRegExp() } };
    validators = {
      draft7: addFormats(new Ajv(options)),
      draft2019: addFormats(new Ajv2019(options) as unknown as AjvType),
      draft2020: addFormats(new Ajv2020(options) as unknown as AjvType),
    };
  }
  const dialect = typeof schema.$schema === 'string' ? schema.$schema : '';
  if (dialect.includes('2020-12')) return validators.draft2020;
  if (dialect.includes('2019-09')) return validators.draft2019;
  return validators.draft7;
}

/** A compiled validator, or why the schema is not one. Compiled once per distinct schema. */
export function compileSchema(schema: unknown): { validate: ValidateFunction } | { error: string } {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema))
    return { error: 'the output schema must be a JSON object (a JSON Schema)' };
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch (error) {
    return { error: `the output schema is not JSON: ${(error as Error).message}` };
  }
  if (text.length > MAX_SCHEMA_CHARS)
    return { error: `the output schema is longer than ${MAX_SCHEMA_CHARS} characters: simplify it` };
  const cached = compiled.get(text);
  if (cached) return { validate: cached };
  try {
    // A fresh copy: ajv keeps a reference, and the caller's object may change later.
    const validate = ajvFor(schema as JsonSchema).compile(JSON.parse(text) as JsonSchema);
    if (compiled.size > 200) compiled.clear();
    compiled.set(text, validate);
    return { validate };
  } catch (error) {
    if (error instanceof UnsupportedPattern) return { error: error.message };
    return { error: `the output schema is not a valid JSON Schema: ${(error as Error).message}` };
  }
}

/** Why `schema` cannot be given to `backend` (with none: to any), or undefined when it can. */
export function schemaProblem(schema: unknown, backend?: Backend): string | undefined {
  const result = compileSchema(schema);
  if ('error' in result) return result.error;
  const max = backend?.maxOutputSchemaBytes;
  const bytes = jsonBytes(schema);
  if (backend && max !== undefined && bytes > max) {
    return `the output schema is ${bytes} bytes as JSON text, more than the ${max} ${backend.name} takes on its command line: simplify it`;
  }
  return undefined;
}

function formatErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors?.length) return 'it does not match the schema';
  const lines = errors.slice(0, MAX_ERRORS).map((e) => {
    const where = e.instancePath || '(the whole answer)';
    const extra =
      e.keyword === 'additionalProperties'
        ? ` ("${String((e.params as { additionalProperty?: string }).additionalProperty)}")`
        : e.keyword === 'enum'
          ? ` (${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)})`
          : '';
    return `${where} ${e.message ?? 'is invalid'}${extra}`;
  });
  if (errors.length > MAX_ERRORS) lines.push(`and ${errors.length - MAX_ERRORS} more`);
  return lines.join('; ');
}

/**
 * The JSON value in an answer: the whole text when it parses, else the last fenced code block
 * (```json or ```) that does. Models often wrap JSON in a fence, or put a sentence before it.
 */
export function extractJson(text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  const trimmed = text.trim();
  if (!trimmed) return { ok: false, reason: 'the answer is empty' };
  try {
    return { ok: true, value: JSON.parse(trimmed) as unknown };
  } catch {
    // look for a fenced block
  }
  const blocks = [...trimmed.matchAll(/```[A-Za-z0-9_-]*[ \t]*\r?\n([\s\S]*?)```/g)].map((m) => m[1]!);
  for (const block of blocks.reverse()) {
    try {
      return { ok: true, value: JSON.parse(block.trim()) as unknown };
    } catch {
      // the next one
    }
  }
  return {
    ok: false,
    reason: blocks.length
      ? 'no code block in the answer is valid JSON'
      : 'the answer is not JSON (and holds no ```json block)',
  };
}

/** Checks an outcome's answer against the schema. */
export function checkAnswer(
  outcome: Outcome,
  validate: ValidateFunction,
): { ok: true; value: unknown } | { ok: false; errors: string } {
  let value: unknown;
  if (outcome.structuredOutput !== undefined) value = outcome.structuredOutput;
  else {
    const parsed = extractJson(outcome.text);
    if (!parsed.ok) return { ok: false, errors: parsed.reason };
    value = parsed.value;
  }
  return validate(value) ? { ok: true, value } : { ok: false, errors: formatErrors(validate.errors) };
}

/** What every backend is told, after the task. No backticks: an echoed prompt must not look like an answer. */
function schemaInstruction(schema: JsonSchema): string {
  return (
    '\n\n---\nWhen you are done, answer with one JSON value that matches the JSON Schema below, and nothing else: ' +
    `no prose before or after it (a Markdown code block around it is fine).\nJSON Schema: ${JSON.stringify(schema)}\n`
  );
}

function resumeFeedback(errors: string): string {
  return (
    `Your answer did not match the required JSON Schema: ${errors}.\n` +
    'Answer again with only the corrected JSON value that matches the schema, nothing else.'
  );
}

function freshFeedback(prompt: string, schema: JsonSchema, answer: string, errors: string): string {
  const shown =
    answer.length > MAX_ANSWER_IN_FEEDBACK ? `${answer.slice(0, MAX_ANSWER_IN_FEEDBACK)}\n[... cut]` : answer;
  // The earlier answer is indented, not fenced: a fence in it would end a fence of ours.
  const indented = shown
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
  return (
    `${prompt}${schemaInstruction(schema)}\n---\nAn earlier attempt at this task answered:\n\n${indented}\n\n` +
    `That answer did not match the JSON Schema: ${errors}.\nAnswer again, with only a JSON value that matches the schema.`
  );
}

const addUsage = (a: Usage | undefined, b: Usage | undefined): Usage | undefined =>
  a && b
    ? {
        inputTokens: a.inputTokens + b.inputTokens,
        outputTokens: a.outputTokens + b.outputTokens,
        cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
      }
    : (b ?? a);

/** The second attempt's outcome, with the first's tokens, cost and premium requests added. */
function combine(first: Outcome, second: Outcome): Outcome {
  const both = first.costUsd !== undefined && second.costUsd !== undefined;
  const usage = addUsage(first.usage, second.usage);
  const premium =
    first.premiumRequests !== undefined || second.premiumRequests !== undefined
      ? (first.premiumRequests ?? 0) + (second.premiumRequests ?? 0)
      : undefined;
  const { costUsd: _c, costSource: _s, ...rest } = second;
  return {
    ...rest,
    ...(usage ? { usage } : {}),
    ...(premium !== undefined ? { premiumRequests: premium } : {}),
    ...(both
      ? {
          costUsd: first.costUsd! + second.costUsd!,
          costSource: first.costSource === second.costSource ? second.costSource : 'estimated',
        }
      : { costSource: 'unknown' as const }),
  };
}

/** Keeps the first attempt's logs beside the retry's (which start the files afresh). */
function keepFirstAttemptLogs(config: Config, id: string): void {
  const { stdout, stderr } = runFolder(config.stateDir, id);
  for (const path of [stdout, stderr]) {
    try {
      if (existsSync(path)) renameSync(path, path.replace(/\.log$/, '.attempt-1.log'));
    } catch {
      // the retry overwrites it: nothing worse
    }
  }
}

/** Wraps the executor: jobs with an output schema are validated, and retried once on a mismatch. */
export function withStructuredOutput(execute: Executor, backends: readonly Backend[], config: Config): Executor {
  const byName = new Map(backends.map((b) => [b.name, b]));
  return async (job, control) => {
    if (!job.outputSchema) return execute(job, control);
    const schema = job.outputSchema;
    const compiledSchema = compileSchema(schema);
    if ('error' in compiledSchema) {
      // Checked when the job was made; a stored schema that no longer compiles lands here.
      return { state: 'failed', outcome: { ok: false, text: '', error: compiledSchema.error, costSource: 'unknown' } };
    }
    const started = Date.now();
    const first = await execute({ ...job, prompt: job.prompt + schemaInstruction(schema) }, control);
    if (first.state !== 'succeeded') return first;
    const firstCheck = checkAnswer(first.outcome, compiledSchema.validate);
    if (firstCheck.ok) return { ...first, outcome: { ...first.outcome, structured: firstCheck.value } };
    if (control.signal.aborted) return first;

    const left = job.timeoutS - Math.floor((Date.now() - started) / 1000);
    const failed = (error: string, outcome: Outcome, exitCode?: number | null): ExecutionResult => ({
      state: 'failed',
      exitCode,
      outcome: { ...outcome, ok: false, error },
    });
    if (left < 1)
      return failed(
        `the answer did not match the output schema (${firstCheck.errors}), and no time was left to retry`,
        first.outcome,
        first.exitCode,
      );

    const backend = byName.get(job.backend);
    const session = backend?.supportsResume ? first.outcome.sessionId : undefined;
    const retry: JobRecord = session
      ? {
          ...job,
          prompt: resumeFeedback(firstCheck.errors),
          resumeSessionId: session,
          timeoutS: left,
          ...(first.outcome.sessionTotals ? { previousSessionTotals: first.outcome.sessionTotals } : {}),
          ...(first.outcome.sessionCostUsd !== undefined
            ? { previousSessionCostUsd: first.outcome.sessionCostUsd }
            : {}),
        }
      : {
          ...job,
          prompt: freshFeedback(job.prompt, schema, first.outcome.text, firstCheck.errors),
          timeoutS: left,
          ...(first.outcome.sessionTotals ? { previousSessionTotals: first.outcome.sessionTotals } : {}),
        };
    keepFirstAttemptLogs(config, job.id);
    const second = await execute(retry, control);
    const outcome = combine(first.outcome, second.outcome);
    if (second.state !== 'succeeded') {
      return {
        ...second,
        outcome: {
          ...outcome,
          error: `the retry for the output schema failed: ${second.outcome.error ?? second.state}`,
        },
      };
    }
    const secondCheck = checkAnswer(second.outcome, compiledSchema.validate);
    if (secondCheck.ok) return { ...second, outcome: { ...outcome, structured: secondCheck.value } };
    return failed(
      `the answer did not match the output schema, also after one retry with the errors as feedback: ${secondCheck.errors} ` +
        `(first answer: ${firstCheck.errors}; logs of the first attempt: *.attempt-1.log beside the log)`,
      outcome,
      second.exitCode,
    );
  };
}
