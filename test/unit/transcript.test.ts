// Each CLI backend's transcript(): its recorded stdout (test/fixtures/cli-samples, measured on the
// real CLIs against a fake model API) read as neutral transcript entries; and the dashboard's
// TranscriptStream folding them into steps and rendering them with every text escaped.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { claude } from '../../backends/claude.js';
import { codex } from '../../backends/codex.js';
import { copilot } from '../../backends/copilot.js';
import { jsonLines } from '../../backends/jsonl.js';
import { acpBackend } from '../../backends/acp.js';
import { ACP_PRESETS } from '../../backends/acp-presets.js';
import type { CliBackend, TranscriptEntry } from '../../backends/types.js';
import { loadRenderers } from '../../src/mcp/dashboard/markdown.js';
import { TranscriptStream } from '../../src/mcp/dashboard/transcript.js';
import { repoRoot } from '../helpers/mcp.js';

const SAMPLES = join(repoRoot, 'test', 'fixtures', 'cli-samples');

const entriesOf = (backend: CliBackend, sample: string): TranscriptEntry[] =>
  jsonLines(readFileSync(join(SAMPLES, sample), 'utf8')).records.flatMap((r) => backend.transcript!(r));

describe('claude', () => {
  test('a Bash tool call, its result and exit code, then the message', () => {
    expect(entriesOf(claude, 'claude-stream-json-tool.jsonl')).toEqual([
      { kind: 'command', id: 'toolu_fake_91', command: 'echo tool-ran', status: 'running' },
      { kind: 'done', id: 'toolu_fake_91', status: 'ok', output: 'tool-ran', exitCode: 0 },
      { kind: 'message', text: 'TOOL_RESULT: tool-ran' },
    ]);
  });

  test('a retried request is a notice; an API error ends in an error entry', () => {
    expect(entriesOf(claude, 'claude-stream-json-429-once-retried.jsonl')[0]).toMatchObject({
      kind: 'notice',
      text: expect.stringMatching(/failed \(429\); retry 1 of 10 in 1\.2 s/),
    });
    expect(entriesOf(claude, 'claude-stream-json-api-error-401.jsonl').at(-1)).toMatchObject({
      kind: 'error',
      text: expect.stringContaining('401'),
    });
  });

  test('a run stopped at max_turns says so as an error', () => {
    expect(entriesOf(claude, 'claude-stream-json-max-turns.jsonl').at(-1)).toMatchObject({
      kind: 'error',
      text: expect.stringContaining('maximum number of turns'),
    });
  });

  // No recorded sample edits a file or writes a todo list: these are the tool inputs Claude Code documents.
  test('Edit, Write, TodoWrite and an MCP tool', () => {
    const message = (block: object) => ({ type: 'assistant', message: { content: [block] } });
    const edit = {
      type: 'tool_use',
      id: 'e1',
      name: 'Edit',
      input: { file_path: 'a.ts', old_string: 'x', new_string: 'y' },
    };
    const write = { type: 'tool_use', id: 'w1', name: 'Write', input: { file_path: 'b.ts', content: 'z' } };
    const todo = {
      type: 'tool_use',
      id: 't1',
      name: 'TodoWrite',
      input: {
        todos: [
          { content: 'one', status: 'completed' },
          { content: 'two', status: 'in_progress' },
        ],
      },
    };
    const mcp = { type: 'tool_use', id: 'm1', name: 'mcp__parent__ask_parent', input: { question: 'Q?' } };
    expect([edit, write, todo, mcp].flatMap((b) => claude.transcript!(message(b)))).toEqual([
      { kind: 'edit', id: 'e1', path: 'a.ts', change: 'update', status: 'running', before: 'x', after: 'y' },
      { kind: 'edit', id: 'w1', path: 'b.ts', change: 'write', status: 'running', after: 'z' },
      {
        kind: 'plan',
        items: [
          { text: 'one', status: 'completed' },
          { text: 'two', status: 'in_progress' },
        ],
      },
      { kind: 'tool', id: 'm1', name: 'ask_parent', server: 'parent', input: '{"question":"Q?"}', status: 'running' },
    ]);
    const failed = {
      type: 'user',
      message: {
        content: [{ type: 'tool_result', tool_use_id: 'b1', is_error: true, content: 'Exit code 2\nno such file' }],
      },
    };
    expect(claude.transcript!(failed)).toEqual([
      { kind: 'done', id: 'b1', status: 'failed', exitCode: 2, output: 'Exit code 2\nno such file' },
    ]);
  });
});

