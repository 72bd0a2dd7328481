#!/usr/bin/env node
// What an agent that found the project's daemon might do: read daemon.json and http-token from
// a folder (the first argument: the state folder, or where the agent found copies), open an MCP
// session over raw HTTP, list the tools and call spawn_codex. Prints {initialized, tools, call}
// as JSON (call: the result's isError and text, or the HTTP refusal). Run by the fake CLI's
// [[cli:drive-daemon]] with an empty environment, as an agent that clears its environment to
// hide the depth marker would. With `--detach`, it first leaves its process tree as well
// (setsid -f: a new session, its parent gone) and prints what that detached copy wrote.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [stateDir, mode, out] = process.argv.slice(2);
if (mode === '--detach') {
  const file = join(stateDir, `driven-${process.pid}.json`);
  spawn('setsid', ['-f', process.execPath, fileURLToPath(import.meta.url), stateDir, '--write', file], {
    env: {},
    stdio: 'ignore',
  });
  const deadline = Date.now() + 60_000;
  while (!existsSync(file) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  process.stdout.write(readFileSync(file, 'utf8'));
  process.exit(0);
}
const { url } = JSON.parse(readFileSync(join(stateDir, 'daemon.json'), 'utf8'));
const token = readFileSync(join(stateDir, 'http-token'), 'utf8').trim();
let session;

/** One JSON-RPC message; the answer's JSON (from a JSON or an event-stream body), or {status, body} when refused. */
async function post(message) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  session ??= response.headers.get('mcp-session-id') ?? undefined;
  const body = await response.text();
  if (!response.ok) return { status: response.status, body };
  if (message.id === undefined) return undefined;
  const data = body.split('\n').find((line) => line.startsWith('data: '));
  return JSON.parse(data ? data.slice(6) : body);
}

const init = await post({
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'agent', version: '0' } },
});
await post({ method: 'notifications/initialized' });
const listed = await post({ id: 2, method: 'tools/list', params: {} });
const called = await post({
  id: 3,
  method: 'tools/call',
  params: { name: 'spawn_codex', arguments: { prompt: 'escaped through the daemon' } },
});
const report = JSON.stringify({
  initialized: init?.result !== undefined,
  tools: listed?.result?.tools?.map((t) => t.name) ?? listed,
  call: called?.result ? { isError: called.result.isError === true, text: called.result.content?.[0]?.text } : called,
});
if (mode === '--write') {
  writeFileSync(`${out}.tmp`, report);
  renameSync(`${out}.tmp`, out);
} else process.stdout.write(report);
