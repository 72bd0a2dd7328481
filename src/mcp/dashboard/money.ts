// Time and money on the dashboard: a run's elapsed time (which the page's script advances while
// the run goes on), its cost without rounding a small run to nothing, what "~" means, premium
// requests where a backend bills in those, budgets left, and the chart of cost per day and backend.
import type { App } from '../../app.js';
import type { JobResult } from '../../jobs/result.js';
import { isFinished } from '../../jobs/table.js';
import { esc } from './html.js';

/** "$12.34", "$0.123", "$0.00038": two significant digits at least, so a small run is never $0.0000. */
export function usd(amount: number): string {
  if (amount === 0) return '$0';
  // Cents from a dollar up, and from what would round up to one ($0.9996 is $1.00, not $1.000).
  if (Math.abs(Number(amount.toFixed(3))) >= 1) return `$${amount.toFixed(2)}`;
  if (Math.abs(amount) >= 0.01) return `$${amount.toFixed(3)}`;
  // Two significant digits, written out (never 4e-7).
  return `$${amount.toFixed(Math.min(20, 1 - Math.floor(Math.log10(Math.abs(amount))))).replace(/0+$/, '')}`;
}

const ESTIMATED_NOTE =
  "estimated: the CLI reported no cost, so it is its tokens at the prices in polyspawn's models table";

/** A run's cost: reported, estimated (~), premium requests, or why it is unknown. */
export function costCell(r: Pick<JobResult, 'cost_usd' | 'cost_source' | 'premium_requests' | 'cost_note'>): string {
  const premium =
    r.premium_requests !== undefined
      ? `${r.premium_requests} premium request${r.premium_requests === 1 ? '' : 's'}`
      : undefined;
  if (r.cost_usd !== undefined) {
    const estimated =
      r.cost_source === 'estimated' ? ` <abbr class="estimated" title="${esc(ESTIMATED_NOTE)}">~</abbr>` : '';
    return `${esc(usd(r.cost_usd))}${estimated}${premium ? ` · ${esc(premium)}` : ''}`;
  }
  if (premium) return `<span title="billed in premium requests, not dollars">${esc(premium)}</span>`;
  return r.cost_note ? `<span class="empty" title="${esc(r.cost_note)}">unknown</span>` : '';
}

