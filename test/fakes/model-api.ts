/**
 * A fake model API on 127.0.0.1 for the integration and contract tests. node:http only.
 *
 * It speaks just enough of four wire protocols for the real vendor CLIs and SDKs to run
 * against it offline (see test/fakes/fake-api.md and test/contract/FINDINGS.md):
 *
 *   Anthropic Messages       POST  /v1/messages[?beta=true]                  claude
 *   OpenAI Responses         POST  /v1/responses                             codex
 *   OpenAI Chat Completions  POST  /v1/chat/completions                      copilot, openai SDK, Mistral SDK
 *   Gemini                   POST  /v1beta/models/{model}:generateContent     @google/genai, gemini
 *                            POST  /v1beta/models/{model}:streamGenerateContent?alt=sse
 *                            POST  /v1beta/models/{model}:countTokens
 *                            GET   /v1beta/models, /v1beta/models/{model}
 *
 * Routing is by path suffix, so a client whose base URL lacks `/v1` still lands.
 *
 * Behaviour comes from a directive anywhere in the text of the LAST user message (the CLIs
 * wrap the prompt with their own text, so it is matched with `includes`):
 *
 *   [[fake:401]]           401, the vendor's error body
 *   [[fake:429-once]]      429 + `retry-after: 1` the first time this exact prompt is seen, then success
 *   [[fake:429]]           429 + `retry-after: 2`, always
 *   [[fake:500]]           500, the vendor's error body
 *   [[fake:slow:MS]]       wait MS ms before answering (stops waiting when the client goes away)
 *   [[fake:malformed]]     200 with a body that is not JSON / an SSE stream that breaks off
 *   [[fake:empty]]         200 with empty content
 *   [[fake:mistral-chunks]] chat completion whose message.content is [{type:"text",text}]
 *   [[fake:tool:COMMAND]]  ask the client to run COMMAND with its shell tool (claude: Bash,
 *                          codex: exec_command / shell, copilot: bash, Gemini CLI:
 *                          run_shell_command); the follow-up request that carries the tool's
 *                          output is answered `TOOL_RESULT: <output>`
 *   [[fake:tool-escalated:COMMAND]]  the same, asking to run it outside the client's sandbox
 *                          (codex's exec_command `sandbox_permissions: "require_escalated"`)
 *   [[fake:write:PATH=CONTENT]]  ask the client to write CONTENT (up to `]]`) into PATH with its
 *                          file-writing tool (Gemini CLI: write_file); then `TOOL_RESULT: …`.
 *                          A request that offers none is answered `FAKE WRITE ERROR: …` with the
 *                          tools it saw (Gemini CLI's default mode offers none)
 *   [[fake:mcp:SERVER:TOOL:{"json":"args"}]]  (or [[fake:mcp:SERVER:TOOL]] for no arguments)
 *                          call tool TOOL of MCP server SERVER with those arguments, under the
 *                          client's name for it: claude `mcp__SERVER__TOOL` after a `ToolSearch`
 *                          `select:` that loads it; codex TOOL in the namespace `mcp__SERVER`
 *                          (after its built-in `tool_search` when the model is in its catalog);
 *                          copilot `SERVER-TOOL`, Gemini CLI `mcp_SERVER_TOOL`. Then
 *                          `TOOL_RESULT: <output>`, as above. The
 *                          arguments are one JSON object (any spaces, colons or brackets inside).
 *                          A tool the request does not offer gets the text `FAKE MCP ERROR: …`
 *                          with the tools it saw.
 *
 * A Gemini request in JSON mode (generationConfig.responseMimeType application/json: Gemini CLI's
 * model router and its own summaries) is answered with a value of the schema it gives, whatever
 * directive the prompt carries: the router's request carries the user's prompt too.
 *
 * Otherwise the answer is `FAKE REPLY (turn N): <first 200 chars of the last user prompt>`,
 * N = the number of user turns in the conversation the request carries (a resumed session
 * says turn 2). The "prompt" is the user's text with the CLIs' own wrappers removed
 * (<system-reminder>, <current_datetime>, <environment_context>, Gemini CLI's <session_context>, ...).
 *
 * Usage is always input 12, output 7, cached 0, under each API's own field names.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import zlib from 'node:zlib';

export type FakeProtocol = 'anthropic' | 'responses' | 'chat' | 'gemini' | 'unknown';

export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/messages`. */
  path: string;
  /** Query string parameters, e.g. `{ beta: 'true' }`. */
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON body, or undefined when the body was empty or not JSON. */
  body: unknown;
  /** The raw body text (decompressed). */
  rawBody: string;
  protocol: FakeProtocol;
  /** The last user prompt, with the CLIs' wrappers removed ('' on a tool-result follow-up). */
  prompt: string;
  /** The full text of the last user message, wrappers included (what directives match). */
  lastUserText: string;
  /** System / developer instructions the request carries, joined with blank lines. */
  system: string;
  /** Number of user turns in the conversation (tool-result messages do not count). */
  turn: number;
  /** Whether the client asked for a stream. */
  stream: boolean;
  /** The model the client asked for. */
  model: string;
  /** Tool names the client offered the model. */
  tools: string[];
  /** The text of the tool result when this request carries one as its last message. */
  toolResult?: string;
  /**
   * What the fake answered: 'reply', 'tool', 'tool-result', the directive's name, or for an MCP
   * directive 'mcp-search' (the search step), 'mcp' (the call), 'mcp-missing', 'mcp-error'.
   */
  outcome: string;
  /** HTTP status it answered with (0 when the client went away first). */
  status: number;
}

export interface FakeModelApi {
  /** e.g. http://127.0.0.1:43121 (no trailing slash, no /v1). */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Forget recorded requests and the prompts that [[fake:429-once]] has seen. */
  reset(): void;
  /** Close the server and every open socket, including ones held by a slow answer. */
  close(): Promise<void>;
}

export const FAKE_USAGE = { input: 12, output: 7, cached: 0 } as const;

