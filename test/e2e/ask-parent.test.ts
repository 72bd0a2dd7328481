// The two-way channel through the built server, with the fake CLIs: an agent asks, the
// orchestrator (this test) is woken by wait_for_agents, answers with reply_subagent, and the
// agent carries on in the same run; the conversation in result and IAC.md; the channel's guards
// (tokens per run and only while it runs, bounded questions); and the token nowhere it must not be.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';
import {
  finishedAfterQuestions,
  questionOf as questionOn,
  type Job as JobView,
  type Question,
  type Waited,
} from '../helpers/jobs.js';

type Entry = { kind: string; at: string; message_id?: string; text: string; options?: string[] };
type Job = JobView & {
  waiting_for_parent?: boolean;
  questions?: Omit<Question, 'agent_id'>[];
  progress?: string;
  conversation?: Entry[];
};

const TOKEN_SHAPE = /psp_[A-Za-z0-9_-]{20,}/;

let server: TestServer;
let records: string;
const scratch = tempDir('ask');

/** Every file under dir, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

/** The run's entry in IAC.md's history ('' until it is there). */
function entryOf(id: string): string {
  const iac = readFileSync(join(server.projectDir, 'IAC.md'), 'utf8');
  const start = iac.indexOf(`### \`${id}\``);
  if (start < 0) return '';
  const end = iac.indexOf('\n---\n', start);
  return iac.slice(start, end < 0 ? undefined : end);
}

async function spawn(backend: string, prompt: string, extra: Record<string, unknown> = {}): Promise<string> {
  return (await server.callOk<Job>(`spawn_${backend}`, { prompt, ...extra })).agent_id;
}

const questionOf = (id: string) => questionOn(server, id);
/** Waits until the agent has finished: a wait returns early for each new question it asks. */
const finished = async (id: string, on: TestServer = server): Promise<Job> =>
  (await finishedAfterQuestions(on, id)).job;

beforeAll(async () => {
  records = tempDir('ask-argv');
  server = await startServer({ env: { FAKE_CLI_RECORD: records, FAKE_CLI_RECORD_ENV: 'POLYSPAWN_PARENT_TOKEN' } });
});
afterAll(() => server.close());

