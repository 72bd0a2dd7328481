// Reviewing and landing an isolated agent's work from the page (`/agents/<id>/review`): its
// branch's diff against its base, file by file and hunk by hunk, the files other agents changed
// too, and buttons for the `integrate` modes, discard, and cancel while it runs. The buttons post
// to the dashboard, which calls the same use case as the `integrate` tool, so a refusal reads
// the same. Drawn here from git's own unified diff (src/jobs/worktree/diff.ts parses it): every
// file name and line is the agent's writing, and goes through `esc`.
import type { App } from '../../app.js';
import { fullResult } from '../../jobs/result.js';
import { isFinished, type JobRecord } from '../../jobs/table.js';
import type { BranchDiff, FileDiff } from '../../jobs/worktree/diff.js';
import type { Integration } from '../../jobs/worktree/integrate.js';
import { agentLink, esc, postButton } from './html.js';

const STYLE = `<style>
.files{columns:2 24em;list-style:none;padding:0}.files li{overflow-wrap:anywhere}
.add-n{color:#1a7f37}.del-n{color:#b3261e}.status{font-size:12px;color:#445;display:inline-block;min-width:5.5em}
.file{border:1px solid #d0d7de;border-radius:6px;margin:.75em 0}.file>summary{background:#f6f8fa;padding:.4em .6em;cursor:pointer;overflow-wrap:anywhere}
table.diff{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;border-collapse:collapse;width:100%;margin:0}
table.diff td{border:0;padding:0 .5em;white-space:pre-wrap;overflow-wrap:anywhere}
table.diff td.n{color:#57606a;text-align:right;width:3.5em;user-select:none}
tr.add td{background:#e6ffec}tr.remove td{background:#ffebe9}tr.hunk td{background:#ddf4ff;color:#0a3069}tr.note td{color:#57606a;font-style:italic}
.actions{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:flex-start;margin:.75em 0}.action{margin:0}
.action button{font:inherit;padding:.35em .9em;border-radius:6px;border:1px solid #8c959f;background:#f6f8fa;cursor:pointer}
.action button:hover,.action button:focus-visible{background:#eaeef2;outline:2px solid #0969da}
.danger button{border-color:#cf222e;color:#a40e26}.overlaps li{overflow-wrap:anywhere}.error{color:#b3261e}
</style>`;

/** What each button does, as the integrate tool says it. */
const MODES = [
  ['merge', 'Merge', 'a merge commit of the branch onto your current branch'],
  ['cherry-pick', 'Cherry-pick', "the branch's commits, one by one, onto your current branch"],
  ['patch', 'Show the patch', 'its diff as a patch, applied nowhere'],
] as const;

const countOf = (f: FileDiff) => `<span class="add-n">+${f.added}</span> <span class="del-n">−${f.removed}</span>`;
const pathOf = (f: FileDiff) => (f.from ? `${esc(f.from)} → ${esc(f.path)}` : esc(f.path));

function fileDiff(f: FileDiff, i: number): string {
  const rows = f.hunks.flatMap((h) => [
    `<tr class="hunk"><td class="n"></td><td class="n"></td><td>${esc(h.header)}</td></tr>`,
    ...h.lines.map(
      (l) =>
        `<tr class="${l.kind}"><td class="n">${l.oldLine ?? ''}</td><td class="n">${l.newLine ?? ''}</td><td>${l.kind === 'add' ? '+' : l.kind === 'remove' ? '−' : ' '}${esc(l.text)}</td></tr>`,
    ),
  ]);
  const body = f.binary
    ? '<p class="empty">A binary file: not shown.</p>'
    : rows.length
      ? `<table class="diff">${rows.join('')}</table>`
      : '<p class="empty">No lines changed (its mode or type changed).</p>';
  const cut = f.cut ? '<p class="empty">Cut here: the review shows so much of the diff at most.</p>' : '';
  return `<details class="file" id="file-${i}" open><summary><span class="status">${f.status}</span> <code>${pathOf(f)}</code> ${countOf(f)}</summary>${body}${cut}</details>`;
}

/** The branch's diff: the files it changes, then each with its hunks (the page's, drawn once: a review is read, not refreshed). */
export function diffSection(diff: BranchDiff): string {
  const list = diff.files.map(
    (f, i) => `<li><span class="status">${f.status}</span> <a href="#file-${i}">${pathOf(f)}</a> ${countOf(f)}</li>`,
  );
  const cut = diff.cut
    ? `<p class="note">Part of the diff is left out here: <code>${esc(diff.command)}</code> shows the whole.</p>`
    : '';
  return `<section id="diff">${STYLE}<h2>Files changed (${diff.files.length})</h2>${
    diff.files.length
      ? `<ol class="files">${list.join('')}</ol>${cut}${diff.files.map(fileDiff).join('')}`
      : '<p class="empty">Its branch changes nothing yet.</p>'
  }</section>`;
}

