// A team on the dashboard as what it is: its shape (the steps its topology declares, each with
// its members and their states, planned ones too), what its members share (a task list, a board),
// the teams a supervisor started, and its events as a timeline. The overview shows each team as
// a card with its shape; `/teams/<id>` shows all of it. What to draw comes from the topology's own
// `view` (src/jobs/teams/view.ts), so a new topology needs nothing here. Every text is escaped:
// tasks, answers, board values and task results are agents' writing.
import type { App } from '../../app.js';
import { overlapsOfIds } from '../../jobs/worktree/report.js';
import { isTeamFinished, type TeamRecord } from '../../jobs/teams/record.js';
import { summarizeTeam } from '../../jobs/teams/result.js';
import type { TeamView } from '../../jobs/teams/view.js';
import { agentLink, esc, postButton } from './html.js';
import { teamBudget, usd } from './money.js';

/** How many teams the overview shows, newest first. */
const TEAMS_SHOWN = 20;
const ANSWER_CHARS = 2000;

const STYLE = `<style>
.shape{display:flex;flex-wrap:wrap;gap:.25em 1.6em;list-style:none;padding:0;margin:.5em 0}
.step{position:relative;border:1px solid #c8d0da;border-radius:6px;padding:.3em .6em;background:#fafbfc;min-width:9em}
.shape:not(.together) .step+.step::before{content:"→";position:absolute;left:-1.25em;top:.9em;color:#667}
.step-title{display:block;font-size:12px;color:#445;text-transform:uppercase;letter-spacing:.03em}
.slots{list-style:none;padding:0;margin:.2em 0 0}.slot{margin:.15em 0;padding:.1em .4em;border-radius:4px;border-left:4px solid #999}
.slot small{color:#556}.slot.planned{color:#556;border:1px dashed #8a939d;padding-left:calc(.4em + 3px);background:#fff}
.slot.state-running{border-color:#1f6feb;background:#eef6ff}.slot.state-queued{border-color:#8a939d;background:#f3f4f6}
.slot.state-succeeded{border-color:#1a7f37;background:#eefbf1}.slot.state-failed,.slot.state-timed_out,.slot.state-interrupted{border-color:#cf222e;background:#fff0f0}
.slot.state-cancelled{border-color:#8a939d;background:#f6f6f6;color:#444}
.badge{font-size:12px;padding:0 .35em;border-radius:3px;background:#e6e9ed;color:#222}
.team-state{font-weight:600}.team-state.running{color:#0b5cd5}.team-state.succeeded{color:#1a7f37}.team-state.failed,.team-state.interrupted{color:#b3261e}
.timeline{list-style:none;padding:0;border-left:2px solid #c8d0da;margin-left:.4em}.timeline li{padding:.15em .6em}
.timeline time{color:#445;font-variant-numeric:tabular-nums;display:inline-block;min-width:4.5em}
.kind{display:inline-block;min-width:4.5em;font-size:12px;color:#445}.kind-failed .kind,.kind-budget .kind,.kind-limit .kind{color:#b3261e}
.shared td{max-width:40em;overflow-wrap:anywhere;white-space:pre-wrap}.children{list-style:none;padding:0}
.whole-task{max-height:12em}.children>li{border-left:3px solid #b07aa1;padding-left:.6em;margin:.4em 0}.error{color:#b3261e}
</style>`;

/** The state of the member job `jobId`, as the team last saw it (or the job table, for a job it no longer follows). */
const stateOf = (app: App, team: TeamRecord, jobId: string) =>
  team.members.find((m) => m.jobId === jobId)?.state ?? app.jobs.get(jobId)?.state ?? 'unknown';

/** The steps, left to right, each with its members: a member that started links to its agent. */
function shape(app: App, team: TeamRecord, view: TeamView): string {
  const planned = isTeamFinished(team.state) ? 'not run' : 'not started';
  const slot = ({ member, jobId }: { member: string; jobId?: string }) => {
    if (!jobId) return `<li class="slot planned">${esc(member)} <span class="badge">${planned}</span></li>`;
    const state = stateOf(app, team, jobId);
    return `<li class="slot state-${esc(state)}" data-agent="${esc(jobId)}">${agentLink(jobId, member)} <span class="badge">${esc(state)}</span> <small>${esc(jobId)}</small></li>`;
  };
  const steps = view.steps.map(
    (step) =>
      `<li class="step"><span class="step-title">${esc(step.title)}</span><ul class="slots">${step.slots.map(slot).join('')}</ul></li>`,
  );
  const label = view.together ? 'the parts of the team, at work together' : "the team's steps in order";
  return `<ol class="shape${view.together ? ' together' : ''}" aria-label="${label}">${steps.join('')}</ol>`;
}

/** What the members share: each table as its topology declares it, agents linked, texts redacted. */
function sharedTables(app: App, view: TeamView): string {
  return view.tables
    .map((table) => {
      const cells = (row: (string | { agent: string })[]) =>
        row
          .map(
            (c) => `<td>${typeof c === 'string' ? esc(app.secrets.text(c)) : c.agent ? agentLink(c.agent) : ''}</td>`,
          )
          .join('');
      const body = table.rows.length
        ? `<table class="shared"><tr>${table.columns.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${table.rows.map((r) => `<tr>${cells(r)}</tr>`).join('')}</table>`
        : `<p class="empty">${esc(table.empty)}</p>`;
      return `<h2>${esc(table.title)} (${table.rows.length})</h2>${body}`;
    })
    .join('');
}

