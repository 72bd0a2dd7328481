// Budgets: max_turns and max_budget_usd on a job. A backend that enforces one itself gets it
// (Backend.budgetFlags: its CLI's flags); for the others polyspawn follows what the run reports
// while it runs (CliBackend.liveSpend, read from the log as the child writes it) and stops the
// run that passes its budget, or, where the spend is known only at the end (a CLI that reports
// tokens once, an HTTP request), says so in the result.
import { z } from 'zod';
import type { Backend, Budget, BudgetKind, CliBackend, Outcome, Usage } from '../../backends/types.js';
import { estimateCost, type ModelsTable } from '../config/models.js';
import { InputError } from '../lib/errors.js';
import type { JobRecord, JobRequest } from './table.js';

/** The limits a budget takes, wherever it is given (spawn tools, agent.md, `polyspawn run`). */
export const MAX_TURNS_LIMIT = 1000;
export const MAX_BUDGET_USD_LIMIT = 10_000;
export const maxTurnsSchema = () => z.number().int().min(1).max(MAX_TURNS_LIMIT);
export const maxBudgetUsdSchema = () => z.number().positive().max(MAX_BUDGET_USD_LIMIT);

/** Why polyspawn stopped a run: the budget passed, and an error that names it and what was spent. */
export type BudgetHit = { kind: BudgetKind; error: string };

/** The job's budget as the backend contract takes it, or undefined when it has none. */
export function budgetOf(job: Pick<JobRequest, 'maxTurns' | 'maxBudgetUsd'>): Budget | undefined {
  if (job.maxTurns === undefined && job.maxBudgetUsd === undefined) return undefined;
  return {
    ...(job.maxTurns !== undefined ? { maxTurns: job.maxTurns } : {}),
    ...(job.maxBudgetUsd !== undefined ? { maxBudgetUsd: job.maxBudgetUsd } : {}),
  };
}

/**
 * The budget of a spawn: the caller's, within the named agent's definition, whose values are a
 * ceiling (a preset's cost is its author's promise): a larger value is refused, not lowered quietly.
 */
export function spawnBudget(
  requested: Pick<JobRequest, 'maxTurns' | 'maxBudgetUsd'>,
  definition: { maxTurns?: number; maxBudgetUsd?: number; file: string } | undefined,
): Pick<JobRequest, 'maxTurns' | 'maxBudgetUsd'> {
  const pick = (field: string, asked: number | undefined, ceiling: number | undefined) => {
    if (asked !== undefined && ceiling !== undefined && asked > ceiling)
      throw new InputError(
        `${field} ${asked} is over this agent's ${field} (${ceiling}, in ${definition!.file}): pass at most ${ceiling}, or leave it out`,
      );
    return asked ?? ceiling;
  };
  const maxTurns = pick('max_turns', requested.maxTurns, definition?.maxTurns);
  const maxBudgetUsd = pick('max_budget_usd', requested.maxBudgetUsd, definition?.maxBudgetUsd);
  return {
    ...(maxTurns !== undefined ? { maxTurns } : {}),
    ...(maxBudgetUsd !== undefined ? { maxBudgetUsd } : {}),
  };
}

/** The part of the job's budget polyspawn must follow itself: what the backend does not enforce. */
export function followedBudget(backend: Backend, job: Pick<JobRequest, 'maxTurns' | 'maxBudgetUsd'>): Budget {
  const own = backend.budgetFlags ?? [];
  return {
    ...(job.maxTurns !== undefined && !own.includes('turns') ? { maxTurns: job.maxTurns } : {}),
    ...(job.maxBudgetUsd !== undefined && !own.includes('cost') ? { maxBudgetUsd: job.maxBudgetUsd } : {}),
  };
}

const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
});
const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 };
const usd = (n: number) => `$${n.toFixed(n < 0.01 ? 6 : 4)}`;

/**
 * Follows a CLI run's live output against `budget`: add() takes each JSON line of its stdout
 * and returns the hit once the run passes its budget (a turn past max_turns begins; the cost
 * estimated from its tokens passes max_budget_usd), else undefined.
 */
export function spendMeter(
  backend: CliBackend,
  job: Pick<JobRecord, 'backend' | 'model' | 'previousSessionTotals'>,
  budget: Budget,
  models: ModelsTable,
): { add(record: Record<string, unknown>): BudgetHit | undefined } {
  let turns = 0;
  let usage = NO_USAGE;
  let sessionUsage = NO_USAGE;
  return {
    add(record) {
      const spend = backend.liveSpend?.(record);
      if (!spend) return undefined;
      if (spend.turn) turns++;
      if (budget.maxTurns !== undefined && turns > budget.maxTurns)
        return {
          kind: 'turns',
          error: `stopped by polyspawn: it began turn ${turns}, past max_turns (${budget.maxTurns})`,
        };
      if (spend.usage) usage = addUsage(usage, spend.usage);
      if (spend.sessionTotals) sessionUsage = thisRunsShare(spend.sessionTotals, job.previousSessionTotals);
      const cost =
        budget.maxBudgetUsd !== undefined &&
        estimateCost(models, job.backend, job.model, addUsage(usage, sessionUsage));
      if (cost && cost > budget.maxBudgetUsd!)
        return {
          kind: 'cost',
          error: `stopped by polyspawn: it spent about ${usd(cost)} (estimated from its tokens), past max_budget_usd (${budget.maxBudgetUsd})`,
        };
      return undefined;
    },
  };
}

/** This run's share of a session's running totals (never negative: totals can be reset). */
export function thisRunsShare(total: Usage, before: Usage | undefined): Usage {
  if (!before) return total;
  const less = (a: number, b: number) => (a >= b ? a - b : a);
  return {
    inputTokens: less(total.inputTokens, before.inputTokens),
    outputTokens: less(total.outputTokens, before.outputTokens),
    cachedInputTokens: less(total.cachedInputTokens, before.cachedInputTokens),
  };
}

/**
 * A finished run whose cost, known only now, passed max_budget_usd: nothing is left to stop, so
 * it keeps its state and answer, and its outcome says the budget was passed.
 */
export function markCostOverrun(job: Pick<JobRequest, 'maxBudgetUsd'>, outcome: Outcome): void {
  if (outcome.budgetExceeded || job.maxBudgetUsd === undefined || outcome.costUsd === undefined) return;
  if (outcome.costUsd > job.maxBudgetUsd) outcome.budgetExceeded = 'cost';
}

/** What a set of jobs cost so far (a team's budget): the USD known, and how many jobs have no cost yet or an unknown one. */
export function totalCost(jobs: readonly Pick<JobRecord, 'outcome'>[]): { usd: number; unknown: number } {
  let usd = 0;
  let unknown = 0;
  for (const job of jobs) {
    if (job.outcome?.costUsd === undefined) unknown++;
    else usd += job.outcome.costUsd;
  }
  return { usd, unknown };
}
