// Issue 25, "the cost of a start": nothing is loaded before tools/list is answered that the answer
// does not need. What start-up skips loads at first use: the relay to a daemon (the v1 SDK's
// client), the ACP SDK (an ACP run), YAML (a named agent's file), the API backends' HTTP SDKs, the
// dashboard's renderers, the HTTP side of MCP. Read from the modules the unbundled server loads
// (test/helpers/traced-serve.mjs); bench/coldstart.mjs measures the time.
import { readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { expect, test } from 'vitest';
import { fakeBinDir } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';

const tracedServe = fileURLToPath(new URL('../helpers/traced-serve.mjs', import.meta.url));

/** The package a loaded module belongs to ("@scope/name" or "name"), or undefined for the project's own and node's. */
function packageOf(loaded: string): string | undefined {
  const inModules = loaded.split('node_modules/').at(-1)!;
  if (loaded.includes('node_modules/'))
    return inModules
      .split('/')
      .slice(0, inModules.startsWith('@') ? 2 : 1)
      .join('/');
  if (loaded.startsWith('node:') || loaded.startsWith('file:') || loaded.startsWith('.') || loaded.startsWith('/'))
    return undefined;
  return loaded
    .split('/')
    .slice(0, loaded.startsWith('@') ? 2 : 1)
    .join('/'); // a bare require('x')
}

const LOADED_LATER = [
  '@modelcontextprotocol/sdk',
  '@agentclientprotocol/sdk',
  'yaml',
  'openai',
  '@google/genai',
  '@mistralai/mistralai',
  'markdown-it',
  'diff',
  '@modelcontextprotocol/node',
  '@hono/node-server',
];

test('before tools/list is answered, only what the answer needs is loaded; a named agent loads YAML when first written', async () => {
  const projectDir = tempDir('start-loads');
  const trace = join(projectDir, 'loaded.txt');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('POLYSPAWN_')) env[k] = v;
  Object.assign(env, {
    PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
    XDG_CONFIG_HOME: join(projectDir, '.xdg-config'),
    POLYSPAWN_TEST_LOAD_TRACE: trace,
  });
  const client = new Client({ name: 'start-loads', version: '0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [tracedServe],
      cwd: projectDir,
      env,
      stderr: 'ignore',
    }),
  );
  try {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('define_agent');
    // Every load is appended before the module runs, so all that preceded the answer is in the file.
    const packages = (text: string) => new Set(text.split('\n').flatMap((line) => packageOf(line) ?? []));
    const before = packages(readFileSync(trace, 'utf8'));
    // The trace sees what serving needs (so an absence below means something).
    expect([...before]).toEqual(expect.arrayContaining(['@modelcontextprotocol/server', 'zod']));
    expect(LOADED_LATER.filter((p) => before.has(p))).toEqual([]);

    const defined = await client.callTool({
      name: 'define_agent',
      arguments: { name: 'reviewer', description: 'Reviews', backend: 'codex', system_prompt: 'Review.' },
    });
    expect(defined.isError, JSON.stringify(defined.content)).toBeFalsy();
    expect(packages(readFileSync(trace, 'utf8')).has('yaml')).toBe(true);
  } finally {
    await client.close();
  }
}, 60_000);
