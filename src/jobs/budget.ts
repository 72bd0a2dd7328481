// Budgets: max_turns and max_budget_usd on a job. A backend that enforces one itself gets it
// (Backend.budgetFlags: its CLI's flags); for the others polyspawn counts a CLI's turns in its
// live output (CliBackend.liveTurn, read from the log as the child writes it) and stops the run
// as a turn past max_turns begins; a cost, known only once the run ends (the CLIs report tokens
// at the end, an HTTP request is one turn), is checked then and reported in the result.
import { z } from 'zod';
import type { Backend, Budget, BudgetKind, CliBackend, Outcome, Usage } from '../../backends/types.js';
import type { ModelsTable } from '../config/models.js';
import { InputError } from '../lib/errors.js';
import type { JobRequest } from './table.js';

/** The limits a budget takes, wherever it is given (spawn tools, agent.md, `polyspawn run`). */
const MAX_TURNS_LIMIT = 1000;
const MAX_BUDGET_USD_LIMIT = 10_000;
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
  return { maxTurns, maxBudgetUsd };
}

/**
 * Why max_budget_usd cannot be followed for this model, or undefined: where the backend does not
 * enforce it itself, polyspawn prices the tokens from the models table, which may not know it.
 */
export function costBudgetProblem(backend: Backend, models: ModelsTable, model: string): string | undefined {
  if ((backend.budgetFlags ?? []).includes('cost') || models[backend.name]?.prices[model]) return undefined;
  return (
    `max_budget_usd: polyspawn knows no price for ${backend.name}'s model ${model}, so it cannot follow its cost: ` +
    'add its prices to a models.json override (docs/configuration.md, "Models"), or leave max_budget_usd out'
  );
}

/**
 * Counts a CLI run's turns from its live output against max_turns: add() takes each JSON line of
 * its stdout and returns the hit once a turn past the budget begins, else undefined.
 */
export function turnMeter(
  backend: CliBackend,
  maxTurns: number,
): { add(record: Record<string, unknown>): BudgetHit | undefined } {
  let turns = 0;
  return {
    add(record) {
      if (!backend.liveTurn?.(record) || ++turns <= maxTurns) return undefined;
      return { kind: 'turns', error: `stopped by polyspawn: it began turn ${turns}, past max_turns (${maxTurns})` };
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

/** This run's share of a session's running cost (the whole when the total went down: a session begun anew). */
export function thisRunsCost(total: number, before: number | undefined): number {
  return before !== undefined && total >= before ? total - before : total;
}

/**
 * A finished run whose cost, known only now, passed max_budget_usd: nothing is left to stop, so
 * it keeps its state and answer, and its outcome says the budget was passed.
 */
export function markCostOverrun(job: Pick<JobRequest, 'maxBudgetUsd'>, outcome: Outcome): void {
  if (outcome.budgetExceeded || job.maxBudgetUsd === undefined || outcome.costUsd === undefined) return;
  if (outcome.costUsd > job.maxBudgetUsd) outcome.budgetExceeded = 'cost';
}
