// The fake CLIs' side of polyspawn's channel to the orchestrator (ask_parent): it finds the
// channel in its own command line, the way each real CLI would, and talks to it with the MCP
// SDK's client. Loaded by fake-cli.mjs only when a prompt has a channel directive.
//
//   [[cli:progress:TEXT]]    report_progress(TEXT) first
//   [[cli:ask:QUESTION]]     ask_parent(QUESTION), then check_message_status while it is
//                            pending; the answer text is `ANSWER <answer>` (`ASK ERROR <message>`
//                            when the tool refuses)
//   [[cli:ask-options:A|B]]  the options of that question
//   [[cli:ask-to:WHOM]]      its addressee (ask_parent's `to`), passed as given; ask-many's too
//   [[cli:ask-extra:KEY]]    an argument ask_parent does not take, KEY: true
//   [[cli:ask-check]]        once answered, check_message_status for that message and for an
//                            unknown one: the answer text ends with ` CHECKED <status> <answer>`
//                            and ` UNKNOWN <the refusal>`
//   [[cli:ask-clock]]        the answer text ends with ` CLOCK <sent> <returned>`: Date.now() as
//                            ask_parent was called and as the answer came back (bench/ask.mjs)
//   [[cli:ask-many:N]]       N questions at once; ends with `REFUSED <message>` at the first refusal
//   [[cli:save-token:FILE]]  write its own token to FILE (as a misbehaving agent could)
//   [[cli:team]]             play the part a team's prompt gives (src/jobs/teams/topologies/):
//                            a leader creates the tasks of [[cli:tasks:A|B]] and waits until all
//                            are done (`LEAD <results>`); a teammate claims and finishes tasks
//                            until none is left (`MATE <task ids>`), each after [[cli:task-ms:MS]]
//                            ms when given (a task seen claimed); a blackboard member writes
//                            `seen-<pid>`, and `done` in the round [[cli:done-round:N]] says; a
//                            supervisor runs the team [[cli:subteam:{run_team args}]] and waits
//                            for it (`SUPERVISED <its answer>`)
//   [[cli:probe:HOW]]        one initialize request to the channel, with no token (HOW=none), a
//                            made-up one (wrong), or the token in a file (file=PATH); the answer
//                            text is `PROBE <HTTP status>`
import { readFileSync, writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const SERVER = 'parent';

/** Where the channel is and the headers that admit this run, read as the named CLI reads them. */
export function findChannel(name, args, env) {
  const after = (flag) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  if (name === 'codex') {
    const setting = (key) => {
      const prefix = `mcp_servers.${SERVER}.${key}=`;
      const arg = args.find((a) => a.startsWith(prefix));
      return arg === undefined ? undefined : JSON.parse(arg.slice(prefix.length));
    };
    const url = setting('url');
    const tokenEnv = setting('bearer_token_env_var');
    if (!url) return undefined;
    return { url, headers: tokenEnv && env[tokenEnv] ? { Authorization: `Bearer ${env[tokenEnv]}` } : {} };
  }
  const file = name === 'claude' ? after('--mcp-config') : after('--additional-mcp-config')?.replace(/^@/, '');
  if (!file) return undefined;
  const server = JSON.parse(readFileSync(file, 'utf8')).mcpServers?.[SERVER];
  if (!server) return undefined;
  // Both CLIs expand ${VAR} in a server's headers from their environment.
  const expand = (value) => value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name) => env[name] ?? '');
  const headers = Object.fromEntries(Object.entries(server.headers ?? {}).map(([k, v]) => [k, expand(v)]));
  return { url: server.url, headers };
}

async function connect(channel) {
  const client = new Client({ name: 'fake-cli', version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(channel.url), { requestInit: { headers: channel.headers } }),
  );
  return client;
}

const textOf = (result) => result.content?.map((c) => c.text ?? '').join('') ?? '';

async function ask(client, question, options, to, extra, clock, check) {
  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  const sentAt = Date.now();
  const args = {
    question,
    ...(options ? { options } : {}),
    ...(to ? { to } : {}),
    ...(extra ? { [extra]: true } : {}),
  };
  let result = await call('ask_parent', args);
  for (let i = 0; !result.isError && result.structuredContent?.status === 'pending' && i < 20; i++) {
    result = await call('check_message_status', { message_id: result.structuredContent.message_id });
  }
  const returnedAt = Date.now();
  let text = result.isError
    ? `ASK ERROR ${textOf(result)}`
    : `ANSWER ${result.structuredContent.answer ?? '(pending)'}`;
  if (check && !result.isError) {
    const again = await call('check_message_status', { message_id: result.structuredContent.message_id });
    const unknown = await call('check_message_status', { message_id: 'q99' });
    text += ` CHECKED ${again.structuredContent?.status} ${again.structuredContent?.answer}`;
    text += ` UNKNOWN ${unknown.isError ? textOf(unknown) : JSON.stringify(unknown.structuredContent)}`;
  }
  return clock ? `${text} CLOCK ${sentAt} ${returnedAt}` : text;
}

