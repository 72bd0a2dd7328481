// The depth marker: a nested polyspawn starts no agents unless an agent definition allowed it,
// and never deeper than MAX_DEPTH.
import { describe, expect, test } from 'vitest';
import { childNestingEnv, MAX_DEPTH, nestingFrom } from '../../src/jobs/agents/nesting.js';

describe('nesting', () => {
  test.each([
    [{}, true],
    [{ POLYSPAWN_DEPTH: '0' }, true],
    [{ POLYSPAWN_DEPTH: '1' }, false],
    [{ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '1' }, true],
    [{ POLYSPAWN_DEPTH: '2', POLYSPAWN_ALLOW_DEPTH: '1' }, false],
    [{ POLYSPAWN_DEPTH: String(MAX_DEPTH), POLYSPAWN_ALLOW_DEPTH: '9' }, false],
    [{ POLYSPAWN_DEPTH: 'yes' }, false],
  ])('%j: can spawn %s', (env, can) => {
    const n = nestingFrom(env);
    expect(n.canSpawn).toBe(can);
    if (!can) expect(n.reason).toBeTruthy();
  });

  test('children get the next depth; an allowance only from an agent that grants it, capped', () => {
    const top = nestingFrom({ POLYSPAWN_ALLOW_DEPTH: '2' }); // a stale allowance at depth 0 means nothing
    expect(childNestingEnv(top)).toEqual({ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: undefined });
    expect(childNestingEnv(top, 1)).toEqual({ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '1' });
    expect(childNestingEnv(top, 3)).toEqual({ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: String(MAX_DEPTH - 1) });
    // Passed on below an agent that allowed two levels; gone below one that allowed one.
    const second = nestingFrom({ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '2' });
    expect(childNestingEnv(second)).toEqual({ POLYSPAWN_DEPTH: '2', POLYSPAWN_ALLOW_DEPTH: '2' });
    const once = nestingFrom({ POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '1' });
    expect(childNestingEnv(once)).toEqual({ POLYSPAWN_DEPTH: '2', POLYSPAWN_ALLOW_DEPTH: undefined });
  });
});