// ---------------------------------------------------------------------------------------------
// Small JSON helpers (bodies are `unknown` until narrowed).

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Text of a content value: a string, or an array of blocks with `text` (any block type). */
function textOf(content: unknown, types?: readonly string[]): string {
  if (typeof content === 'string') return content;
  const parts: string[] = [];
  for (const block of arr(content)) {
    if (typeof block === 'string') parts.push(block);
    else if (isObj(block) && typeof block.text === 'string') {
      if (!types || types.includes(str(block.type))) parts.push(block.text);
    }
  }
  return parts.join('\n');
}

/** Wrappers the CLIs put around or beside the user's text. */
const WRAPPER_TAGS = [
  'system-reminder',
  'current_datetime',
  'environment_context',
  'user_instructions',
  'INSTRUCTIONS',
  'permissions instructions',
  'collaboration_mode',
  'reminder',
  'ide_opened_file',
  'ide_selection',
  // Gemini CLI: the folder listing and date it puts before the first prompt; polyspawn's
  // system prompt for it (backends/gemini-cli.ts).
  'session_context',
  'polyspawn_instructions',
];

/** The user's own text: the CLIs' wrapper elements removed, trimmed. */
export function visibleText(text: string): string {
  let t = text;
  for (const tag of WRAPPER_TAGS) {
    const esc = tag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const name = esc.split(' ')[0] ?? esc;
    t = t.replace(new RegExp(`<${esc}(?:\\s[^>]*)?>[\\s\\S]*?</${name}>`, 'g'), '');
  }
  // codex: "# AGENTS.md instructions for /path" heading before <INSTRUCTIONS>.
  t = t.replace(/^# AGENTS\.md instructions for .*$/gm, '');
  return t.trim();
}

// ---------------------------------------------------------------------------------------------
// What one request asks for, protocol-independent.

/** A tool call the assistant made earlier in the conversation. */
interface PastCall {
  name: string;
  /** Responses: the `namespace` of a function_call (codex: `mcp__<server>`). */
  namespace?: string;
}

interface Parsed {
  protocol: FakeProtocol;
  stream: boolean;
  model: string;
  /** Raw text of each user message that carries text, oldest first. */
  userTexts: string[];
  /** Text of the last user message (raw). '' if the last message is a tool result. */
  lastUserText: string;
  system: string;
  tools: string[];
  /** Responses: the functions inside `"type": "namespace"` tools (codex's MCP servers), offered
   * in `tools` or loaded by an earlier `tool_search`. */
  namespaced: Required<PastCall>[];
  /** The tool calls the assistant made since the last user message with text, oldest first. */
  calls: PastCall[];
  toolResult?: string;
  /** Chat Completions: the client asked for a usage chunk (stream_options.include_usage). */
  includeUsage?: boolean;
  /** Gemini: the JSON Schema of the answer the client asked for (JSON mode), if any. */
  jsonSchema?: unknown;
}

/**
 * Messages that are not conversation turns: claude 2.1 appends a `role: "system"` message
 * after the user's (mid-conversation system turns); chat clients lead with system/developer.
 */
function isInstructionRole(role: unknown): boolean {
  return role === 'system' || role === 'developer';
}

function parseAnthropic(body: Json): Parsed {
  const messages = arr(body.messages).filter(isObj);
  const turns = messages.filter((m) => !isInstructionRole(m.role));
  const userTexts: string[] = [];
  let lastUserText = '';
  let toolResult: string | undefined;
  let calls: PastCall[] = [];
  turns.forEach((m, i) => {
    if (m.role === 'assistant') {
      for (const b of arr(m.content)) if (isObj(b) && b.type === 'tool_use') calls.push({ name: str(b.name) });
    }
    if (m.role !== 'user') return;
    const content = m.content;
    const text = textOf(content, ['text']);
    const results = arr(content).filter((b) => isObj(b) && b.type === 'tool_result');
    // A tool result's message is no user turn, whatever text rides along (claude adds
    // "Tool loaded." beside a ToolSearch result).
    if (results.length === 0 && visibleText(text)) {
      userTexts.push(text);
      calls = [];
    }
    if (i === turns.length - 1) {
      lastUserText = results.length > 0 ? '' : text;
      if (results.length > 0) {
        toolResult = results.map((r) => (isObj(r) ? textOf(r.content) : '')).join('\n');
      }
    }
  });
  const systemParts = [typeof body.system === 'string' ? body.system : textOf(body.system)];
  for (const m of messages) if (isInstructionRole(m.role)) systemParts.push(textOf(m.content));
  const tools = arr(body.tools)
    .map((t) => (isObj(t) ? str(t.name) : ''))
    .filter(Boolean);
  const p: Parsed = {
    protocol: 'anthropic',
    stream: body.stream === true,
    model: str(body.model),
    userTexts,
    lastUserText,
    system: systemParts.filter(Boolean).join('\n\n'),
    tools,
    namespaced: [],
    calls,
  };
  if (toolResult !== undefined) p.toolResult = toolResult;
  return p;
}

const TOOL_OUTPUT_TYPES = [
  'function_call_output',
  'custom_tool_call_output',
  'local_shell_call_output',
  'tool_search_output',
];
const TOOL_CALL_TYPES = ['function_call', 'custom_tool_call', 'local_shell_call', 'tool_search_call'];

function parseResponses(body: Json): Parsed {
  const input: unknown[] =
    typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : arr(body.input);
  const items = input.filter(isObj);
  const userTexts: string[] = [];
  const systemParts: string[] = [];
  if (typeof body.instructions === 'string') systemParts.push(body.instructions);
  let lastUserText = '';
  let toolResult: string | undefined;
  let calls: PastCall[] = [];
  items.forEach((item, i) => {
    const isLast = i === items.length - 1;
    const type = str(item.type) || 'message';
    if (TOOL_CALL_TYPES.includes(type)) {
      const call: PastCall = { name: type === 'tool_search_call' ? 'tool_search' : str(item.name) };
      if (typeof item.namespace === 'string') call.namespace = item.namespace;
      calls.push(call);
    }
    if (TOOL_OUTPUT_TYPES.includes(type)) {
      // codex answers its built-in tool_search with the tools it found, not with text.
      const output = type === 'tool_search_output' ? JSON.stringify(item.tools ?? []) : item.output;
      if (isLast) toolResult = typeof output === 'string' ? output : textOf(output);
      return;
    }
    if (type !== 'message') return;
    const text = textOf(item.content);
    if (item.role === 'developer' || item.role === 'system') systemParts.push(text);
    if (item.role !== 'user') return;
    if (visibleText(text)) {
      userTexts.push(text);
      lastUserText = text;
      calls = [];
    }
  });
  if (toolResult !== undefined) lastUserText = '';
  const tools = arr(body.tools)
    .map((t) => (isObj(t) ? str(t.name) || str(t.type) : ''))
    .filter(Boolean);
  // The tools a tool_search loaded ride in its output item, not in `tools`.
  const searchOutputs = items.filter((item) => item.type === 'tool_search_output').flatMap((item) => arr(item.tools));
  const namespaced = [...arr(body.tools), ...searchOutputs]
    .filter((t): t is Json => isObj(t) && t.type === 'namespace')
    .flatMap((t) => arr(t.tools).map((f) => ({ namespace: str(t.name), name: isObj(f) ? str(f.name) : '' })));
  const p: Parsed = {
    protocol: 'responses',
    stream: body.stream === true,
    model: str(body.model),
    userTexts,
    lastUserText,
    system: systemParts.join('\n\n'),
    tools,
    namespaced,
    calls,
  };
  if (toolResult !== undefined) p.toolResult = toolResult;
  return p;
}

function parseChat(body: Json): Parsed {
  const messages = arr(body.messages).filter(isObj);
  const turns = messages.filter((m) => !isInstructionRole(m.role));
  const userTexts: string[] = [];
  const systemParts: string[] = [];
  let lastUserText = '';
  let toolResult: string | undefined;
  let calls: PastCall[] = [];
  for (const m of messages) if (isInstructionRole(m.role)) systemParts.push(textOf(m.content));
  turns.forEach((m, i) => {
    if (m.role === 'assistant') {
      for (const c of arr(m.tool_calls)) {
        if (isObj(c) && isObj(c.function)) calls.push({ name: str(c.function.name) });
      }
    }
    if (m.role !== 'user') return;
    const text = textOf(m.content);
    if (visibleText(text)) {
      userTexts.push(text);
      calls = [];
    }
    if (i === turns.length - 1) lastUserText = text;
  });
  // A tool result: the conversation ends with `tool` messages (one per call): gather them.
  if (turns.at(-1)?.role === 'tool') {
    const trailing: string[] = [];
    for (let i = turns.length - 1; i >= 0 && turns[i]?.role === 'tool'; i--) {
      trailing.unshift(textOf(turns[i]?.content));
    }
    toolResult = trailing.join('\n');
  }
  const tools = arr(body.tools)
    .map((t) => {
      if (!isObj(t)) return '';
      if (isObj(t.function)) return str(t.function.name);
      if (isObj(t.custom)) return str(t.custom.name);
      return str(t.name);
    })
    .filter(Boolean);
  const p: Parsed = {
    protocol: 'chat',
    stream: body.stream === true,
    model: str(body.model),
    userTexts,
    lastUserText,
    system: systemParts.join('\n\n'),
    tools,
    namespaced: [],
    calls,
    includeUsage: isObj(body.stream_options) && body.stream_options.include_usage === true,
  };
  if (toolResult !== undefined) p.toolResult = toolResult;
  return p;
}

function parseGemini(body: Json, model: string, stream: boolean): Parsed {
  const contents = arr(body.contents).filter(isObj);
  const userTexts: string[] = [];
  let lastUserText = '';
  let toolResult: string | undefined;
  let calls: PastCall[] = [];
  contents.forEach((c, i) => {
    const isLast = i === contents.length - 1;
    const parts = arr(c.parts).filter(isObj);
    if (c.role === 'model') {
      for (const part of parts) if (isObj(part.functionCall)) calls.push({ name: str(part.functionCall.name) });
    }
    if (c.role !== undefined && c.role !== 'user') return;
    const text = textOf(parts);
    const responses = parts.filter((p) => isObj(p.functionResponse));
    if (visibleText(text)) {
      userTexts.push(text);
      calls = [];
    }
    if (isLast) {
      lastUserText = text;
      if (responses.length > 0) {
        toolResult = responses
          .map((p) => {
            const fr = p.functionResponse as Json;
            const r = fr.response;
            if (isObj(r) && typeof r.output === 'string') return r.output;
            if (isObj(r) && typeof r.result === 'string') return r.result;
            return JSON.stringify(r);
          })
          .join('\n');
      }
    }
  });
  const si = body.systemInstruction ?? body.system_instruction;
  const system = typeof si === 'string' ? si : isObj(si) ? textOf(si.parts) : '';
  const tools: string[] = [];
  for (const t of arr(body.tools)) {
    if (!isObj(t)) continue;
    for (const fd of arr(t.functionDeclarations ?? t.function_declarations)) {
      if (isObj(fd) && typeof fd.name === 'string') tools.push(fd.name);
    }
  }
  const p: Parsed = {
    protocol: 'gemini',
    stream,
    model,
    userTexts,
    lastUserText,
    system,
    tools,
    namespaced: [],
    calls,
  };
  if (toolResult !== undefined) p.toolResult = toolResult;
  const config = body.generationConfig ?? body.generation_config;
  if (isObj(config) && str(config.responseMimeType ?? config.response_mime_type) === 'application/json') {
    p.jsonSchema = config.responseJsonSchema ?? config.responseSchema ?? config.response_schema ?? {};
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Directives.

/** `[[fake:mcp:SERVER:TOOL:{args}]]`; `error` says why the directive could not be read. */
interface McpDirective {
  kind: 'mcp';
  server: string;
  tool: string;
  args: Json;
  error?: string;
}

type Directive =
  | { kind: 'none' }
  | { kind: '401' | '429' | '429-once' | '500' | 'malformed' | 'empty' | 'mistral-chunks' }
  | { kind: 'slow'; ms: number }
  | { kind: 'tool'; command: string; escalated?: boolean }
  | { kind: 'write'; path: string; content: string }
  | McpDirective;

const OPEN = '[[fake:';

/** Every directive in the text, in order. `slow` combines with the others. */
function findDirectives(text: string): Directive[] {
  const out: Directive[] = [];
  let at = text.indexOf(OPEN);
  while (at >= 0) {
    const start = at + OPEN.length;
    let end: number;
    if (text.startsWith('mcp:', start)) {
      const read = readMcpDirective(text, start + 'mcp:'.length);
      out.push(read.directive);
      end = read.end;
    } else {
      // The first `]]` that is not followed by another `]`.
      const close = /\]\](?!\])/g;
      close.lastIndex = start;
      const m = close.exec(text);
      if (!m) break;
      const d = text.slice(start, m.index);
      end = m.index + 2;
      if (d.startsWith('tool:')) out.push({ kind: 'tool', command: d.slice('tool:'.length) });
      else if (d.startsWith('tool-escalated:'))
        out.push({ kind: 'tool', command: d.slice('tool-escalated:'.length), escalated: true });
      else if (d.startsWith('write:')) {
        const [path = '', ...content] = d.slice('write:'.length).split('=');
        out.push({ kind: 'write', path, content: content.join('=') });
      } else if (d.startsWith('slow:')) out.push({ kind: 'slow', ms: Math.max(0, Number(d.slice(5)) || 0) });
      else if (['401', '429', '429-once', '500', 'malformed', 'empty', 'mistral-chunks'].includes(d)) {
        out.push({ kind: d as '401' });
      }
    }
    at = text.indexOf(OPEN, end);
  }
  return out;
}

