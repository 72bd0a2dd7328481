// Markdown that holds whatever the agents wrote without breaking the document around it:
// every piece of foreign text goes through exactly one of these.

/**
 * Normalizes foreign text: CRLF and CR to LF, ANSI escape sequences removed, NUL and the other
 * control characters (but tab and newline), the Unicode bidi embeddings, overrides and isolates
 * (which reorder what a reader sees: "invoice_\u202Efdp.exe" shows as "invoice_exe.pdf") and lone
 * surrogates to U+FFFD. Right-to-left text itself needs none of them.
 */
export function clean(s: string): string {
  return s
    .replace(/\r\n?/g, '\n')
    .replace(/\u001b\[[0-?]*[ -/]*[@-~]/g, '')
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f\u202a-\u202e\u2066-\u2069]/g, '\uFFFD')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/**
 * One line of inline text, safe in a paragraph and in a table cell: newlines become spaces,
 * and every character that could start Markdown or HTML syntax (including the cell separator
 * `|`, code spans, links, emphasis, HTML, entities and GitHub's math) is backslash-escaped.
 */
export function inline(s: string): string {
  return clean(s)
    .replace(/\s*\n\s*/g, ' ')
    .replace(/[\\`*_[\]<>|~&$!]/g, '\\$&')
    .trim();
}

/**
 * A fenced code block that nothing inside can close: the fence is longer than the longest run
 * of backticks in the text. Inside it, Markdown and HTML (`</details>` included) are plain text.
 */
export function fence(text: string, info = 'text'): string {
  const body = clean(text);
  let longest = 0;
  for (const run of body.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const ticks = '`'.repeat(Math.max(3, longest + 1));
  return `${ticks}${info}\n${body}${body === '' || body.endsWith('\n') ? '' : '\n'}${ticks}`;
}

/**
 * At most `max` characters of `s`, cut at a line end when one is near the limit and never
 * inside a surrogate pair; `cut` is how many characters were left out.
 */
export function shorten(s: string, max: number): { text: string; cut: number } {
  if (s.length <= max) return { text: s, cut: 0 };
  let end = max;
  const newline = s.lastIndexOf('\n', max);
  if (newline >= max * 0.8) end = newline + 1;
  else if (/[\uD800-\uDBFF]/.test(s.charAt(end - 1))) end -= 1;
  return { text: s.slice(0, end), cut: s.length - end };
}

/** A GFM table; cells are escaped by the caller (inline()). */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.map((c) => (c === '' ? ' ' : c)).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