describe.each(['claude', 'codex', 'copilot'])('%s agent asks the orchestrator', (backend) => {
  test('wait_for_agents wakes on the question; reply_subagent answers it; the agent carries on in the same run', async () => {
    const logged: unknown[] = [];
    server.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logged.push(n.params));
    const id = await spawn(
      backend,
      'pick one [[cli:progress:reading the schema]] [[cli:ask:Which database?]] [[cli:ask-options:postgres|sqlite]]',
    );
    const question = await questionOf(id);
    expect(question).toMatchObject({
      agent_id: id,
      message_id: 'q1',
      question: 'Which database?',
      options: ['postgres', 'sqlite'],
    });

    // While it waits: list and result show it waiting, with the question and its progress line.
    const listed = await server.callOk<{ agents: Job[] }>('list');
    const row = listed.agents.find((a) => a.agent_id === id)!;
    expect(row).toMatchObject({ state: 'running', waiting_for_parent: true, progress: 'reading the schema' });
    expect(row.questions).toEqual([expect.objectContaining({ message_id: 'q1', question: 'Which database?' })]);
    await waitFor(
      'IAC.md to show the open question',
      () => readFileSync(join(server.projectDir, 'IAC.md'), 'utf8').includes(`\`${id}\` asks \`q1\``),
      20_000,
    );
    await waitFor('the question as a warning notification', () => JSON.stringify(logged).includes(id), 20_000);
    expect(logged).toContainEqual(
      expect.objectContaining({ level: 'warning', data: expect.objectContaining({ agent_id: id, message_id: 'q1' }) }),
    );

    const replied = await server.callOk<Job>('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'postgres' });
    expect(replied.waiting_for_parent).toBeUndefined();
    const done = await finished(id);
    expect(done.state).toBe('succeeded');
    expect(done.text).toBe('ANSWER postgres');
    expect(done.conversation!.map((e) => [e.kind, e.message_id, e.text])).toEqual([
      ['progress', undefined, 'reading the schema'],
      ['question', 'q1', 'Which database?'],
      ['answer', 'q1', 'postgres'],
    ]);

    // IAC.md: the conversation in the run's entry, in order.
    await waitFor('IAC.md to show the answer', () => entryOf(id).includes('**answered** `q1`: postgres'), 20_000);
    const entry = entryOf(id);
    const order = [
      'progress: reading the schema',
      '**asked** `q1`: Which database? (options: postgres / sqlite)',
      '**answered** `q1`: postgres',
    ];
    const at = order.map((line) => entry.indexOf(line));
    expect(
      at.every((i) => i > 0),
      entry,
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });
});

describe('the addressee', () => {
  test('to: "user" on a client without tasks: the question reaches the orchestrator marked as the user’s, and so do the record and IAC.md', async () => {
    const id = await spawn('claude', '[[cli:ask:May I delete the cache?]] [[cli:ask-to:user]]');
    const question = await questionOf(id);
    expect(question).toMatchObject({ message_id: 'q1', question: 'May I delete the cache?', to: 'user' });
    await waitFor(
      'IAC.md to show the question as the user’s',
      () => readFileSync(join(server.projectDir, 'IAC.md'), 'utf8').includes(`\`${id}\` asks the user \`q1\``),
      20_000,
    );
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'the user says yes' });
    const done = await finished(id);
    expect(done.text).toBe('ANSWER the user says yes');
    await waitFor('IAC.md to show the answer', () => entryOf(id).includes('**asked the user** `q1`'), 20_000);
  });

  test('an addressee or an argument ask_parent does not know is refused, saying what to change; nothing is asked', async () => {
    const wrongTo = await spawn('codex', '[[cli:ask:Which one?]] [[cli:ask-to:boss]]');
    const refusedTo = await finished(wrongTo);
    expect(refusedTo.text).toMatch(/^ASK ERROR /);
    expect(refusedTo.text).toContain('"orchestrator"');
    expect(refusedTo.text).toContain('"user"');
    expect(refusedTo.text).toContain('to');
    const extraKey = await spawn('codex', '[[cli:ask:Which one?]] [[cli:ask-extra:urgent]]');
    const refusedKey = await finished(extraKey);
    expect(refusedKey.text).toMatch(/^ASK ERROR .*urgent/s);
    expect(refusedTo.conversation ?? []).toEqual([]);
    expect(refusedKey.conversation ?? []).toEqual([]);
  });
});