describe('codex', () => {
  test('a command started, then completed with its output and exit code, then the message', () => {
    expect(entriesOf(codex, 'codex-exec-json-tool.jsonl')).toEqual([
      { kind: 'command', id: 'item_0', command: 'echo hi', status: 'running', output: '' },
      { kind: 'command', id: 'item_0', command: 'echo hi', status: 'ok', exitCode: 0, output: 'hi\n' },
      { kind: 'message', text: expect.stringContaining('TOOL_RESULT') },
    ]);
  });

  test('a command the sandbox refused fails with its exit code', () => {
    expect(entriesOf(codex, 'codex-exec-json-sandbox-read-only-denied.jsonl')[1]).toMatchObject({
      kind: 'command',
      command: 'touch made.txt && echo wrote',
      status: 'failed',
      exitCode: 1,
      output: expect.stringContaining('Read-only file system'),
    });
  });

  test('a failed turn is an error, a reconnect a notice', () => {
    expect(entriesOf(codex, 'codex-exec-json-error-401.jsonl')).toEqual([
      { kind: 'notice', text: expect.stringContaining('401 Unauthorized') },
      { kind: 'error', text: expect.stringContaining('401 Unauthorized') },
    ]);
    expect(entriesOf(codex, 'codex-exec-json-429-once-retried.jsonl')[0]).toMatchObject({
      kind: 'notice',
      text: expect.stringContaining('Reconnecting'),
    });
  });

  // No recorded sample has these items: the shapes are codex's exec events (exec_events.rs).
  test('file changes, a todo list and an MCP tool call', () => {
    const item = (i: object) => codex.transcript!({ type: 'item.completed', item: i });
    expect(
      item({
        id: 'f',
        type: 'file_change',
        status: 'completed',
        changes: [
          { path: 'a', kind: 'add' },
          { path: 'b', kind: 'update' },
        ],
      }),
    ).toEqual([
      { kind: 'edit', id: 'f/0', path: 'a', change: 'add', status: 'ok' },
      { kind: 'edit', id: 'f/1', path: 'b', change: 'update', status: 'ok' },
    ]);
    expect(
      item({
        id: 't',
        type: 'todo_list',
        items: [
          { text: 'one', completed: true },
          { text: 'two', completed: false },
        ],
      }),
    ).toEqual([
      {
        kind: 'plan',
        items: [
          { text: 'one', status: 'completed' },
          { text: 'two', status: 'pending' },
        ],
      },
    ]);
    expect(
      item({
        id: 'm',
        type: 'mcp_tool_call',
        server: 'parent',
        tool: 'ask_parent',
        arguments: { question: 'Q?' },
        status: 'completed',
        result: { content: [{ type: 'text', text: '{"answer":"A"}' }] },
      }),
    ).toEqual([
      {
        kind: 'tool',
        id: 'm',
        name: 'ask_parent',
        server: 'parent',
        input: '{"question":"Q?"}',
        status: 'ok',
        output: '{"answer":"A"}',
      },
    ]);
  });
});

describe('copilot', () => {
  test('a bash tool call and its completion with exit code, then the message', () => {
    expect(entriesOf(copilot, 'copilot-json-tool.jsonl')).toEqual([
      { kind: 'command', id: 'call_fake_38', command: 'touch made.txt && echo wrote', status: 'running' },
      { kind: 'done', id: 'call_fake_38', status: 'ok', exitCode: 0, output: 'wrote' },
      { kind: 'message', text: expect.stringContaining('TOOL_RESULT: wrote') },
    ]);
  });

  test("a tool call refused for want of permission fails with copilot's message; an auth error is an error", () => {
    expect(entriesOf(copilot, 'copilot-json-tool-permission-denied.jsonl')[1]).toMatchObject({
      kind: 'done',
      status: 'failed',
      output: expect.stringContaining('Permission denied'),
    });
    expect(entriesOf(copilot, 'copilot-json-api-error-401.jsonl').at(-1)).toMatchObject({
      kind: 'error',
      text: expect.stringContaining('Authentication failed'),
    });
    expect(entriesOf(copilot, 'copilot-json-429-once-retried.jsonl')[0]).toMatchObject({ kind: 'notice' });
  });

  // No recorded sample edits a file: copilot's edit and create tools, as its tool calls name them.
  test('edit and create', () => {
    const start = (toolName: string, args: object) =>
      copilot.transcript!({ type: 'tool.execution_start', data: { toolCallId: 'c', toolName, arguments: args } });
    expect(start('edit', { path: 'a', old_str: 'x', new_str: 'y' })).toEqual([
      { kind: 'edit', id: 'c', path: 'a', change: 'update', status: 'running', before: 'x', after: 'y' },
    ]);
    expect(start('create', { path: 'b', file_text: 'z' })).toEqual([
      { kind: 'edit', id: 'c', path: 'b', change: 'add', status: 'running', after: 'z' },
    ]);
  });
});

