// IAC.md holds whatever agents wrote: rendered, then parsed back with a real Markdown parser.
import { describe, expect, test } from 'vitest';
import { clean, fence, inline, shorten } from '../../iac/markdown.js';
import { PROMPT_CHARS, RESULT_CHARS, renderDocument, renderEntry, type ActiveRow } from '../../iac/render.js';
import { taskLine } from '../../src/lib/text.js';
import type { StoredRecord } from '../../iac/store.js';
import type { JobState } from '../../src/jobs/table.js';
import { parseIac } from '../helpers/iac.js';

const ticks = (n: number) => '`'.repeat(n);
const everyTickRun = Array.from(
  { length: 20 },
  (_, i) => `${ticks(i + 1)}run ${i + 1}${ticks(i + 1)}\n${ticks(i + 1)}\n   ${ticks(i + 1)}`,
).join('\n');

/** Text an agent might write that breaks naive Markdown. */
const HOSTILE: Record<string, string> = {
  pipes: 'a | b || c \\| d |',
  backticks: everyTickRun,
  details: '</details>\n<details><summary>x</summary>\n</details></details>\n<!-- comment\n-->',
  html: '<script>alert(1)</script><img src=x onerror=alert(1)></code></pre></summary>',
  crlf: 'line one\r\nline two\rline three\r\n\r\n',
  longLine: 'y'.repeat(50_000),
  nonAscii: 'Grüße 日本語 🎉 العربية ẞ',
  bidi: 'invoice_\u202Efdp.exe\u202C | \u2067isolated\u2069 \u202Aembedded\u202C \u202Doverride\u202C \u2066x\u2068y\u2069',
  nul: 'a\u0000b\u0000\u0007c \u001b[31mred\u001b[0m \u000b\u000c',
  surrogate: 'lone \uD800 and \uDFFF surrogates',
  markdown:
    '# Heading\n---\n===\n* list\n1. item\n> quote\n[link](http://x) ![img](x) $x^2$ &amp; **bold** _it_ ~~del~~\n    indented code\n~~~\nfence\n~~~',
  backslashEnd: 'ends with a backslash \\',
};

const ALL = Object.values(HOSTILE).join('\n');

let n = 0;
function record(overrides: Partial<StoredRecord> & { state: JobState }): StoredRecord {
  n++;
  return {
    v: 1,
    id: `r${String(n).padStart(5, '0')}`,
    backend: 'claude',
    model: 'sonnet',
    prompt: 'p',
    cwd: '/tmp',
    timeoutS: 60,
    extra: {},
    createdAt: '2026-05-01T12:00:00.000Z',
    startedAt: '2026-05-01T12:00:01.000Z',
    endedAt: '2026-05-01T12:00:31.500Z',
    owner: { pid: 1 },
    ...overrides,
  };
}

const ctx = { runPath: (id: string) => `.polyspawn/runs/${id}` };

function documentOf(records: StoredRecord[], active: ActiveRow[] = []): string {
  return renderDocument({
    now: Date.parse('2026-05-01T13:00:00Z'),
    active,
    entries: records.map((r) => renderEntry(r, ctx)),
    totalFinished: records.length,
    storePath: '.polyspawn',
  });
}

