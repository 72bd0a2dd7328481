// The real interactive Claude Code in a pseudo-terminal, for contract tests of what only its
// interactive UI does (MCP tasks run in the background, a server's question opens a dialog for
// the user; FINDINGS.md, "Interactive Claude Code"). The terminal is tmux's: it renders the
// screen (Claude Code redraws with cursor moves, so the raw byte stream is no screen), takes
// keys, and runs on its own socket in a folder of this run, so nothing else on the machine is
// touched. Every stdio MCP server is started with test/contract/jsonrpc-tap.mjs, so a test
// sees each JSON-RPC message both ways (and knows when tools/list has been answered: a prompt
// typed before that reaches the model without the server's tools).
// The servers are Node scripts: the tap runs inside the server's process.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { procStat } from '../../src/lib/proc.js';
import { repoRoot } from '../helpers/mcp.js';
import { isGone, waitFor } from '../helpers/processes.js';
import { cliEnv } from './clis.js';

/** A stdio MCP server that is a Node script (the tap is preloaded into it). */
export interface NodeServer {
  script: string;
  args?: string[];
  env?: Record<string, string>;
}

export interface InteractiveClaudeOptions {
  /** The pinned claude binary (installClis().claude). */
  claude: string;
  /** The project folder it runs in; marked trusted in its config. */
  cwd: string;
  /** A folder of this run for the terminal's socket, the taps' logs and the MCP config. */
  dir: string;
  /**
   * Its environment besides PATH: ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, CLAUDE_CONFIG_DIR and
   * the like (makeCliHomes). The config folder's `.claude.json` is written here so that no
   * first-run screen comes up.
   */
  env: Record<string, string>;
  mcpServers: Record<string, NodeServer>;
  /** More arguments, e.g. ['--allowedTools', 'mcp__agents']. */
  args?: string[];
  /**
   * Every server must have settled on MCP 2026-07-28 (what tasks need). Claude Code waits 3 s
   * from sending its server/discover probe to a stdio server (whose start that includes), then
   * falls back to `initialize` and 2025-11-25 for the session; a server slow to start on a
   * loaded machine is retried in a new session (up to 3 sessions, each fallback printed), and
   * one that answers the probe with an error fails at once.
   */
  requireModernEra?: boolean;
}

/** One line of a tap's log: a JSON-RPC message, or the tap's note that the server exited. */
export interface TapEntry {
  at: number;
  from: 'client' | 'server' | 'tap';
  message: unknown;
}

export type JsonRpc = {
  jsonrpc?: string;
  id?: string | number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
};

/** A request the client sent and the server's answer to it, when there is one yet. */
export interface Exchange {
  request: JsonRpc;
  response?: JsonRpc;
}

export interface InteractiveClaude {
  /** The pid of claude itself. */
  pid: number;
  /** Every message to and from the server `name` so far. */
  tap(name: string): TapEntry[];
  /** The requests of `method` the client sent to server `name`, each with its answer if any. */
  exchanges(name: string, method: string): Exchange[];
  /** Waits for a request of `method` to `name` that `match`es and has been answered; returns it. */
  waitForExchange(name: string, method: string, match?: (e: Exchange) => boolean, ms?: number): Promise<Exchange>;
  /** The screen as it is now, wrapped lines joined. */
  screen(): string;
  /** Waits until the screen shows `what`; returns the screen. */
  waitForScreen(what: string | RegExp, ms?: number): Promise<string>;
  /** Types `text` as keystrokes (literally: no key names), and waits until the screen shows its end. */
  type(text: string): Promise<void>;
  /** Presses keys by tmux's names: 'Enter', 'Escape', 'Down', 'C-c', 'x', ... */
  press(...keys: string[]): void;
  /** Types the prompt and presses Enter. */
  submit(prompt: string): Promise<void>;
  /**
   * Answers the open MCP input dialog ("MCP server … requests your input"): types `answer`
   * into its focused field, moves to Accept (or Decline) and presses Enter; waits for the
   * dialog to close.
   */
  answerDialog(answer: string, button?: 'Accept' | 'Decline'): Promise<void>;
  /** Moves the open dialog's cursor to `button` and presses Enter; waits for the dialog to close. */
  pressDialogButton(button: 'Accept' | 'Decline'): Promise<void>;
  /**
   * Ends the session as a user does (Ctrl-C twice; with a task running, "Exit and stop tasks"),
   * then the terminal; waits until claude and
   * every process it had started are gone. What is still alive after `ms` is killed and named
   * in the error it throws.
   */
  close(ms?: number): Promise<void>;
}

