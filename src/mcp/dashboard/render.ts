// The dashboard's HTML, rendered on the server from the job table. Every text that comes from an
// agent or a prompt (tasks, answers, questions, logs, errors, models) goes through `esc`: an
// agent's output is untrusted input to this page. The page's only script is SCRIPT below (no
// CDN, no bundler): it refreshes the sections when the server says a job changed, and appends a
// log as it streams, as text.
import { createHash } from 'node:crypto';
import type { App } from '../../app.js';
import { CONVERSATION_LIMITS } from '../../jobs/conversation.js';
import { fullResult, type JobResult } from '../../jobs/result.js';
import { isFinished, JOB_STATES, type JobRecord } from '../../jobs/table.js';
import { esc } from './html.js';
import { markdown } from './markdown.js';
import { costCell, costSection, elapsedCell, jobBudget } from './money.js';
import { agentActions } from './review.js';
import { teamsSection } from './team-view.js';

type HistoryFilter = { backend?: string; state?: string; text?: string };

/** How many finished agents the history shows. */
const HISTORY_ROWS = 100;

const tokens = (r: JobResult) => (r.usage ? `${r.usage.input_tokens} in / ${r.usage.output_tokens} out` : '');

function agentRow(r: JobResult): string {
  return `<tr data-agent="${esc(r.agent_id)}" class="state-${esc(r.state)}">
<td><a href="/agents/${esc(r.agent_id)}">${esc(r.agent_id)}</a></td>
<td>${r.team_id ? `<a href="/teams/${esc(r.team_id)}">${esc(r.team_id)}</a>` : ''}</td><td>${esc(r.team_role)}</td><td>${esc(r.backend)}${r.agent ? ` (${esc(r.agent)})` : ''}</td>
<td>${esc(r.model)}</td><td class="task">${esc(r.task)}</td><td>${esc(r.state)}</td>${elapsedCell(r)}
<td>${esc(tokens(r))}</td><td class="cost">${costCell(r)}</td></tr>`;
}

const HEAD =
  '<tr><th>agent</th><th>team</th><th>role</th><th>backend</th><th>model</th><th>task</th><th>state</th><th>elapsed</th><th>tokens</th><th>cost</th></tr>';

function questionForms(r: JobResult): string {
  return (r.questions ?? [])
    .map(
      (q) => `<form class="question" method="post" action="/agents/${esc(r.agent_id)}/reply">
<p><b>${esc(r.agent_id)}</b> asks${q.to === 'user' ? ' the user' : ''}: <span class="question-text">${esc(q.question)}</span>${q.options?.length ? ` <i>(${q.options.map(esc).join(' / ')})</i>` : ''}</p>
<input type="hidden" name="message_id" value="${esc(q.message_id)}">
<input name="answer" required maxlength="${CONVERSATION_LIMITS.answerChars}" placeholder="your answer" aria-label="answer to ${esc(r.agent_id)} ${esc(q.message_id)}">
<button type="submit">Answer</button></form>`,
    )
    .join('\n');
}

/** The running and queued agents with their open questions. */
export function activeSection(app: App): string {
  const active = app.jobs
    .all()
    .filter((j) => !isFinished(j.state))
    .reverse()
    .map((j) => fullResult(app, j));
  return `<section id="active"><h2>Running and queued (${active.length})</h2>
${active.map(questionForms).join('\n')}
<div class="scroll"><table>${HEAD}${active.map(agentRow).join('\n')}</table></div>${active.length ? '' : '<p class="empty">No agent is running.</p>'}</section>`;
}

function matches(r: JobResult, f: HistoryFilter): boolean {
  if (f.backend && r.backend !== f.backend) return false;
  if (f.state && r.state !== f.state) return false;
  if (f.text && !`${r.task} ${r.agent_id} ${r.model}`.toLowerCase().includes(f.text.toLowerCase())) return false;
  return true;
}

/** Newest first: the latest to end on top (the same order before and after a restart). */
const newestEnded = (a: JobRecord, b: JobRecord) =>
  (b.endedAt ?? b.createdAt).localeCompare(a.endedAt ?? a.createdAt) || b.createdAt.localeCompare(a.createdAt);