/** "12.3 s", "4 min 05 s", "1 h 02 min": the same words the page's script writes as it counts. */
export function duration(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.floor(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** The page's script counts a running job's time on from the server's figure (data-elapsed). */
export function elapsedCell(r: Pick<JobResult, 'elapsed_s' | 'state' | 'started_at'>): string {
  const counting = r.started_at !== undefined && !isFinished(r.state);
  return `<td class="elapsed"${counting ? ` data-elapsed="${r.elapsed_s}"` : ''}>${duration(r.elapsed_s)}</td>`;
}

/** The budget a job was given, and what is left of it (known once it has ended: the CLIs report cost at the end). */
export function jobBudget(r: Pick<JobResult, 'budget' | 'cost_usd' | 'state'>): string {
  const b = r.budget;
  if (!b || (b.max_budget_usd === undefined && b.max_turns === undefined)) return '';
  const parts: string[] = [];
  if (b.max_budget_usd !== undefined) {
    const left =
      r.cost_usd !== undefined
        ? `${usd(Math.max(0, b.max_budget_usd - r.cost_usd))} left`
        : isFinished(r.state)
          ? 'cost unknown'
          : 'spent: known when it ends';
    parts.push(`${usd(b.max_budget_usd)} (${left})`);
  }
  if (b.max_turns !== undefined) parts.push(`${b.max_turns} turns`);
  const passed = b.exceeded
    ? ` · <b class="error">stopped at its ${b.exceeded === 'cost' ? 'cost' : 'turn'} limit</b>`
    : '';
  return `<p class="budget">Budget: ${esc(parts.join(', '))}${passed}</p>`;
}

/** A team's budget and what its members have spent of it. */
export function teamBudget(team: { maxBudgetUsd?: number; reached?: boolean; spentUsd?: number }): string {
  if (team.maxBudgetUsd === undefined) return '';
  const left = `${usd(Math.max(0, team.maxBudgetUsd - (team.spentUsd ?? 0)))} left`;
  return `budget ${esc(usd(team.maxBudgetUsd))}, ${esc(left)}${team.reached ? ' <b class="error">(reached)</b>' : ''}`;
}

const COLORS = ['#1f5f9e', '#c25400', '#2e7d32', '#b3261e', '#00796b', '#8d6e00', '#7b3f9e', '#6d4c41'];
/** Days the chart shows, the newest ones. */
const CHART_DAYS = 14;

/** Cost per day and backend as an SVG bar chart with axes, each day's total, and totals per backend. */
export function costSection(app: App): string {
  const byDay = new Map<string, Map<string, number>>();
  const premium = new Map<string, number>();
  for (const job of app.jobs.all()) {
    const outcome = job.outcome;
    if (outcome?.premiumRequests) premium.set(job.backend, (premium.get(job.backend) ?? 0) + outcome.premiumRequests);
    if (!outcome?.costUsd) continue;
    const day = (job.endedAt ?? job.createdAt).slice(0, 10);
    const row = byDay.get(day) ?? new Map<string, number>();
    row.set(job.backend, (row.get(job.backend) ?? 0) + outcome.costUsd);
    byDay.set(day, row);
  }
  const days = [...byDay.keys()].sort().slice(-CHART_DAYS);
  const backends = app.backends.map((b) => b.name);
  const colorOf = (name: string) => COLORS[Math.max(0, backends.indexOf(name)) % COLORS.length]!;
  const totals = days.map((d) => [...byDay.get(d)!.values()].reduce((a, b) => a + b, 0));
  const top = niceCeiling(Math.max(...totals, 0));
  const [LEFT, TOP, BAR, H] = [64, 18, 56, 160];
  const width = LEFT + Math.max(days.length, 3) * BAR + 10;
  const y = (amount: number) => TOP + H - (amount / top) * H;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => top * f);
  const axis = ticks
    .map(
      (t) =>
        `<line x1="${LEFT}" x2="${width - 10}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" class="grid"/><text x="${LEFT - 6}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${esc(usd(t))}</text>`,
    )
    .join('');
  const bars = days
    .map((day, i) => {
      let base = 0;
      const x = LEFT + i * BAR + 8;
      const parts = [...byDay.get(day)!.entries()].map(([backend, amount]) => {
        const rect = `<rect x="${x}" y="${y(base + amount).toFixed(1)}" width="${BAR - 16}" height="${(y(base) - y(base + amount)).toFixed(1)}" fill="${colorOf(backend)}"><title>${esc(day)} ${esc(backend)}: ${esc(usd(amount))}</title></rect>`;
        base += amount;
        return rect;
      });
      const mid = x + (BAR - 16) / 2;
      return `${parts.join('')}<text x="${mid}" y="${(y(totals[i]!) - 4).toFixed(1)}" text-anchor="middle" class="total">${esc(usd(totals[i]!))}</text><text x="${mid}" y="${TOP + H + 16}" text-anchor="middle">${esc(day.slice(5))}</text>`;
    })
    .join('');
  const perBackend = new Map<string, number>();
  for (const row of byDay.values()) for (const [b, amount] of row) perBackend.set(b, (perBackend.get(b) ?? 0) + amount);
  const all = [...perBackend.values()].reduce((a, b) => a + b, 0);
  const legend = [...new Set([...perBackend.keys(), ...premium.keys()])]
    .map((b) => {
      const amount = perBackend.get(b);
      const requests = premium.get(b);
      const figures = [
        amount !== undefined ? usd(amount) : undefined,
        requests ? `${requests} premium request${requests === 1 ? '' : 's'}` : undefined,
      ].filter(Boolean);
      return `<li><span class="swatch" style="background:${colorOf(b)}"></span>${esc(b)}: ${esc(figures.join(' · '))}</li>`;
    })
    .join('');
  const chart = days.length
    ? `<svg role="img" aria-label="cost in US dollars per day, stacked by backend" class="chart" width="${width}" height="${TOP + H + 24}" viewBox="0 0 ${width} ${TOP + H + 24}">${axis}<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${TOP + H}" class="axis"/><line x1="${LEFT}" x2="${width - 10}" y1="${TOP + H}" y2="${TOP + H}" class="axis"/>${bars}</svg>`
    : '<p class="empty">No cost recorded yet.</p>';
  return `<section id="cost"><h2>Cost per day and backend</h2>${chart}${
    legend ? `<ul class="legend">${legend}<li><b>total: ${esc(usd(all))}</b></li></ul>` : ''
  }<p class="note">Over the runs this server keeps (its own and the newest stored ones). <abbr title="${esc(ESTIMATED_NOTE)}">~</abbr> after a cost: ${esc(ESTIMATED_NOTE)}. A backend billed in premium requests has no dollar cost.</p></section>`;
}

/** The axis's top: 1, 2 or 5 times a power of ten, at least the largest day. */
function niceCeiling(value: number): number {
  if (value <= 0) return 0.01;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= value)!;
}