/**
 * Reads `SERVER:TOOL]]` or `SERVER:TOOL:{json}]]` from `from`. The JSON object is found by
 * matching its braces outside strings, so it may hold spaces, colons, `]]` and braces in strings.
 */
function readMcpDirective(text: string, from: number): { directive: McpDirective; end: number } {
  const head = /([\w.-]+):([\w.-]+)(\]\]|:)/y;
  head.lastIndex = from;
  const m = head.exec(text);
  const fail = (server: string, tool: string, error: string) => {
    const close = text.indexOf(']]', from);
    return {
      directive: { kind: 'mcp' as const, server, tool, args: {}, error },
      end: close < 0 ? text.length : close + 2,
    };
  };
  if (!m) return fail('', '', 'expected [[fake:mcp:SERVER:TOOL]] or [[fake:mcp:SERVER:TOOL:{json}]]');
  const server = m[1] ?? '';
  const tool = m[2] ?? '';
  if (m[3] === ']]') return { directive: { kind: 'mcp', server, tool, args: {} }, end: head.lastIndex };
  const jsonStart = head.lastIndex;
  const jsonEnd = endOfJsonObject(text, jsonStart);
  if (jsonEnd < 0 || !text.startsWith(']]', jsonEnd)) {
    return fail(server, tool, 'the arguments must be one JSON object followed by ]]');
  }
  let args: unknown;
  try {
    args = JSON.parse(text.slice(jsonStart, jsonEnd));
  } catch (err) {
    return fail(server, tool, `the arguments are not JSON: ${String(err)}`);
  }
  if (!isObj(args)) return fail(server, tool, 'the arguments must be a JSON object');
  return { directive: { kind: 'mcp', server, tool, args }, end: jsonEnd + 2 };
}