const TAP = join(repoRoot, 'test', 'contract', 'jsonrpc-tap.mjs');
/**
 * claude runs at this niceness and its MCP servers at claude's less this (the normal priority,
 * or claude's own where lowering it is not allowed: nice then warns and runs them anyway).
 * Claude Code gives a stdio server 3 s from its first request to answer it, the server's start
 * included, and its own start competes for the CPU meanwhile: on a loaded machine the UI is
 * slowed rather than the answer, and no process runs above the normal priority.
 */
const CLAUDE_NICENESS = 10;
/** Wide enough that a tool's one-line answer is not wrapped into the next dialog's way. */
const COLUMNS = 200;
const ROWS = 50;

/**
 * The settings that take Claude Code past its first-run screens: onboarding (whose connection
 * check would reach api.anthropic.com), the theme, "Detected a custom API key … use it?"
 * (approved by the key's last 20 characters) and whether to trust the folder.
 */
function seedConfig(configDir: string, apiKey: string, cwd: string): void {
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, '.claude.json'),
    JSON.stringify({
      hasCompletedOnboarding: true,
      theme: 'dark',
      customApiKeyResponses: { approved: [apiKey.slice(-20)], rejected: [] },
      projects: { [cwd]: { hasTrustDialogAccepted: true } },
    }),
  );
}

/**
 * Whether the screen shows `text`, whitespace aside: Claude Code wraps long lines itself (with
 * a newline and an indent), so a text may be cut anywhere there is a space.
 */
const shows = (screen: string, text: string) => screen.replace(/\s+/g, '').includes(text.replace(/\s+/g, ''));

/** What the input box at the bottom holds: the lines between its two rules. */
function inputBox(screen: string): string {
  const lines = screen.split('\n');
  const rules = lines.flatMap((line, i) => (/^─{20,}\s*$/.test(line) ? [i] : []));
  return rules.length < 2 ? '' : lines.slice(rules.at(-2)! + 1, rules.at(-1)).join('\n');
}

/** Each line of a tap's log (test/contract/jsonrpc-tap.mjs). */
export function readTap(file: string): TapEntry[] {
  if (!existsSync(file)) return [];
  const entries: TapEntry[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    try {
      entries.push(JSON.parse(line) as TapEntry);
    } catch {
      // the last line, half written as we read
    }
  }
  return entries;
}

/** Each request from the client with the server's answer to it (matched by id). */
export function exchangesOf(entries: TapEntry[], method: string): Exchange[] {
  const rpc = entries.filter((e) => typeof e.message === 'object' && e.message !== null);
  const answers = new Map<string, JsonRpc>();
  for (const e of rpc) {
    const m = e.message as JsonRpc;
    if (e.from === 'server' && m.id !== undefined && m.method === undefined) answers.set(String(m.id), m);
  }
  return rpc
    .map((e) => e.message as JsonRpc)
    .filter((m, i) => rpc[i]!.from === 'client' && m.method === method)
    .map((request) => {
      const response = answers.get(String(request.id));
      return response ? { request, response } : { request };
    });
}