describe('escaping primitives', () => {
  test('a fence is longer than any backtick run inside it, so nothing inside closes it', () => {
    for (let k = 0; k <= 30; k++) {
      const text = `before\n${ticks(k)}\nafter ${ticks(k)}x`;
      const f = fence(text);
      const fenceLen = /^`+/.exec(f)![0].length;
      expect(fenceLen).toBeGreaterThan(k);
      expect(fenceLen).toBeGreaterThanOrEqual(3);
    }
  });

  test('clean: CRLF and CR to LF, NUL and control characters and lone surrogates to U+FFFD, ANSI colours removed', () => {
    expect(clean('a\r\nb\rc')).toBe('a\nb\nc');
    expect(clean('a\u0000b\u0007')).toBe('a\uFFFDb\uFFFD');
    expect(clean('\u001b[31mred\u001b[0m')).toBe('red');
    expect(clean('x\uD800y')).toBe('x\uFFFDy');
    expect(clean('🎉 tab\tnewline\n')).toBe('🎉 tab\tnewline\n');
  });

  test('clean: Unicode bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) to U+FFFD', () => {
    const controls = '\u202A\u202B\u202C\u202D\u202E\u2066\u2067\u2068\u2069';
    expect(clean(`a${controls}b`)).toBe(`a${'\uFFFD'.repeat(9)}b`);
    expect(inline('exe.\u202Etxt')).toBe('exe.\uFFFDtxt');
    expect(clean('Hebrew שלום and Arabic العربية, marks \u200E\u200F kept')).toBe(
      'Hebrew שלום and Arabic العربية, marks \u200E\u200F kept',
    );
  });

  test('inline: one line, every Markdown and HTML trigger escaped', () => {
    expect(inline('a | b\nc')).toBe('a \\| b c');
    expect(inline('<b>*x*</b> `c` [l](u) $m$ &amp;')).toBe('\\<b\\>\\*x\\*\\</b\\> \\`c\\` \\[l\\](u) \\$m\\$ \\&amp;');
  });

  test('shorten: at a line end near the limit, never inside a surrogate pair', () => {
    expect(shorten('abc', 10)).toEqual({ text: 'abc', cut: 0 });
    const emoji = '🎉'.repeat(10);
    const cut = shorten(emoji, 5);
    expect(cut.text).toBe('🎉🎉');
    expect(cut.cut).toBe(16);
    expect(shorten('line1\nline2\nline3', 13).text).toBe('line1\nline2\n');
  });
});

describe('IAC.md with hostile content', () => {
  test.each(Object.entries(HOSTILE))(
    '%s: in the prompt, result, error, model and task, the document parses and round-trips',
    (_name, text) => {
      const rec = record({
        state: 'failed',
        model: `model ${text.slice(0, 200)}`,
        prompt: `${text}\n\nsecond paragraph ${text}`,
        outcome: { ok: false, text, error: `error: ${text}`, costSource: 'estimated', costUsd: 0.0123 },
        conversation: [
          { kind: 'progress', at: '2026-05-01T12:00:02Z', text },
          { kind: 'question', at: '2026-05-01T12:00:03Z', messageId: 'q1', text, options: [text, 'b'] },
          { kind: 'answer', at: '2026-05-01T12:00:04Z', messageId: 'q1', text },
          { kind: 'question', at: '2026-05-01T12:00:05Z', messageId: 'q2', text },
        ],
      });
      const ok = record({
        state: 'succeeded',
        prompt: text,
        outcome: { ok: true, text: `${text}\n${text}`, costSource: 'reported', costUsd: 1.5 },
      });
      const active: ActiveRow[] = [
        {
          id: 'act001',
          state: 'running',
          backend: 'claude',
          model: text.slice(0, 50),
          task: taskLine(text),
          createdAt: '2026-05-01T12:59:00Z',
          startedAt: '2026-05-01T12:59:30Z',
          questions: [{ kind: 'question', at: '2026-05-01T12:59:40Z', messageId: 'q1', text, options: [text] }],
          progress: { text, at: '2026-05-01T12:59:35Z' },
        },
      ];
      const doc = documentOf([rec, ok], active);
      const parsed = parseIac(doc);

      expect(parsed.activeHeader).toEqual(['Agent', 'Status', 'Backend', 'Model', 'Task', 'Started', 'Elapsed']);
      expect(parsed.active).toHaveLength(1);
      expect(parsed.active[0]![0]).toBe('act001');
      expect(parsed.active[0]![4]).toBe(inlineText(taskLine(text)) || '—');

      expect(parsed.entries.map((e) => e.id)).toEqual([rec.id, ok.id]);
      for (const [entry, source] of [
        [parsed.entries[0]!, rec],
        [parsed.entries[1]!, ok],
      ] as const) {
        expect(entry.header).toEqual(['Started', 'Duration', 'Tokens', 'Cost']);
        expect(entry.cells).toHaveLength(4);
        expect(entry.prompt).toBe(expectedFence(shorten(source.prompt, PROMPT_CHARS).text));
        expect(entry.task).toBe(inlineText(taskLine(source.prompt)) || '—');
        expect(entry.result).toBe(
          source.outcome!.text ? expectedFence(shorten(source.outcome!.text, RESULT_CHARS).text) : undefined,
        );
      }
      expect(parsed.entries[0]!.heading).toContain(inlineText(rec.model));
      expect(parsed.entries[0]!.error).toBe(
        expectedFence(
          shorten(rec.outcome!.error!, 2000).text +
            (rec.outcome!.error!.length > 2000
              ? `\n… (${rec.outcome!.error!.length - shorten(rec.outcome!.error!, 2000).text.length} more characters: \`result\` tool)`
              : ''),
        ),
      );
      expect(parsed.entries[0]!.cells[3]).toBe('$0.0123 (estimated)');
      expect(parsed.entries[1]!.error).toBeUndefined(); // no error block for a success
      expect(doc).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/); // no bidi control reorders what a reader sees
    },
  );

  test('the conversation: in order in the entry, a question never answered marked; open ones under the active table', () => {
    const rec = record({
      state: 'interrupted',
      conversation: [
        { kind: 'progress', at: '2026-05-01T12:00:02Z', text: 'reading' },
        { kind: 'question', at: '2026-05-01T12:00:03Z', messageId: 'q1', text: 'Which db?', options: ['pg', 'sqlite'] },
        { kind: 'answer', at: '2026-05-01T12:00:04Z', messageId: 'q1', text: 'pg' },
        { kind: 'question', at: '2026-05-01T12:00:05Z', messageId: 'q2', text: 'And *the* port?' },
      ],
    });
    const active: ActiveRow = {
      id: 'act002',
      state: 'running',
      backend: 'codex',
      model: 'm',
      task: 't',
      createdAt: '2026-05-01T12:59:00Z',
      startedAt: '2026-05-01T12:59:30Z',
      questions: [{ kind: 'question', at: '2026-05-01T12:59:40Z', messageId: 'q1', text: 'Proceed?' }],
      progress: { text: 'running | tests', at: '2026-05-01T12:59:35Z' },
    };
    const doc = documentOf([rec], [active]);
    expect(doc).toContain(
      [
        '**Conversation with the orchestrator:**',
        '',
        '- 2026-05-01 12:00:02Z · progress: reading',
        '- 2026-05-01 12:00:03Z · **asked** `q1`: Which db? (options: pg / sqlite)',
        '- 2026-05-01 12:00:04Z · **answered** `q1`: pg',
        '- 2026-05-01 12:00:05Z · **asked** `q2`: And \\*the\\* port? · _never answered_',
      ].join('\n'),
    );
    expect(doc).toContain(
      '**Waiting for the orchestrator** (it answers with `reply_subagent`):\n\n- `act002` asks `q1` (2026-05-01 12:59:40Z): Proceed?',
    );
    expect(doc).toContain('**Progress:**\n\n- `act002` (2026-05-01 12:59:35Z): running \\| tests');
    expect(parseIac(doc).entries).toHaveLength(1);
  });

  test('everything at once, in 50 entries: each closed, each once, newest first as given', () => {
    const records = Array.from({ length: 50 }, (_, i) =>
      record({
        state: (['succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted'] as const)[i % 5]!,
        prompt: `${i}: ${ALL}`,
        outcome: { ok: i % 5 === 0, text: ALL, error: ALL, costSource: 'unknown' },
      }),
    );
    const parsed = parseIac(documentOf(records));
    expect(parsed.entries.map((e) => e.id)).toEqual(records.map((r) => r.id));
    for (const e of parsed.entries) expect(e.prompt.length).toBeGreaterThan(0);
  });

  test('long results and prompts are cut, with where to find the whole', () => {
    const long = record({
      state: 'succeeded',
      prompt: 'P'.repeat(PROMPT_CHARS + 5000),
      outcome: { ok: true, text: 'R'.repeat(RESULT_CHARS * 3), costSource: 'unknown' },
    });
    const parsed = parseIac(documentOf([long]));
    const [entry] = parsed.entries;
    expect(entry!.result!.length).toBeLessThanOrEqual(RESULT_CHARS + 1);
    expect(entry!.prompt.length).toBeLessThanOrEqual(PROMPT_CHARS + 1);
    expect(entry!.notes.join('\n')).toContain(`.polyspawn/runs/${long.id}/prompt.txt`);
    expect(entry!.notes.join('\n')).toContain(`.polyspawn/runs/${long.id}/stdout.log`);
    expect(entry!.notes.join('\n')).toMatch(/`?result`? tool with agent_id/);
  });

  test('every state renders, and an empty store says so', () => {
    const states: JobState[] = ['succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted'];
    const parsed = parseIac(
      documentOf(
        states.map((state) =>
          record({
            state,
            prompt: state,
            outcome: { ok: state === 'succeeded', text: '', error: `${state} error`, costSource: 'unknown' },
          }),
        ),
      ),
    );
    expect(parsed.entries.map((e) => e.heading.split(' ').pop())).toEqual([
      'succeeded',
      'failed',
      'out',
      'cancelled',
      'interrupted',
    ]);
    expect(parsed.entries.filter((e) => e.error).length).toBe(4);
    const empty = documentOf([]);
    expect(parseIac(empty).entries).toEqual([]);
    expect(empty).toContain('No agents running or queued');
  });
});

