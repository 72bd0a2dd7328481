// How members' answers are handed on: labelled by member, failures said, for the next member
// (a reducer, the next stage, a debater, a judge) and for the team's answer.
import type { JobRecord } from '../../table.js';

export type MemberAnswer = { role: string; member: string; job: JobRecord };

export const succeeded = (a: MemberAnswer) => a.job.state === 'succeeded';

export const answerText = (job: JobRecord) =>
  job.outcome?.structured !== undefined ? JSON.stringify(job.outcome.structured) : (job.outcome?.text ?? '');

/** "### member 2: claude (agent k3x9qp)" and its answer, or what went wrong. */
export function labelled(answers: MemberAnswer[]): string {
  return answers
    .map((a) => {
      const head = `### ${a.role}: ${a.member} (agent ${a.job.id})`;
      if (succeeded(a)) return `${head}\n\n${answerText(a.job).trim()}`;
      return `${head}: ${a.job.state.toUpperCase()}\n\n${a.job.outcome?.error ?? 'no answer'}`;
    })
    .join('\n\n');
}

export const failureLine = (a: MemberAnswer) =>
  `${a.role} (${a.member}, agent ${a.job.id}) ${a.job.state}${a.job.outcome?.error ? `: ${a.job.outcome.error}` : ''}`;