/** Live descendants of `pid` (children, their children, ...), found through /proc. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = procStat(name);
    if (!stat || stat.state === 'Z') continue;
    children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), Number(name)]);
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      found.push(c);
      walk(c);
    }
  };
  walk(pid);
  return found;
}

const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 200);
  } catch {
    return '(gone)';
  }
};

/**
 * Writes the `mcpServers` file Claude Code reads (`--mcp-config`): each server started by this
 * Node with the tap preloaded, logging to `tapLog(name)`, and `raisedBy` steps of niceness above
 * claude's (see CLAUDE_NICENESS). Returns its path.
 */
export function writeMcpConfig(
  dir: string,
  servers: Record<string, NodeServer>,
  tapLog: (name: string) => string,
  raisedBy = 0,
): string {
  const entries = Object.fromEntries(
    Object.entries(servers).map(([name, s]) => {
      const node = [process.execPath, '--import', TAP, s.script, ...(s.args ?? [])];
      const command = raisedBy === 0 ? node : ['nice', '-n', String(-raisedBy), ...node];
      const env = { ...s.env, JSONRPC_TAP_LOG: tapLog(name) };
      return [name, { type: 'stdio', command: command[0], args: command.slice(1), env }];
    }),
  );
  const file = join(dir, 'mcp.json');
  writeFileSync(file, JSON.stringify({ mcpServers: entries }));
  return file;
}

/** Where tmux is, or an error that says what to install: these tests need a terminal. */
function tmuxBinary(): string {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return 'tmux';
  } catch {
    throw new Error(
      'tmux is not on PATH: the interactive Claude Code contract tests run it in a tmux terminal (apt-get install tmux)',
    );
  }
}

/** How Claude Code opened a session with a server, from the tap's log. */
export interface Negotiation {
  era: 'modern' | 'legacy';
  /** What the server did with the first server/discover, for a message. */
  story: string;
}

export function negotiation(entries: TapEntry[]): Negotiation {
  const at = (from: TapEntry['from'], match: (m: JsonRpc) => boolean) =>
    entries.find((e) => e.from === from && typeof e.message === 'object' && match(e.message as JsonRpc))?.at;
  const discover = exchangesOf(entries, 'server/discover')[0];
  const era = exchangesOf(entries, 'initialize').length > 0 ? 'legacy' : 'modern';
  if (!discover) return { era, story: 'no server/discover reached the server' };
  const read = at('client', (m) => m.id === discover.request.id && m.method === 'server/discover')!;
  const answered = at('server', (m) => m === discover.response);
  const initialize = at('client', (m) => m.method === 'initialize');
  const story = [
    discover.response?.error
      ? `server/discover answered with the error ${discover.response.error.message}`
      : `server/discover answered ${answered === undefined ? 'never' : `${answered - read} ms after it was read`}`,
    initialize === undefined ? '' : `; initialize came ${initialize - read} ms after it`,
  ].join('');
  return { era, story };
}

/**
 * Starts claude in a terminal of COLUMNS x ROWS with `mcpServers` (each with the tap), and
 * returns once every server has answered tools/list and the prompt box is on screen.
 */
export async function startInteractiveClaude(options: InteractiveClaudeOptions): Promise<InteractiveClaude> {
  for (let session = 1; ; session++) {
    const claude = await startSession(options);
    if (!options.requireModernEra) return claude;
    const legacy = Object.keys(options.mcpServers)
      .map((name) => ({ name, ...negotiation(claude.tap(name)) }))
      .filter((n) => n.era === 'legacy');
    if (legacy.length === 0) return claude;
    await claude.close();
    const said = legacy.map((n) => `${n.name}: ${n.story}`).join('; ');
    // An error is the server's answer, not its slowness: no new session changes that.
    if (legacy.some((n) => n.story.includes('with the error')) || session === 3) {
      throw new Error(`Claude Code settled on MCP 2025-11-25, not 2026-07-28, in session ${session}: ${said}`);
    }
    console.warn(
      `Claude Code fell back to MCP 2025-11-25 (${said}; it waits 3 s from sending, the server's start included): starting a new session`,
    );
  }
}