/** The index just past the JSON object that starts at `from`, or -1. */
function endOfJsonObject(text: string, from: number): number {
  if (text[from] !== '{') return -1;
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The server.

export async function startFakeModelApi(): Promise<FakeModelApi> {
  const requests: RecordedRequest[] = [];
  const seen429 = new Set<string>();
  const sockets = new Set<Socket>();
  const waits = new Set<AbortController>();
  let counter = 0;
  let closing = false;

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `fake server bug: ${String(err)}` } }));
      } else {
        res.destroy();
      }
    });
  });
  server.keepAliveTimeout = 1000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function readBody(req: http.IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let buf: Buffer = Buffer.concat(chunks);
    const enc = String(req.headers['content-encoding'] ?? '').toLowerCase();
    if (enc === 'gzip') buf = zlib.gunzipSync(buf);
    else if (enc === 'deflate') buf = zlib.inflateSync(buf);
    else if (enc === 'br') buf = zlib.brotliDecompressSync(buf);
    else if (enc === 'zstd') {
      const z = zlib as unknown as { zstdDecompressSync?: (b: Buffer) => Buffer };
      if (z.zstdDecompressSync) buf = z.zstdDecompressSync(buf);
    }
    return buf.toString('utf8');
  }

  /** Resolves true after ms, false as soon as the client goes away or the server closes. */
  function wait(ms: number, res: http.ServerResponse): Promise<boolean> {
    return new Promise((resolve) => {
      const ac = new AbortController();
      waits.add(ac);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        waits.delete(ac);
        res.off('close', onClose);
        resolve(ok);
      };
      const onClose = () => done(false);
      const timer = setTimeout(() => done(true), ms);
      ac.signal.addEventListener('abort', () => done(false), { once: true });
      res.on('close', onClose);
    });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = u.pathname;
    const query = Object.fromEntries(u.searchParams.entries());
    const rawBody = await readBody(req);
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const n = ++counter;

    const record: RecordedRequest = {
      method: req.method ?? '',
      path,
      query,
      headers: req.headers,
      body,
      rawBody,
      protocol: 'unknown',
      prompt: '',
      lastUserText: '',
      system: '',
      turn: 0,
      stream: false,
      model: '',
      tools: [],
      outcome: 'not-found',
      status: 0,
    };
    requests.push(record);
    res.on('finish', () => {
      record.status = res.statusCode;
    });

    if (req.method === 'GET' && /\/models\/?$/.test(path)) {
      record.outcome = 'models';
      sendJson(res, 200, {
        object: 'list',
        data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'fake' }],
        models: [geminiModel('fake-model')],
      });
      return;
    }
    const oneModel = /\/models\/([^/:]+)$/.exec(path);
    if (req.method === 'GET' && oneModel) {
      record.outcome = 'model';
      sendJson(res, 200, geminiModel(oneModel[1] ?? ''));
      return;
    }
    const count = /\/models\/([^/:]+):countTokens$/.exec(path);
    if (req.method === 'POST' && count) {
      // Gemini: a rough count (a token per 4 characters of the request), never below 1.
      Object.assign(record, { protocol: 'gemini', model: count[1] ?? '', outcome: 'count-tokens' });
      sendJson(res, 200, { totalTokens: Math.max(1, Math.ceil(rawBody.length / 4)) });
      return;
    }

    let parsed: Parsed | undefined;
    const gem = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path);
    if (req.method === 'POST' && isObj(body)) {
      if (path.endsWith('/messages')) parsed = parseAnthropic(body);
      else if (path.endsWith('/responses')) parsed = parseResponses(body);
      else if (path.endsWith('/chat/completions')) parsed = parseChat(body);
      else if (gem) parsed = parseGemini(body, gem[1] ?? '', gem[2] === 'streamGenerateContent');
    }
    if (!parsed) {
      if (
        req.method === 'POST' &&
        !isObj(body) &&
        /\/(messages|responses|chat\/completions)$|:(stream)?[gG]enerateContent$/.test(path)
      ) {
        record.outcome = 'bad-request';
        sendJson(res, 400, { error: { message: 'fake: request body is not a JSON object' } });
        return;
      }
      sendJson(res, 404, { error: { message: `fake: no route for ${req.method} ${path}` } });
      return;
    }

    const lastVisible = visibleText(parsed.lastUserText);
    Object.assign(record, {
      protocol: parsed.protocol,
      prompt: lastVisible,
      lastUserText: parsed.lastUserText,
      system: parsed.system,
      turn: parsed.userTexts.length,
      stream: parsed.stream,
      model: parsed.model,
      tools: parsed.tools,
    });
    if (parsed.toolResult !== undefined) record.toolResult = parsed.toolResult;

    const mistral = /mistral/i.test(String(req.headers['user-agent'] ?? ''));
    const ctx: Ctx = { n, parsed, mistral, res };

    // Gemini CLI's own calls ask for JSON (its model router; a session's summary): answer the
    // shape asked for, whatever directive the prompt carries, so the main request meets it.
    if (parsed.jsonSchema !== undefined) {
      record.outcome = 'json';
      reply(ctx, { kind: 'text', text: JSON.stringify(exampleOf(parsed.jsonSchema)) });
      return;
    }

    // A tool result: answer it, whatever the conversation's first message asked for, unless an
    // MCP directive's tool was only searched for so far: then call it now.
    if (parsed.toolResult !== undefined) {
      const mcp = findDirectives(parsed.userTexts.at(-1) ?? '').find((d) => d.kind === 'mcp');
      if (mcp && !mcp.error && !parsed.calls.some((c) => isMcpTarget(c, mcp))) {
        const step = mcpStep(parsed, mcp);
        record.outcome = step.outcome;
        reply(ctx, step.answer);
        return;
      }
      record.outcome = 'tool-result';
      reply(ctx, { kind: 'text', text: `TOOL_RESULT: ${parsed.toolResult}` });
      return;
    }

    const directives = findDirectives(parsed.lastUserText);
    for (const d of directives) {
      if (d.kind === 'slow') {
        const ok = await wait(d.ms, res);
        if (!ok) {
          record.outcome = 'slow-aborted';
          if (!res.destroyed) res.destroy();
          return;
        }
      }
    }
    const main = directives.find((d) => d.kind !== 'slow') ?? { kind: 'none' as const };
    record.outcome = main.kind === 'none' ? (directives.length ? 'slow' : 'reply') : main.kind;
    if (closing) {
      res.destroy();
      return;
    }

    switch (main.kind) {
      case '401':
        sendError(ctx, 401);
        return;
      case '500':
        sendError(ctx, 500);
        return;
      case '429':
        sendError(ctx, 429, '2');
        return;
      case '429-once': {
        const key = `${parsed.protocol}\u0000${parsed.lastUserText}`;
        if (!seen429.has(key)) {
          seen429.add(key);
          sendError(ctx, 429, '1');
          return;
        }
        break;
      }
      case 'malformed':
        sendMalformed(ctx);
        return;
      case 'empty':
        reply(ctx, { kind: 'text', text: '', empty: true });
        return;
      case 'tool':
        reply(ctx, shellCall(parsed, main.command, main.escalated));
        return;
      case 'write': {
        const step = writeStep(parsed, main.path, main.content);
        record.outcome = step.outcome;
        reply(ctx, step.answer);
        return;
      }
      case 'mcp': {
        const step = mcpStep(parsed, main);
        record.outcome = step.outcome;
        reply(ctx, step.answer);
        return;
      }
      default:
        break;
    }
    const text = `FAKE REPLY (turn ${parsed.userTexts.length}): ${lastVisible.slice(0, 200)}`;
    reply(ctx, { kind: 'text', text, chunks: main.kind === 'mistral-chunks' });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    reset() {
      requests.length = 0;
      seen429.clear();
    },
    close() {
      closing = true;
      for (const ac of waits) ac.abort();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const s of sockets) s.destroy();
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Answers.

