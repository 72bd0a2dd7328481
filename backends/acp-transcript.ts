// An ACP run's log (AcpLogLine: every message either way, and polyspawn's notes) read as the
// transcript a person follows: the agent's message and thoughts (streamed in pieces, joined), its
// tool calls (a command, an edit with its diff, another tool) completed by their updates, the
// permission requests with what they carried and the answer sent, plans, and what polyspawn said.
// Measured shapes (test/fixtures/cli-samples/acp-*.jsonl): one agent announces a tool call and
// fills in its command in an update, another asks permission for a call it never announced, the
// diff of an edit comes in the request or in the completing update.
import type { StepStatus, TranscriptEntry } from './types.js';
import { argumentsText, asNumber, asString, contentText, field } from './jsonl.js';

const STATUS: Record<string, StepStatus> = {
  pending: 'running',
  in_progress: 'running',
  completed: 'ok',
  failed: 'failed',
};

const PLAN_STATUS = ['pending', 'in_progress', 'completed'] as const;

/** The transcript entries of one line of an ACP run's log. */
export function acpTranscript(line: Record<string, unknown>): TranscriptEntry[] {
  const said = field(line, 'polyspawn');
  if (said !== undefined) {
    const error = asString(field(said, 'error'));
    const note = asString(field(said, 'note'));
    return error ? [{ kind: 'error', text: error }] : note ? [{ kind: 'notice', text: note }] : [];
  }
  const message = field(line, 'message');
  const method = asString(field(message, 'method'));
  const params = field(message, 'params');
  if (line.from === 'client') {
    if (method === 'session/load')
      return [{ kind: 'notice', text: `resumes session ${String(field(params, 'sessionId'))}: its history follows` }];
    const outcome = field(message, 'result', 'outcome');
    if (method === undefined && typeof field(outcome, 'outcome') === 'string') {
      const chosen = asString(field(outcome, 'optionId'));
      return [{ kind: 'notice', text: chosen ? `permission answered: ${chosen}` : 'permission request cancelled' }];
    }
    return [];
  }
  if (line.from !== 'agent') return [];
  if (method === 'session/update') return updateEntries(field(params, 'update'));
  if (method === 'session/request_permission') {
    const call = field(params, 'toolCall');
    const options = field(params, 'options');
    const names = (Array.isArray(options) ? options : []).map((o) => asString(field(o, 'name'))).filter(Boolean);
    return [
      { kind: 'notice', text: `asks permission for ${toolTitle(call)} (${names.join(' / ')})` },
      ...toolEntries(call, 'running'),
    ];
  }
  if (method !== undefined) return [];
  const error = field(message, 'error');
  if (error !== undefined)
    return [{ kind: 'error', text: `the agent answered with an error: ${String(field(error, 'message'))}` }];
  const stop = asString(field(message, 'result', 'stopReason'));
  return stop && stop !== 'end_turn' ? [{ kind: 'notice', text: `the turn ended: ${stop}` }] : [];
}

function updateEntries(update: unknown): TranscriptEntry[] {
  const text = asString(field(update, 'content', 'text'));
  switch (field(update, 'sessionUpdate')) {
    case 'agent_message_chunk':
      return text ? [{ kind: 'message', text, continues: true }] : [];
    case 'agent_thought_chunk':
      return text ? [{ kind: 'reasoning', text, continues: true }] : [];
    case 'user_message_chunk':
      return text ? [{ kind: 'notice', text: `prompt: ${text}` }] : [];
    case 'tool_call':
      return toolEntries(update, STATUS[String(field(update, 'status'))] ?? 'running');
    case 'tool_call_update':
      return toolUpdate(update);
    case 'plan': {
      const entries = field(update, 'entries');
      return [
        {
          kind: 'plan',
          items: (Array.isArray(entries) ? entries : []).map((entry) => ({
            text: asString(field(entry, 'content')) ?? '',
            status: PLAN_STATUS.find((s) => s === field(entry, 'status')) ?? 'pending',
          })),
        },
      ];
    }
    default:
      // usage, modes, commands, the session's title: bookkeeping.
      return [];
  }
}

const toolTitle = (call: unknown) =>
  asString(field(call, 'title')) ??
  asString(field(call, 'kind')) ??
  asString(field(call, 'toolCallId')) ??
  'a tool call';

/** The command a call runs: its input's `command` (a string, or argv), else its title. */
function commandOf(call: unknown): string | undefined {
  const command = field(call, 'rawInput', 'command');
  if (typeof command === 'string') return command;
  if (Array.isArray(command)) return command.map(String).join(' ');
  return field(call, 'kind') === 'execute' ? toolTitle(call) : undefined;
}

/** A tool call (as announced, asked about, or updated with its input) as steps: each diff an edit, a command, or a tool. */
function toolEntries(call: unknown, status: StepStatus): TranscriptEntry[] {
  const id = asString(field(call, 'toolCallId'));
  const content = field(call, 'content');
  const diffs = (Array.isArray(content) ? content : []).filter((c) => field(c, 'type') === 'diff');
  if (diffs.length) {
    return diffs.map((diff, n) => {
      const before = field(diff, 'oldText');
      return {
        kind: 'edit',
        ...(id !== undefined ? { id: n === 0 ? id : `${id}/${n}` } : {}),
        path: asString(field(diff, 'path')) ?? '',
        change: before === null || before === undefined ? 'add' : 'update',
        status,
        ...(typeof before === 'string' ? { before } : {}),
        after: asString(field(diff, 'newText')) ?? '',
      };
    });
  }
  const command = commandOf(call);
  if (command !== undefined) return [{ kind: 'command', id, command, status }];
  return [{ kind: 'tool', id, name: toolTitle(call), input: argumentsText(field(call, 'rawInput')), status }];
}

/**
 * A tool_call_update: what it adds to the call (its input, its diff) replaces the step; a final
 * status completes it with the output (its text content, else its raw output) and an exit code.
 */
function toolUpdate(update: unknown): TranscriptEntry[] {
  const id = asString(field(update, 'toolCallId'));
  if (!id) return [];
  const status = STATUS[String(field(update, 'status'))];
  const content = field(update, 'content');
  const hasDiff = Array.isArray(content) && content.some((c) => field(c, 'type') === 'diff');
  const entries: TranscriptEntry[] =
    hasDiff || field(update, 'rawInput', 'command') !== undefined ? toolEntries(update, status ?? 'running') : [];
  if (status === 'ok' || status === 'failed') {
    const texts = (Array.isArray(content) ? content : []).map((c) => field(c, 'content'));
    const raw = field(update, 'rawOutput');
    const output = contentText(texts) || asString(raw) || asString(field(raw, 'content')) || '';
    const code = field(update, '_meta', 'terminal_exit', 'exit_code');
    entries.push({
      kind: 'done',
      id,
      status,
      ...(typeof code === 'number' ? { exitCode: asNumber(code) } : {}),
      ...(output ? { output } : {}),
    });
  }
  return entries;
}