describe('answering', () => {
  test('twice, an unknown message, an unknown agent, an agent that has ended: each a clear error', async () => {
    const id = await spawn('codex', '[[cli:ask:Go on?]]');
    await questionOf(id);
    const unknownMessage = await server.call('reply_subagent', { agent_id: id, message_id: 'q9', answer: 'x' });
    expect(unknownMessage.isError).toBe(true);
    expect(JSON.stringify(unknownMessage.content)).toContain('its open questions are q1');
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'yes' });
    const twice = await server.call('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'again' });
    expect(twice.isError).toBe(true);
    expect(JSON.stringify(twice.content)).toContain('was answered already');
    await finished(id);
    const unknownAgent = await server.call('reply_subagent', { agent_id: 'zzzzzz', message_id: 'q1', answer: 'x' });
    expect(unknownAgent.isError).toBe(true);
    expect(JSON.stringify(unknownAgent.content)).toContain('no agent with id');

    // A question left open when its run ends cannot be answered afterwards.
    // Long enough for the agent to ask on a loaded machine; its time-out then ends it while it waits.
    const left = await spawn('claude', '[[cli:ask:Anyone there?]]', { timeout_s: 10 });
    await questionOf(left);
    const ended = await finished(left);
    expect(ended.state).toBe('timed_out');
    const late = await server.call('reply_subagent', { agent_id: left, message_id: 'q1', answer: 'too late' });
    expect(late.isError).toBe(true);
    expect(JSON.stringify(late.content)).toContain('has ended (timed_out)');
    // Its own time-out ended the run; the question shows never answered.
    expect(ended.conversation).toEqual([expect.objectContaining({ kind: 'question', text: 'Anyone there?' })]);
    await waitFor(
      'IAC.md to show the question never answered',
      () => entryOf(left).includes('**asked** `q1`: Anyone there? · _never answered_'),
      20_000,
    );
  });

  test('result shows a waiting agent, its time counting; check_message_status repeats an answer, refuses an unknown message', async () => {
    const id = await spawn('copilot', '[[cli:ask:Again?]] [[cli:ask-check]]');
    await questionOf(id);
    // While it waits, result shows the question too, and its elapsed time keeps counting.
    const waiting = await server.callOk<Job & { elapsed_s: number }>('result', { agent_id: id });
    expect(waiting).toMatchObject({ state: 'running', waiting_for_parent: true });
    expect(waiting.questions).toEqual([expect.objectContaining({ message_id: 'q1', question: 'Again?' })]);
    await new Promise((r) => setTimeout(r, 300));
    const later = await server.callOk<Job & { elapsed_s: number }>('result', { agent_id: id });
    expect(later.elapsed_s).toBeGreaterThan(waiting.elapsed_s);
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'once' });
    const done = await finished(id);
    expect(done.text).toMatch(
      /^ANSWER once CHECKED answered once UNKNOWN .*no question "q99" in this run: pass the message_id ask_parent returned/,
    );
  });

  test('a run may hold 5 open questions: the next is refused with what to do', async () => {
    const id = await spawn('codex', '[[cli:ask-many:100]]');
    const done = await finished(id);
    expect(done.text).toMatch(/^REFUSED 5 questions \(q1, q2, q3, q4, q5\) are waiting for answers already/);
    const questions = done.conversation!.filter((e) => e.kind === 'question');
    expect(questions).toHaveLength(5);
  });
});

describe('two agents asking at once', () => {
  test("each question lands on the run that asked it, each answer goes back to that run alone, and one ending leaves the other's channel open", async () => {
    const a = await spawn('codex', '[[cli:ask:Question of A?]]');
    // A's session on the channel is open (it asked) before B starts: B's must still speak as B.
    expect((await questionOf(a)).question).toBe('Question of A?');
    const b = await spawn('claude', '[[cli:ask:Question of B?]]');
    const asked = async () => {
      const { agents } = await server.callOk<{ agents: Job[] }>('list');
      return Object.fromEntries(
        [a, b].map((id) => [id, (agents.find((j) => j.agent_id === id)?.questions ?? []).map((q) => q.question)]),
      );
    };
    await waitFor('a second open question', async () => Object.values(await asked()).flat().length === 2, 30_000);
    expect(await asked()).toEqual({ [a]: ['Question of A?'], [b]: ['Question of B?'] });

    // B answered and ended first: A, still waiting on the channel, keeps it.
    await server.callOk('reply_subagent', { agent_id: b, message_id: 'q1', answer: 'for B' });
    const doneB = await finished(b);
    await server.callOk('reply_subagent', { agent_id: a, message_id: 'q1', answer: 'for A' });
    const doneA = await finished(a);
    expect([doneA.text, doneB.text]).toEqual(['ANSWER for A', 'ANSWER for B']);
    expect(doneA.conversation!.map((e) => [e.kind, e.text])).toEqual([
      ['question', 'Question of A?'],
      ['answer', 'for A'],
    ]);
    expect(doneB.conversation!.map((e) => [e.kind, e.text])).toEqual([
      ['question', 'Question of B?'],
      ['answer', 'for B'],
    ]);
  });
});

