// A running agent's conversation with the orchestrator: the questions it asks (ask_parent), the
// answers it gets (reply_subagent) and the progress lines it reports (report_progress). The
// entries live on the job's record, in order, so the run store keeps them and IAC.md shows them.
// Their limits are checked here, where the entries are kept (JobTable.ask, reply, reportProgress),
// so every door (the tools, the dashboard's form, the channel) gets the same refusal.
import { InputError } from '../lib/errors.js';

/**
 * Whom an agent's question is for: the orchestrating model (the default, as before addressees
 * existed), or the user it works for. A question to the user on a job run as an MCP task opens
 * the client's dialog; elsewhere it reaches the orchestrator marked as meant for the user.
 */
export const ADDRESSEES = ['orchestrator', 'user'] as const;
export type Addressee = (typeof ADDRESSEES)[number];

/** Who gave an answer: reply_subagent, the dashboard's form, or the user in the client's dialog (tasks/update). */
export type AnswerSource = 'orchestrator' | 'dashboard' | 'user';
const SOURCE_WORDS: Record<AnswerSource, string> = {
  orchestrator: 'the orchestrator (reply_subagent)',
  dashboard: 'the dashboard',
  user: "the user, in the client's dialog",
};
export const answeredBy = (by: AnswerSource | undefined) => SOURCE_WORDS[by ?? 'orchestrator'];

export type ConversationEntry =
  | { kind: 'question'; at: string; messageId: string; text: string; options?: string[]; to?: 'user' }
  | { kind: 'answer'; at: string; messageId: string; text: string; by?: AnswerSource }
  | { kind: 'progress'; at: string; text: string };

export type Question = Extract<ConversationEntry, { kind: 'question' }>;

/** What one run may say: open questions are bounded so an agent cannot pile them up. */
export const CONVERSATION_LIMITS = {
  openQuestions: 5,
  questions: 50,
  /** Progress lines kept in the record; later ones still update the current status. */
  progressLines: 100,
  questionChars: 4000,
  options: 10,
  optionChars: 200,
  answerChars: 20_000,
  /** A progress line is cut to progressChars; longer than this it is refused. */
  progressInputChars: 2000,
  progressChars: 300,
} as const;

/** Refuses an empty `text`, or one longer than `max` characters, saying what to change. */
export function checkLength(what: string, text: string, max: number): void {
  if (text.length === 0) throw new InputError(`${what} is empty: write at least one character`);
  if (text.length > max) {
    throw new InputError(
      `${what} holds ${text.length} characters, more than the ${max} it may: shorten it (or put the rest in a file and name the file)`,
    );
  }
}

/** ask_parent's question and options, as JobTable.ask takes them. */
export function checkQuestion(text: string, options: readonly string[] | undefined): void {
  checkLength('the question', text, CONVERSATION_LIMITS.questionChars);
  if (!options) return;
  if (options.length > CONVERSATION_LIMITS.options) {
    throw new InputError(
      `the question offers ${options.length} options, more than the ${CONVERSATION_LIMITS.options} it may: offer fewer`,
    );
  }
  options.forEach((option, i) => {
    checkLength(`option ${i + 1}`, option, CONVERSATION_LIMITS.optionChars);
    const first = options.indexOf(option);
    // A form's choices are a set: a repeated one could not be told apart.
    if (first < i) throw new InputError(`option ${i + 1} repeats option ${first + 1}: offer each choice once`);
  });
}

/** What the agent is told when the user turns its question down in the dialog (decline) or closes it (cancel). */
export const USER_DECLINED =
  'The user declined to answer this question. Decide without their answer, or ask the orchestrator (ask_parent without `to`).';
export const USER_DISMISSED =
  'The user closed the dialog without answering. Decide without their answer, or ask the orchestrator (ask_parent without `to`).';

/** How long ask_parent and check_message_status block: under the 60 s cut-off of common MCP clients. */
export const ANSWER_WAIT_S = 50;

/** Questions not answered yet, oldest first. On a finished job: the ones never answered. */
export function openQuestions(entries: readonly ConversationEntry[] | undefined): Question[] {
  if (!entries) return [];
  const answered = new Set(entries.filter((e) => e.kind === 'answer').map((e) => e.messageId));
  return entries.filter((e): e is Question => e.kind === 'question' && !answered.has(e.messageId));
}

export function findQuestion(entries: readonly ConversationEntry[] | undefined, messageId: string) {
  return entries?.find((e): e is Question => e.kind === 'question' && e.messageId === messageId);
}

export function answerTo(
  entries: readonly ConversationEntry[] | undefined,
  messageId: string,
): Extract<ConversationEntry, { kind: 'answer' }> | undefined {
  return entries?.find(
    (e): e is Extract<ConversationEntry, { kind: 'answer' }> => e.kind === 'answer' && e.messageId === messageId,
  );
}

export const countOf = (entries: readonly ConversationEntry[] | undefined, kind: ConversationEntry['kind']) =>
  entries?.filter((e) => e.kind === kind).length ?? 0;

/** One line of at most `max` characters: a progress line is a status, not a report. */
export function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** The name the channel's MCP server has in every CLI agent's configuration. */
export const PARENT_SERVER = 'parent';
/** The child's environment variable that holds its run's token. */
export const PARENT_TOKEN_ENV = 'POLYSPAWN_PARENT_TOKEN';

/** The one line of the agent's system prompt that tells it the channel is there. */
export const PARENT_PROMPT =
  `When a decision is not yours to make, ask the orchestrator that started you with the ask_parent tool ` +
  `(MCP server "${PARENT_SERVER}"); it waits for the answer, or says "pending": then call check_message_status. ` +
  `report_progress tells the orchestrator what you are doing.`;

/**
 * Where running CLI jobs reach the orchestrator: the MCP layer serves it (src/mcp/channel/), and
 * the executor opens one lease per run.
 */
export type ParentChannel = {
  /** Admits this running job: the URL to reach and the token that admits it, until close(). */
  open(jobId: string): Promise<ChannelLease>;
};

export type ChannelLease = {
  url: string;
  token: string;
  /** The token stops working and the run's sessions end. */
  close(): Promise<void>;
};
