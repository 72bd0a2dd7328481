// A team in IAC.md: one entry with its topology, task, members (linked to their own entries),
// the order of events and the team's answer, cost and tokens.
import { teamTotals, type TeamRecord, type TeamState } from '../src/jobs/teams/record.js';
import { taskLine } from '../src/lib/text.js';
import { fence, inline, shorten, table } from './markdown.js';
import { duration, RESULT_CHARS, statusLabel, time } from './render.js';

const TEAM_STATUS: Record<TeamState, string> = {
  running: statusLabel('running'),
  succeeded: statusLabel('succeeded'),
  failed: statusLabel('failed'),
  cancelled: statusLabel('cancelled'),
  interrupted: statusLabel('interrupted'),
};

/** The anchor of an agent's entry, so a team's entry can link its members. */
const agentAnchor = (id: string) => `agent-${id}`;

const EVENTS_SHOWN = 100;

export function renderTeam(team: TeamRecord): string {
  const totals = teamTotals(team);
  const out: string[] = [];
  const spec = team.spec;
  out.push(`### \`${team.id}\` · \`${spec.topology}\` · ${TEAM_STATUS[team.state] ?? team.state}`);
  out.push('');
  out.push(
    table(
      ['Started', 'Duration', 'Members', 'Tokens', 'Cost'],
      [
        [
          time(team.createdAt),
          team.endedAt && team.state !== 'interrupted'
            ? duration(Date.parse(team.endedAt) - Date.parse(team.createdAt))
            : '—',
          String(team.members.length),
          `${totals.inputTokens} in / ${totals.outputTokens} out`,
          totals.costUsd !== undefined ? `$${totals.costUsd.toFixed(4)}` : '—',
        ],
      ],
    ),
  );
  out.push('');
  out.push(`**Task:** ${inline(taskLine(spec.task)) || '—'}`);
  if (spec.preset) out.push('', `**Preset:** \`${inline(spec.preset)}\``);
  if (spec.parent)
    out.push('', `**Started by:** agent \`${spec.parent.jobId}\` of team \`${inline(spec.parent.teamId)}\``);
  if (team.children?.length) out.push('', `**Teams it started:** ${team.children.map((c) => `\`${c}\``).join(', ')}`);
  out.push('', '**Members:**', '');
  for (const m of team.members)
    out.push(
      `- [\`${m.jobId}\`](#${agentAnchor(m.jobId)}) · ${inline(m.role)} · ${inline(m.member)} · ${statusLabel(m.state)}`,
    );
  if (team.members.length === 0) out.push('- _none started_');
  out.push('', '**Events:**', '');
  for (const e of team.events.slice(-EVENTS_SHOWN)) out.push(`- ${time(e.at)} · ${inline(e.kind)}: ${inline(e.text)}`);
  if (team.events.length > EVENTS_SHOWN)
    out.push(`- _${team.events.length - EVENTS_SHOWN} earlier events: the \`result\` tool with the team id_`);
  if (team.answer) {
    const answer = shorten(team.answer, RESULT_CHARS);
    out.push('', "**The team's answer:**", '', fence(answer.text));
    if (answer.cut)
      out.push('', `_Cut: ${answer.cut} more characters. The whole: the \`result\` tool with \`${team.id}\`._`);
  }
  if (team.note) out.push('', `**Note:** ${inline(team.note)}`);
  if (team.error && team.state !== 'succeeded') out.push('', '**Error:**', '', fence(team.error));
  return out.join('\n');
}
