// The dashboard's HTML, rendered on the server from the job table. Every text that comes from an
// agent or a prompt (tasks, answers, questions, logs, errors, models) goes through `esc`: an
// agent's output is untrusted input to this page. The page's only script is SCRIPT below (no
// CDN, no bundler): it refreshes the sections when the server says a job changed, and appends a
// log as it streams, as text.
import type { App } from '../../app.js';
import { CONVERSATION_LIMITS } from '../../jobs/conversation.js';
import { fullResult, type JobResult } from '../../jobs/result.js';
import { isFinished, JOB_STATES, type JobRecord } from '../../jobs/table.js';
import { esc } from './html.js';
import { agentActions } from './review.js';
import { teamsSection } from './team-view.js';

type HistoryFilter = { backend?: string; state?: string; text?: string };

/** How many finished agents the history shows. */
const HISTORY_ROWS = 100;

const tokens = (r: JobResult) => (r.usage ? `${r.usage.input_tokens} in / ${r.usage.output_tokens} out` : '');
const cost = (r: JobResult) =>
  r.cost_usd === undefined ? '' : `$${r.cost_usd.toFixed(4)}${r.cost_source === 'estimated' ? ' ~' : ''}`;

function agentRow(r: JobResult): string {
  return `<tr data-agent="${esc(r.agent_id)}" class="state-${esc(r.state)}">
<td><a href="/agents/${esc(r.agent_id)}">${esc(r.agent_id)}</a></td>
<td>${r.team_id ? `<a href="/teams/${esc(r.team_id)}">${esc(r.team_id)}</a>` : ''}</td><td>${esc(r.team_role)}</td><td>${esc(r.backend)}${r.agent ? ` (${esc(r.agent)})` : ''}</td>
<td>${esc(r.model)}</td><td class="task">${esc(r.task)}</td><td>${esc(r.state)}</td><td>${r.elapsed_s.toFixed(1)} s</td>
<td>${esc(tokens(r))}</td><td>${esc(cost(r))}</td></tr>`;
}

const HEAD =
  '<tr><th>agent</th><th>team</th><th>role</th><th>backend</th><th>model</th><th>task</th><th>state</th><th>elapsed</th><th>tokens</th><th>cost</th></tr>';

