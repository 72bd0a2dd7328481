// An ACP agent declared in the user's config (acp_agents), driven through the built server with the
// fake ACP agent (test/fakes/fake-acp-agent.mjs): its spawn tool, a file written after a permission
// request the orchestrator answered (with the diff it carried), a refused one, the file methods kept
// in the job's folder, cancel, resume through session/load, budgets, and the faults: no answer to
// initialize, another protocol version, a crash, a flood, a thousand permission requests, not
// installed. Each ends in a clear state and error, with nothing of it left running.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { repoRoot, startServer, type TestServer } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';
import { groupMembers } from '../helpers/processes.js';
import { finished as finishedOn, questionOf as questionOn, runLog, type Job } from '../helpers/jobs.js';
import { CONVERSATION_LIMITS } from '../../src/jobs/conversation.js';

const fake = join(repoRoot, 'test', 'fakes', 'fake-acp-agent.mjs');
const agent = (...args: string[]) => ({ command: process.execPath, args: [fake, ...args], start_timeout_s: 5 });

let server: TestServer;
const outside = tempDir('acp-outside');

beforeAll(async () => {
  const home = tempDir('acp-config');
  const config = join(home, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      acp_agents: {
        fakeacp: { ...agent(), fs: true },
        yolo: { ...agent(), permissions: { allow: 'allow', ask: 'ask' } },
        mute: agent('--no-init'),
        future: agent('--protocol', '2'),
        stubborn: agent('--ignore-cancel'),
        noload: agent('--no-load'),
        priced: { ...agent(), reports_cost: true, fs: true },
        moded: { ...agent(), session_mode: 'default' },
        nomode: { ...agent(), session_mode: 'plan' },
        missing: { command: 'no-such-acp-agent-here', install_hint: 'install it with `npm i -g no-such`' },
      },
    }),
  );
  server = await startServer({ env: { POLYSPAWN_CONFIG: config, POLYSPAWN_KILL_GRACE_S: '1' } });
});
afterAll(() => server.close());

const spawn = async (backend: string, prompt: string, extra: Record<string, unknown> = {}) =>
  (await server.callOk<Job>(`spawn_${backend}`, { prompt, ...extra })).agent_id;
const finished = (id: string) => finishedOn(server, id);
const questionOf = (id: string) => questionOn(server, id);
const log = (id: string) => runLog(server, id);
/** Waits until the job's prompt is on its way to the agent. */
const promptSent = (id: string) =>
  expect
    .poll(() => existsSync(join(server.projectDir, '.polyspawn', 'runs', id, 'stdout.log')) && log(id), {
      timeout: 30_000,
    })
    .toContain('"method":"session/prompt"');
/** What of a job's process group is still running (the fake agent and its `sleep`). */
function leftOf(id: string): number[] {
  const job = JSON.parse(readFileSync(join(server.projectDir, '.polyspawn', 'runs', id, 'record.json'), 'utf8')) as {
    group?: { pgid: number };
  };
  expect(job.group?.pgid).toBeGreaterThan(1);
  return groupMembers(job.group!.pgid);
}