const cancelButton = (job: JobRecord) =>
  isFinished(job.state)
    ? ''
    : postButton(`/agents/${job.id}/cancel`, 'Cancel', {
        confirm: `Stop agent ${job.id} and every process it started?`,
        danger: true,
      });

/** What the agent's page offers: cancel while it runs, and its review when it worked in a worktree. */
export function agentActions(job: JobRecord): string {
  const review = job.isolation === 'worktree' ? `<a href="/agents/${esc(job.id)}/review">Review its branch</a>` : '';
  const cancel = cancelButton(job);
  return cancel || review ? `<div class="actions">${cancel}${review}</div>` : '';
}

function actions(job: JobRecord, problem: Error | undefined): string {
  if (!isFinished(job.state))
    return `<div class="actions">${cancelButton(job)}</div><p class="note">It is ${esc(job.state)}: the diff below is what it has committed so far; what it leaves uncommitted is committed when it ends. Reload then, and land it.</p>`;
  if (problem) return '';
  const modes = MODES.map(
    ([how, label, what]) =>
      `<div>${postButton(`/agents/${job.id}/integrate`, label, { fields: { how } })}<small>${esc(what)}</small></div>`,
  );
  const discard = postButton(`/agents/${job.id}/integrate`, 'Discard', {
    fields: { how: 'discard' },
    confirm: `Discard agent ${job.id}'s work? Its worktree and branch ${job.worktree?.branch ?? ''} are deleted.`,
    danger: true,
  });
  return `<div class="actions">${modes.join('')}<div>${discard}<small>delete its worktree and branch</small></div></div>`;
}

/** The files this agent changed that agents running beside it changed too. */
function overlaps(app: App, job: JobRecord): string {
  const found = fullResult(app, job).worktree?.overlaps ?? [];
  if (!found.length) return '';
  const items = found.map((o) => {
    const others = o.agent_ids.filter((id) => id !== job.id);
    return `<li><code>${esc(o.file)}</code>: also ${others.map((id) => `<a href="/agents/${esc(id)}/review">${esc(id)}</a>`).join(', ')}</li>`;
  });
  return `<h2>Changed by other agents too (${found.length})</h2><p>They ran at the same time from the same base: landing one may conflict with the other.</p><ul class="overlaps">${items.join('')}</ul>`;
}

/** The review's live part (it refreshes as the agent changes): who, what, the buttons, the overlaps; `problem`: why there is nothing to land. */
export function reviewSection(app: App, job: JobRecord, problem: Error | undefined): string {
  const r = fullResult(app, job);
  const wt = job.worktree;
  const where = wt
    ? `<p>Branch <code>${esc(wt.branch)}</code> from <code>${esc(wt.base.slice(0, 12))}</code>${wt.changes?.diffStat ? ` · ${esc(wt.changes.diffStat)}` : ''}</p>`
    : '';
  const notes = (wt?.notes ?? []).map((n) => `<p class="note">${esc(app.secrets.text(n))}</p>`).join('');
  const team = r.team_id
    ? ` · ${esc(r.team_role ?? 'member')} of team <a href="/teams/${esc(r.team_id)}">${esc(r.team_id)}</a>`
    : '';
  return `<section id="record" data-agent="${esc(job.id)}">${STYLE}
<p>${agentLink(job.id)} · ${esc(r.backend)}${r.agent ? ` (${esc(r.agent)})` : ''} · <b>${esc(r.state)}</b>${team}</p>
<p class="task">${esc(r.task)}</p>${where}${notes}${actions(job, problem)}
${problem ? `<p class="error">${esc(problem.message)}</p>` : ''}${overlaps(app, job)}</section>`;
}

/** What an integrate from the page did: as the tool returns it, for a person. */
export function integrationSection(done: Integration): string {
  const id = done.agentId;
  const said = {
    merge: `Merged ${esc(done.branch)} into your branch.`,
    'cherry-pick': `Cherry-picked ${esc(done.branch)} onto your branch.`,
    patch: `The patch of ${esc(done.branch)}: nothing was applied.`,
    discard: `Discarded ${esc(done.branch)}: its worktree and branch are deleted.`,
  }[done.how];
  const commits = done.commits?.length
    ? `<h2>New commits on your branch</h2><ul>${done.commits.map((c) => `<li><code>${esc(c)}</code></li>`).join('')}</ul>`
    : '';
  const files = `<h2>Files (${done.files.length})</h2><ul>${done.files.map((f) => `<li><code>${esc(f)}</code></li>`).join('')}</ul>`;
  const patch = done.patch !== undefined ? `<h2>Patch</h2><pre class="patch">${esc(done.patch)}</pre>` : '';
  const back = done.removed
    ? `<a href="/agents/${esc(id)}">agent ${esc(id)}</a> · <a href="/">overview</a>`
    : `<a href="/agents/${esc(id)}/review">back to the review</a>`;
  return `<section id="integrated" data-how="${esc(done.how)}"><p class="done">${said}</p>${done.note ? `<p class="note">${esc(done.note)}</p>` : ''}${commits}${files}${patch}<p>${back}</p></section>`;
}