/** The answer text, after doing what the directives say; undefined when none applies. */
export async function talkToParent({ name, args, env, valueOf, prompt }) {
  const channel = findChannel(name, args, env);
  const probe = valueOf('probe');
  if (probe !== undefined) {
    const token =
      probe === 'none'
        ? undefined
        : probe === 'wrong'
          ? 'psp_madeup'
          : readFileSync(probe.replace(/^file=/, ''), 'utf8');
    const response = await fetch(channel?.url ?? 'http://127.0.0.1:9/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '0' } },
      }),
    });
    return `PROBE ${response.status}`;
  }
  if (!channel) return 'NO CHANNEL';
  const saveTo = valueOf('save-token');
  if (saveTo !== undefined) writeFileSync(saveTo, (channel.headers.Authorization ?? '').replace(/^Bearer /, ''));
  const client = await connect(channel);
  try {
    const progress = valueOf('progress');
    if (progress !== undefined) await client.callTool({ name: 'report_progress', arguments: { text: progress } });
    const many = valueOf('ask-many');
    const to = valueOf('ask-to');
    if (many !== undefined) {
      return await new Promise((resolve) => {
        for (let i = 1; i <= Number(many); i++) {
          void client
            .callTool(
              { name: 'ask_parent', arguments: { question: `question ${i}`, ...(to ? { to } : {}) } },
              undefined,
              { timeout: 120_000 },
            )
            .then((r) => r.isError && resolve(`REFUSED ${textOf(r)}`));
        }
      });
    }
    if (valueOf('team') !== undefined) return await playTeamPart(client, prompt, valueOf);
    const question = valueOf('ask');
    if (question !== undefined) {
      const flag = (key) => valueOf(key) !== undefined;
      const options = valueOf('ask-options')?.split('|');
      const extra = valueOf('ask-extra');
      return await ask(client, question, options, to, extra, flag('ask-clock'), flag('ask-check'));
    }
    return 'TALKED';
  } finally {
    await client.close().catch(() => undefined);
  }
}

async function playTeamPart(client, prompt, valueOf) {
  const call = async (name, args = {}) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
    if (result.isError) throw new Error(`${name}: ${textOf(result)}`);
    return result.structuredContent;
  };
  const allDone = (tasks) => tasks.length > 0 && tasks.every((t) => t.status === 'done' || t.status === 'failed');
  if (prompt.includes('You lead a team')) {
    for (const subject of (valueOf('tasks') ?? 'one task').split('|')) await call('task_create', { subject });
    for (let i = 0; i < 20; i++) {
      // The list first: the last task may have been done before this wait began.
      const { tasks } = await call('task_list');
      if (allDone(tasks)) return `LEAD ${tasks.map((t) => `${t.id}=${t.result}`).join(', ')}`;
      await call('read_messages');
    }
    return 'LEAD gave up waiting';
  }
  if (prompt.includes('You are a teammate')) {
    const claimed = [];
    for (let empty = 0; empty < 5;) {
      const { task } = await call('task_claim');
      if (task) {
        claimed.push(task.id);
        await new Promise((resolve) => setTimeout(resolve, Number(valueOf('task-ms') ?? 0)));
        await call('task_update', { task_id: task.id, status: 'done', result: `${task.subject} by ${process.pid}` });
        continue;
      }
      const { tasks } = await call('read_messages');
      if (allDone(tasks)) break;
      empty++;
    }
    return `MATE ${claimed.join(',') || 'none'}`;
  }
  if (prompt.includes('shared board')) {
    const round = Number(/Round (\d+) of/.exec(prompt)?.[1] ?? 0);
    await call('board_write', { key: `seen-${process.pid}`, value: `round ${round}` });
    if (String(round) === valueOf('done-round'))
      await call('board_write', { key: 'done', value: `DONE in round ${round}` });
    const { entries } = await call('board_read');
    return `BOARD ${entries.length} entries`;
  }
  if (prompt.includes('You supervise')) {
    let team_id;
    try {
      ({ team_id } = await call('run_team', JSON.parse(valueOf('subteam') ?? '{}')));
    } catch (error) {
      return `SUPERVISE ERROR ${error.message}`;
    }
    for (let i = 0; i < 20; i++) {
      const result = await call('wait_team', { team_id });
      if (!result.pending) return `SUPERVISED ${team_id}: ${result.answer}`;
    }
    return 'SUPERVISED gave up waiting';
  }
  return 'NO TEAM PART';
}
