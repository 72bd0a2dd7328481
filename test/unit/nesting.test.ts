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
    // Empty is not "not nested": a client that blanks the variable gets a polyspawn that fails closed.
    [{ POLYSPAWN_DEPTH: '' }, false],
    [{ POLYSPAWN_DEPTH: ' ' }, false],
  ])('%j: can spawn %s', (env, can) => {
    const n = nestingFrom(env);
    expect(n.canSpawn).toBe(can);
    if (!can) expect(n.reason).toBeTruthy();
  });

  test('a marker in an ancestor process counts when the environment lost it, and the deeper of the two wins', () => {
    // Codex starts its MCP servers with a cleared environment; the codex process itself has the marker.
    const cleared = nestingFrom({}, { POLYSPAWN_DEPTH: '1' });
    expect(cleared).toMatchObject({ depth: 1, canSpawn: false });
    expect(nestingFrom({}, { POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '1' })).toMatchObject({
      depth: 1,
      allowDepth: 1,
      canSpawn: true,
    });
    expect(nestingFrom({ POLYSPAWN_DEPTH: '0' }, { POLYSPAWN_DEPTH: '2' })).toMatchObject({
      depth: 2,
      canSpawn: false,
    });
    expect(nestingFrom({ POLYSPAWN_DEPTH: '2' }, { POLYSPAWN_DEPTH: '1' })).toMatchObject({
      depth: 2,
      canSpawn: false,
    });
    expect(nestingFrom({}, { POLYSPAWN_DEPTH: 'x' }).canSpawn).toBe(false);
    expect(nestingFrom({}, {})).toMatchObject({ depth: 0, canSpawn: true });
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
