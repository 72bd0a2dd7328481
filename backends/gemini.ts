// Google Gemini over the Gemini Developer API (generateContent), with `@google/genai`.
// The SDK is imported inside call(), so a server that never runs gemini never loads it.
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

/** Explicit, so GOOGLE_GEMINI_BASE_URL in the environment does not silently redirect the key. */
const GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com';
const VENDOR = 'the Gemini API';

type Part = { text?: unknown; thought?: unknown };

export const gemini: ApiBackend = {
  name: 'gemini',
  kind: 'api',
  keyNames: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_AI_KEY'],
  keyLabel: 'Gemini API key',
  defaultBaseUrl: GEMINI_BASE_URL,
  title: 'Gemini (Google AI API)',
  // Google API keys: AIza…
  secretPatterns: [String.raw`\bAIza[0-9A-Za-z_-]{30,}`],
  models: {
    default: 'gemini-3.5-flash',
    aliases: { flash: 'gemini-3.5-flash', lite: 'gemini-3.1-flash-lite', pro: 'gemini-3.1-pro-preview' },
    prices: {
      'gemini-3.5-flash': { input: 1.5, cachedInput: 0.15, output: 9 },
      'gemini-3.1-flash-lite': { input: 0.25, cachedInput: 0.025, output: 1.5 },
      'gemini-3.1-pro-preview': { input: 2, cachedInput: 0.2, output: 12 },
    },
  },
  description: 'Google Gemini by API: long inputs, second opinions, plans.',
  supportsSystemPrompt: true,
  supportsResume: false,
  extraInput: apiExtraInput,

  async call(input, ctx) {
    const { maxOutputTokens, temperature } = apiOptions(input.extra);
    try {
      const { GoogleGenAI } = await loadSdk(VENDOR, ctx, () => import('@google/genai'));
      const { value: response, attempts } = await withPolicy(VENDOR, ctx, async (attempt) => {
        const ai = new GoogleGenAI({
          apiKey: ctx.key,
          // Explicit: GOOGLE_GENAI_USE_VERTEXAI in the environment would switch to Vertex AI.
          vertexai: false,
          // No retryOptions: the SDK does not retry, the policy does. No timeout: the policy's.
          httpOptions: { baseUrl: ctx.baseUrl ?? GEMINI_BASE_URL, fetch: attempt.fetch },
        });
        return ai.models.generateContent({
          model: input.model,
          contents: [{ role: 'user', parts: [{ text: input.prompt }] }],
          config: {
            abortSignal: attempt.signal,
            ...(input.systemPrompt ? { systemInstruction: input.systemPrompt } : {}),
            ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
            ...(temperature !== undefined ? { temperature } : {}),
          },
        });
      });
      const candidate = response.candidates?.[0];
      const m = response.usageMetadata;
      // Thinking is billed as output: output = candidates + thoughts. promptTokenCount
      // includes the cached part.
      const usage = m
        ? makeUsage(
            m.promptTokenCount,
            (m.candidatesTokenCount ?? 0) + (m.thoughtsTokenCount ?? 0),
            m.cachedContentTokenCount,
          )
        : undefined;
      const finishReason = candidate?.finishReason ?? response.promptFeedback?.blockReason;
      const raw = {
        responseId: response.responseId ?? null,
        modelVersion: response.modelVersion ?? null,
        finishReason: finishReason ?? null,
        usageMetadata: m ?? null,
        attempts,
      };
      const parts = (candidate?.content?.parts ?? []) as Part[];
      const text = parts
        .filter((p) => typeof p.text === 'string' && p.thought !== true)
        .map((p) => p.text as string)
        .join('');
      if (!text.trim())
        return emptyAnswer(VENDOR, finishReason ? String(finishReason) : undefined, attempts, usage, raw);
      return { ok: true, text, usage, costSource: 'unknown', raw };
    } catch (error) {
      return toFailureOutcome(error, VENDOR);
    }
  },
};
