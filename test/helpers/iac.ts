// Parses IAC.md back with a real Markdown parser (markdown-it, GFM tables), so tests check what
// a reader sees: whole tables, closed fences and <details> blocks, and the text inside them.
import MarkdownIt, { type Token } from 'markdown-it';
import { END_MARK } from '../../iac/render.js';

export type ParsedEntry = {
  id: string;
  heading: string;
  /** The entry's table: header cells and its one row, as plain text. */
  header: string[];
  cells: string[];
  task: string;
  prompt: string;
  result?: string;
  error?: string;
  notes: string[];
};

export type ParsedIac = {
  activeHeader: string[];
  active: string[][];
  entries: ParsedEntry[];
};

const md = new MarkdownIt({ html: true });

/** The text a reader sees in an inline token (escapes resolved, tags and entities decoded). */
function plain(token: Token | undefined): string {
  if (!token?.children) return token?.content ?? '';
  return token.children
    .map((c) =>
      c.type === 'text' || c.type === 'code_inline'
        ? c.content
        : c.type === 'softbreak' || c.type === 'hardbreak'
          ? '\n'
          : c.type === 'html_inline'
            ? c.content
            : '',
    )
    .join('');
}

function tableAt(tokens: Token[], at: number): { header: string[]; rows: string[][]; end: number } {
  const header: string[] = [];
  const rows: string[][] = [];
  let row: string[] | undefined;
  let i = at;
  for (; tokens[i]!.type !== 'table_close'; i++) {
    const t = tokens[i]!;
    if (t.type === 'tr_open') row = [];
    if (t.type === 'inline' && row) row.push(plain(t));
    if (t.type === 'tr_close' && row) {
      if (header.length === 0) header.push(...row);
      else rows.push(row);
      row = undefined;
    }
  }
  return { header, rows, end: i };
}

/**
 * Parses IAC.md, throwing when it is not whole: the end mark must be the last block (an
 * unclosed fence or <details> would swallow it), every <details> must close before the next
 * opens, every table row must have its header's cell count in the source, and every entry must
 * have its parts in order.
 */
export function parseIac(text: string): ParsedIac {
  if (!text.endsWith(`${END_MARK}\n`)) throw new Error('IAC.md does not end with its end mark: cut short');
  const tokens = md.parse(text, {});
  const last = tokens[tokens.length - 1]!;
  if (last.type !== 'html_block' || last.content.trim() !== END_MARK)
    throw new Error(`the end mark is not a block of its own (last token: ${last.type})`);
  const lines = text.split('\n');

  let open = false;
  for (const t of tokens) {
    if (t.type === 'html_block' || t.type === 'html_inline') {
      const c = t.content.trim();
      if (c.startsWith('<details>')) {
        if (open) throw new Error('<details> opened inside another');
        open = true;
      } else if (c === '</details>') {
        if (!open) throw new Error('</details> without <details>');
        open = false;
      } else if (c !== END_MARK && !c.startsWith('<!--'))
        throw new Error(`unexpected HTML outside code: ${c.slice(0, 80)}`);
    }
    for (const c of t.children ?? [])
      if (c.type === 'html_inline') throw new Error(`inline HTML outside code: ${c.content}`);
    if (t.type === 'table_open') {
      // In the source, every row must split into the header's cell count on unescaped pipes.
      const [from, to] = t.map!;
      const counts = lines.slice(from, to).map((l) => l.replace(/\\./g, '').split('|').length);
      if (new Set(counts).size !== 1)
        throw new Error(`table rows with different cell counts: ${counts.join(',')} at line ${from + 1}`);
    }
  }
  if (open) throw new Error('<details> never closed');

  const parsed: ParsedIac = { activeHeader: [], active: [], entries: [] };
  let section = '';
  let entry: ParsedEntry | undefined;
  let label = '';
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.type === 'heading_open') {
      const title = plain(tokens[i + 1]);
      if (t.tag === 'h2') section = title;
      if (t.tag === 'h3') {
        if (section !== 'Interaction History') throw new Error(`entry heading outside the history: ${title}`);
        const id = /^(\S+)/.exec(title)?.[1] ?? '';
        entry = { id, heading: title, header: [], cells: [], task: '', prompt: '', notes: [] };
        parsed.entries.push(entry);
        label = '';
      }
      if (t.tag === 'h1' && (i !== 0 || title !== 'IAC.md: Inter-Agent Context'))
        throw new Error(`unexpected title: ${title}`);
      if (t.tag === 'h4' || t.tag === 'h5' || t.tag === 'h6') throw new Error(`unexpected heading: ${title}`);
      i += 2;
      continue;
    }
    if (t.type === 'table_open') {
      const table = tableAt(tokens, i);
      if (section === 'Active Agents') {
        parsed.activeHeader = table.header;
        parsed.active = table.rows;
      } else if (entry) {
        if (table.rows.length !== 1) throw new Error(`entry ${entry.id}: its table has ${table.rows.length} rows`);
        entry.header = table.header;
        entry.cells = table.rows[0]!;
      } else throw new Error('a table outside any section');
      i = table.end;
      continue;
    }
    if (t.type === 'inline' && entry) {
      const content = plain(t);
      if (content.startsWith('Task: ')) entry.task = content.slice('Task: '.length);
      else if (content === 'Result:' || content === 'Error:') label = content;
      else if (tokens[i - 1]?.type === 'paragraph_open') entry.notes.push(content);
    }
    if (t.type === 'fence' && entry) {
      if (label === 'Result:' && entry.result === undefined) entry.result = t.content;
      else if (label === 'Error:' && entry.error === undefined) entry.error = t.content;
      else if (label === '' && entry.prompt === '') entry.prompt = t.content;
      else throw new Error(`entry ${entry.id}: an unexpected code block`);
      label = '';
    }
    if (t.type === 'fence' && !entry) throw new Error('a code block outside any entry');
  }
  return parsed;
}
