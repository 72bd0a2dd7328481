// A running job's conversation with the orchestrator, in the job table: questions bounded,
// answers once and only while it runs, waits woken by questions and answers (never by timers).
import { describe, expect, test } from 'vitest';
import { CONVERSATION_LIMITS } from '../../src/jobs/conversation.js';
import { JobTable, type Executor, type JobRecord, type JobRequest } from '../../src/jobs/table.js';

const request: JobRequest = { backend: 'fake', model: 'm', prompt: 'p', cwd: '/', timeoutS: 10, extra: {} };

/** A table whose jobs run until the test ends them. */
function table() {
  const ends = new Map<string, () => void>();
  const execute: Executor = (job) =>
    new Promise((resolve) =>
      ends.set(job.id, () =>
        resolve({ state: 'succeeded', outcome: { ok: true, text: 'done', costSource: 'unknown' } }),
      ),
    );
  const jobs = new JobTable({ concurrency: 4, execute });
  const started = async () => {
    const job = jobs.submit(request);
    while (job.state !== 'running') await new Promise((r) => setTimeout(r, 1));
    return job;
  };
  const end = async (job: JobRecord) => {
    ends.get(job.id)!();
    while (job.state === 'running') await new Promise((r) => setTimeout(r, 1));
  };
  return { jobs, started, end };
}

const LONG_MS = 60_000;
const WOKEN_WITHIN_MS = 20_000;

