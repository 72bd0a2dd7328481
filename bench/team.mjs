// Teams (issue 13): a three-member map_reduce costs little more than its slowest member. The
// members are the Node fake CLIs (claude, codex, copilot), each given one item whose directive
// sets its delay (500, 1000 and 2000 ms); the floor is the slowest member alone, a spawn of the
// same fake with the same 2000 ms delay, run to its end the same way (wait_for_agents).
import { rmSync } from 'node:fs';
import { figure, median, report, startServer } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const DELAYS = [500, 1000, 2000];

const server = await startServer();

async function untilDone(id, pick) {
  for (;;) {
    const waited = await server.call('wait_for_agents', { agent_ids: [id], timeout_s: 600 });
    const done = pick(waited);
    if (done) return done;
  }
}

async function team(i) {
  const t0 = performance.now();
  const { team_id } = await server.call('run_team', {
    topology: 'map_reduce',
    members: ['claude', 'codex', 'copilot'],
    task: `bench team ${i}`,
    options: { items: DELAYS.map((ms) => `[[cli:sleep:${ms}]]`) },
  });
  const done = await untilDone(team_id, (w) => w.teams.find((t) => t.state !== 'running'));
  if (done.state !== 'succeeded') throw new Error(`team ${i}: ${JSON.stringify(done).slice(0, 500)}`);
  return performance.now() - t0;
}

async function slowestAlone(i) {
  const t0 = performance.now();
  const { agent_id } = await server.call('spawn_copilot', {
    prompt: `bench alone ${i} [[cli:sleep:${DELAYS.at(-1)}]]`,
  });
  const done = await untilDone(agent_id, (w) => w.finished[0]);
  if (done.state !== 'succeeded') throw new Error(`alone ${i}: ${JSON.stringify(done).slice(0, 500)}`);
  return performance.now() - t0;
}

// Warm-up: the first CLI job of a server loads the channel's HTTP stack.
await slowestAlone(0);
const teams = [];
const alone = [];
for (let i = 1; i <= RUNS; i++) {
  alone.push(await slowestAlone(i));
  teams.push(await team(i));
}
await server.close();
rmSync(server.dir, { recursive: true, force: true });

const value = median(teams);
const floor = median(alone);
report('team', [
  figure('map_reduce of 3 members (500/1000/2000 ms), run_team → finished (median)', value, 'ms', {
    floor,
    ratio: value / floor,
    target: '≤ 1.2x the slowest member alone',
    met: value / floor <= 1.2,
  }),
]);
console.log(`runs: ${RUNS} of each, alternating; floor: spawn_copilot with the 2000 ms delay alone, median of ${RUNS}`);
