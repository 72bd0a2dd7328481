// An ACP agent's `session/request_permission`, answered by the job's policy: allowed, refused, or
// asked as a question on the job, with the tool call and the diff it would apply. The question is
// the user's (a permission is theirs to give): on a spawn made as an MCP task their client's
// dialog shows it; elsewhere it reaches the orchestrator marked as meant for the user. The
// dashboard and reply_subagent answer it too, the first answer winning.
import type { PermissionOption, RequestPermissionRequest, RequestPermissionResponse } from '@agentclientprotocol/sdk';
import { CONVERSATION_LIMITS, type Question } from '../conversation.js';
import type { JobTable } from '../table.js';

/** What answering by asking needs of the job table. */
export type Questions = Pick<JobTable, 'ask' | 'waitForAnswer'>;

const selected = (option: PermissionOption | undefined): RequestPermissionResponse =>
  option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } };

const firstOfKind = (options: readonly PermissionOption[], kinds: readonly string[]) =>
  kinds.map((kind) => options.find((o) => o.kind === kind)).find(Boolean);

export const allowOnce = (request: RequestPermissionRequest) =>
  selected(firstOfKind(request.options, ['allow_once', 'allow_always']));
export const rejectOnce = (request: RequestPermissionRequest) =>
  selected(firstOfKind(request.options, ['reject_once', 'reject_always']));

/** How long one wait for the answer blocks before it is renewed (the job's time-out ends it). */
const ANSWER_POLL_MS = 10 * 60_000;

/**
 * Asks the user and waits, until answered or `signal` (the turn ended: cancel, time-out). An
 * answer that names an option (its name or id) chooses it; "allow" or "yes" the agent's
 * allow-once option; anything else (a declined dialog too) refuses.
 */
export async function askPermission(
  questions: Questions,
  jobId: string,
  request: RequestPermissionRequest,
  signal: AbortSignal,
): Promise<{ response: RequestPermissionResponse; question: Question; answer?: string }> {
  const options = request.options.slice(0, CONVERSATION_LIMITS.options);
  // An agent may name two options alike; a question offers each choice once (the first is the one an answer names).
  const names = [...new Set(options.map((o) => clip(o.name, CONVERSATION_LIMITS.optionChars)))];
  const question = questions.ask(jobId, permissionQuestion(request), names, 'user');
  for (;;) {
    const wait = await questions.waitForAnswer(jobId, question.messageId, ANSWER_POLL_MS, signal);
    if (wait.status === 'answered') return { response: chosen(request, wait.answer), question, answer: wait.answer };
    if (signal.aborted) return { response: { outcome: { outcome: 'cancelled' } }, question };
  }
}

function chosen(request: RequestPermissionRequest, answer: string): RequestPermissionResponse {
  const said = answer.trim().toLowerCase();
  const named = request.options.find((o) => o.name.toLowerCase() === said || o.optionId.toLowerCase() === said);
  if (named) return selected(named);
  return /^(allow|yes|y|ok|approve)\b/.test(said) ? allowOnce(request) : rejectOnce(request);
}

/** The question: what the tool call is, what it would run or change (each diff's path, old and new text), and how to answer. */
export function permissionQuestion(request: RequestPermissionRequest): string {
  const call = request.toolCall;
  const head = `The agent asks permission for ${call.kind ?? 'a tool call'}: ${call.title ?? call.toolCallId}`;
  const parts: string[] = [];
  for (const content of call.content ?? []) {
    if (content.type !== 'diff') continue;
    parts.push(
      `${content.oldText == null ? 'new file' : 'edit'} ${content.path}\n--- before\n${content.oldText ?? ''}\n+++ after\n${content.newText}`,
    );
  }
  if (parts.length === 0 && call.rawInput !== undefined) parts.push(`input: ${JSON.stringify(call.rawInput)}`);
  const how = `Answer with an option's name (${request.options.map((o) => o.name).join(' / ')}), or "allow" / "deny".`;
  const room = CONVERSATION_LIMITS.questionChars - head.length - how.length - 4;
  return `${head}\n${clip(parts.join('\n'), room)}\n${how}`;
}

const clip = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, Math.max(0, max - 16))}… (clipped)` : text;