/** The finished agents, newest first, filtered. */
export function historySection(app: App, filter: HistoryFilter): string {
  const finished = app.jobs
    .all()
    .filter((j) => isFinished(j.state))
    .sort(newestEnded)
    .map((j) => fullResult(app, j))
    .filter((r) => matches(r, filter))
    .slice(0, HISTORY_ROWS);
  const option = (value: string, chosen?: string) =>
    `<option value="${esc(value)}"${value === chosen ? ' selected' : ''}>${esc(value || 'any')}</option>`;
  return `<section id="history"><h2>History</h2>
<form method="get" action="/" class="filters">
<label>backend <select name="backend">${['', ...app.backends.map((b) => b.name)].map((b) => option(b, filter.backend)).join('')}</select></label>
<label>state <select name="state">${['', ...JOB_STATES.filter((s) => isFinished(s))].map((s) => option(s, filter.state)).join('')}</select></label>
<label>text <input name="text" value="${esc(filter.text ?? '')}"></label> <button type="submit">Filter</button></form>
<div class="scroll"><table>${HEAD}${finished.map(agentRow).join('\n')}</table></div>${finished.length ? '' : '<p class="empty">Nothing finished matches.</p>'}</section>`;
}

/** Contrast at least 4.5:1 for text; a visible focus ring; tables scroll inside their section at a laptop's width. */
const STYLE = `body{font:14px system-ui,sans-serif;margin:1.5em;color:#1a1a1a;max-width:1400px}a{color:#0b57a4}
:focus-visible{outline:3px solid #0b57a4;outline-offset:2px}.skip{position:absolute;left:-999px}.skip:focus{left:1em;top:1em;background:#fff;padding:.25em .5em}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;margin:.5em 0}
td,th{border-bottom:1px solid #d0d0d0;padding:4px 6px;text-align:left;vertical-align:top}.task{max-width:32em;overflow-wrap:anywhere}
td.elapsed,td.cost{white-space:nowrap}.state-running td{background:#e8f1fc}.state-queued td{background:#f2f2f2}.state-failed td,.state-timed_out td{background:#fdecec}
.question{background:#fff6d6;padding:.5em;margin:.5em 0;border-left:4px solid #8a6500}.empty,.note{color:#595959}.error{color:#a11b12}
pre{background:#16181d;color:#ececec;padding:.75em 1em;white-space:pre-wrap;overflow-wrap:anywhere;max-height:60vh;overflow:auto;margin:.25em 0}
.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.25em 1.5em}.team{border-left:4px solid #1f5f9e;padding:0 .75em;margin:.75em 0}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
.chart text{font-size:11px;fill:#333}.chart .total{font-weight:600}.chart .grid{stroke:#e3e3e3}.chart .axis{stroke:#555}abbr.estimated{text-decoration:underline dotted;cursor:help}
#transcript{max-width:75em}.step{margin:.4em 0}.step>summary{cursor:pointer;padding:.2em 0}.step code{font-size:13px}
.message{border-left:4px solid #1f5f9e;padding:.1em .9em;background:#f5f8fc}.message p{margin:.4em 0}.reasoning{color:#4a4a4a}
.command,.tool,.edit{border-left:4px solid #8c8c8c;padding-left:.6em}.command.failed,.tool.failed,.edit.failed{border-color:#b3261e}
.badge{font-size:12px;padding:0 .4em;border-radius:3px;background:#e6e6e6;color:#1a1a1a}.badge.failed{background:#b3261e;color:#fff}.badge.ok{background:#d7ecd9;color:#14521a}.badge.running{background:#dce8f7;color:#0b3d75}
.diff .ins{color:#9fe6a8}.diff .del{color:#ffaaa5}.diff .fold{color:#a9b4c2}.diff span{display:block}
.plan ul{list-style:none;padding-left:.5em;margin:.25em 0}.plan .completed{color:#2e6b32}.sr{position:absolute;left:-999px}
.notice{color:#6b4e00}.step.error{background:#fdecec;padding:.4em .6em;border-left:4px solid #b3261e}.progress{color:#595959;font-style:italic}
.answer{border:1px solid #d0d0d0;padding:.25em 1em;max-width:75em}.answer pre{max-height:none}.budget{margin:.25em 0}
@media (max-width:1100px){body{margin:1em}.task{max-width:18em}}`;

/**
 * The page's only script: refreshes the sections on each change the server announces; counts a
 * running agent's elapsed time on between changes; puts each transcript step the server renders
 * in place (a step shown before is replaced); appends a raw log as text; asks a form's
 * data-confirm question before it is sent.
 */
