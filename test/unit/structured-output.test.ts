// Structured output: finding the JSON in an answer, validating it, and the one retry.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import type { Outcome } from '../../backends/types.js';
import { loadConfig } from '../../src/config/config.js';
import type { ExecutionResult, Executor, JobRecord } from '../../src/jobs/table.js';
import {
  checkAnswer,
  compileSchema,
  extractJson,
  MAX_SCHEMA_CHARS,
  schemaProblem,
  withStructuredOutput,
} from '../../src/jobs/structured-output.js';
import { tempDir } from '../helpers/temp.js';

const schema = {
  type: 'object',
  properties: { name: { type: 'string' }, n: { type: 'integer' } },
  required: ['name'],
  additionalProperties: false,
};
const validate = () => {
  const c = compileSchema(schema);
  if ('error' in c) throw new Error(c.error);
  return c.validate;
};
const outcome = (text: string, extra: Partial<Outcome> = {}): Outcome => ({
  ok: true,
  text,
  costSource: 'reported',
  ...extra,
});

describe('finding the JSON in an answer', () => {
  test.each([
    ['{"name":"a"}', { name: 'a' }],
    ['  [1, 2]\n', [1, 2]],
    ['Here it is:\n```json\n{"name": "b"}\n```\nDone.', { name: 'b' }],
    ['```\n{"name": "c"}\n```', { name: 'c' }],
    ['first ```json\n{"name": "x"}\n``` then the fix:\n```json\n{"name": "d"}\n```', { name: 'd' }],
    ['```json\n{"name": "e"}\n```\n```text\nnot json\n```', { name: 'e' }],
  ])('%j', (text, value) => {
    expect(extractJson(text)).toEqual({ ok: true, value });
  });

  test.each([
    ['', /empty/],
    ['FAKE claude: hello', /not JSON/],
    ['```json\n{broken\n```', /no code block in the answer is valid JSON/],
  ])('%j is not JSON', (text, reason) => {
    const r = extractJson(text);
    expect(r.ok).toBe(false);
    expect((r as { reason: string }).reason).toMatch(reason);
  });
});

describe('validating', () => {
  test('a match, a mismatch with every error, and a CLI-reported structured value', () => {
    expect(checkAnswer(outcome('{"name":"a","n":2}'), validate())).toEqual({ ok: true, value: { name: 'a', n: 2 } });
    const bad = checkAnswer(outcome('{"n":1.5,"extra":true}'), validate());
    expect(bad.ok).toBe(false);
    const errors = (bad as { errors: string }).errors;
    expect(errors).toContain("(the whole answer) must have required property 'name'");
    expect(errors).toContain('/n must be integer');
    expect(errors).toContain('must NOT have additional properties ("extra")');
    // claude's structured_output is preferred over the text.
    expect(checkAnswer(outcome('I called the tool.', { structuredOutput: { name: 'z' } }), validate())).toEqual({
      ok: true,
      value: { name: 'z' },
    });
  });

  test('invalid schemas are named; the $schema dialect is honoured; formats are checked', () => {
    expect(schemaProblem({ type: 'nope' })).toMatch(/not a valid JSON Schema/);
    expect(schemaProblem([1])).toMatch(/must be a JSON object/);
    expect(schemaProblem({ type: 'object', properties: { a: { type: 'string' } } })).toBeUndefined();
    const tuple = compileSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'array',
      prefixItems: [{ type: 'number' }],
      items: false,
    });
    if ('error' in tuple) throw new Error(tuple.error);
    expect(tuple.validate([1])).toBe(true);
    expect(tuple.validate([1, 2])).toBe(false);
    const email = compileSchema({ type: 'string', format: 'email' });
    if ('error' in email) throw new Error(email.error);
    expect(email.validate('a@b.co')).toBe(true);
    expect(email.validate('nope')).toBe(false);
  });

  test('a pattern runs in linear time: ^(a+)+$ against 29 a and a ! fails at once, not after seconds', () => {
    const compiled = compileSchema({ type: 'string', pattern: '^(a+)+$' });
    if ('error' in compiled) throw new Error(compiled.error);
    const started = Date.now();
    expect(compiled.validate(`${'a'.repeat(29)}!`)).toBe(false);
    // A backtracking engine takes 14 s and more here; a linear one, milliseconds.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(compiled.validate('aaaa')).toBe(true);
    const keys = compileSchema({ type: 'object', patternProperties: { '^(x+)+$': { type: 'number' } } });
    if ('error' in keys) throw new Error(keys.error);
    expect(keys.validate({ xxxx: 'not a number' })).toBe(false);
  });

  test('a pattern the linear-time engine cannot run (a backreference, a lookahead) is refused, saying so', () => {
    expect(schemaProblem({ type: 'string', pattern: '^(a)\\1$' })).toMatch(
      /^the output schema's pattern "\^\(a\)\\1\$" cannot be used: .*RE2.*no backreferences or lookaround/,
    );
    expect(schemaProblem({ type: 'object', properties: { a: { type: 'string', pattern: '^(?=x)' } } })).toMatch(
      /pattern "\^\(\?=x\)" cannot be used/,
    );
  });

  test('JavaScript escapes in patterns: \\uXXXX and \\u{X} match the character', () => {
    const accented = compileSchema({ type: 'string', pattern: '^caf\\u00e9 \\u{1F600}$' });
    if ('error' in accented) throw new Error(accented.error);
    expect(accented.validate('café 😀')).toBe(true);
    expect(accented.validate('cafe 😀')).toBe(false);
  });

  test("a size limit: a backend's own where it declares one (claude's command line), in bytes, else the server's cap", () => {
    const sized = (chars: number, char = 'x') => ({ type: 'object', description: char.repeat(chars) });
    const byName = (name: string) => backends.find((b) => b.name === name)!;
    expect(schemaProblem(sized(130_000), byName('claude'))).toMatch(
      /^the output schema is 1300\d\d bytes as JSON text, more than the \d+ claude takes on its command line: simplify it$/,
    );
    // 50,000 characters, 150,000 bytes: Linux counts bytes.
    expect(schemaProblem(sized(50_000, '\u0800'), byName('claude'))).toMatch(/1500\d\d bytes/);
    expect(schemaProblem(sized(100_000), byName('claude'))).toBeUndefined();
    expect(schemaProblem(sized(130_000), byName('codex'))).toBeUndefined();
    expect(schemaProblem(sized(130_000))).toBeUndefined();
    expect(schemaProblem(sized(300_000), byName('codex'))).toBe(
      `the output schema is longer than ${MAX_SCHEMA_CHARS} characters: simplify it`,
    );
  });
});