describe('the channel admits each run alone, while it runs', () => {
  test('no token, a made-up token, and the token of a run that has ended: 401', async () => {
    expect((await finished(await spawn('codex', '[[cli:probe:none]]'))).text).toBe('PROBE 401');
    expect((await finished(await spawn('copilot', '[[cli:probe:wrong]]'))).text).toBe('PROBE 401');
    const tokenFile = join(scratch, 'stolen-token');
    const first = await finished(await spawn('claude', `[[cli:save-token:${tokenFile}]]`));
    expect(first.text).toBe('TALKED');
    expect(readFileSync(tokenFile, 'utf8')).toMatch(TOKEN_SHAPE);
    // The same token, presented by a later run after the first has ended.
    expect((await finished(await spawn('codex', `[[cli:probe:file=${tokenFile}]]`))).text).toBe('PROBE 401');
  });

  test('ask_parent: false gives the agent no channel', async () => {
    const job = await finished(await spawn('claude', '[[cli:ask:Hello?]]', { ask_parent: false }));
    expect(job.text).toBe('NO CHANNEL');
  });

  test('ask_parent: false in an agent definition: its tool has no ask_parent field, and its agent no channel', async () => {
    await server.callOk('define_agent', {
      name: 'loner',
      description: 'Works alone.',
      backend: 'claude',
      system_prompt: 'Decide on your own.',
      ask_parent: false,
    });
    const { tools } = await server.client.listTools();
    const fields = (name: string) => Object.keys(tools.find((t) => t.name === name)!.inputSchema.properties!);
    expect(fields('spawn_claude')).toContain('ask_parent');
    expect(fields('spawn_loner')).not.toContain('ask_parent');
    const job = await finished(await spawn('loner', '[[cli:ask:Hello?]]'));
    expect(job.text).toBe('NO CHANNEL');
  });

  test('the token is in no argv, file of the project, log or tool result; the files that held it are gone', async () => {
    const id = await spawn('claude', '[[cli:ask:Secret?]]');
    await questionOf(id);
    // While the run lasts, its MCP config is the user's alone (an agent's servers may hold tokens).
    const runDir = join(server.projectDir, '.polyspawn', 'runs', id);
    expect(statSync(join(runDir, 'claude-mcp.json')).mode & 0o777).toBe(0o600);
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'fine' });
    // An agent that prints its token: redacted like any secret.
    const leaked = await finished(await spawn('codex', '[[cli:echo-env:POLYSPAWN_PARENT_TOKEN]]'));
    expect(leaked.text).toBe('[REDACTED]');
    const results = JSON.stringify([await finished(id), leaked, await server.callOk('list')]);
    expect(results).not.toMatch(TOKEN_SHAPE);
    for (const file of filesUnder(records)) {
      const { argv, env } = JSON.parse(readFileSync(file, 'utf8')) as { argv: string[]; env: Record<string, string> };
      expect(argv.join(' ')).not.toMatch(TOKEN_SHAPE);
      // Each CLI reads its token from the environment (codex by bearer_token_env_var, the others
      // by expanding the variable in their config file's header).
      const hasChannel = argv.some((a) => a.startsWith('mcp_servers.parent.') || /mcp-config$/.test(a));
      if (hasChannel) expect(env.POLYSPAWN_PARENT_TOKEN).toMatch(TOKEN_SHAPE);
      else expect(env.POLYSPAWN_PARENT_TOKEN).toBeNull();
    }
    for (const file of filesUnder(server.projectDir)) {
      if (file.includes(`${join('.polyspawn', 'runs')}`) || file.endsWith('IAC.md') || file.endsWith('.jsonl')) {
        expect(readFileSync(file, 'utf8'), file).not.toMatch(TOKEN_SHAPE);
      }
    }
    expect(server.stderr()).not.toMatch(TOKEN_SHAPE);
    expect(existsSync(join(runDir, 'claude-mcp.json'))).toBe(false);
  });

  test('a secret in a question, an answer or a progress line is redacted in results, notifications, the record and IAC.md', async () => {
    const secret = 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345';
    const logged: unknown[] = [];
    server.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logged.push(n.params));
    const id = await spawn('claude', `[[cli:progress:using ${secret}]] [[cli:ask:May I print ${secret}?]]`);
    const question = await questionOf(id);
    expect(question.question).toBe('May I print [REDACTED]?');
    const listed = JSON.stringify(await server.callOk('list'));
    expect(listed).toContain('using [REDACTED]');
    await waitFor('the question as a notification', () => JSON.stringify(logged).includes(id), 20_000);
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: `no, not ${secret}` });
    const done = await finished(id);
    expect(done.conversation!.map((e) => e.text)).toEqual([
      'using [REDACTED]',
      'May I print [REDACTED]?',
      'no, not [REDACTED]',
    ]);
    await waitFor('IAC.md to show the answer', () => entryOf(id).includes('**answered** `q1`'), 20_000);
    const record = readFileSync(join(server.projectDir, '.polyspawn', 'runs', id, 'record.json'), 'utf8');
    for (const [where, text] of Object.entries({
      listed,
      done: JSON.stringify(done),
      logged: JSON.stringify(logged),
      record,
      iac: entryOf(id),
    }))
      expect(text, where).not.toContain(secret);
  });

  test('with no CLI agent running, nothing listens', async () => {
    const id = await spawn('codex', '[[cli:ask:Port?]]');
    await questionOf(id);
    const argv = filesUnder(records)
      .map((f) => JSON.parse(readFileSync(f, 'utf8')) as { argv: string[]; prompt: string })
      .find((r) => r.prompt.includes('Port?'))!.argv;
    const url = JSON.parse(
      argv
        .find((a) => a.startsWith('mcp_servers.parent.url='))!
        .split('=')
        .slice(1)
        .join('='),
    );
    expect((await fetch(url, { method: 'POST' })).status).toBe(401);
    await server.callOk('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'ok' });
    await finished(id);
    // The last lease closes the listener before the job's end is announced.
    await expect(fetch(url, { method: 'POST' })).rejects.toThrow();
  });
});