async function startSession(options: InteractiveClaudeOptions): Promise<InteractiveClaude> {
  const tmux = tmuxBinary();
  const dir = mkdtempSync(join(options.dir, 'claude-tty-'));
  const socket = join(dir, 'tmux.sock');
  const tapLog = (name: string) => join(dir, `tap-${name}.jsonl`);
  const mcpConfig = writeMcpConfig(dir, options.mcpServers, tapLog, CLAUDE_NICENESS);
  const { CLAUDE_CONFIG_DIR: configDir, ANTHROPIC_API_KEY: apiKey } = options.env;
  if (!configDir || !apiKey) throw new Error('env must set CLAUDE_CONFIG_DIR and ANTHROPIC_API_KEY');
  seedConfig(configDir, apiKey, options.cwd);

  // No ~/.tmux.conf: the options this harness relies on, nothing else. remain-on-exit keeps
  // the last screen readable after claude ends.
  const conf = join(dir, 'tmux.conf');
  writeFileSync(
    conf,
    [
      'set -g remain-on-exit on',
      'set -g default-terminal xterm-256color',
      'set -g history-limit 5000',
      'set -g focus-events on', // else Claude Code shows a hint about it
      '',
    ].join('\n'),
  );
  const env = cliEnv(options.env);
  delete env.TMUX; // set when the tests run inside tmux: a nested tmux would refuse to start
  const run = (...args: string[]) =>
    execFileSync(tmux, ['-S', socket, '-f', conf, ...args], { env, encoding: 'utf8', cwd: options.cwd });
  // argv, not a shell line: tmux runs nice, which execs claude, so the pane's pid is claude's.
  run(
    'new-session',
    '-d',
    '-s',
    'claude',
    '-x',
    String(COLUMNS),
    '-y',
    String(ROWS),
    '-c',
    options.cwd,
    '--',
    'nice',
    '-n',
    String(CLAUDE_NICENESS),
    options.claude,
    '--mcp-config',
    mcpConfig,
    '--strict-mcp-config',
    ...(options.args ?? []),
  );
  const pid = Number(run('display-message', '-p', '-t', 'claude', '#{pane_pid}').trim());
  const tmuxServer = Number(run('display-message', '-p', '#{pid}').trim());

  const screen = () => run('capture-pane', '-p', '-J', '-t', 'claude');
  const waitForScreen = async (what: string | RegExp, ms = 60_000) => {
    let last = '';
    try {
      await waitFor(
        `the screen to show ${String(what)}`,
        () => {
          last = screen();
          return typeof what === 'string' ? shows(last, what) : what.test(last);
        },
        ms,
      );
    } catch (error) {
      throw new Error(`${(error as Error).message}; the screen:\n${last}`);
    }
    return last;
  };
  const press = (...keys: string[]) => void run('send-keys', '-t', 'claude', ...keys);
  const type = async (text: string) => {
    run('send-keys', '-t', 'claude', '-l', text);
    // Its end (Claude Code folds a long paste into a placeholder).
    await waitForScreen(text.trim().slice(-20), 10_000).catch(() => waitForScreen(/\[Pasted text/, 1));
  };
  const tap = (name: string) => readTap(tapLog(name));
  /** A check that holds once the screen has not changed for 300 ms. */
  const settled = () => {
    let last = '';
    let since = Date.now();
    return () => {
      const now = screen();
      if (now !== last) [last, since] = [now, Date.now()];
      return Date.now() - since >= 300;
    };
  };
  const exchanges = (name: string, method: string) => exchangesOf(tap(name), method);

  const session: InteractiveClaude = {
    pid,
    tap,
    exchanges,
    async waitForExchange(name, method, match = () => true, ms = 60_000) {
      let found: Exchange | undefined;
      await waitFor(
        `${name} to answer a ${method} request`,
        () => (found = exchanges(name, method).find((e) => e.response !== undefined && match(e))) !== undefined,
        ms,
      );
      return found!;
    },
    screen,
    waitForScreen,
    type,
    press,
    async submit(prompt) {
      await type(prompt);
      // Keys that come in a burst are a paste to Claude Code, and an Enter inside one is a new
      // line: press it again until the prompt has left the input box.
      const tail = prompt.trim().slice(-20);
      for (let presses = 1; ; presses++) {
        await waitFor('the screen to settle', settled(), 5_000).catch(() => {});
        press('Enter');
        try {
          await waitFor('the prompt to be sent', () => !shows(inputBox(screen()), tail), 3_000);
          return;
        } catch (error) {
          if (presses === 3) throw new Error(`${(error as Error).message}; the screen:\n${screen()}`);
        }
      }
    },
    async answerDialog(answer, button = 'Accept') {
      await waitForScreen('requests your input');
      await type(answer);
      await session.pressDialogButton(button);
    },
    async pressDialogButton(button) {
      // The buttons sit below the fields, side by side: down, then right, until it has the cursor.
      for (let i = 0; i < 8 && !new RegExp(`❯\\s${button}`).test(screen()); i++) {
        const before = screen();
        press(i < 4 ? 'Down' : 'Right');
        await waitFor('the dialog to move its cursor', () => screen() !== before, 5_000);
      }
      // Claude Code drops an Enter that comes right after the keys before it (measured: the first
      // one left the dialog open for 6 s, a second closed it): press again until it closes.
      const closed = () => !screen().includes('requests your input');
      for (let presses = 1; ; presses++) {
        await waitFor('the screen to settle', settled(), 5_000).catch(() => {});
        press('Enter');
        try {
          await waitFor('the dialog to close', closed, 3_000);
          return;
        } catch (error) {
          if (presses === 3) throw new Error(`${(error as Error).message}; the screen:\n${screen()}`);
        }
      }
    },
    async close(ms = 20_000) {
      const started = new Map([pid, ...descendants(pid)].map((p) => [p, commandLine(p)]));
      const leftovers = () => [...started.keys()].filter((p) => !isGone(p));
      // Ctrl-C, and again once it says so: the way a user leaves. With a task still running,
      // Claude Code asks first ("Background work is running"): its first choice, "Exit and stop
      // tasks", is the one that has the cursor.
      for (let presses = 0; presses < 3 && !isGone(pid); presses++) {
        press('C-c');
        await waitFor(
          'claude to end or ask for another Ctrl-C',
          () => isGone(pid) || /again to exit|Background work is running/i.test(screen()),
          5_000,
        ).catch(() => {});
        if (screen().includes('Background work is running')) {
          press('Enter');
          await waitFor('claude to end', () => isGone(pid), 10_000).catch(() => {});
        }
      }
      await waitFor('claude and what it started to end', () => leftovers().length === 0, ms).catch(() => {});
      const left = leftovers();
      const lastScreen = left.length > 0 ? screen() : '';
      for (const p of left) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      try {
        run('kill-server');
      } catch {
        // already gone
      }
      await waitFor('the terminal to end', () => isGone(tmuxServer), 5_000);
      if (left.length > 0) {
        const named = left.map((p) => `  ${p} ${p === pid ? '(claude) ' : ''}${started.get(p)}`).join('\n');
        throw new Error(
          `still running ${ms} ms after claude was told to exit (now killed):\n${named}\nthe screen:\n${lastScreen}`,
        );
      }
    },
  };

  try {
    for (const name of Object.keys(options.mcpServers)) await session.waitForExchange(name, 'tools/list');
    await waitForScreen(/^❯\s/m); // the prompt box (Claude Code puts a no-break space after ❯)
  } catch (error) {
    await session.close(5_000).catch(() => {});
    throw error;
  }
  return session;
}
