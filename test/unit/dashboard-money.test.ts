// The dashboard's time and money figures: a small run's cost is never rounded to $0.0000, an
// estimate says what "~" means, a backend billed in premium requests shows those, budgets show
// what is left, and a running job's elapsed cell carries the figure the page's script counts on.
import { describe, expect, test } from 'vitest';
import { costCell, duration, elapsedCell, jobBudget, teamBudget, usd } from '../../src/mcp/dashboard/money.js';

describe('usd', () => {
  test.each([
    [0, '$0'],
    [0.000376, '$0.00038'],
    [0.0000004, '$0.0000004'],
    [0.00000123, '$0.0000012'],
    [0.0123, '$0.012'],
    [0.5, '$0.500'],
    [0.9994, '$0.999'],
    [0.9996, '$1.00'],
    [12.345, '$12.35'],
  ])('%s is %s', (amount, shown) => expect(usd(amount)).toBe(shown));
});

test('a cost cell: reported, estimated (~ with its meaning), premium requests, unknown with why', () => {
  expect(costCell({ cost_usd: 0.000188, cost_source: 'reported' })).toBe('$0.00019');
  expect(costCell({ cost_usd: 0.000085, cost_source: 'estimated' })).toMatch(
    /^\$0\.000085 <abbr class="estimated" title="estimated: the CLI reported no cost[^"]*">~<\/abbr>$/,
  );
  expect(costCell({ premium_requests: 1, cost_source: 'unknown' })).toContain('1 premium request<');
  expect(costCell({ premium_requests: 3, cost_source: 'unknown' })).toContain('3 premium requests');
  expect(costCell({ cost_note: 'model "<x>" is not in the table', cost_source: 'unknown' })).toBe(
    '<span class="empty" title="model &quot;&lt;x&gt;&quot; is not in the table">unknown</span>',
  );
});

test('elapsed: words for long runs; a running job carries data-elapsed for the script, a finished one not', () => {
  expect(duration(4.25)).toBe('4.3 s');
  expect(duration(245)).toBe('4 min 05 s');
  expect(duration(3725)).toBe('1 h 02 min');
  expect(elapsedCell({ elapsed_s: 3.5, state: 'running', started_at: '2026-01-01T00:00:00Z' })).toBe(
    '<td class="elapsed" data-elapsed="3.5">3.5 s</td>',
  );
  expect(elapsedCell({ elapsed_s: 3.5, state: 'succeeded', started_at: '2026-01-01T00:00:00Z' })).toBe(
    '<td class="elapsed">3.5 s</td>',
  );
  expect(elapsedCell({ elapsed_s: 0, state: 'queued' })).toBe('<td class="elapsed">0.0 s</td>');
});

test("a job's and a team's budget and what is left of it", () => {
  expect(jobBudget({ state: 'succeeded' })).toBe('');
  expect(jobBudget({ state: 'succeeded', cost_usd: 0.12, budget: { max_budget_usd: 0.5, max_turns: 4 } })).toBe(
    '<p class="budget">Budget: $0.500 ($0.380 left), 4 turns</p>',
  );
  expect(jobBudget({ state: 'running', budget: { max_budget_usd: 1 } })).toContain('spent: known when it ends');
  expect(jobBudget({ state: 'failed', cost_usd: 0.6, budget: { max_budget_usd: 0.5, exceeded: 'cost' } })).toContain(
    '$0 left',
  );
  expect(teamBudget({ spentUsd: 0.1 })).toBe('');
  expect(teamBudget({ maxBudgetUsd: 2, spentUsd: 0.25 })).toBe('budget $2.00, $1.75 left');
  expect(teamBudget({ maxBudgetUsd: 0.01, spentUsd: 0.02, reached: true })).toBe(
    'budget $0.010, $0 left <b class="error">(reached)</b>',
  );
});