describe('a running job asks', () => {
  test('at most 5 open questions at once, 50 in all: the rest are refused with what to do', async () => {
    const { jobs, started } = table();
    const job = await started();
    const refusals: string[] = [];
    for (let i = 0; i < 100; i++) {
      try {
        jobs.ask(job.id, `question ${i}`);
      } catch (error) {
        refusals.push((error as Error).message);
      }
    }
    expect(refusals).toHaveLength(95);
    expect(refusals[0]).toBe(
      '5 questions (q1, q2, q3, q4, q5) are waiting for answers already: wait for them with check_message_status before asking more',
    );
    // Answered ones make room, up to the run's total.
    for (let n = 1; n <= CONVERSATION_LIMITS.questions; n++) {
      jobs.reply(job.id, `q${n}`, 'a');
      if (n + 5 <= CONVERSATION_LIMITS.questions) jobs.ask(job.id, 'more');
    }
    expect(() => jobs.ask(job.id, 'one too many')).toThrow(/has asked 50 questions, the most one run may/);
  });

  test('a wait for the job is woken by its question, once; the answer wakes the agent', async () => {
    const { jobs, started } = table();
    const job = await started();
    const t0 = Date.now();
    const waiting = jobs.waitFor([job.id], { timeoutMs: LONG_MS, mode: 'all' });
    setTimeout(() => jobs.ask(job.id, 'Which?', ['a', 'b']), 5);
    const woken = await waiting;
    expect(Date.now() - t0).toBeLessThan(WOKEN_WITHIN_MS);
    expect(woken.pending[0]!.conversation).toEqual([
      expect.objectContaining({ kind: 'question', messageId: 'q1', text: 'Which?', options: ['a', 'b'] }),
    ]);
    // Returned once: a second wait is not woken by the same question (it times out here).
    const again = await jobs.waitFor([job.id], { timeoutMs: 50, mode: 'all' });
    expect(again.pending).toHaveLength(1);

    const answer = jobs.waitForAnswer(job.id, 'q1', LONG_MS);
    const t1 = Date.now();
    setTimeout(() => jobs.reply(job.id, 'q1', 'b'), 5);
    expect(await answer).toEqual({ status: 'answered', answer: 'b' });
    expect(Date.now() - t1).toBeLessThan(WOKEN_WITHIN_MS);
    // Asked again after it was answered: at once.
    expect(await jobs.waitForAnswer(job.id, 'q1', LONG_MS)).toEqual({ status: 'answered', answer: 'b' });
  });

  test('no answer in time: pending; the job ending: pending; its question stays unanswered', async () => {
    const { jobs, started, end } = table();
    const job = await started();
    const q = jobs.ask(job.id, 'Anyone?');
    expect(await jobs.waitForAnswer(job.id, q.messageId, 20)).toEqual({ status: 'pending' });
    const waiting = jobs.waitForAnswer(job.id, q.messageId, LONG_MS);
    const t0 = Date.now();
    await end(job);
    expect(await waiting).toEqual({ status: 'pending' });
    expect(Date.now() - t0).toBeLessThan(WOKEN_WITHIN_MS);
    expect(() => jobs.reply(job.id, q.messageId, 'late')).toThrow(
      `agent ${job.id} has ended (succeeded): its question q1 can no longer be answered`,
    );
    expect(() => jobs.ask(job.id, 'again?')).toThrow(`agent ${job.id} is not running (succeeded): its run has ended`);
  });

  test('reply: an unknown agent, an unknown message, twice: each a clear error', async () => {
    const { jobs, started } = table();
    const job = await started();
    jobs.ask(job.id, 'Go?');
    expect(() => jobs.reply('nosuch', 'q1', 'x')).toThrow('no agent with id "nosuch"');
    expect(() => jobs.reply(job.id, 'q7', 'x')).toThrow(
      `agent ${job.id} asked no question "q7": its open questions are q1`,
    );
    jobs.reply(job.id, 'q1', 'yes');
    expect(() => jobs.reply(job.id, 'q1', 'no')).toThrow(/was answered already/);
    expect(() => jobs.waitForAnswer(job.id, 'q9', 10)).toThrow(/no question "q9" in this run/);
  });

  test('the first answer wins, from any door; a later one is told who answered', async () => {
    const { jobs, started } = table();
    const job = await started();
    for (const by of ['user', 'dashboard', 'orchestrator'] as const) {
      const q = jobs.ask(job.id, `Go? (${by})`, undefined, 'user');
      expect(q.to).toBe('user');
      jobs.reply(job.id, q.messageId, 'first', by);
      const said = {
        user: "by the user, in the client's dialog at",
        dashboard: 'by the dashboard at',
        orchestrator: 'by the orchestrator (reply_subagent) at',
      }[by];
      for (const later of ['user', 'dashboard', 'orchestrator'] as const)
        expect(() => jobs.reply(job.id, q.messageId, 'second', later)).toThrow(
          `question ${q.messageId} of agent ${job.id} was answered already, ${said}`,
        );
    }
    expect(job.conversation?.filter((e) => e.kind === 'answer').map((e) => e.kind === 'answer' && e.by)).toEqual([
      'user',
      'dashboard',
      'orchestrator',
    ]);
    // A question to the orchestrator keeps no addressee on the record, as before addressees existed.
    expect(jobs.ask(job.id, 'plain').to).toBeUndefined();
  });

  test('a question offers each option once', async () => {
    const { jobs, started } = table();
    const job = await started();
    expect(() => jobs.ask(job.id, 'pick', ['a', 'b', 'a'], 'user')).toThrow(
      'option 3 repeats option 1: offer each choice once',
    );
    expect(job.conversation ?? []).toEqual([]);
  });

  test("another server's running agent is answered through that server", () => {
    const theirs: JobRecord = {
      ...request,
      id: 'other1',
      state: 'running',
      createdAt: '2026-11-26T00:00:00Z',
      conversation: [{ kind: 'question', at: '2026-11-26T00:00:01Z', messageId: 'q1', text: 'Go?' }],
    };
    const jobs = new JobTable({
      concurrency: 1,
      execute: () => new Promise(() => {}),
      store: { claimId: () => false, get: (id) => (id === theirs.id ? theirs : undefined), finished: () => [] },
    });
    expect(() => jobs.reply('other1', 'q1', 'yes')).toThrow(
      'agent other1 runs in another polyspawn server on this project: answer it through that one',
    );
  });

  test('progress: one line, the newest shown, the first hundred kept', async () => {
    const { jobs, started } = table();
    const job = await started();
    for (let i = 0; i < 150; i++) jobs.reportProgress(job.id, `step ${i}\n  of many`);
    expect(job.progress?.text).toBe('step 149 of many');
    expect(job.conversation!.filter((e) => e.kind === 'progress')).toHaveLength(CONVERSATION_LIMITS.progressLines);
    jobs.reportProgress(job.id, 'x'.repeat(1000));
    expect(job.progress!.text).toHaveLength(CONVERSATION_LIMITS.progressChars);
  });

  test("the length limits are the table's, whatever door the text came through: refused, nothing recorded", async () => {
    const { jobs, started } = table();
    const job = await started();
    const L = CONVERSATION_LIMITS;
    expect(() => jobs.ask(job.id, 'q'.repeat(L.questionChars + 1))).toThrow(
      `the question holds ${L.questionChars + 1} characters, more than the ${L.questionChars} it may: shorten it`,
    );
    expect(() => jobs.ask(job.id, '')).toThrow('the question is empty');
    const tooMany = Array.from({ length: L.options + 1 }, (_, i) => `option ${i}`);
    expect(() => jobs.ask(job.id, 'Which?', tooMany)).toThrow(
      `the question offers ${L.options + 1} options, more than the ${L.options} it may: offer fewer`,
    );
    expect(() => jobs.ask(job.id, 'Which?', ['a', 'o'.repeat(L.optionChars + 1)])).toThrow(
      /^option 2 holds 201 characters, more than the 200 it may/,
    );
    expect(() => jobs.reportProgress(job.id, 'p'.repeat(L.progressInputChars + 1))).toThrow(
      `the progress line holds ${L.progressInputChars + 1} characters, more than the ${L.progressInputChars} it may`,
    );
    expect(job.conversation ?? []).toEqual([]);
    expect(job.progress).toBeUndefined();

    const q = jobs.ask(job.id, 'q'.repeat(L.questionChars), ['a', 'o'.repeat(L.optionChars)]);
    expect(() => jobs.reply(job.id, q.messageId, 'a'.repeat(L.answerChars + 1))).toThrow(
      `the answer holds ${L.answerChars + 1} characters, more than the ${L.answerChars} it may: shorten it`,
    );
    expect(() => jobs.reply(job.id, q.messageId, '')).toThrow('the answer is empty: write at least one character');
    expect(job.conversation!.filter((e) => e.kind === 'answer')).toEqual([]);
    jobs.reply(job.id, q.messageId, 'a'.repeat(L.answerChars));
    expect(job.conversation!.filter((e) => e.kind === 'answer')).toHaveLength(1);
  });
});