describe('after a restart', () => {
  test('a question of an interrupted run shows never answered, and answering it is a clear error', async () => {
    const projectDir = tempDir('ask-restart');
    const first = await startServer({ projectDir });
    const id = (await first.callOk<Job>('spawn_codex', { prompt: '[[cli:ask:Still there?]]' })).agent_id;
    const waited = await first.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 60 });
    expect(waited.questions, JSON.stringify(waited)).toHaveLength(1);
    await waitFor(
      'the question in the run store',
      () =>
        readFileSync(join(projectDir, '.polyspawn', 'runs', id, 'record.json'), 'utf8').includes('"kind": "question"'),
      20_000,
    );
    process.kill(first.transport.pid!, 'SIGKILL');
    await first.close().catch(() => undefined);

    const second = await startServer({ projectDir });
    try {
      let job = await second.callOk<Job>('result', { agent_id: id });
      for (const deadline = Date.now() + 30_000; job.state !== 'interrupted' && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 100));
        job = await second.callOk<Job>('result', { agent_id: id });
      }
      expect(job.state).toBe('interrupted');
      expect(job.conversation).toEqual([expect.objectContaining({ kind: 'question', text: 'Still there?' })]);
      const late = await second.call('reply_subagent', { agent_id: id, message_id: 'q1', answer: 'yes' });
      expect(late.isError).toBe(true);
      expect(JSON.stringify(late.content)).toContain('has ended (interrupted)');
      await waitFor(
        'IAC.md to show the question never answered',
        () =>
          existsSync(join(projectDir, 'IAC.md')) &&
          readFileSync(join(projectDir, 'IAC.md'), 'utf8').includes('**asked** `q1`: Still there? · _never answered_'),
        30_000,
      );
    } finally {
      await second.close();
    }
  });
});

describe('channel: false in the config', () => {
  test('no reply_subagent tool, no ask_parent field, and agents get no channel', async () => {
    const off = await startServer({ env: { POLYSPAWN_CHANNEL: 'false' } });
    try {
      const { tools } = await off.client.listTools();
      expect(tools.map((t) => t.name)).not.toContain('reply_subagent');
      expect(Object.keys(tools.find((t) => t.name === 'spawn_codex')!.inputSchema.properties!)).not.toContain(
        'ask_parent',
      );
      const id = (await off.callOk<Job>('spawn_codex', { prompt: '[[cli:ask:Anyone?]]' })).agent_id;
      const waited = await off.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 60 });
      expect(waited.finished[0]!.text).toBe('NO CHANNEL');
    } finally {
      await off.close();
    }
  });
});
