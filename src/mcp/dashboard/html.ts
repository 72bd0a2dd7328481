// The one escape every text from an agent, a prompt or a repository goes through on the
// dashboard's pages: an agent's output is untrusted input to them.
export const esc = (text: unknown): string =>
  String(text ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