const SCRIPT = `(() => {
  const refresh = async (id) => {
    const el = document.getElementById(id);
    if (!el) return;
    const base = location.pathname === '/' ? '' : location.pathname;
    const res = await fetch(base + '/fragment/' + id + location.search, { credentials: 'same-origin' });
    if (res.ok) el.outerHTML = await res.text();
  };
  let timer;
  const refreshAll = () => {
    clearTimeout(timer);
    timer = setTimeout(() => { if (!document.activeElement || document.activeElement.tagName !== 'INPUT') ['active', 'teams', 'history', 'cost', 'record'].forEach(refresh); }, 150);
  };
  const changes = new EventSource('/events');
  changes.addEventListener('change', refreshAll);
  // What changed between the page's rendering and the stream's (re)opening was not announced: look once.
  changes.addEventListener('open', refreshAll);
  const seen = new WeakMap();
  const words = (s) => s < 60 ? s.toFixed(1) + ' s' : s < 3600 ? Math.floor(s / 60) + ' min ' + String(Math.floor(s % 60)).padStart(2, '0') + ' s' : Math.floor(s / 3600) + ' h ' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + ' min';
  setInterval(() => {
    for (const cell of document.querySelectorAll('td[data-elapsed]')) {
      if (!seen.has(cell)) seen.set(cell, performance.now());
      cell.textContent = words(Number(cell.dataset.elapsed) + (performance.now() - seen.get(cell)) / 1000);
    }
  }, 1000);
  const follow = (el, onEvent) => {
    const stream = new EventSource(el.dataset.stream);
    stream.addEventListener(el.id === 'log' ? 'chunk' : 'step', (e) => {
      const atEnd = innerHeight + scrollY >= document.body.scrollHeight - 40;
      onEvent(JSON.parse(e.data));
      if (atEnd && el.dataset.live) scrollTo(0, document.body.scrollHeight);
    });
    stream.addEventListener('end', () => { stream.close(); el.dataset.ended = 'true'; refresh('record'); });
  };
  const log = document.getElementById('log');
  if (log) follow(log, (text) => { log.textContent += text; log.scrollTop = log.scrollHeight; });
  document.addEventListener('submit', (e) => {
    const question = e.target.dataset && e.target.dataset.confirm;
    if (question && !confirm(question)) e.preventDefault();
  });
  const transcript = document.getElementById('transcript');
  if (transcript) follow(transcript, (step) => {
    const shown = document.getElementById(step.id);
    if (shown) shown.outerHTML = step.html; else transcript.insertAdjacentHTML('beforeend', step.html);
  });
})();`;

/** The CSP source that admits SCRIPT and no other script (a hash: the script never changes). */
export const SCRIPT_SOURCE = `'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'`;

export function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><a class="skip" href="#main">Skip to the content</a><header><h1><a href="/">polyspawn</a> · ${esc(title)}</h1></header><main id="main">${body}</main><script>${SCRIPT}</script></body></html>`;
}

export function overviewPage(app: App, filter: HistoryFilter): string {
  return page(
    app.config.projectDir,
    activeSection(app) + teamsSection(app) + costSection(app) + historySection(app, filter),
  );
}

/** One agent's record: its row, open questions, budget, prompt, and once it ended its answer (Markdown) and error. */
export function recordSection(app: App, job: JobRecord): string {
  const r = fullResult(app, job);
  const ended = isFinished(r.state);
  // A failed run may have an answer too (a budget stop keeps what it wrote); its error is apart.
  const answer = ended && r.text ? `<h2>Answer</h2><div class="answer">${markdown(r.text)}</div>` : '';
  const error = ended && r.error ? `<h2>Error</h2><p class="step error" role="alert">${esc(r.error)}</p>` : '';
  const empty = ended && !answer && !error ? '<h2>Answer</h2><p class="empty">It ended without an answer.</p>' : '';
  return `<section id="record"><div class="scroll"><table>${HEAD}${agentRow(r)}</table></div>${agentActions(job)}${questionForms(r)}${jobBudget(r)}
${error}${answer}${empty}<details><summary>Prompt</summary><pre class="prompt">${esc(app.secrets.text(job.prompt))}</pre></details></section>`;
}

/** An agent's page: its record, then its run as a transcript where its backend reads its output, else the raw log. */
export function agentPage(app: App, job: JobRecord, readable: boolean): string {
  const stream = `/agents/${esc(job.id)}/log`;
  const live = isFinished(job.state) ? '' : ' data-live="true"';
  return page(
    `agent ${job.id}`,
    `${recordSection(app, job)}${
      readable
        ? `<h2>Transcript</h2><div id="transcript" data-stream="${stream}"${live}></div>`
        : `<h2>Output log</h2><pre id="log" data-stream="${stream}"${live}></pre>`
    }`,
  );
}