interface Ctx {
  n: number;
  parsed: Parsed;
  mistral: boolean;
  res: http.ServerResponse;
}

type Answer =
  | { kind: 'text'; text: string; empty?: boolean; chunks?: boolean }
  | ({ kind: 'call'; name: string; args: Json } & CallExtras);

interface CallExtras {
  /** Responses only: the function's namespace (codex's MCP servers). */
  namespace?: string;
  /** Responses only: codex's own `tool_search`, a `tool_search_call` item, not a function_call. */
  builtinSearch?: boolean;
}

/** What the fake answers, and the outcome it records for it. */
interface Step {
  outcome: string;
  answer: Answer;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, extra: http.OutgoingHttpHeaders = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    ...extra,
  });
  res.end(data);
}

function startSse(res: http.ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
}

function sse(res: http.ServerResponse, data: unknown, event?: string): void {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  res.write(`${event ? `event: ${event}\n` : ''}data: ${payload}\n\n`);
}

function errorBody(ctx: Ctx, status: number): unknown {
  const message = `fake error ${status}`;
  switch (ctx.parsed.protocol) {
    case 'anthropic': {
      const type = status === 401 ? 'authentication_error' : status === 429 ? 'rate_limit_error' : 'api_error';
      return { type: 'error', error: { type, message }, request_id: `req_fake_${ctx.n}` };
    }
    case 'gemini': {
      const s = status === 401 ? 'UNAUTHENTICATED' : status === 429 ? 'RESOURCE_EXHAUSTED' : 'INTERNAL';
      return { error: { code: status, message, status: s } };
    }
    default: {
      if (ctx.mistral) {
        return {
          object: 'error',
          message,
          type: status === 401 ? 'unauthorized' : 'error',
          param: null,
          code: String(status),
        };
      }
      const type = status === 401 ? 'invalid_request_error' : status === 429 ? 'rate_limit_error' : 'server_error';
      const code = status === 401 ? 'invalid_api_key' : status === 429 ? 'rate_limit_exceeded' : null;
      return { error: { message, type, param: null, code } };
    }
  }
}