// The ACP presets' real message logs (test/contract/acp.test.ts against the fake model API).
describe('an ACP agent', () => {
  const acp = acpBackend({ ...ACP_PRESETS.copilot!, name: 'acp' });

  test('a command announced, asked about, answered and completed, then the message', () => {
    expect(entriesOf(acp, 'acp-copilot-shell-permission.jsonl')).toEqual([
      {
        kind: 'command',
        id: 'call_fake_1',
        command: 'echo copilot_acp > copilot_acp-written.txt',
        status: 'running',
      },
      { kind: 'notice', text: 'asks permission for fake tool call (Allow once / Always allow / Deny)' },
      {
        kind: 'command',
        id: 'call_fake_1',
        command: 'echo copilot_acp > copilot_acp-written.txt',
        status: 'running',
      },
      { kind: 'notice', text: 'permission q1 answered "allow": {"outcome":"selected","optionId":"allow_once"}' },
      { kind: 'notice', text: 'permission answered: allow_once' },
      { kind: 'done', id: 'call_fake_1', status: 'ok', output: '\n<shellId: 0 completed with exit code 0>' },
      { kind: 'message', text: 'TOOL_RESULT: \n<shellId: 0 completed with exit code 0>', continues: true },
    ]);
  });

  test('a command whose input comes in an update; one that ends with an exit code', () => {
    const claude = entriesOf(acp, 'acp-claude-shell-permission.jsonl');
    expect(claude.slice(0, 2)).toEqual([
      { kind: 'command', id: 'toolu_fake_5', command: 'Terminal', status: 'running' },
      { kind: 'command', id: 'toolu_fake_5', command: 'echo claude_acp > claude_acp-written.txt', status: 'running' },
    ]);
    expect(claude).toContainEqual({
      kind: 'done',
      id: 'toolu_fake_5',
      status: 'ok',
      output: '(Bash completed with no output)',
    });
    expect(entriesOf(acp, 'acp-codex-shell-permission.jsonl')).toContainEqual({
      kind: 'done',
      id: 'call_fake_13',
      status: 'ok',
      exitCode: 0,
    });
  });

  test('an edit never announced: the permission request carries its diff, the completing update too', () => {
    const entries = entriesOf(acp, 'acp-gemini-write-permission.jsonl');
    const edit = {
      kind: 'edit',
      id: expect.stringMatching(/^write_file__/),
      path: expect.stringMatching(/gemini-acp\.txt$/),
      change: 'update',
      before: '',
      after: 'written over acp',
    };
    expect(entries[0]).toEqual({
      kind: 'notice',
      text: 'asks permission for Writing to gemini-acp.txt (Allow for this session / Allow / Reject)',
    });
    expect(entries[1]).toEqual({ ...edit, status: 'running' });
    expect(entries).toContainEqual({ ...edit, status: 'ok' });
    // The message came in two pieces, each joined to the one before.
    expect(entries.filter((e) => e.kind === 'message')).toHaveLength(2);
  });

  test("a cancelled turn says so; a plan, thoughts, a new file, another tool, the agent's error, polyspawn's notes", () => {
    expect(entriesOf(acp, 'acp-copilot-cancel.jsonl')).toEqual([{ kind: 'notice', text: 'the turn ended: cancelled' }]);
    // Shapes from the ACP schema (no preset here was seen sending them against the fake model API).
    const update = (u: object) => ({ from: 'agent', message: { method: 'session/update', params: { update: u } } });
    const lines = [
      update({
        sessionUpdate: 'plan',
        entries: [
          { content: 'read', priority: 'high', status: 'completed' },
          { content: 'write', priority: 'low', status: 'in_progress' },
          { content: 'odd', status: 'strange' },
        ],
      }),
      update({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } }),
      update({
        sessionUpdate: 'tool_call',
        toolCallId: 'n',
        kind: 'edit',
        status: 'pending',
        content: [{ type: 'diff', path: '/p/new.txt', oldText: null, newText: 'new' }],
      }),
      update({ sessionUpdate: 'tool_call', toolCallId: 'f', title: 'Fetch', kind: 'fetch', rawInput: { url: 'u' } }),
      update({ sessionUpdate: 'tool_call_update', toolCallId: 'f', status: 'failed', rawOutput: { content: 'no' } }),
      { from: 'agent', message: { id: 3, error: { code: -32603, message: 'boom' } } },
      { polyspawn: { note: 'a note' } },
      { polyspawn: { error: 'it failed' } },
      { from: 'client', message: { method: 'session/load', params: { sessionId: 's1' } } },
      { from: 'client', message: { id: 4, result: { outcome: { outcome: 'cancelled' } } } },
    ];
    expect(lines.flatMap((l) => acp.transcript!(l))).toEqual([
      {
        kind: 'plan',
        items: [
          { text: 'read', status: 'completed' },
          { text: 'write', status: 'in_progress' },
          { text: 'odd', status: 'pending' },
        ],
      },
      { kind: 'reasoning', text: 'hmm', continues: true },
      { kind: 'edit', id: 'n', path: '/p/new.txt', change: 'add', status: 'running', after: 'new' },
      { kind: 'tool', id: 'f', name: 'Fetch', input: '{"url":"u"}', status: 'running' },
      { kind: 'done', id: 'f', status: 'failed', output: 'no' },
      { kind: 'error', text: 'the agent answered with an error: boom' },
      { kind: 'notice', text: 'a note' },
      { kind: 'error', text: 'it failed' },
      { kind: 'notice', text: 'resumes session s1: its history follows' },
      { kind: 'notice', text: 'permission request cancelled' },
    ]);
  });
});

