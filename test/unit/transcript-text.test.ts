// `logs` with readable: a page of a CLI's or an ACP agent's log as plain text through its
// backend's transcript(), against the recorded samples (test/fixtures/cli-samples).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { acpBackend } from '../../backends/acp.js';
import { ACP_PRESETS } from '../../backends/acp-presets.js';
import { claude } from '../../backends/claude.js';
import { transcriptText } from '../../src/jobs/process/transcript-text.js';
import { repoRoot } from '../helpers/mcp.js';

const sample = (name: string) => readFileSync(join(repoRoot, 'test', 'fixtures', 'cli-samples', name), 'utf8');

test("a claude run: the command with its exit code and output, then the agent's message", () => {
  expect(transcriptText(sample('claude-stream-json-tool.jsonl'), claude.transcript!.bind(claude))).toBe(
    ['$ echo tool-ran  [ok (exit 0)]', '    tool-ran', 'message: TOOL_RESULT: tool-ran'].join('\n'),
  );
});

test('a page that begins after its command: the outcome on a line of its own', () => {
  const lines = sample('claude-stream-json-tool.jsonl').split('\n');
  const started = lines.findIndex((l) => l.includes('"tool_use"'));
  const rest = lines.slice(started + 1).join('\n');
  expect(transcriptText(rest, claude.transcript!.bind(claude)).split('\n').slice(0, 2)).toEqual([
    '  ↳ ok (exit 0)',
    '    tool-ran',
  ]);
});

test("an ACP agent's permission for an edit: the edit with its new text, the streamed message joined", () => {
  const gemini = acpBackend({ ...ACP_PRESETS.gemini!, name: 'gemini_acp' });
  const text = transcriptText(sample('acp-gemini-write-permission.jsonl'), gemini.transcript!.bind(gemini));
  expect(text).toMatch(/gemini-acp\.txt {2}\[ok\]\n {4}\+\+\+ after\n {4}written over acp/);
  expect(text).toContain('message: TOOL_RESULT: Successfully overwrote file');
  // No raw JSON-RPC is left in the readable page.
  expect(text).not.toContain('"jsonrpc"');
});

test('a line that is not JSON is kept as it is; bookkeeping lines are passed over', () => {
  expect(transcriptText('not json\n{"type":"system","subtype":"init"}\n', claude.transcript!.bind(claude))).toBe(
    'not json',
  );
});