function sendError(ctx: Ctx, status: number, retryAfter?: string): void {
  const extra: http.OutgoingHttpHeaders = {};
  if (retryAfter) extra['retry-after'] = retryAfter;
  if (ctx.parsed.protocol === 'anthropic') extra['request-id'] = `req_fake_${ctx.n}`;
  // Without it claude 2.1.332 retries a 401 ten times with backoff (~3 minutes); the Stainless
  // SDKs (anthropic, openai) and claude honour `x-should-retry: false`.
  if (status === 401) extra['x-should-retry'] = 'false';
  sendJson(ctx.res, status, errorBody(ctx, status), extra);
}

function sendMalformed(ctx: Ctx): void {
  const { res, parsed } = ctx;
  if (!parsed.stream) {
    const data = '{"id": "broken", "this is": not json';
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
    res.end(data);
    return;
  }
  startSse(res);
  switch (parsed.protocol) {
    case 'anthropic':
      res.write('event: message_start\ndata: {"type":"message_start","message":{"id":\n\n');
      break;
    case 'responses':
      res.write('event: response.output_item.done\ndata: {"type":"response.output_item.done","item":{\n\n');
      break;
    default:
      res.write('data: {"id":"broken","choices":[{"delta":{"content":\n\n');
      break;
  }
  res.end();
}

/** The client's own shell tool, picked by name, with the argument shape that tool takes. */
function shellCall(parsed: Parsed, command: string, escalated = false): Answer {
  const { tools, protocol } = parsed;
  const call = (name: string, args: Json): Answer => ({ kind: 'call', name, args });
  // Gemini CLI offers run_shell_command only in its yolo mode.
  if (tools.includes('run_shell_command')) return call('run_shell_command', { command, description: 'fake tool call' });
  if (protocol === 'gemini') return call(tools[0] ?? 'bash', { command });
  if (tools.includes('exec_command'))
    return call('exec_command', {
      cmd: command,
      // codex runs it outside its sandbox only once approved: its client is asked.
      ...(escalated ? { sandbox_permissions: 'require_escalated', justification: 'fake escalation' } : {}),
    });
  if (tools.includes('shell_command')) return call('shell_command', { command });
  if (tools.includes('shell')) return call('shell', { command: ['bash', '-lc', command] });
  const name = tools.includes('Bash') || (protocol === 'anthropic' && tools.length === 0) ? 'Bash' : 'bash';
  return call(name, { command, description: 'fake tool call' });
}

/**
 * A file written by the client's own file-writing tool: Gemini CLI's `write_file` (offered in
 * its auto_edit and yolo modes). Without one, a text naming the tools the request offered.
 */
function writeStep(parsed: Parsed, path: string, content: string): Step {
  if (parsed.tools.includes('write_file')) {
    return { outcome: 'write', answer: { kind: 'call', name: 'write_file', args: { file_path: path, content } } };
  }
  const text = `FAKE WRITE ERROR: the request offers no write_file tool; tools seen: ${parsed.tools.join(', ') || 'none'}`;
  return { outcome: 'write-missing', answer: { kind: 'text', text } };
}

/** Gemini's description of one model (GET models, GET models/{model}). */
function geminiModel(name: string): Json {
  return {
    name: `models/${name}`,
    displayName: name,
    inputTokenLimit: 1048576,
    outputTokenLimit: 65536,
    supportedGenerationMethods: ['generateContent', 'countTokens'],
  };
}

/**
 * A value of the JSON Schema given (Gemini's upper-case types or standard lower-case ones):
 * every property of an object, the first of an enum, 1 for a number, "fake" for a string.
 */
