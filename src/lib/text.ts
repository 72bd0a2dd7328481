// Short forms of a job's text for tables and lists.

const TASK_CHARS = 80;

/** An environment variable's name, as a config or an agent definition may list one. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** A value's size as JSON text in UTF-8 bytes: how it is quoted into a command-line argument, and what Linux counts. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '');

/**
 * The "task": the prompt's first line, shortened. `redact` runs before the cut, so a secret the
 * cut would shorten is still recognized.
 */
export function taskLine(prompt: string, redact: (text: string) => string = (t) => t): string {
  const line = redact((prompt.trim().split('\n', 1)[0] ?? '').slice(0, TASK_CHARS + 256));
  return line.length > TASK_CHARS ? `${line.slice(0, TASK_CHARS - 1)}…` : line;
}

/** `text` cut to at most `max` characters, ending in … where it was cut. */
export const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/**
 * Characters that could drive a terminal or reorder what it shows: C0 controls but tab and line
 * feed, DEL, C1 controls (ESC and CSI among them), and the bidirectional overrides and isolates.
 */
const UNPRINTABLE = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/g;

/** Foreign text as a terminal may show it: each unprintable character as U+FFFD. */
export const printable = (text: string) => text.replace(UNPRINTABLE, '\uFFFD');

/** `text` cut to at most `max` characters, at a word boundary when one is near, ending in `more` where it was cut. */
export function shorten(text: string, max: number, more = '…'): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max - more.length);
  const space = cut.lastIndexOf(' ');
  return `${(space > cut.length * 0.8 ? cut.slice(0, space) : cut).trimEnd()}${more}`;
}

/** Names that mark a secret (Codex's own default for the commands it runs); TOKENS counts (MAX_OUTPUT_TOKENS). */
export const SECRET_NAME = /KEY|SECRET|PASSWORD|TOKEN(?!S)/i;

/**
 * What a model must look like to be passed on: a name, never an option for a CLI's argv or a path
 * for an API's URL. Held for a model a caller names and for every model a models.json or an ACP
 * agent's declaration names (a cloned repository ships .polyspawn/models.json).
 */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}$/;
export const isModelName = (name: string) => MODEL_NAME.test(name) && !name.includes('..');
export const PLAIN_NAME_RULE = 'letters, digits and . _ : @ / + -, starting with a letter or digit, at most 200';