describe('the executor wrapper: one retry with the errors, then fail', () => {
  const config = loadConfig(backends, { XDG_CONFIG_HOME: '/nonexistent' }, tempDir('so'));
  const job = (over: Partial<JobRecord> = {}): JobRecord => ({
    id: 'abcdef',
    backend: 'claude',
    model: 'sonnet',
    prompt: 'Name something.',
    cwd: '/',
    timeoutS: 60,
    extra: {},
    state: 'running',
    createdAt: new Date().toISOString(),
    outputSchema: schema,
    ...over,
  });
  const control = { signal: new AbortController().signal, onOutputTail: () => undefined };
  /** An executor that answers from a list, recording the jobs it was given. */
  const scripted = (answers: ExecutionResult[]) => {
    const seen: JobRecord[] = [];
    const execute: Executor = async (j) => {
      seen.push({ ...j });
      return answers.shift()!;
    };
    return { seen, execute };
  };
  const ok = (text: string, extra: Partial<Outcome> = {}): ExecutionResult => ({
    state: 'succeeded',
    outcome: outcome(text, {
      sessionId: 'S1',
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0 },
      costUsd: 0.01,
      ...extra,
    }),
  });

  test('a matching first answer: structured, no retry; the prompt carried the schema', async () => {
    const { seen, execute } = scripted([ok('```json\n{"name":"a"}\n```')]);
    const result = await withStructuredOutput(execute, backends, config)(job(), control);
    expect(result.state).toBe('succeeded');
    expect(result.outcome.structured).toEqual({ name: 'a' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.prompt).toContain(`Name something.`);
    expect(seen[0]!.prompt).toContain(`JSON Schema: ${JSON.stringify(schema)}`);
  });

  test('a mismatch resumes the session with the errors, and a match then succeeds with both attempts counted', async () => {
    const { seen, execute } = scripted([ok('not json'), ok('{"name":"b"}', { costUsd: 0.02 })]);
    const result = await withStructuredOutput(execute, backends, config)(job(), control);
    expect(result.state).toBe('succeeded');
    expect(result.outcome.structured).toEqual({ name: 'b' });
    expect(seen[1]).toMatchObject({ resumeSessionId: 'S1' });
    expect(seen[1]!.prompt).toMatch(/^Your answer did not match the required JSON Schema: the answer is not JSON/);
    expect(result.outcome.usage).toEqual({ inputTokens: 20, outputTokens: 10, cachedInputTokens: 0 });
    expect(result.outcome.costUsd).toBeCloseTo(0.03);
  });

  test('two mismatches fail with the errors', async () => {
    const { seen, execute } = scripted([ok('{"name": 1}'), ok('{"nom": "x"}')]);
    const result = await withStructuredOutput(execute, backends, config)(job(), control);
    expect(seen).toHaveLength(2);
    expect(seen[1]!.prompt).toContain('/name must be string');
    expect(result.state).toBe('failed');
    expect(result.outcome.ok).toBe(false);
    expect(result.outcome.error).toMatch(
      /did not match the output schema, also after one retry .*must have required property 'name'.*first answer: \/name must be string/,
    );
    expect(result.outcome.structured).toBeUndefined();
  });

  test('a backend without resume gets a fresh prompt holding the task, the previous answer and the errors', async () => {
    const { seen, execute } = scripted([ok('{"name": 1}', { sessionId: undefined }), ok('{"name": "ok"}')]);
    const result = await withStructuredOutput(execute, backends, config)(job({ backend: 'grok' }), control);
    expect(result.outcome.structured).toEqual({ name: 'ok' });
    expect(seen[1]!.resumeSessionId).toBeUndefined();
    expect(seen[1]!.prompt).toMatch(
      /^Name something\.[\s\S]*An earlier attempt at this task answered:\n\n {4}\{"name": 1\}[\s\S]*\/name must be string/,
    );
  });

  test('a failed first attempt is not retried; a job without a schema passes through', async () => {
    const failed: ExecutionResult = {
      state: 'failed',
      outcome: { ok: false, text: '', error: 'boom', costSource: 'unknown' },
    };
    const { seen, execute } = scripted([failed]);
    expect(await withStructuredOutput(execute, backends, config)(job(), control)).toBe(failed);
    expect(seen).toHaveLength(1);
    const plain = scripted([ok('whatever')]);
    const result = await withStructuredOutput(
      plain.execute,
      backends,
      config,
    )(job({ outputSchema: undefined }), control);
    expect(result.outcome.structured).toBeUndefined();
    expect(plain.seen[0]!.prompt).toBe('Name something.');
  });
});
