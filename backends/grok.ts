// xAI Grok over its OpenAI-compatible Chat Completions API, with the `openai` SDK.
// The SDK is imported inside call(), so a server that never runs grok never loads it.
import type { ApiBackend, Environment } from './types.js';
import {
  apiExtraInput,
  apiOptions,
  emptyAnswer,
  loadSdk,
  makeUsage,
  toFailureOutcome,
  withPolicy,
} from './http-policy.js';

const XAI_BASE_URL = 'https://api.x.ai/v1';
const VENDOR = 'x.ai (grok)';

/** The SDK's logger, kept off stdout (which carries only JSON-RPC). */
const stderrLogger = {
  error: (...args: unknown[]) => console.error('openai:', ...args),
  warn: (...args: unknown[]) => console.error('openai:', ...args),
  info: () => undefined,
  debug: () => undefined,
};

/**
 * Header names the SDK would add from OPENAI_CUSTOM_HEADERS: removed, they are meant for OpenAI.
 * (The SDK reads the variable from the process; polyspawn's environment is the process's own.)
 */
function inheritedHeaders(env: Environment): Record<string, null> {
  const raw = env.OPENAI_CUSTOM_HEADERS;
  const out: Record<string, null> = {};
  for (const line of raw ? raw.split('\n') : []) {
    const colon = line.indexOf(':');
    if (colon > 0) out[line.slice(0, colon).trim()] = null;
  }
  return out;
}

/** Text of a message content: a string, or (some compatible servers) an array of text parts. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) =>
      p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string'
        ? (p as { text: string }).text
        : '',
    )
    .join('');
}

export const grok: ApiBackend = {
  name: 'grok',
  kind: 'api',
  keyNames: ['XAI_API_KEY', 'GROK_API_KEY', 'X_API_KEY'],
  keyLabel: 'xAI API key',
  defaultBaseUrl: XAI_BASE_URL,
  title: 'Grok (xAI API)',
  secretPatterns: [String.raw`\bxai-[A-Za-z0-9_-]{16,}`],
  models: {
    default: 'grok-4.3',
    aliases: { default: 'grok-4.3', reasoning: 'grok-4.20-0309-reasoning', fast: 'grok-4.20-0309-non-reasoning' },
    prices: {
      'grok-4.3': { input: 1.25, output: 2.5 },
      'grok-4.20-0309-reasoning': { input: 2, cachedInput: 0.2, output: 6 },
      'grok-4.20-0309-non-reasoning': { input: 2, cachedInput: 0.2, output: 6 },
    },
  },
  description: 'xAI Grok by API: second opinions, plans, brainstorming.',
  supportsSystemPrompt: true,
  supportsResume: false,
  extraInput: apiExtraInput,

  async call(input, ctx) {
    const { maxOutputTokens, temperature } = apiOptions(input.extra);
    const messages = [
      ...(input.systemPrompt ? [{ role: 'system' as const, content: input.systemPrompt }] : []),
      { role: 'user' as const, content: input.prompt },
    ];
    try {
      const { default: OpenAI } = await loadSdk(VENDOR, ctx, () => import('openai'));
      const { value: completion, attempts } = await withPolicy(VENDOR, ctx, async (attempt) => {
        const client = new OpenAI({
          // Always explicit: the SDK would otherwise read OPENAI_API_KEY, OPENAI_BASE_URL,
          // OPENAI_ORG_ID and OPENAI_PROJECT_ID from the environment and send them to x.ai.
          apiKey: ctx.key,
          baseURL: ctx.baseUrl ?? XAI_BASE_URL,
          organization: null,
          project: null,
          adminAPIKey: null,
          maxRetries: 0, // the policy retries
          timeout: 2_147_483_647, // the policy times out (the SDK would retry its own timeouts)
          fetch: attempt.fetch,
          defaultHeaders: inheritedHeaders(ctx.env ?? {}),
          logger: stderrLogger,
          logLevel: 'warn',
        });
        return client.chat.completions.create(
          {
            model: input.model,
            messages,
            max_completion_tokens: maxOutputTokens,
            temperature,
          },
          { signal: attempt.signal, maxRetries: 0 },
        );
      });
      const choice = completion.choices?.[0];
      const u = completion.usage;
      // xAI counts reasoning tokens outside completion_tokens but inside total_tokens (OpenAI
      // counts them inside both): total - prompt covers both conventions.
      const output = u ? Math.max(u.completion_tokens ?? 0, (u.total_tokens ?? 0) - (u.prompt_tokens ?? 0)) : 0;
      const usage = u ? makeUsage(u.prompt_tokens, output, u.prompt_tokens_details?.cached_tokens) : undefined;
      const raw = {
        id: completion.id,
        model: completion.model,
        finish_reason: choice?.finish_reason ?? null,
        usage: u ?? null,
        attempts,
      };
      const text = contentText(choice?.message?.content);
      if (!text.trim()) return emptyAnswer(VENDOR, choice?.finish_reason ?? undefined, attempts, usage, raw);
      return { ok: true, text, usage, costSource: 'unknown', raw };
    } catch (error) {
      return toFailureOutcome(error, VENDOR);
    }
  },
};