export function exampleOf(schema: unknown): unknown {
  if (!isObj(schema)) return {};
  const first = arr(schema.enum)[0];
  if (first !== undefined) return first;
  const types = arr(schema.type).length ? arr(schema.type) : [schema.type];
  const type = str(types.find((t) => t !== 'null')).toLowerCase();
  const variants = arr(schema.anyOf ?? schema.oneOf);
  if (!type && variants.length) return exampleOf(variants[0]);
  switch (type) {
    case 'object':
    case '': {
      const props = isObj(schema.properties) ? schema.properties : {};
      return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, exampleOf(v)]));
    }
    case 'array':
      return [exampleOf(schema.items)];
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return true;
    default:
      return 'fake';
  }
}

/** The names of MCP tool T of server S as one function: claude `mcp__S__T`, copilot `S-T`, Gemini CLI `mcp_S_T`. */
const flatMcpNames = (d: McpDirective): string[] => [
  `mcp__${d.server}__${d.tool}`,
  `${d.server}-${d.tool}`,
  `mcp_${d.server}_${d.tool}`,
];

/**
 * Whether an earlier call was to the MCP tool itself, under any client's name for it:
 * claude `mcp__S__T`, codex `T` in namespace `mcp__S`, copilot `S-T`, Gemini CLI `mcp_S_T`.
 */
function isMcpTarget(call: PastCall, d: McpDirective): boolean {
  if (call.namespace !== undefined) return call.namespace === `mcp__${d.server}` && call.name === d.tool;
  return flatMcpNames(d).includes(call.name);
}

/**
 * The next step towards calling MCP tool T of server S, as each client offers it:
 * - claude defers MCP tools: they are named in a system message, and `ToolSearch` with
 *   `select:mcp__S__T` loads one; then `mcp__S__T` is called.
 * - codex offers a server's tools as a `namespace` tool `mcp__S` (models outside its catalog),
 *   or defers them behind its built-in `tool_search` (gpt-5.5): search, then call.
 * - copilot offers `S-T`, Gemini CLI `mcp_S_T`.
 * A tool that is nowhere gets a text answer naming the tools the request offered.
 */
function mcpStep(parsed: Parsed, d: McpDirective): Step {
  const label = `[[fake:mcp:${d.server}:${d.tool}]]`;
  const say = (outcome: string, text: string): Step => ({ outcome, answer: { kind: 'text', text } });
  const call = (outcome: string, name: string, args: Json, extra: CallExtras = {}): Step => ({
    outcome,
    answer: { kind: 'call', name, args, ...extra },
  });
  if (d.error) return say('mcp-error', `FAKE MCP ERROR: ${label}: ${d.error}`);
  const namespace = `mcp__${d.server}`;
  const claudeName = `${namespace}__${d.tool}`;
  if (parsed.namespaced.some((f) => f.namespace === namespace && f.name === d.tool)) {
    return call('mcp', d.tool, d.args, { namespace });
  }
  for (const name of flatMcpNames(d)) {
    if (parsed.tools.includes(name)) return call('mcp', name, d.args);
  }
  const searched = parsed.calls.some((c) => c.name === 'ToolSearch' || c.name === 'tool_search');
  if (!searched && parsed.tools.includes('ToolSearch') && parsed.system.includes(claudeName)) {
    return call('mcp-search', 'ToolSearch', { query: `select:${claudeName}` });
  }
  if (!searched && parsed.tools.includes('tool_search')) {
    return call('mcp-search', 'tool_search', { query: `${d.server} ${d.tool}` }, { builtinSearch: true });
  }
  const seen = [...parsed.tools, ...parsed.namespaced.map((f) => `${f.namespace}.${f.name}`)];
  return say(
    'mcp-missing',
    `FAKE MCP ERROR: ${label}: the request offers no such tool${searched ? ' after a tool search' : ''}` +
      ` (looked for ${flatMcpNames(d).join(', ')}, ${d.tool} in namespace ${namespace});` +
      ` tools seen: ${seen.join(', ') || 'none'}`,
  );
}

function reply(ctx: Ctx, answer: Answer): void {
  switch (ctx.parsed.protocol) {
    case 'anthropic':
      return replyAnthropic(ctx, answer);
    case 'responses':
      return replyResponses(ctx, answer);
    case 'chat':
      return replyChat(ctx, answer);
    case 'gemini':
      return replyGemini(ctx, answer);
    default:
      sendJson(ctx.res, 404, { error: { message: 'fake: unknown protocol' } });
  }
}

// --- Anthropic Messages ----------------------------------------------------------------------

function replyAnthropic(ctx: Ctx, answer: Answer): void {
  const { res, n, parsed } = ctx;
  const id = `msg_fake_${n}`;
  const model = parsed.model || 'claude-fake';
  const usage = {
    input_tokens: FAKE_USAGE.input,
    output_tokens: FAKE_USAGE.output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: FAKE_USAGE.cached,
  };
  const toolId = `toolu_fake_${n}`;
  const stopReason = answer.kind === 'call' ? 'tool_use' : 'end_turn';

  if (!parsed.stream) {
    const content: unknown[] = [];
    if (answer.kind === 'call') content.push({ type: 'tool_use', id: toolId, name: answer.name, input: answer.args });
    else if (!answer.empty) content.push({ type: 'text', text: answer.text });
    sendJson(
      res,
      200,
      {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage,
      },
      { 'request-id': `req_fake_${n}` },
    );
    return;
  }

  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'request-id': `req_fake_${n}`,
  });
  sse(
    res,
    {
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    },
    'message_start',
  );
  if (answer.kind === 'call') {
    sse(
      res,
      {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id: toolId, name: answer.name, input: {} },
      },
      'content_block_start',
    );
    sse(
      res,
      {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(answer.args) },
      },
      'content_block_delta',
    );
    sse(res, { type: 'content_block_stop', index: 0 }, 'content_block_stop');
  } else if (!answer.empty) {
    sse(
      res,
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      'content_block_start',
    );
    sse(
      res,
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: answer.text } },
      'content_block_delta',
    );
    sse(res, { type: 'content_block_stop', index: 0 }, 'content_block_stop');
  }
  sse(
    res,
    {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: FAKE_USAGE.output },
    },
    'message_delta',
  );
  sse(res, { type: 'message_stop' }, 'message_stop');
  res.end();
}

