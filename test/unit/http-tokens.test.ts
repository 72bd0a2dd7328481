// The bearer tokens of the HTTP side of MCP (src/mcp/http/tokens.ts): random, recognisable by
// the redactor, each standing for its principal until the principal is revoked.
import { describe, expect, test } from 'vitest';
import { tokenTable } from '../../src/mcp/http/tokens.js';
import { REDACTED, Redactor } from '../../src/lib/redact.js';

describe('tokenTable', () => {
  test('issues distinct psp_ tokens of 256 random bits', () => {
    const table = tokenTable<string>();
    const tokens = Array.from({ length: 200 }, (_, i) => table.issue(`run-${i}`));
    expect(new Set(tokens).size).toBe(tokens.length);
    for (const token of tokens) expect(token).toMatch(/^psp_[A-Za-z0-9_-]{43}$/);
    // 43 base64url characters carry 258 bits, of which the last 2 are padding zeros: 256 random.
    expect(Buffer.from(tokens[0]!.slice(4), 'base64url')).toHaveLength(32);
  });

  test('a token finds its principal; anything else finds none', () => {
    const table = tokenTable<{ job: string }>();
    const a = { job: 'a' };
    const b = { job: 'b' };
    const tokenA = table.issue(a);
    const tokenB = table.issue(b);
    expect(table.lookup(tokenA)).toBe(a);
    expect(table.lookup(tokenB)).toBe(b);
    for (const other of ['', 'psp_', tokenA.slice(0, -1), `${tokenA}x`, tokenA.toUpperCase(), ` ${tokenA}`]) {
      expect(table.lookup(other), other).toBeUndefined();
    }
  });

  test('revoke ends every token of that principal and no other', () => {
    const table = tokenTable<string>();
    const first = table.issue('run-a');
    const second = table.issue('run-a');
    const other = table.issue('run-b');
    table.revoke('run-a');
    expect(table.lookup(first)).toBeUndefined();
    expect(table.lookup(second)).toBeUndefined();
    expect(table.lookup(other)).toBe('run-b');
    table.revoke('run-a'); // again: nothing left to revoke
    expect(table.lookup(table.issue('run-a'))).toBe('run-a'); // a revoked principal may be issued a new one
  });

  test('the redactor knows a token by its shape, wherever it stands', () => {
    const token = tokenTable<string>().issue('run-a');
    const redactor = new Redactor();
    for (const text of [token, `PARENT_TOKEN=${token}`, `{"Authorization":"Bearer ${token}"}`, `"${token}"`]) {
      const redacted = redactor.text(text);
      expect(redacted, text).not.toContain(token.slice(4));
      expect(redacted).toContain(REDACTED);
    }
  });
});