test('every recorded sample line reads without throwing, and each entry is of a known kind', () => {
  const kinds = new Set(['message', 'reasoning', 'command', 'edit', 'tool', 'plan', 'notice', 'error', 'done']);
  const acp = acpBackend({ ...ACP_PRESETS.copilot!, name: 'acp' });
  for (const file of readdirSync(SAMPLES).filter((f) => f.endsWith('.jsonl') || f.endsWith('.json'))) {
    const backend = file.startsWith('acp-')
      ? acp
      : file.startsWith('claude')
        ? claude
        : file.startsWith('codex')
          ? codex
          : copilot;
    for (const entry of entriesOf(backend, file)) expect(kinds.has(entry.kind), `${file}: ${entry.kind}`).toBe(true);
  }
});

describe('the dashboard folds entries into steps and renders them escaped', () => {
  beforeAll(loadRenderers);

  const render = (backend: CliBackend, text: string, answers: Record<string, string> = {}) => {
    const stream = new TranscriptStream(backend.transcript!.bind(backend), {
      jobId: 'job1',
      answerOf: (id) => answers[id],
      openQuestion: () => undefined,
    });
    // Split mid-line, as the log is read a chunk at a time.
    const cut = Math.floor(text.length / 2);
    return [...stream.push(text.slice(0, cut)), ...stream.push(text.slice(cut)), ...stream.end()];
  };

  test("a command's completion replaces its running step, with exit code and output", () => {
    const steps = render(codex, readFileSync(join(SAMPLES, 'codex-exec-json-tool.jsonl'), 'utf8'));
    expect(steps.map((s) => s.id)).toEqual(['step-0', 'step-0', 'step-1']);
    expect(steps[0]!.html).toContain('running');
    expect(steps[1]!.html).toMatch(/\$ echo hi.*exit 0.*hi/s);
  });

  test('an error that repeats the notice before it (codex: error, then turn.failed) takes its place', () => {
    const steps = render(codex, readFileSync(join(SAMPLES, 'codex-exec-json-error-401.jsonl'), 'utf8'));
    expect(steps.map((s) => s.id)).toEqual(['step-0', 'step-0']);
    expect(steps[1]!.html).toMatch(/class="step error".*401 Unauthorized/);
  });

  test("an agent's markup is text in every kind of step; Markdown renders without raw HTML", () => {
    const hostile = '<img src=x onerror=alert(1)><script>alert(2)</script>';
    const lines = [
      {
        type: 'assistant',
        message: { content: [{ type: 'text', text: `**bold** ${hostile} [x](javascript:alert(3))` }] },
      },
      {
        type: 'assistant',
        message: { content: [{ type: 'tool_use', id: 'b', name: 'Bash', input: { command: hostile } }] },
      },
      { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'b', content: hostile }] } },
      {
        type: 'assistant',
        message: {
          content: [
            {
              type: 'tool_use',
              id: 'e',
              name: 'Edit',
              input: { file_path: hostile, old_string: hostile, new_string: 'ok' },
            },
          ],
        },
      },
      'not json ' + hostile,
    ].map((l) => (typeof l === 'string' ? l : JSON.stringify(l)));
    const html = render(claude, lines.join('\n') + '\n')
      .map((s) => s.html)
      .join('\n');
    expect(html).toContain('<strong>bold</strong>');
    expect(html).not.toMatch(/<img|<script|href="javascript/i);
    expect(html).toContain('&lt;script&gt;');
    expect(html).toMatch(/class="del">- &lt;img/);
    expect(html).toMatch(/class="ins">\+ ok/);
  });

  test('a question asked through the channel shows in place with its answer', () => {
    const ask = {
      type: 'assistant',
      message: {
        content: [
          { type: 'tool_use', id: 'q', name: 'mcp__parent__ask_parent', input: { question: 'Which <color>?' } },
        ],
      },
    };
    const pending = {
      type: 'user',
      message: {
        content: [{ type: 'tool_result', tool_use_id: 'q', content: '{"message_id":"m1","status":"pending"}' }],
      },
    };
    const text = [ask, pending].map((l) => JSON.stringify(l)).join('\n') + '\n';
    const [asked, answered] = render(claude, text, { m1: 'blue' });
    expect(asked!.html).toContain('Asked you:</b> Which &lt;color&gt;?');
    expect(asked!.html).toContain('waiting for the answer');
    expect(answered!.id).toBe(asked!.id);
    expect(answered!.html).toContain('<b>Answer:</b> blue');
  });

  test("an ACP agent's message streamed in pieces is one step, rendered once per read; past its length, the rest is left to the log", () => {
    const acp = acpBackend({ ...ACP_PRESETS.copilot!, name: 'acp' });
    const chunk = (text: string) =>
      JSON.stringify({
        from: 'agent',
        message: {
          method: 'session/update',
          params: { update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } } },
        },
      });
    const call = JSON.stringify({
      from: 'agent',
      message: {
        method: 'session/update',
        params: {
          update: { sessionUpdate: 'tool_call', toolCallId: 't', kind: 'execute', rawInput: { command: 'ls' } },
        },
      },
    });
    const stream = new TranscriptStream(acp.transcript!.bind(acp), {
      jobId: 'job1',
      answerOf: () => undefined,
      openQuestion: () => undefined,
    });
    const first = stream.push([chunk('Hello '), chunk('**wor'), chunk('ld**'), call, chunk('after')].join('\n') + '\n');
    expect(first.map((s) => s.id)).toEqual(['step-0', 'step-1', 'step-2']);
    expect(first[0]!.html).toContain('Hello <strong>world</strong>');
    expect(first[1]!.html).toContain('$ ls');
    // A piece read later joins the message still open.
    const later = stream.push(chunk(' and more') + '\n');
    expect(later).toHaveLength(1);
    expect(later[0]!.id).toBe('step-2');
    expect(later[0]!.html).toContain('after and more');
    // 200,000 characters in pieces: the step holds 100,000, shown cut, and takes no more.
    const long = stream.push(Array.from({ length: 200 }, () => chunk('y'.repeat(1000))).join('\n') + '\n');
    expect(long.map((s) => s.id)).toEqual(['step-2']);
    expect(long[0]!.html.slice(-300)).toContain('the whole text is in the log');
    expect(long[0]!.html.length).toBeLessThan(110_000);
    expect(stream.push(chunk('z') + '\n')).toEqual([]);
  });

  test('a line too long to hold is left out and said so; the next lines still read', () => {
    const stream = new TranscriptStream(claude.transcript!.bind(claude), {
      jobId: 'job1',
      answerOf: () => undefined,
      openQuestion: () => undefined,
    });
    const huge = 'x'.repeat(8 * 1024 * 1024 + 1);
    expect(
      stream
        .push(huge)
        .map((s) => s.html)
        .join(''),
    ).toContain('was left out');
    // The rest of that line is neither held nor said again.
    expect(stream.push('x'.repeat(8 * 1024 * 1024 + 1))).toEqual([]);
    const next = JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'after' }] } });
    expect(
      stream
        .push(`tail of the long line\n${next}\n`)
        .map((s) => s.html)
        .join(''),
    ).toContain('after');
  });
});
