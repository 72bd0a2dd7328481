// map_reduce: the task to every member at once (or one item of a list to each), then an optional
// reducer that gets every answer, labelled, and writes the team's answer.
import { z } from 'zod';
import { memberOption, TEAM_LIMITS } from '../spec.js';
import type { TeamRecord } from '../record.js';
import type { TeamRun, Topology, TopologyOutcome } from '../topology.js';
import { plannedStep, type TeamView } from '../view.js';
import { failureLine, labelled, succeeded, answerText, type MemberAnswer } from './answers.js';

async function runMapReduce(run: TeamRun): Promise<TopologyOutcome> {
  const { spec } = run;
  const work = spec.items
    ? spec.items.map((item, i) => ({
        member: spec.members[i % spec.members.length]!,
        role: `item ${i + 1}`,
        prompt: `${run.brief()}\n\n---\n\nYour item (${i + 1} of ${spec.items!.length}):\n\n${item}`,
      }))
    : spec.members.map((member, i) => ({ member, role: `member ${i + 1}`, prompt: run.brief() }));
  const started = work.map((w) => ({ ...w, job: run.start(w.member, w.role, w.prompt) }));
  const answers: MemberAnswer[] = await Promise.all(
    started.map(async (s) => ({ role: s.role, member: s.member, job: await run.finished(s.job) })),
  );
  for (const a of answers) {
    if (succeeded(a)) run.event('answer', `${a.role} (${a.member}) answered`, a.job.id);
    else run.event('failed', failureLine(a), a.job.id);
  }
  const failed = answers.filter((a) => !succeeded(a));
  const all = labelled(answers);
  if (failed.length === answers.length)
    return { ok: false, answer: all, error: `every member failed: ${failed.map(failureLine).join('; ')}` };
  if (!spec.reduceWith) return { ok: true, answer: all };

  const note = failed.length ? `\n\n${failed.length} of ${answers.length} failed (said below); use the others.` : '';
  const reduce = await run.finished(
    run.start(
      spec.reduceWith,
      'reduce',
      `${run.brief()}\n\n---\n\nThe team's ${answers.length} members answered this task; their answers follow, labelled by member.${note} Write the team's answer from them.\n\n${all}`,
    ),
  );
  const reducer: MemberAnswer = { role: 'reduce', member: spec.reduceWith, job: reduce };
  if (!succeeded(reducer)) {
    run.event('failed', failureLine(reducer), reduce.id);
    return { ok: false, answer: all, error: `the reduce step failed: ${failureLine(reducer)}` };
  }
  run.event('answer', `reduce (${spec.reduceWith}) wrote the team's answer`, reduce.id);
  return { ok: true, answer: answerText(reduce) };
}

/** Every member (or item) at once, then the reducer. */
function mapReduceView(team: TeamRecord): TeamView {
  const { spec } = team;
  const roles = spec.items ? spec.items.map((_, i) => `item ${i + 1}`) : spec.members.map((_, i) => `member ${i + 1}`);
  const slots = roles.map((role, i) => ({
    member: spec.members[i % spec.members.length]!,
    jobId: team.members.find((m) => m.role === role)?.jobId,
  }));
  const reduce = spec.reduceWith ? [plannedStep(team, 'reduce', spec.reduceWith)] : [];
  return { steps: [{ title: spec.items ? `map: ${roles.length} items` : 'map', slots }, ...reduce], tables: [] };
}

export const mapReduce: Topology = {
  name: 'map_reduce',
  description: 'each member gets the task (or one of options.items), options.reduce_with merges.',
  options: {
    items: z.array(z.string().min(1).max(TEAM_LIMITS.taskChars)).min(1).max(TEAM_LIMITS.items),
    reduce_with: memberOption,
  },
  plannedAgents: (spec) => (spec.items?.length ?? spec.members.length) + (spec.reduceWith ? 1 : 0),
  view: mapReduceView,
  run: runMapReduce,
};
