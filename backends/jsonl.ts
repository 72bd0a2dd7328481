// CLI output helpers shared by the backends' parsers.

type JsonRecord = Record<string, unknown>;

/** Each line of `text` that parses as a JSON object; other lines are counted, not thrown on. */
export function jsonLines(text: string): { records: JsonRecord[]; unparsed: number } {
  const records: JsonRecord[] = [];
  let unparsed = 0;
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    try {
      const value: unknown = JSON.parse(trimmed);
      if (value && typeof value === 'object' && !Array.isArray(value)) records.push(value as JsonRecord);
      else unparsed++;
    } catch {
      unparsed++;
    }
  }
  return { records, unparsed };
}

export function field(record: unknown, ...path: string[]): unknown {
  let value = record;
  for (const key of path) {
    if (!value || typeof value !== 'object') return undefined;
    value = (value as JsonRecord)[key];
  }
  return value;
}

export const asString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
export const asNumber = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/** The error for output that ended without the record that says how the run went. */
export function missingResult(
  cli: string,
  what: string,
  result: { stdoutTruncated: boolean; exitCode: number | null; stderr: string },
): string {
  const cut = result.stdoutTruncated ? ' (the output was too long to read whole: its middle is only in the log)' : '';
  const stderr = result.stderr.trim().split('\n').slice(-3).join(' | ');
  return `${cli} exited with code ${result.exitCode ?? 'none'} without ${what}: its output is malformed or truncated${cut}${stderr ? `; stderr: ${stderr}` : ''}`;
}

/** The text of a tool's result as the CLIs write it: a string, or blocks of which the text ones count. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((block) => asString(field(block, 'text')) ?? '')
    .filter(Boolean)
    .join('\n');
}

/** A tool's arguments as one line of JSON (the dashboard shows them; `{}` when there are none). */
export const argumentsText = (value: unknown): string => (value === undefined ? '{}' : JSON.stringify(value));
