// A job as the tools return it (the fields tests read), and the waits the e2e and contract tests
// share: spawn and wait for the end, the question an agent asks, the end of an agent that asks,
// its run's log.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { TestServer } from './mcp.js';

export type Job = {
  agent_id: string;
  state: string;
  text?: string;
  error?: string;
  session_id?: string;
  log?: string;
  raw?: unknown;
  usage?: { input_tokens: number; output_tokens: number };
  cost_usd?: number;
  cost_source?: string;
  budget?: { max_turns?: number; max_budget_usd?: number; exceeded?: string };
  worktree?: { path: string; branch: string; kept: boolean; files?: string[]; uncommitted?: string[] };
};

export type Question = {
  agent_id: string;
  message_id: string;
  question: string;
  options?: string[];
  to?: 'user';
  asked_at: string;
};
export type Waited = { finished: Job[]; pending: Job[]; questions?: Question[]; timed_out: boolean };

/** Waits for the agent's end (a wait that is never woken fails here, well before the test's time-out): the job as `result` gives it. */
export async function finished(server: TestServer, id: string, timeoutS = 60): Promise<Job> {
  const waited = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: timeoutS });
  expect(waited.finished, `the job finished within the wait: ${JSON.stringify(waited)}`).toHaveLength(1);
  return server.callOk<Job>('result', { agent_id: id });
}

/** Spawns with `tool`, then waits for the end. */
export async function spawnAndWait(
  server: TestServer,
  tool: string,
  args: Record<string, unknown>,
  timeoutS = 60,
): Promise<Job> {
  return finished(server, (await server.callOk<Job>(tool, args)).agent_id, timeoutS);
}

/** The one question the agent asks: the wait must be woken by it. */
export async function questionOf(server: TestServer, id: string, timeoutS = 60): Promise<Question> {
  const waited = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: timeoutS });
  expect(waited.timed_out, JSON.stringify(waited)).toBe(false);
  expect(waited.questions, JSON.stringify(waited)).toHaveLength(1);
  return waited.questions![0]!;
}

/**
 * Waits until the agent has finished, each wait woken early by a new question, which `answer`
 * (if given) answers; the job as `result` gives it, and the questions asked.
 */
export async function finishedAfterQuestions(
  server: TestServer,
  id: string,
  answer?: (question: Question) => string,
  timeoutS = 60,
): Promise<{ job: Job; questions: Question[] }> {
  const questions: Question[] = [];
  for (let waits = 0; waits < 10; waits++) {
    const waited = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: timeoutS });
    if (waited.finished.length) return { job: await server.callOk<Job>('result', { agent_id: id }), questions };
    expect(waited.questions?.length, JSON.stringify(waited)).toBeGreaterThan(0);
    for (const question of waited.questions ?? []) {
      questions.push(question);
      if (answer)
        await server.callOk('reply_subagent', {
          agent_id: id,
          message_id: question.message_id,
          answer: answer(question),
        });
    }
  }
  throw new Error(`agent ${id} did not finish`);
}

/** A run's log as it is now. */
export const runLog = (server: TestServer, id: string, stream: 'stdout' | 'stderr' = 'stdout') =>
  readFileSync(join(server.projectDir, '.polyspawn', 'runs', id, `${stream}.log`), 'utf8');
