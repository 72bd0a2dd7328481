// What a CLI agent's environment holds: what its own CLI signs in with, nothing else whose name
// marks a secret (the API backends' keys, any *_TOKEN), unless the user's config or the agent's
// definition passes it on by name; the channel's token, set by polyspawn itself.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { recordOf } from '../helpers/processes.js';

const recordDir = mkdtempSync(join(tmpdir(), 'polyspawn-child-env-records-'));

const server: Record<string, string> = {
  XAI_API_KEY: 'xai-server-key',
  MISTRAL_API_KEY: 'mistral-server-key',
  ANTHROPIC_API_KEY: 'anthropic-login',
  GH_TOKEN: 'gh-login',
  OPENAI_API_KEY: 'openai-login',
  DEPLOY_PASSWORD: 'hunter2',
  SOME_SECRET: 'shh',
  NPM_TOKEN: 'npm-token',
  CLAUDE_CODE_MAX_OUTPUT_TOKENS: '4096', // a count, not a secret
  PLAIN_SETTING: 'kept',
};
const recorded = [...Object.keys(server), 'POLYSPAWN_PARENT_TOKEN', 'GITHUB_TOKEN', 'POLYSPAWN_MCP_WEB_SECRET_1'];

let s: TestServer;
let project: string;
beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'polyspawn-child-env-'));
  // The user's own config passes NPM_TOKEN on to codex.
  mkdirSync(join(project, '.xdg-config', 'polyspawn', 'agents', 'releaser'), { recursive: true });
  writeFileSync(
    join(project, '.xdg-config', 'polyspawn', 'config.json'),
    JSON.stringify({ backends: { codex: { env: ['NPM_TOKEN'] } } }),
  );
  // An agent that runs `gh` gets GH_TOKEN, though its CLI is claude.
  writeFileSync(
    join(project, '.xdg-config', 'polyspawn', 'agents', 'releaser', 'agent.md'),
    '---\ndescription: Releases.\nbackend: claude\nenv: [GH_TOKEN]\n---\nYou release.\n',
  );
  // A codex agent whose MCP servers take a token each: the values reach codex through its
  // environment (past the filter of secret-looking names), never through argv.
  mkdirSync(join(project, '.xdg-config', 'polyspawn', 'agents', 'gh-reader'));
  writeFileSync(
    join(project, '.xdg-config', 'polyspawn', 'agents', 'gh-reader', 'agent.md'),
    '---\ndescription: Reads issues.\nbackend: codex\nmcp_servers:\n' +
      '  gh: { command: gh-mcp, env: { GITHUB_TOKEN: ghp-mcp-value-0123456789 } }\n' +
      '  web: { url: "https://mcp.example/mcp", headers: { Authorization: "Bearer web-mcp-value-0123456789" } }\n' +
      '---\nYou read issues.\n',
  );
  s = await startServer({
    projectDir: project,
    env: { ...server, FAKE_CLI_RECORD: recordDir, FAKE_CLI_RECORD_ENV: recorded.join(',') },
  });
}, 60_000);
afterAll(async () => {
  await s?.close();
  rmSync(project, { recursive: true, force: true });
  rmSync(recordDir, { recursive: true, force: true });
});

const run = async (tool: string, marker: string) => {
  const job = await s.callOk<{ state: string }>(tool, { prompt: marker, wait_s: 30 });
  expect(job.state).toBe('succeeded');
  return recordOf(recordDir, marker).env;
};

describe("a CLI agent's environment", () => {
  test('claude: its own login, no other backend key, no other secret; settings and counts kept; the channel token set', async () => {
    const env = await run('spawn_claude', 'env claude');
    expect(env).toMatchObject({
      ANTHROPIC_API_KEY: 'anthropic-login',
      XAI_API_KEY: null,
      MISTRAL_API_KEY: null,
      GH_TOKEN: null,
      OPENAI_API_KEY: null,
      DEPLOY_PASSWORD: null,
      SOME_SECRET: null,
      NPM_TOKEN: null,
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '4096',
      PLAIN_SETTING: 'kept',
    });
    expect(env.POLYSPAWN_PARENT_TOKEN).toMatch(/^psp_/);
  });

  test("codex and copilot: each its own login; the config's allow list passes a named variable on", async () => {
    expect(await run('spawn_codex', 'env codex')).toMatchObject({
      OPENAI_API_KEY: 'openai-login',
      ANTHROPIC_API_KEY: null,
      XAI_API_KEY: null,
      NPM_TOKEN: 'npm-token',
    });
    expect(await run('spawn_copilot', 'env copilot')).toMatchObject({
      GH_TOKEN: 'gh-login',
      OPENAI_API_KEY: null,
      NPM_TOKEN: null,
    });
  });

  test("a codex agent's MCP server tokens: in its environment, not in its argv; the channel's server unchanged", async () => {
    const job = await s.callOk<{ state: string }>('spawn_gh-reader', { prompt: 'env gh-reader', wait_s: 30 });
    expect(job.state).toBe('succeeded');
    const { env, argv } = recordOf(recordDir, 'env gh-reader');
    expect(env).toMatchObject({
      GITHUB_TOKEN: 'ghp-mcp-value-0123456789',
      POLYSPAWN_MCP_WEB_SECRET_1: 'Bearer web-mcp-value-0123456789',
      NPM_TOKEN: 'npm-token',
      XAI_API_KEY: null,
    });
    expect(env.POLYSPAWN_PARENT_TOKEN).toMatch(/^psp_/);
    expect(argv.join(' ')).not.toMatch(/mcp-value|psp_/);
    expect(argv).toEqual(
      expect.arrayContaining([
        'mcp_servers.gh.env_vars=["GITHUB_TOKEN"]',
        'mcp_servers.web.env_http_headers={"Authorization" = "POLYSPAWN_MCP_WEB_SECRET_1"}',
        'mcp_servers.parent.bearer_token_env_var="POLYSPAWN_PARENT_TOKEN"',
      ]),
    );
  });

  test("a named agent's env list passes a named variable on", async () => {
    expect(await run('spawn_releaser', 'env releaser')).toMatchObject({
      GH_TOKEN: 'gh-login',
      ANTHROPIC_API_KEY: 'anthropic-login',
      XAI_API_KEY: null,
    });
  });
});