function questionForms(r: JobResult): string {
  return (r.questions ?? [])
    .map(
      (q) => `<form class="question" method="post" action="/agents/${esc(r.agent_id)}/reply">
<p><b>${esc(r.agent_id)}</b> asks: <span class="question-text">${esc(q.question)}</span>${q.options?.length ? ` <i>(${q.options.map(esc).join(' / ')})</i>` : ''}</p>
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
<table>${HEAD}${active.map(agentRow).join('\n')}</table>${active.length ? '' : '<p class="empty">No agent is running.</p>'}</section>`;
}

function matches(r: JobResult, f: HistoryFilter): boolean {
  if (f.backend && r.backend !== f.backend) return false;
  if (f.state && r.state !== f.state) return false;
  if (f.text && !`${r.task} ${r.agent_id} ${r.model}`.toLowerCase().includes(f.text.toLowerCase())) return false;
  return true;
}

/** The finished agents, newest first, filtered. */
export function historySection(app: App, filter: HistoryFilter): string {
  const finished = app.jobs
    .all()
    .filter((j) => isFinished(j.state))
    .reverse()
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
<table>${HEAD}${finished.map(agentRow).join('\n')}</table>${finished.length ? '' : '<p class="empty">Nothing finished matches.</p>'}</section>`;
}

/** Cost per backend and per day, as an inline SVG bar chart (one bar a day, stacked by backend). */
export function costSection(app: App): string {
  const byDay = new Map<string, Map<string, number>>();
  for (const job of app.jobs.all()) {
    const usd = job.outcome?.costUsd;
    if (!usd) continue;
    const day = (job.endedAt ?? job.createdAt).slice(0, 10);
    const row = byDay.get(day) ?? new Map<string, number>();
    row.set(job.backend, (row.get(job.backend) ?? 0) + usd);
    byDay.set(day, row);
  }
  const days = [...byDay.keys()].sort().slice(-14);
  const backends = app.backends.map((b) => b.name);
  const colors = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];
  const colorOf = (name: string) => colors[Math.max(0, backends.indexOf(name)) % colors.length]!;
  const totals = days.map((d) => [...byDay.get(d)!.values()].reduce((a, b) => a + b, 0));
  const max = Math.max(...totals, 0.0001);
  const W = 40;
  const H = 120;
  const bars = days
    .map((day, i) => {
      let y = H;
      const parts = [...byDay.get(day)!.entries()].map(([backend, usd]) => {
        const h = (usd / max) * H;
        y -= h;
        return `<rect x="${i * W + 4}" y="${y.toFixed(1)}" width="${W - 8}" height="${h.toFixed(1)}" fill="${colorOf(backend)}"><title>${esc(day)} ${esc(backend)}: $${usd.toFixed(4)}</title></rect>`;
      });
      return `${parts.join('')}<text x="${i * W + W / 2}" y="${H + 14}" font-size="9" text-anchor="middle">${esc(day.slice(5))}</text>`;
    })
    .join('');
  const perBackend = new Map<string, number>();
  for (const row of byDay.values()) for (const [b, usd] of row) perBackend.set(b, (perBackend.get(b) ?? 0) + usd);
  const legend = [...perBackend.entries()]
    .map(
      ([b, usd]) =>
        `<li><span class="swatch" style="background:${colorOf(b)}"></span>${esc(b)}: $${usd.toFixed(4)}</li>`,
    )
    .join('');
  return `<section id="cost"><h2>Cost per day and backend</h2>${
    days.length
      ? `<svg role="img" aria-label="cost per day" width="${Math.max(days.length * W, 200)}" height="${H + 20}">${bars}</svg><ul class="legend">${legend}</ul>`
      : '<p class="empty">No cost recorded yet.</p>'
  }</section>`;
}

const STYLE = `body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;width:100%;margin:.5em 0}
td,th{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}.task{max-width:32em;overflow-wrap:anywhere}
.state-running td{background:#eef6ff}.state-queued td{background:#f6f6f6}.state-failed td,.state-timed_out td{background:#fff0f0}
.question{background:#fff8e0;padding:.5em;margin:.5em 0;border-left:4px solid #e0a800}.empty{color:#777}
pre{background:#111;color:#eee;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere;max-height:60vh;overflow:auto}
.legend{list-style:none;padding:0}.team{border-left:4px solid #4e79a7;padding:0 .75em;margin:.75em 0}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}`;

/** Refreshes the sections on each change the server announces; streams an agent's log as text. */
const SCRIPT = `(() => {
  const refresh = async (id) => {
    const el = document.getElementById(id);
    if (!el) return;
    const base = location.pathname === '/' ? '' : location.pathname;
    const res = await fetch(base + '/fragment/' + id + location.search, { credentials: 'same-origin' });
    if (res.ok) el.outerHTML = await res.text();
  };
  let timer;
  const changes = new EventSource('/events');
  changes.addEventListener('change', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { if (!document.activeElement || document.activeElement.tagName !== 'INPUT') ['active', 'teams', 'history', 'cost', 'record'].forEach(refresh); }, 150);
  });
  const log = document.getElementById('log');
  if (log) {
    const stream = new EventSource(log.dataset.stream);
    stream.addEventListener('chunk', (e) => { log.textContent += JSON.parse(e.data); log.scrollTop = log.scrollHeight; });
    stream.addEventListener('end', () => { stream.close(); log.dataset.ended = 'true'; });
  }
})();`;

export function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><header><h1><a href="/">polyspawn</a> · ${esc(title)}</h1></header>${body}<script>${SCRIPT}</script></body></html>`;
}

export function overviewPage(app: App, filter: HistoryFilter): string {
  return page(
    app.config.projectDir,
    activeSection(app) + teamsSection(app) + costSection(app) + historySection(app, filter),
  );
}

/** One agent's record; its log streams into #log. */
export function recordSection(app: App, job: JobRecord): string {
  const r = fullResult(app, job);
  const answer = r.text ?? r.error ?? '';
  return `<section id="record"><table>${HEAD}${agentRow(r)}</table>${agentActions(job)}${questionForms(r)}
<h2>Prompt</h2><pre class="prompt">${esc(app.secrets.text(job.prompt))}</pre>
${isFinished(r.state) ? `<h2>${r.text !== undefined ? 'Answer' : 'Error'}</h2><pre class="answer">${esc(answer)}</pre>` : ''}</section>`;
}

export function agentPage(app: App, job: JobRecord): string {
  return page(
    `agent ${job.id}`,
    `${recordSection(app, job)}<h2>Output log</h2><pre id="log" data-stream="/agents/${esc(job.id)}/log"></pre>`,
  );
}
