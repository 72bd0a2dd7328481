// peer_ring: a debate of `rounds` rounds; in each, every member sees the others' previous answers
// and revises its own. A member that fails drops out and the debate goes on without it. The
// team's answer is the last round's answers, or a judge's verdict on them.
import { DEFAULT_ROUNDS, memberOption, roundsOption } from '../spec.js';
import type { TeamRecord } from '../record.js';
import type { TeamRun, Topology, TopologyOutcome } from '../topology.js';
import { plannedStep, slotsIn, type TeamView } from '../view.js';
import { answerText, failureLine, labelled, succeeded, type MemberAnswer } from './answers.js';

async function runPeerRing(run: TeamRun): Promise<TopologyOutcome> {
  const { spec } = run;
  const rounds = spec.rounds ?? DEFAULT_ROUNDS;
  /** Each debater's newest answer, by its index in members. */
  const latest = new Map<number, MemberAnswer>();
  let active = spec.members.map((_, i) => i);
  for (let round = 1; round <= rounds; round++) {
    run.event('round', `round ${round} of ${rounds}: ${active.length} member(s)`);
    const jobs = active.map((i) => {
      const member = spec.members[i]!;
      const others = active.filter((j) => j !== i && latest.has(j)).map((j) => latest.get(j)!);
      const own = latest.get(i);
      const ask =
        round === 1
          ? `You are one of ${active.length} members of a debate of ${rounds} round(s). Give your answer.`
          : `Round ${round} of ${rounds} of a debate. Your previous answer:\n\n${own ? answerText(own.job).trim() : '(none)'}\n\n` +
            `The other members' previous answers:\n\n${labelled(others)}\n\nRevise your answer: keep what holds, correct what the others showed wrong, and say where you still disagree.`;
      return { i, member, job: run.start(member, `round ${round}`, `${run.brief()}\n\n---\n\n${ask}`) };
    });
    const done = await Promise.all(jobs.map(async (j) => ({ ...j, job: await run.finished(j.job) })));
    for (const { i, member, job } of done) {
      const answer: MemberAnswer = { role: `member ${i + 1}`, member, job };
      if (succeeded(answer)) {
        latest.set(i, answer);
        run.event('answer', `round ${round}: member ${i + 1} (${member}) answered`, job.id);
      } else {
        latest.delete(i);
        run.event('failed', `round ${round}: ${failureLine(answer)}; the debate goes on without it`, job.id);
      }
    }
    active = done.filter((d) => latest.get(d.i)?.job.id === d.job.id).map((d) => d.i);
    if (active.length === 0) return { ok: false, answer: '', error: `every member failed by round ${round}` };
  }
  const final = active.map((i) => latest.get(i)!);
  const dropped = spec.members.length - active.length;
  const note = dropped ? `${dropped} member(s) dropped out of the debate (see its events)` : undefined;
  if (!spec.judge) return { ok: true, answer: labelled(final), note };
  const verdict = await run.finished(
    run.start(
      spec.judge,
      'judge',
      `${run.brief()}\n\n---\n\nA debate of ${rounds} round(s) ended with these answers, labelled by member. Judge them and give the verdict: the best answer, and why.\n\n${labelled(final)}`,
    ),
  );
  const judge: MemberAnswer = { role: 'judge', member: spec.judge, job: verdict };
  if (!succeeded(judge)) {
    run.event('failed', failureLine(judge), verdict.id);
    return { ok: false, answer: labelled(final), error: `the judge failed: ${failureLine(judge)}` };
  }
  run.event('answer', `judge (${spec.judge}) gave the verdict`, verdict.id);
  return { ok: true, answer: answerText(verdict), note };
}

/** The rounds (each with its members, planned ones as the spec names them), then the judge. */
function debateView(team: TeamRecord): TeamView {
  const { spec } = team;
  const steps = Array.from({ length: spec.rounds ?? DEFAULT_ROUNDS }, (_, i) => {
    const started = slotsIn(team, `round ${i + 1}`);
    return { title: `round ${i + 1}`, slots: started.length ? started : spec.members.map((member) => ({ member })) };
  });
  if (spec.judge) steps.push(plannedStep(team, 'judge', spec.judge));
  return { steps, tables: [] };
}

export const peerRing: Topology = {
  name: 'peer_ring',
  description: 'a debate of options.rounds, options.judge decides.',
  options: { judge: memberOption, rounds: roundsOption },
  refuse: (spec) => (spec.members.length < 2 ? 'a debate needs at least two members' : undefined),
  plannedAgents: (spec) => spec.members.length * (spec.rounds ?? DEFAULT_ROUNDS) + (spec.judge ? 1 : 0),
  view: debateView,
  run: runPeerRing,
};
