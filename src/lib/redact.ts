// Secrets never leave polyspawn: the values of the configured API keys, and anything shaped like
// a key or token, are replaced by [REDACTED] in the run store, IAC.md, the logs the `logs` tool
// returns and every tool result. The shapes here are those no one backend owns; each backend
// declares its vendor's own (`secretPatterns`), and createApp builds the app's one Redactor from
// both and the configured values.

export const REDACTED = '[REDACTED]';
/** Every polyspawn bearer token starts with this, so the redactor knows one by its shape. */
export const TOKEN_PREFIX = 'psp_';

/**
 * Shapes of common keys and tokens that no backend owns. ASCII only, so they match in latin1
 * (byte) text too; the same holds for the shapes backends declare.
 */
const GENERIC_PATTERNS = [
  String.raw`\bglpat-[A-Za-z0-9_-]{20,}`, // GitLab
  String.raw`\bxox[abposr]-[A-Za-z0-9-]{10,}`, // Slack
  String.raw`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, // AWS access key ids
  String.raw`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`, // JWTs
  String.raw`\bpsp_[A-Za-z0-9_-]{40,}`, // polyspawn's own bearer tokens (src/mcp/http/tokens.ts)
  // "Bearer <token>": only the token is replaced (see BEARER). No lookbehind: it would make
  // the expression try it at every position, four times slower on a long log.
  String.raw`\b[Bb]earer[ \t]+[A-Za-z0-9._~+/=-]{16,}`,
];
const BEARER = /^[Bb]earer[ \t]+/;

/** Shorter values are too likely to be ordinary text (and no real key is this short). */
const MIN_VALUE_LENGTH = 8;

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export class Redactor {
  private readonly patterns: readonly string[];
  private readonly values = new Set<string>();
  private textRe!: RegExp;
  private byteRe!: RegExp;

  /** keyShapes: regular expression sources of vendor keys (the backends'), besides the generic shapes. */
  constructor(values: Iterable<string> = [], keyShapes: readonly string[] = []) {
    this.patterns = [...new Set([...keyShapes, ...GENERIC_PATTERNS])];
    this.addValues(values);
  }

  /** Adds literal secret values (API keys); short or blank ones are ignored. */
  addValues(values: Iterable<string>): void {
    const known = this.values.size;
    for (const v of values) {
      const value = v.trim();
      if (value.length >= MIN_VALUE_LENGTH) this.values.add(value);
    }
    // Called with the key files' values at every spawn: rebuild only for a new one.
    if (known === this.values.size && this.textRe) return;
    const literal = [...this.values].sort((a, b) => b.length - a.length);
    this.textRe = new RegExp([...literal.map(escapeRegExp), ...this.patterns].join('|'), 'g');
    // The same, for text decoded as latin1 (one char per byte): the logs tool and the file
    // scrubber match on bytes, so a match's offsets are byte offsets.
    const bytes = literal.map((v) => escapeRegExp(Buffer.from(v, 'utf8').toString('latin1')));
    this.byteRe = new RegExp([...bytes, ...this.patterns].join('|'), 'g');
  }

  text(s: string): string {
    this.textRe.lastIndex = 0;
    return s.replace(this.textRe, (m) => `${BEARER.exec(m)?.[0] ?? ''}${REDACTED}`);
  }

  has(s: string): boolean {
    this.textRe.lastIndex = 0;
    return this.textRe.test(s);
  }

  /** Every string in a JSON-like value (object keys too), redacted; other values as they are. */
  deep<T>(value: T): T {
    const walk = (v: unknown): unknown => {
      if (typeof v === 'string') return this.text(v);
      if (Array.isArray(v)) return v.map(walk);
      if (v && typeof v === 'object') {
        const out: Record<string, unknown> = {};
        for (const [k, x] of Object.entries(v)) out[this.text(k)] = walk(x);
        return out;
      }
      return v;
    };
    return walk(value) as T;
  }

  /** [start, end) spans of secrets in text decoded as latin1: byte offsets. */
  byteSpans(latin1: string): Array<[number, number]> {
    const spans: Array<[number, number]> = [];
    this.byteRe.lastIndex = 0;
    for (const m of latin1.matchAll(this.byteRe))
      spans.push([m.index + (BEARER.exec(m[0])?.[0].length ?? 0), m.index + m[0].length]);
    return spans;
  }
}
