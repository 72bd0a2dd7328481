// What every file of the dashboard writes its HTML with: every text that is not the page's own (an
// agent's, a repository's file names, an id from the URL) goes through `esc`.
export const esc = (text: unknown): string =>
  String(text ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

/** A link to an agent's page. */
export const agentLink = (id: string, label: string = id) => `<a href="/agents/${esc(id)}">${esc(label)}</a>`;

/**
 * A form of one button that posts to `action` (one of the dashboard's own paths): `fields` go as
 * hidden inputs, `confirm` is asked first, `danger` marks a button that deletes.
 */
export function postButton(
  action: string,
  label: string,
  options: { fields?: Record<string, string>; confirm?: string; danger?: boolean } = {},
): string {
  const hidden = Object.entries(options.fields ?? {})
    .map(([name, value]) => `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`)
    .join('');
  // The page's script asks it before the form is sent (no inline handler: the CSP allows none).
  const ask = options.confirm ? ` data-confirm="${esc(options.confirm)}"` : '';
  return `<form class="action${options.danger ? ' danger' : ''}" method="post" action="${esc(action)}"${ask}>${hidden}<button type="submit">${esc(label)}</button></form>`;
}
