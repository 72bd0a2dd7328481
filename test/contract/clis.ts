// The pinned real CLIs (claude, codex, copilot, gemini) and the environment that points each of them at the fake model API,
// shared by the contract tests (test/contract/FINDINGS.md says why each variable is there).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { startFakeModelApi, type FakeModelApi } from '../fakes/model-api.js';
import { repoRoot, startServer, type TestServer } from '../helpers/mcp.js';

export interface InstalledClis {
  claude: string;
  codex: string;
  copilot: string;
  /** Run copilot with XDG_CACHE_HOME set to this: its unpacked package, shared. */
  copilotXdgCache: string;
  /** The ACP adapters, each running the CLI above (CLAUDE_CODE_EXECUTABLE, CODEX_PATH). */
  claudeAcp: string;
  codexAcp: string;
  gemini: string;
}

/** Installs the pinned CLIs on first use (test/contract/install-clis.sh), then reuses them. */
export function installClis(): InstalledClis {
  const lines = execFileSync('bash', [join(repoRoot, 'test/contract/install-clis.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const found = Object.fromEntries(
    lines
      .trim()
      .split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2) as [string, string]),
  );
  const need = (key: string): string => {
    const value = found[key];
    if (!value) throw new Error(`install-clis.sh printed no ${key}`);
    return value;
  };
  return {
    claude: need('POLYSPAWN_CLAUDE_BIN'),
    codex: need('POLYSPAWN_CODEX_BIN'),
    copilot: need('POLYSPAWN_COPILOT_BIN'),
    copilotXdgCache: need('POLYSPAWN_COPILOT_XDG_CACHE_HOME'),
    claudeAcp: need('POLYSPAWN_CLAUDE_ACP_BIN'),
    codexAcp: need('POLYSPAWN_CODEX_ACP_BIN'),
    gemini: need('POLYSPAWN_GEMINI_BIN'),
  };
}

/**
 * A home for Gemini CLI whose settings select the API key: it takes a base URL as "gateway" auth,
 * which headless mode refuses (exit 41), unless they do. In a test's home only, never a user's.
 */
export function geminiApiKeyHome(home: string): string {
  mkdirSync(join(home, '.gemini'), { recursive: true });
  writeFileSync(
    join(home, '.gemini', 'settings.json'),
    JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } } }),
  );
  return home;
}

export interface CliHomes {
  /** The folder that holds each CLI's own home; remove() deletes it. */
  dir: string;
  /** The variables that send all three CLIs to the fake model API, each with its own home. */
  env: Record<string, string>;
  remove(): void;
}

/**
 * Homes for the CLIs' own state, under the CLI cache (codex warns when its home is under /tmp),
 * and the environment that points them at the fake model API at `apiUrl`: claude by
 * ANTHROPIC_BASE_URL, codex by a `fake` provider in CODEX_HOME/config.toml, copilot by its
 * offline mode, gemini by GOOGLE_GEMINI_BASE_URL and a settings file in its own GEMINI_CLI_HOME.
 * Retries are off where a knob exists, so an API error ends a run at once.
 */
export function makeCliHomes(apiUrl: string, clis: InstalledClis): CliHomes {
  const cache = join(homedir(), '.cache', 'polyspawn');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'contract-home-'));
  const codexHome = join(dir, 'codex');
  mkdirSync(codexHome);
  const geminiHome = geminiApiKeyHome(join(dir, 'gemini'));
  writeFileSync(
    join(codexHome, 'config.toml'),
    [
      'model_provider = "fake"',
      '[model_providers.fake]',
      'name = "fake"',
      `base_url = "${apiUrl}/v1"`,
      'wire_api = "responses"',
      'stream_max_retries = 0',
      'request_max_retries = 0',
      '[analytics]',
      'enabled = false',
      '[features]',
      'plugins = false',
    ].join('\n'),
  );
  return {
    dir,
    env: {
      // The commands the agents run start login shells (codex: bash -lc): a home of their own
      // keeps this machine's shell profile out of them (a profile that waits on a lock left by
      // a killed shell stalls every command; measured with pyenv's rehash).
      HOME: dir,
      XDG_CACHE_HOME: clis.copilotXdgCache,
      ANTHROPIC_BASE_URL: apiUrl,
      ANTHROPIC_API_KEY: 'sk-ant-contract-test',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_RETRIES: '0',
      CLAUDE_CONFIG_DIR: join(dir, 'claude'),
      CODEX_HOME: codexHome,
      COPILOT_HOME: join(dir, 'copilot'),
      COPILOT_OFFLINE: 'true',
      COPILOT_PROVIDER_BASE_URL: `${apiUrl}/v1`,
      COPILOT_PROVIDER_API_KEY: 'contract-test-key',
      GEMINI_CLI_HOME: geminiHome,
      GOOGLE_GEMINI_BASE_URL: apiUrl,
      GEMINI_API_KEY: 'contract-test-gemini-key',
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The pinned CLIs, the fake model API, the CLIs' homes pointed at it, and a project folder there. */
export type CliSetup = {
  clis: InstalledClis;
  api: FakeModelApi;
  homes: CliHomes;
  project: string;
  close(): Promise<void>;
};

/** What a test that runs the CLIs itself needs (installed when missing: minutes, once). */
export async function startCliSetup(): Promise<CliSetup> {
  const clis = installClis();
  const api = await startFakeModelApi();
  const homes = makeCliHomes(api.url, clis);
  return {
    clis,
    api,
    homes,
    project: mkdtempSync(join(homes.dir, 'project-')),
    async close() {
      await api.close();
      homes.remove();
    },
  };
}

/** The fake model API, the CLIs' homes, and the built server pointed at the pinned CLIs and both. */
export type ContractRig = { api: FakeModelApi; server: TestServer; close(): Promise<void> };

/** `env`: more variables for the server (and so the CLIs it starts). */
export async function startContractRig(
  env: Record<string, string> | ((clis: InstalledClis, apiUrl: string) => Record<string, string>) = {},
): Promise<ContractRig> {
  const setup = await startCliSetup();
  const { clis, api, homes } = setup;
  const server = await startServer({
    fakeClis: false,
    env: {
      POLYSPAWN_CLAUDE_BIN: clis.claude,
      POLYSPAWN_CODEX_BIN: clis.codex,
      POLYSPAWN_COPILOT_BIN: clis.copilot,
      POLYSPAWN_GEMINI_BIN: clis.gemini,
      ...homes.env,
      ...(typeof env === 'function' ? env(clis, api.url) : env),
    },
  });
  return {
    api,
    server,
    async close() {
      await server.close();
      await setup.close();
    },
  };
}

/** This process's environment for a CLI run by a test, and `extra`. */
export function cliEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  delete env.CLAUDECODE; // set when the tests run inside Claude Code
  return Object.assign(env, extra);
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `bin` with `args` in `cwd`, the prompt on its stdin, until it exits. */
export function runCli(
  bin: string,
  args: string[],
  prompt: string,
  cwd: string,
  env: Record<string, string>,
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(prompt);
  });
}
