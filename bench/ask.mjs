// Two-way channel (issue 12): how soon the orchestrator hears a question and the agent its
// answer, through the built server with the Node fake codex (test/fakes/bin/codex), one agent
// at a time. Each round: spawn_codex with `[[cli:ask:...]]`, wait_for_agents (long time-out)
// until it returns the question, reply_subagent, wait_for_agents until the job has finished
// (its text carries the fake's clock: `[[cli:ask-clock]]`, test/fakes/fake-parent.mjs).
//   ask      the fake's ask_parent call (its clock, as it calls) → wait_for_agents has returned
//            the question (this process's clock); target ≤ 100 ms, issue 12's bound. Also the
//            server's part: the question recorded (its asked_at) → wait_for_agents returned.
//   answer   reply_subagent sent → the fake's ask_parent call has returned the answer
// The floor of each: a `list` call's round trip over the same stdio connection, made while
// the agent waits for its answer (a call that waits for nothing). The clocks are Date.now()
// of three processes on one machine: 1 ms resolution.
import { rmSync } from 'node:fs';
import { figure, median, percentile, report, startServer } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);

const server = await startServer();

async function round(i) {
  const { agent_id } = await server.call('spawn_codex', {
    prompt: `bench round ${i} [[cli:ask:Round ${i}: go on?]] [[cli:ask-clock]]`,
  });
  const waited = await server.call('wait_for_agents', { agent_ids: [agent_id], timeout_s: 600 });
  const wokenAt = Date.now();
  const question = waited.questions?.[0];
  if (waited.timed_out || !question) throw new Error(`round ${i}: no question: ${JSON.stringify(waited)}`);

  const t0 = performance.now();
  await server.call('list', {});
  const floor = performance.now() - t0;

  const repliedAt = Date.now();
  await server.call('reply_subagent', { agent_id, message_id: question.message_id, answer: `yes ${i}` });
  let done;
  while (!done) done = (await server.call('wait_for_agents', { agent_ids: [agent_id], timeout_s: 600 })).finished[0];
  const clock = /^ANSWER yes \d+ CLOCK (\d+) (\d+)$/.exec(done.text ?? '');
  if (done.state !== 'succeeded' || !clock) throw new Error(`round ${i}: ${JSON.stringify(done).slice(0, 500)}`);
  return {
    ask: wokenAt - Number(clock[1]),
    askServer: wokenAt - Date.parse(question.asked_at),
    answer: Number(clock[2]) - repliedAt,
    floor,
  };
}

// Warm-up: the first agent loads the channel's HTTP stack; not a per-question cost.
await round(0);
const rounds = [];
for (let i = 1; i <= RUNS; i++) rounds.push(await round(i));
await server.close();
rmSync(server.dir, { recursive: true, force: true });

const of = (key) => rounds.map((r) => r[key]);
const floor = median(of('floor'));
const row = (label, key, stat, target, bound) => {
  const value = stat === 'median' ? median(of(key)) : percentile(of(key), 90);
  return figure(`${label} (${stat})`, value, 'ms', {
    floor,
    ratio: value / floor,
    target,
    ...(bound === undefined ? {} : { met: value <= bound }),
  });
};
const ask = 'ask: ask_parent called → wait_for_agents returned the question';
const answer = 'answer: reply_subagent sent → ask_parent returned the answer';
report('ask', [
  row(ask, 'ask', 'median', '≤ 100 ms (floor: a list round trip)', 100),
  row(ask, 'ask', 'p90', '≤ 100 ms (floor: a list round trip)', 100),
  row('ask, server part: question recorded → wait_for_agents returned', 'askServer', 'median', ''),
  row(answer, 'answer', 'median', 'for information (floor: a list round trip)'),
  row(answer, 'answer', 'p90', 'for information (floor: a list round trip)'),
]);
console.log(
  `rounds: ${RUNS} (after a warm-up), one agent at a time; floor: a list call's round trip, median ${floor.toFixed(1)} ms, p90 ${percentile(of('floor'), 90).toFixed(1)} ms`,
);
