// An agent's Markdown (its messages, its final answer) as HTML, by markdown-it with HTML off:
// every tag an agent writes comes out as text. Images are off too (an agent's image would be a
// request this page makes, and the CSP allows none elsewhere anyway); links keep markdown-it's
// check (no javascript: or data: URLs) and open without this page as opener or referrer.
// markdown-it and the diff library load with the dashboard's first request (`loadRenderers`),
// not at every start of polyspawn.
import type { Change } from 'diff';

/** Past this, the rest of a text is left out (its whole is in the log): rendering costs time. */
const MARKDOWN_CHARS = 100_000;

/** Past this many changed lines two texts are too different to show as a diff (the search would cost time). */
const MAX_EDIT_LINES = 2000;

let renderers:
  { markdown(text: string): string; diffLines(before: string, after: string): Change[] | undefined } | undefined;

export async function loadRenderers(): Promise<void> {
  if (renderers) return;
  const [{ default: MarkdownIt }, { diffLines }] = await Promise.all([import('markdown-it'), import('diff')]);
  const md = new MarkdownIt({ html: false, linkify: false, typographer: false });
  md.disable('image');
  md.renderer.rules.link_open = (tokens, index, options, _env, self) => {
    tokens[index]!.attrSet('rel', 'noopener noreferrer');
    tokens[index]!.attrSet('target', '_blank');
    return self.renderToken(tokens, index, options);
  };
  renderers = {
    markdown: (text) => md.render(text),
    diffLines: (before, after) => diffLines(before, after, { maxEditLength: MAX_EDIT_LINES }),
  };
}

function loaded() {
  if (!renderers) throw new Error('the dashboard renders after loadRenderers()');
  return renderers;
}

export function markdown(text: string): string {
  const cut = text.length > MARKDOWN_CHARS;
  return loaded().markdown(
    cut ? `${text.slice(0, MARKDOWN_CHARS)}\n\n… (cut here: the whole text is in the log)` : text,
  );
}

/** The lines two texts differ in (jsdiff), or undefined when they differ in too many. */
export const diffLines = (before: string, after: string): Change[] | undefined => loaded().diffLines(before, after);
