// Bearer tokens for the HTTP side of MCP: each stands for one principal (a running job, a client)
// until it is revoked. Only a digest of each token is kept, and a token is found by its digest:
// the lookup compares digests, which a caller cannot steer a byte at a time, so the time it takes
// says nothing about how close a guess was (and the tokens themselves are not held in memory).
import { createHash, randomBytes } from 'node:crypto';
import { TOKEN_PREFIX } from '../../lib/redact.js';

/** 256 random bits: 43 base64url characters after the prefix. */
const TOKEN_BYTES = 32;

type TokenTable<P> = {
  /** A new token for the principal; a principal may hold several. */
  issue(principal: P): string;
  /** Every token of the principal stops working at once. */
  revoke(principal: P): void;
  /** The principal the token stands for, or undefined for a token never issued or revoked. */
  lookup(token: string): P | undefined;
};

const digest = (token: string) => createHash('sha256').update(token).digest('base64');

export function tokenTable<P>(): TokenTable<P> {
  const principalByDigest = new Map<string, P>();
  const digestsOf = new Map<P, Set<string>>();
  return {
    issue(principal) {
      const token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString('base64url');
      const key = digest(token);
      principalByDigest.set(key, principal);
      const held = digestsOf.get(principal) ?? new Set<string>();
      held.add(key);
      digestsOf.set(principal, held);
      return token;
    },
    revoke(principal) {
      for (const key of digestsOf.get(principal) ?? []) principalByDigest.delete(key);
      digestsOf.delete(principal);
    },
    lookup(token) {
      return principalByDigest.get(digest(token));
    },
  };
}