// --- OpenAI Responses ------------------------------------------------------------------------

function replyResponses(ctx: Ctx, answer: Answer): void {
  const { res, n, parsed } = ctx;
  const usage = {
    input_tokens: FAKE_USAGE.input,
    input_tokens_details: { cached_tokens: FAKE_USAGE.cached },
    output_tokens: FAKE_USAGE.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: FAKE_USAGE.input + FAKE_USAGE.output,
  };
  let item: Json;
  if (answer.kind === 'call' && answer.builtinSearch) {
    item = {
      id: `ts_fake_${n}`,
      type: 'tool_search_call',
      status: 'completed',
      call_id: `call_fake_${n}`,
      execution: 'client',
      arguments: answer.args,
    };
  } else if (answer.kind === 'call') {
    item = {
      id: `fc_fake_${n}`,
      type: 'function_call',
      status: 'completed',
      call_id: `call_fake_${n}`,
      name: answer.name,
      ...(answer.namespace === undefined ? {} : { namespace: answer.namespace }),
      arguments: JSON.stringify(answer.args),
    };
  } else {
    item = {
      id: `msg_fake_${n}`,
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: answer.empty ? [] : [{ type: 'output_text', text: answer.text, annotations: [] }],
    };
  }
  const response = {
    id: `resp_fake_${n}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    model: parsed.model || 'gpt-fake',
    output: [item],
    usage,
  };
  if (!parsed.stream) {
    sendJson(res, 200, { ...response, output_text: answer.kind === 'text' ? answer.text : '' });
    return;
  }
  startSse(res);
  sse(
    res,
    { type: 'response.created', response: { ...response, status: 'in_progress', output: [], usage: null } },
    'response.created',
  );
  sse(res, { type: 'response.output_item.done', output_index: 0, item }, 'response.output_item.done');
  sse(res, { type: 'response.completed', response }, 'response.completed');
  res.end();
}

// --- OpenAI Chat Completions (also the Mistral SDK) -----------------------------------------

function replyChat(ctx: Ctx, answer: Answer): void {
  const { res, n, parsed } = ctx;
  const id = `chatcmpl-fake-${n}`;
  const created = Math.floor(Date.now() / 1000);
  const model = parsed.model || 'gpt-fake';
  const usage = {
    prompt_tokens: FAKE_USAGE.input,
    completion_tokens: FAKE_USAGE.output,
    total_tokens: FAKE_USAGE.input + FAKE_USAGE.output,
    prompt_tokens_details: { cached_tokens: FAKE_USAGE.cached },
  };
  const toolCall = answer.kind === 'call' && {
    id: `call_fake_${n}`,
    type: 'function',
    function: { name: answer.name, arguments: JSON.stringify(answer.args) },
  };
  const finish = toolCall ? 'tool_calls' : 'stop';
  const text = answer.kind === 'text' ? answer.text : '';
  const content: unknown = toolCall ? null : answer.kind === 'text' && answer.chunks ? [{ type: 'text', text }] : text;

  if (!parsed.stream) {
    const message: Json = { role: 'assistant', content };
    if (toolCall) message.tool_calls = [toolCall];
    sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
      usage,
    });
    return;
  }

  const base = { id, object: 'chat.completion.chunk', created, model };
  const includeUsage = parsed.includeUsage === true;
  startSse(res);
  sse(res, { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  if (toolCall) {
    sse(res, {
      ...base,
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              {
                index: 0,
                id: toolCall.id,
                type: 'function',
                function: { name: toolCall.function.name, arguments: '' },
              },
            ],
          },
          finish_reason: null,
        },
      ],
    });
    sse(res, {
      ...base,
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, function: { arguments: toolCall.function.arguments } }] },
          finish_reason: null,
        },
      ],
    });
  } else if (text) {
    sse(res, { ...base, choices: [{ index: 0, delta: { content }, finish_reason: null }] });
  }
  const last: Json = { ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] };
  if (!includeUsage) last.usage = usage; // Mistral and many compatible servers put it here
  sse(res, last);
  if (includeUsage) sse(res, { ...base, choices: [], usage });
  sse(res, '[DONE]');
  res.end();
}

// --- Gemini ----------------------------------------------------------------------------------

function replyGemini(ctx: Ctx, answer: Answer): void {
  const { res, n, parsed } = ctx;
  const usageMetadata = {
    promptTokenCount: FAKE_USAGE.input,
    candidatesTokenCount: FAKE_USAGE.output,
    thoughtsTokenCount: 0,
    cachedContentTokenCount: FAKE_USAGE.cached,
    totalTokenCount: FAKE_USAGE.input + FAKE_USAGE.output,
  };
  let parts: unknown[];
  if (answer.kind === 'call') {
    parts = [{ functionCall: { name: answer.name, args: answer.args } }];
  } else {
    parts = answer.empty ? [] : [{ text: answer.text }];
  }
  const full = {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata,
    modelVersion: parsed.model || 'gemini-fake',
    responseId: `resp_fake_${n}`,
  };
  if (!parsed.stream) {
    sendJson(res, 200, full);
    return;
  }
  startSse(res);
  if (answer.kind === 'text' && !answer.empty && answer.text.length > 1) {
    // Two chunks, as the real API streams: the text split, usage and finishReason on the last.
    const cut = Math.ceil(answer.text.length / 2);
    sse(res, {
      candidates: [{ content: { role: 'model', parts: [{ text: answer.text.slice(0, cut) }] }, index: 0 }],
      modelVersion: full.modelVersion,
      responseId: full.responseId,
    });
    sse(res, {
      ...full,
      candidates: [
        { content: { role: 'model', parts: [{ text: answer.text.slice(cut) }] }, finishReason: 'STOP', index: 0 },
      ],
    });
  } else {
    sse(res, full);
  }
  res.end();
}