/** What a reader sees of inline() text: the cleaned single line. */
function inlineText(s: string): string {
  return clean(s)
    .replace(/\s*\n\s*/g, ' ')
    .trim();
}

/** What a reader sees inside fence(): the cleaned text, ending with one newline. */
function expectedFence(s: string): string {
  const c = clean(s);
  return c === '' || c.endsWith('\n') ? c : `${c}\n`;
}

describe('budgets', () => {
  test('an entry says which budget its job passed, and whether it was stopped; one within its budget says nothing', () => {
    const stopped = renderEntry(
      record({
        state: 'failed',
        maxTurns: 3,
        outcome: { ok: false, text: '', error: 'stopped', costSource: 'unknown', budgetExceeded: 'turns' },
      }),
      ctx,
    );
    expect(stopped).toContain('**Budget:** passed max_turns (3): stopped');
    const finished = renderEntry(
      record({
        state: 'succeeded',
        maxBudgetUsd: 0.5,
        outcome: { ok: true, text: 'a', costSource: 'estimated', costUsd: 0.7, budgetExceeded: 'cost' },
      }),
      ctx,
    );
    expect(finished).toContain('**Budget:** passed max_budget_usd (0.5): seen once it had finished');
    const within = renderEntry(
      record({ state: 'succeeded', maxTurns: 3, outcome: { ok: true, text: 'a', costSource: 'unknown' } }),
      ctx,
    );
    expect(within).not.toContain('Budget');
  });
});