describe('an ACP agent from the user config', () => {
  test('its spawn tool is listed with on_permission', async () => {
    const tools = (await server.client.listTools()).tools;
    const tool = tools.find((t) => t.name === 'spawn_fakeacp');
    expect(tool?.inputSchema.properties).toHaveProperty('on_permission');
  });

  test('a permission request reaches the orchestrator with its diff; allowed, the file is written', async () => {
    const id = await spawn('fakeacp', 'make it [[acp:write notes/hello.txt hello from acp]]');
    const question = await questionOf(id);
    expect(question.question).toContain('edit');
    expect(question.question).toContain(join(server.projectDir, 'notes', 'hello.txt'));
    expect(question.question).toContain('+++ after\nhello from acp');
    expect(question.options).toEqual(['Allow once', 'Reject']);
    // A permission is the user's to give: on a client without tasks, the orchestrator passes it on.
    expect(question.to).toBe('user');
    await server.callOk('reply_subagent', { agent_id: id, message_id: question.message_id, answer: 'Allow once' });
    const job = await finished(id);
    expect(job.state, job.error).toBe('succeeded');
    expect(job.text).toContain('notes/hello.txt written');
    expect(readFileSync(join(server.projectDir, 'notes', 'hello.txt'), 'utf8')).toBe('hello from acp');
    expect(job.usage).toMatchObject({ input_tokens: 10, output_tokens: 5 });
    // The event log: the request, the answer the client sent, and the channel passed in session/new.
    const lines = log(id)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const asked = lines.find((l) => l.message?.method === 'session/request_permission');
    expect(asked.message.params.toolCall.content[0]).toMatchObject({ type: 'diff', newText: 'hello from acp' });
    expect(
      lines.find((l) => l.from === 'client' && l.message.id === asked.message.id && l.message.result).message.result,
    ).toEqual({
      outcome: { outcome: 'selected', optionId: 'allow' },
    });
    expect(job.text).toContain('mcp servers: parent');
    expect(log(id)).not.toMatch(/psp_[A-Za-z0-9_-]{20,}/);
    // logs, readable: the same run as a transcript, with no raw JSON-RPC.
    const readable = await server.callOk<{ text: string }>('logs', { agent_id: id, readable: true });
    expect(readable.text).toMatch(/^note: asks permission for .*\(Allow once \/ Reject\)$/m);
    expect(readable.text).toContain('+++ after\n    hello from acp');
    expect(readable.text).toMatch(/^message: .*notes\/hello\.txt written/m);
    expect(readable.text).not.toContain('"jsonrpc"');
    const stderr = await server.call('logs', { agent_id: id, readable: true, stream: 'stderr' });
    expect(stderr.isError).toBe(true);
    expect(JSON.stringify(stderr.content)).toContain('leave readable out for the raw log');
  });

  test("a named agent's MCP servers reach session/new; their secrets never reach the log", async () => {
    await server.callOk('define_agent', {
      name: 'acp-helper',
      description: 'an ACP agent with servers',
      backend: 'yolo',
      system_prompt: 'Help.',
      mcp_servers: {
        docs: { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Basic c2VjcmV0LXZhbHVlLTEyMw' } },
        tool: { command: 'docs-mcp', env: { DOCS_SECRET_VALUE: 'plain-secret-value-123' } },
      },
    });
    const job = await finished((await server.callOk<Job>('spawn_acp-helper', { prompt: 'hello' })).agent_id);
    expect(job.text).toContain('mcp servers: docs,tool,parent');
    expect(log(job.agent_id)).not.toContain('c2VjcmV0LXZhbHVlLTEyMw');
    expect(log(job.agent_id)).not.toContain('plain-secret-value-123');
  });

  test('an answer that refuses: the agent is told no and nothing is written', async () => {
    const id = await spawn('fakeacp', '[[acp:write refused.txt no]]');
    const question = await questionOf(id);
    await server.callOk('reply_subagent', { agent_id: id, message_id: question.message_id, answer: 'no, not that' });
    const job = await finished(id);
    expect(job.text).toContain('refused.txt refused');
    expect(existsSync(join(server.projectDir, 'refused.txt'))).toBe(false);
  });

  test('policies: allow answers alone; a spawn narrows allow to deny, never widens', async () => {
    const allowed = await finished(await spawn('yolo', '[[acp:write yes.txt y]]', { on_permission: 'allow' }));
    expect(allowed.text).toContain('yes.txt written');
    const narrowed = await finished(await spawn('yolo', '[[acp:write no.txt n]]', { on_permission: 'deny' }));
    expect(narrowed.text).toContain('no.txt refused');
  });

  test('the file methods stay in the job folder: outside refused, a missing file reads empty', async () => {
    const target = join(outside, 'escaped.txt');
    const inside = join(server.projectDir, 'via-fs.txt');
    const job = await finished(
      await spawn(
        'fakeacp',
        `[[acp:fs-write ${target} bad]] [[acp:fs-write ${inside} good]] [[acp:fs-read ${join(server.projectDir, 'absent.txt')}]] [[acp:fs-read /etc/passwd]]`,
      ),
    );
    expect(job.state, job.error).toBe('succeeded');
    expect(existsSync(target)).toBe(false);
    expect(job.text).toContain(`fs-write ${target} failed`);
    expect(job.text).toContain(`fs-write ${inside} ok`);
    expect(readFileSync(inside, 'utf8')).toBe('good');
    expect(job.text).toContain(`absent.txt: ""`);
    expect(job.text).toContain('fs-read /etc/passwd failed');
    expect(log(job.agent_id)).toContain('is outside the job');
  });

  test('cancel: session/cancel ends the turn, cancelled, nothing left running', async () => {
    const id = await spawn('fakeacp', '[[acp:sleep 60]]');
    await promptSent(id);
    await server.callOk('cancel', { agent_id: id });
    const job = await finished(id);
    expect(job.state).toBe('cancelled');
    expect(log(id)).toContain('session/cancel');
    expect(leftOf(id)).toEqual([]);
  });

  test('cancel of an agent that ignores session/cancel: its process group is ended', async () => {
    const id = await spawn('stubborn', '[[acp:sleep 60]]');
    await promptSent(id);
    const started = Date.now();
    await server.callOk('cancel', { agent_id: id });
    const job = await finished(id);
    expect(job.state).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(leftOf(id)).toEqual([]);
  });

  test('resume continues the session through session/load', async () => {
    const first = await finished(await spawn('yolo', 'first'));
    expect(first.session_id).toMatch(/^[0-9a-f-]{36}$/);
    const second = await finished(await spawn('yolo', 'second', { resume: first.agent_id }));
    expect(second.state, second.error).toBe('succeeded');
    expect(second.session_id).toBe(first.session_id);
    expect(log(second.agent_id)).toContain('session/load');
    // The answer is this turn's, not the history the agent replayed.
    expect(second.text).not.toContain('replayed history');
  });

  test('resume where the agent has no session/load: a clear error', async () => {
    const first = await finished(await spawn('noload', 'first'));
    const second = await finished(await spawn('noload', 'again', { resume: first.agent_id }));
    expect(second.state).toBe('failed');
    expect(second.error).toContain('cannot load an earlier session');
  });

  test('the declared session mode is set; a model the spawn names is set as the session option', async () => {
    const plain = await finished(await spawn('yolo', 'hello'));
    expect(plain.text).toContain('mode auto, model small');
    const moded = await finished(await spawn('moded', 'hello', { model: 'big' }));
    expect(moded.state, moded.error).toBe('succeeded');
    expect(moded.text).toContain('mode default, model big');
    const unknown = await finished(await spawn('moded', 'hello', { model: 'huge' }));
    expect(unknown.error).toContain('has no model "huge": it offers small, big');
    const nomode = await finished(await spawn('nomode', 'hello'));
    expect(nomode.error).toContain('offers no session mode "plan"');
  });

  test('max_turns counts the prompt and each tool call', async () => {
    const job = await finished(await spawn('yolo', '[[acp:tools 5]] [[acp:sleep 30]]', { budget: { max_turns: 3 } }));
    expect(job.state).toBe('failed');
    expect(job.budget?.exceeded).toBe('turns');
    expect(job.error).toContain('max_turns (3)');
  });

  test('a cost reported over the session: a resumed run is billed its own share, and its budget held to it', async () => {
    const first = await finished(await spawn('priced', '[[acp:cost 0.5]]'));
    expect(first).toMatchObject({ state: 'succeeded', cost_usd: 0.5, cost_source: 'reported' });
    // The session's $0.8 includes the first run's $0.5: this run spent $0.3, within its $0.4.
    const second = await finished(
      await spawn('priced', '[[acp:cost 0.8]]', { resume: first.agent_id, budget: { max_budget_usd: 0.4 } }),
    );
    expect(second.state, second.error).toBe('succeeded');
    expect(second.cost_usd).toBeCloseTo(0.3, 12);
    // Past it: $1.5 for the session is $0.7 this run.
    const third = await finished(
      await spawn('priced', '[[acp:cost 1.5]] [[acp:sleep 30]]', {
        resume: second.agent_id,
        budget: { max_budget_usd: 0.4 },
      }),
    );
    expect(third).toMatchObject({ state: 'failed', budget: { exceeded: 'cost' } });
    expect(third.error).toContain('($1.5 for the session, its earlier runs included), past max_budget_usd ($0.4)');
    expect(third.cost_usd).toBeCloseTo(0.7, 12);
  });

  test('a reported cost past max_budget_usd stops the run', async () => {
    const job = await finished(
      await spawn('priced', '[[acp:cost 2.5]] [[acp:sleep 30]]', { budget: { max_budget_usd: 1 } }),
    );
    expect(job.state).toBe('failed');
    expect(job.budget?.exceeded).toBe('cost');
    expect(job.cost_usd).toBe(2.5);
  });
});

describe('an agent as an attacker', () => {
  test('updates of another session are left out of the log and the answer; its requests about that session refused', async () => {
    const job = await finished(await spawn('priced', '[[acp:foreign]]', { budget: { max_budget_usd: 1 } }));
    expect(job.state, job.error).toBe('succeeded');
    expect(job.text).not.toContain('FOREIGN');
    // Its cost of $99 for the other session neither stops the run nor is counted.
    expect(job.cost_usd).toBeUndefined();
    expect(job.text).toMatch(/foreign permission refused: .*is not this run's/);
    expect(job.text).toMatch(/foreign fs-write refused: .*is not this run's/);
    expect(existsSync(join(server.projectDir, 'foreign.txt'))).toBe(false);
    expect(log(job.agent_id)).not.toContain('FOREIGN');
    expect(log(job.agent_id)).toContain('sent updates of another session');
  });

  test('a permission request carrying a 10 MB diff: a question clipped to its limit, answered, the run goes on', async () => {
    const id = await spawn('fakeacp', '[[acp:bigdiff 10]]');
    const question = await questionOf(id);
    expect(question.question.length).toBeLessThanOrEqual(CONVERSATION_LIMITS.questionChars);
    expect(question.question).toContain('(clipped)');
    expect(question.question).toContain('Answer with an option');
    await server.callOk('reply_subagent', { agent_id: id, message_id: question.message_id, answer: 'Reject' });
    const job = await finished(id);
    expect(job.state, job.error).toBe('succeeded');
    expect(job.text).toContain('bigdiff answered {"outcome":"selected","optionId":"reject"}');
  });

  test('cancel while a permission question waits: answered cancelled at once, the turn ends without a kill', async () => {
    const id = await spawn('fakeacp', '[[acp:write late.txt no]]');
    await questionOf(id);
    await server.callOk('cancel', { agent_id: id });
    const job = await finished(id);
    expect(job.state).toBe('cancelled');
    expect(log(id)).toContain('"result":{"outcome":{"outcome":"cancelled"}}');
    // The agent ended its turn itself, told it was cancelled.
    expect(log(id)).toContain('"stopReason":"cancelled"');
    expect(existsSync(join(server.projectDir, 'late.txt'))).toBe(false);
  });

  test('a permission request after cancel is answered cancelled, even where the policy allows', async () => {
    const id = await spawn('yolo', '[[acp:ask-after-cancel]]', { on_permission: 'allow' });
    await promptSent(id);
    await server.callOk('cancel', { agent_id: id });
    const job = await finished(id);
    expect(job.state).toBe('cancelled');
    expect(runLog(server, id, 'stderr')).toContain('after cancel: {"outcome":"cancelled"}');
    expect(log(id)).toContain('"stopReason":"cancelled"');
  });
});

describe('faults: a clear state and error, nothing left running', () => {
  test.each([
    ['mute', 'x', 'did not answer initialize within 5 s'],
    ['future', 'x', 'speaks ACP protocol version 2; polyspawn speaks 1'],
    ['fakeacp', '[[acp:crash]]', 'exited (code 3) during its turn'],
    ['fakeacp', '[[acp:flood 100000]]', 'stopped as a flood'],
    ['yolo', '[[acp:permissions 1000]]', 'asked for permission more than 200 times'],
  ])('%s %s', async (backend, prompt, error) => {
    const job = await finished(await spawn(backend, prompt));
    expect(job.state).toBe('failed');
    expect(job.error).toContain(error);
    expect(leftOf(job.agent_id)).toEqual([]);
  });

  test('not installed: the spawn says how to install it', async () => {
    const text = await server.callError('spawn_missing', { prompt: 'x' });
    expect(text).toContain('no-such-acp-agent-here');
    expect(text).toContain('npm i -g no-such');
  });
});
