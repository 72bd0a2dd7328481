// Mistral over its Chat Completions API, with `@mistralai/mistralai`'s standalone functions
// (MistralCore + chatComplete load ~40% faster and ~25 MB lighter than the whole `Mistral`
// class). The SDK is imported inside call(), so a server that never runs mistral never loads it.
import type { ApiBackend } from './types.js';
import {
  apiExtraInput,
  apiOptions,
  emptyAnswer,
  loadSdk,
  makeUsage,
  toFailureOutcome,
  withPolicy,
} from './http-policy.js';

const MISTRAL_BASE_URL = 'https://api.mistral.ai';
const VENDOR = 'the Mistral API';

/** MISTRAL_DEBUG would make the SDK log every request with console.log, i.e. onto stdout. */
const silentLogger = { group: () => undefined, groupEnd: () => undefined, log: () => undefined };

/** The answer's text: content may be a string, an array of chunks (text, thinking, ...) or null. */
export function mistralText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((c) =>
      c &&
      typeof c === 'object' &&
      (c as { type?: unknown }).type === 'text' &&
      typeof (c as { text?: unknown }).text === 'string'
        ? (c as { text: string }).text
        : '',
    )
    .join('');
}

/** Cached prompt tokens, under whichever name the API and the SDK's passthrough give them. */
function cachedTokens(usage: Record<string, unknown>): unknown {
  const details = (usage.promptTokensDetails ?? usage.prompt_tokens_details) as Record<string, unknown> | undefined;
  return details?.cachedTokens ?? details?.cached_tokens ?? usage.numCachedTokens ?? usage.num_cached_tokens;
}

export const mistral: ApiBackend = {
  name: 'mistral',
  kind: 'api',
  keyNames: ['MISTRAL_API_KEY'],
  keyLabel: 'Mistral API key',
  defaultBaseUrl: MISTRAL_BASE_URL,
  title: 'Mistral (Mistral AI API)',
  // Its keys have no recognizable shape: only configured values are redacted.
  secretPatterns: [],
  models: {
    default: 'mistral-medium-latest',
    aliases: {
      medium: 'mistral-medium-latest',
      large: 'mistral-large-latest',
      small: 'mistral-small-latest',
      devstral: 'devstral-latest',
    },
    prices: {
      'mistral-medium-latest': { input: 1.5, output: 7.5 },
      'mistral-large-latest': { input: 0.5, output: 1.5 },
      'mistral-small-latest': { input: 0.15, output: 0.6 },
      'devstral-latest': { input: 0.4, output: 2 },
    },
  },
  description: 'Mistral by API: second opinions, plans, European languages.',
  supportsSystemPrompt: true,
  supportsResume: false,
  extraInput: apiExtraInput,

  async call(input, ctx) {
    const { maxOutputTokens, temperature } = apiOptions(input.extra);
    try {
      const [{ MistralCore }, { chatComplete }, { HTTPClient }] = await loadSdk(VENDOR, ctx, () =>
        Promise.all([
          import('@mistralai/mistralai/core.js'),
          import('@mistralai/mistralai/funcs/chatComplete.js'),
          import('@mistralai/mistralai/lib/http.js'),
        ]),
      );
      const { value: response, attempts } = await withPolicy(VENDOR, ctx, async (attempt) => {
        const core = new MistralCore({
          apiKey: ctx.key,
          serverURL: ctx.baseUrl ?? MISTRAL_BASE_URL,
          retryConfig: { strategy: 'none' }, // the policy retries
          httpClient: new HTTPClient({ fetcher: attempt.fetch }),
          debugLogger: silentLogger,
        });
        const result = await chatComplete(
          core,
          {
            model: input.model,
            messages: [
              ...(input.systemPrompt ? [{ role: 'system' as const, content: input.systemPrompt }] : []),
              { role: 'user' as const, content: input.prompt },
            ],
            ...(maxOutputTokens !== undefined ? { maxTokens: maxOutputTokens } : {}),
            ...(temperature !== undefined ? { temperature } : {}),
          },
          // A signal turns the SDK's own timeout off; the policy's governs.
          { retries: { strategy: 'none' }, signal: attempt.signal },
        );
        if (!result.ok) throw result.error;
        return result.value;
      });
      const choice = response.choices?.[0];
      const u = response.usage as Record<string, unknown> | undefined;
      const usage = u ? makeUsage(u.promptTokens, u.completionTokens, cachedTokens(u)) : undefined;
      const raw = {
        id: response.id,
        model: response.model,
        finish_reason: choice?.finishReason ?? null,
        usage: u ?? null,
        attempts,
      };
      const text = mistralText(choice?.message?.content);
      if (!text.trim()) return emptyAnswer(VENDOR, choice?.finishReason ?? undefined, attempts, usage, raw);
      return { ok: true, text, usage, costSource: 'unknown', raw };
    } catch (error) {
      return toFailureOutcome(error, VENDOR);
    }
  },
};