/** The team's events in order, each at its time from the team's start. */
function timeline(app: App, team: TeamRecord): string {
  const start = Date.parse(team.createdAt);
  const items = team.events.map((e) => {
    const at = ((Date.parse(e.at) - start) / 1000).toFixed(1);
    const member = e.jobId && team.members.find((m) => m.jobId === e.jobId);
    const who = e.jobId ? ` · ${agentLink(e.jobId, member ? `${member.member}, ${member.role}` : e.jobId)}` : '';
    return `<li class="kind-${esc(e.kind)}"><time datetime="${esc(e.at)}">+${esc(at)} s</time> <span class="kind">${esc(e.kind)}</span> ${esc(app.secrets.text(e.text))}${who}</li>`;
  });
  return items.length
    ? `<ol class="timeline" aria-label="the team's events">${items.join('')}</ol>`
    : '<p class="empty">No event yet.</p>';
}

/** One line of numbers: time, cost, budget, where it came from. */
function facts(app: App, team: TeamRecord): string {
  const t = summarizeTeam(app, team);
  const parent = team.spec.parent;
  return [
    `${t.elapsed_s.toFixed(1)} s`,
    t.cost_usd !== undefined ? esc(usd(t.cost_usd)) : '',
    teamBudget({ maxBudgetUsd: team.spec.maxBudgetUsd, reached: team.budgetReached, spentUsd: t.cost_usd }),
    t.preset ? `preset ${esc(t.preset)}` : '',
    parent
      ? `started by team <a href="/teams/${esc(parent.teamId)}">${esc(parent.teamId)}</a> (agent ${agentLink(parent.jobId)})`
      : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

const heading = (team: TeamRecord, tag: 'h2' | 'h3') =>
  `<${tag}><a href="/teams/${esc(team.id)}">${esc(team.id)}</a> · ${esc(team.spec.topology)} · <span class="team-state ${esc(team.state)}">${esc(team.state)}</span></${tag}>`;

function answerOf(app: App, team: TeamRecord, whole: boolean): string {
  const answer = team.answer ? app.secrets.text(team.answer) : '';
  const shown = !whole && answer.length > ANSWER_CHARS ? `${answer.slice(0, ANSWER_CHARS)}…` : answer;
  return [
    answer
      ? `<details${whole ? ' open' : ''}><summary>Answer</summary><pre class="answer">${esc(shown)}</pre></details>`
      : '',
    team.error && team.state !== 'succeeded' ? `<p class="error">${esc(app.secrets.text(team.error))}</p>` : '',
    team.note ? `<p class="note">${esc(app.secrets.text(team.note))}</p>` : '',
  ].join('');
}

/** A team as the overview shows it: its heading, task, numbers, shape and answer. */
function teamCard(app: App, team: TeamRecord): string {
  const t = summarizeTeam(app, team);
  return `<article class="team state-${esc(team.state)}" data-team="${esc(team.id)}">${heading(team, 'h3')}
<p class="task">${esc(t.task)}</p><p>${facts(app, team)}</p>${shape(app, team, app.teams.view(team))}${answerOf(app, team, false)}</article>`;
}

/** The overview's teams (run_team), newest first. */
export function teamsSection(app: App): string {
  const teams = app.teams.recent(TEAMS_SHOWN);
  return `<section id="teams">${STYLE}<h2>Teams (${teams.length})</h2>${
    teams.length ? teams.map((t) => teamCard(app, t)).join('\n') : '<p class="empty">No team has run.</p>'
  }</section>`;
}

/** The teams a supervisor started, each with its own shape. */
function childTeams(app: App, team: TeamRecord): string {
  const children = (team.children ?? []).flatMap((id) => app.teams.get(id) ?? []);
  if (!children.length) return '';
  const one = (child: TeamRecord) =>
    `<li data-team="${esc(child.id)}">${heading(child, 'h3')}<p class="task">${esc(summarizeTeam(app, child).task)}</p>${shape(app, child, app.teams.view(child))}</li>`;
  return `<h2>Teams it started (${children.length})</h2><ul class="children">${children.map(one).join('')}</ul>`;
}

/** Files that more than one member changed in its worktree: what would collide when they land. */
function memberOverlaps(app: App, team: TeamRecord): string {
  const overlaps = overlapsOfIds(
    (id) => app.jobs.get(id),
    team.members.map((m) => m.jobId),
  );
  if (!overlaps.length) return '';
  const items = overlaps.map(
    (o) =>
      `<li><code>${esc(o.file)}</code>: ${o.agentIds.map((id) => `<a href="/agents/${esc(id)}/review">${esc(id)}</a>`).join(', ')}</li>`,
  );
  return `<h2>Files more than one member changed</h2><ul class="overlaps">${items.join('')}</ul>`;
}

/** The team's page: the section that refreshes as it changes. */
export function teamSection(app: App, team: TeamRecord): string {
  const t = summarizeTeam(app, team);
  const view = app.teams.view(team);
  const cancel = isTeamFinished(team.state)
    ? ''
    : postButton(`/teams/${team.id}/cancel`, 'Cancel the team', {
        confirm: `Cancel team ${team.id} and every member still running?`,
        danger: true,
      });
  const task = app.secrets.text(team.spec.task);
  // A task longer than its first line shown whole, not folded: the section is redrawn as the team changes.
  const shownTask =
    task.trim() === t.task ? `<p class="task">${esc(t.task)}</p>` : `<pre class="prompt whole-task">${esc(task)}</pre>`;
  return `<section id="record" data-team="${esc(team.id)}">${STYLE}${heading(team, 'h2')}
${shownTask}<p>${facts(app, team)}</p>${cancel}
${shape(app, team, view)}${sharedTables(app, view)}${childTeams(app, team)}${memberOverlaps(app, team)}${answerOf(app, team, true)}
<h2>Timeline</h2>${timeline(app, team)}</section>`;
}
