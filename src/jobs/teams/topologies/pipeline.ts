// pipeline: stages in order, each given the task and the previous stage's answer. A failed stage
// ends the team (on_failure "continue": the next stage gets the last answer that came through).
import { z } from 'zod';
import { LimitReached, type TeamRun, type Topology, type TopologyOutcome } from '../topology.js';
import { answerText, failureLine, succeeded, type MemberAnswer } from './answers.js';
import { plannedStep } from '../view.js';

async function runPipeline(run: TeamRun): Promise<TopologyOutcome> {
  const { spec } = run;
  const n = spec.members.length;
  let previous: MemberAnswer | undefined;
  let failures = 0;
  for (const [i, member] of spec.members.entries()) {
    const role = `stage ${i + 1}`;
    const handOn = previous
      ? `You are stage ${i + 1} of ${n} of a pipeline. ${previous.role} (${previous.member}) answered:\n\n${answerText(previous.job).trim()}`
      : `You are stage 1 of ${n} of a pipeline: your answer goes to the next stage.`;
    let job;
    try {
      job = await run.finished(run.start(member, role, `${run.brief()}\n\n---\n\n${handOn}`));
    } catch (error) {
      // Stopped by the budget: the answer so far is the last stage's that came through.
      if (error instanceof LimitReached && previous)
        return { ok: false, answer: answerText(previous.job), error: error.message };
      throw error;
    }
    const answer: MemberAnswer = { role, member, job };
    if (succeeded(answer)) {
      run.event('answer', `${role} (${member}) answered`, job.id);
      previous = answer;
      continue;
    }
    failures++;
    run.event('failed', failureLine(answer), job.id);
    if (spec.onFailure !== 'continue')
      return {
        ok: false,
        answer: previous ? answerText(previous.job) : '',
        error: `the pipeline stopped at ${failureLine(answer)}`,
      };
  }
  if (!previous) return { ok: false, answer: '', error: 'every stage failed' };
  return {
    ok: true,
    answer: answerText(previous.job),
    note: failures ? `${failures} stage(s) failed and were passed over (on_failure: continue)` : undefined,
  };
}

export const pipeline: Topology = {
  name: 'pipeline',
  description: 'each stage gets the last answer.',
  options: { on_failure: z.enum(['stop', 'continue']) },
  optionsNote: 'on_failure (pipeline: stop|continue)',
  refuse: (spec) =>
    spec.members.length < 2
      ? 'a pipeline needs at least two stages (members, in order); for one agent, call its spawn tool'
      : undefined,
  plannedAgents: (spec) => spec.members.length,
  view: (team) => ({ steps: team.spec.members.map((m, i) => plannedStep(team, `stage ${i + 1}`, m)), tables: [] }),
  run: runPipeline,
};
