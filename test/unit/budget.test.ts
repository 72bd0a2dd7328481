// Budgets' pure parts (src/jobs/budget.ts): a named agent's ceiling, the turn count that stops a
// followed run, a cost seen only at the end, a cost budget polyspawn cannot price, and the total
// cost of several jobs, and a resumed run's share of its session's totals.
import { describe, expect, test } from 'vitest';
import { claude } from '../../backends/claude.js';
import { codex } from '../../backends/codex.js';
import { copilot } from '../../backends/copilot.js';
import type { Outcome } from '../../backends/types.js';
import { shippedModels } from '../../src/config/models.js';
import {
  budgetOf,
  costBudgetProblem,
  markCostOverrun,
  spawnBudget,
  thisRunsCost,
  thisRunsShare,
  turnMeter,
} from '../../src/jobs/budget.js';
import { InputError } from '../../src/lib/errors.js';

const definition = { maxTurns: 4, maxBudgetUsd: 2, file: '/p/.polyspawn/agents/capped/agent.md' };

describe("a spawn's budget under a named agent's ceiling", () => {
  test('left out, it is the definition’s; lower, it is the caller’s; without a definition, the caller’s alone', () => {
    expect(spawnBudget({}, definition)).toEqual({ maxTurns: 4, maxBudgetUsd: 2 });
    expect(spawnBudget({ maxTurns: 2, maxBudgetUsd: 2 }, definition)).toEqual({ maxTurns: 2, maxBudgetUsd: 2 });
    expect(spawnBudget({ maxBudgetUsd: 0.5 }, { file: 'x' })).toEqual({ maxBudgetUsd: 0.5 });
    expect(spawnBudget({}, undefined)).toEqual({});
  });

  test('higher is refused, naming the ceiling and the file', () => {
    expect(() => spawnBudget({ maxTurns: 5 }, definition)).toThrow(InputError);
    expect(() => spawnBudget({ maxBudgetUsd: 2.5 }, definition)).toThrow(
      "max_budget_usd 2.5 is over this agent's max_budget_usd (2, in /p/.polyspawn/agents/capped/agent.md): pass at most 2, or leave it out",
    );
  });

  test('budgetOf: undefined without one, else only the limits given', () => {
    expect(budgetOf({})).toBeUndefined();
    expect(budgetOf({ maxTurns: 3 })).toEqual({ maxTurns: 3 });
  });
});

describe('the turn meter of a followed run', () => {
  const codexLines = [
    { type: 'thread.started', thread_id: 't' },
    { type: 'turn.started' },
    { type: 'item.started', item: { type: 'command_execution' } },
    { type: 'item.completed', item: { type: 'command_execution' } },
    { type: 'item.started', item: { type: 'command_execution' } },
    { type: 'item.completed', item: { type: 'agent_message', text: 'done' } },
  ];

  test('no hit while the turns stay within max_turns', () => {
    const meter = turnMeter(codex, 3);
    expect(codexLines.map((line) => meter.add(line)).filter(Boolean)).toEqual([]);
  });

  test('the hit comes with the first turn past it, once, naming the budget', () => {
    const meter = turnMeter(codex, 2);
    const hits = codexLines.map((line) => meter.add(line));
    expect(hits.findIndex(Boolean)).toBe(4);
    expect(hits[4]).toEqual({ kind: 'turns', error: 'stopped by polyspawn: it began turn 3, past max_turns (2)' });
  });

  test('copilot counts its assistant.turn_start events', () => {
    const meter = turnMeter(copilot, 1);
    expect(meter.add({ type: 'assistant.turn_start' })).toBeUndefined();
    expect(meter.add({ type: 'assistant.message' })).toBeUndefined();
    expect(meter.add({ type: 'assistant.turn_start' })?.kind).toBe('turns');
  });
});

describe('cost', () => {
  const outcome = (costUsd?: number): Outcome => ({
    ok: true,
    text: 'answer',
    costSource: 'estimated',
    ...(costUsd !== undefined ? { costUsd } : {}),
  });

  test('a cost over max_budget_usd seen at the end is marked, the answer and state untouched', () => {
    const over = outcome(0.6);
    markCostOverrun({ maxBudgetUsd: 0.5 }, over);
    expect(over).toMatchObject({ ok: true, text: 'answer', budgetExceeded: 'cost' });
    for (const [budget, o] of [
      [{ maxBudgetUsd: 0.5 }, outcome(0.5)],
      [{ maxBudgetUsd: 0.5 }, outcome()],
      [{}, outcome(9)],
    ] as const) {
      markCostOverrun(budget, o);
      expect(o.budgetExceeded).toBeUndefined();
    }
    const stopped: Outcome = { ...outcome(0.1), ok: false, budgetExceeded: 'turns' };
    markCostOverrun({ maxBudgetUsd: 0.05 }, stopped);
    expect(stopped.budgetExceeded).toBe('turns');
  });

  test('max_budget_usd needs a price polyspawn knows, unless the backend enforces it itself', () => {
    const models = shippedModels([claude, codex, copilot]);
    expect(costBudgetProblem(codex, models, models.codex!.default)).toBeUndefined();
    expect(costBudgetProblem(claude, models, 'any-model')).toBeUndefined();
    expect(costBudgetProblem(copilot, models, 'unpriced-model')).toMatch(
      /^max_budget_usd: polyspawn knows no price for copilot's model unpriced-model, so it cannot follow its cost: add its prices/,
    );
  });
});

test("a resumed run's cost: its share of the session's running cost; a lower total (a session begun anew) is its own", () => {
  expect(thisRunsCost(0.8, 0.5)).toBeCloseTo(0.3, 12);
  expect(thisRunsCost(0.8, undefined)).toBe(0.8);
  expect(thisRunsCost(0.2, 0.5)).toBe(0.2);
});

describe("a resumed run's usage: its share of the session's running totals", () => {
  const stored = { inputTokens: 1000, outputTokens: 200, cachedInputTokens: 600 };

  test('the totals less what the session had used before this run', () => {
    const totals = { inputTokens: 1500, outputTokens: 260, cachedInputTokens: 900 };
    expect(thisRunsShare(totals, stored)).toEqual({ inputTokens: 500, outputTokens: 60, cachedInputTokens: 300 });
    expect(thisRunsShare(totals, undefined)).toEqual(totals);
  });

  test('totals lower than the stored ones (the CLI reset its count) are this run alone, never negative', () => {
    const reset = { inputTokens: 300, outputTokens: 50, cachedInputTokens: 0 };
    expect(thisRunsShare(reset, stored)).toEqual(reset);
    // One count reset, the others grown: each is taken on its own.
    expect(thisRunsShare({ inputTokens: 1200, outputTokens: 40, cachedInputTokens: 600 }, stored)).toEqual({
      inputTokens: 200,
      outputTokens: 40,
      cachedInputTokens: 0,
    });
  });
});
