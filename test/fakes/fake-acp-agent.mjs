#!/usr/bin/env node
// A fake ACP agent (the SDK's agent side over stdio), for the ACP backend's tests. How it
// starts is steered by its arguments, what one turn does by [[acp:...]] directives in the prompt:
//   --no-init              never answers initialize
//   --protocol N           answers initialize with protocol version N
//   --no-load              has no loadSession
//   --ignore-cancel        a cancelled turn goes on (its process group must be ended)
// Its session offers the modes auto (the default) and default, and a model option: small, big.
//   [[acp:write REL TEXT]]     asks permission (a diff), then writes REL under its cwd if allowed
//   [[acp:fs-write ABS TEXT]]  writes through the client's fs/write_text_file; says what happened
//   [[acp:fs-read ABS]]        reads through fs/read_text_file; says what it got
//   [[acp:sleep S]]            waits S seconds (a `sleep` child in its group meanwhile), or until cancelled
//   [[acp:flood N]]            sends N session/update notifications
//   [[acp:permissions N]]      asks for permission N times
//   [[acp:tools N]]            starts N tool calls
//   [[acp:cost USD]]           reports a running cost
//   [[acp:crash]]              exits with code 3 mid-turn
//   [[acp:foreign]]            sends a message, a tool call and a cost as updates of another session,
//                              and asks permission and writes a file for it; says what it was answered
//   [[acp:bigdiff MB]]         asks permission for an edit whose diff is MB megabytes; says the answer
//   [[acp:ask-after-cancel]]   waits to be cancelled, then asks permission; says the answer on stderr
//   [[acp:try-write ABS]]      writes ABS itself (not through the client); says ok or the error's code
//   [[acp:try-read ABS]]       reads ABS itself; says ok or the error's code
// Its answer: "fake acp answer" plus what each directive did; usage 10 in, 5 out.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { agent, ndJsonStream } from '@agentclientprotocol/sdk';

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);

const sessions = new Map(); // sessionId -> { cwd, cancel?: () => void }

const directives = (text) => [...text.matchAll(/\[\[acp:([a-z-]+)(?: ([^\]]*))?\]\]/g)].map((m) => [m[1], m[2] ?? '']);

const app = agent({ name: 'fake-acp-agent' })
  .onRequest('initialize', async () => {
    if (flag('--no-init')) return new Promise(() => undefined);
    return {
      protocolVersion: Number(option('--protocol') ?? 1),
      agentCapabilities: { loadSession: !flag('--no-load') },
      authMethods: [],
    };
  })
  .onRequest('session/new', ({ params }) => {
    const sessionId = randomUUID();
    sessions.set(sessionId, { cwd: params.cwd, mcpServers: params.mcpServers, mode: 'auto', model: 'small' });
    return {
      sessionId,
      modes: {
        currentModeId: 'auto',
        availableModes: [
          { id: 'auto', name: 'Auto' },
          { id: 'default', name: 'Ask' },
        ],
      },
      configOptions: [
        {
          id: 'model',
          name: 'Model',
          type: 'select',
          currentValue: 'small',
          options: [
            { value: 'small', name: 'Small' },
            { value: 'big', name: 'Big' },
          ],
        },
      ],
    };
  })
  .onRequest('session/set_mode', ({ params }) => {
    sessions.get(params.sessionId).mode = params.modeId;
    return {};
  })
  .onRequest('session/set_config_option', ({ params }) => {
    sessions.get(params.sessionId).model = params.value;
    return { configOptions: [] };
  })
  .onRequest('session/load', async ({ params, client }) => {
    sessions.set(params.sessionId, { cwd: params.cwd, mcpServers: params.mcpServers });
    await update(client, params.sessionId, {
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: 'replayed history' },
    });
    return {};
  })
  .onNotification('session/cancel', ({ params }) => {
    if (!flag('--ignore-cancel')) sessions.get(params.sessionId)?.cancel?.();
  })
  .onRequest('session/prompt', async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    let cancelled = false;
    const cancelledNow = new Promise((resolve) => (session.cancel = () => ((cancelled = true), resolve())));
    const said = ['fake acp answer'];
    const servers = (session.mcpServers ?? []).map((s) => s.name).join(',');
    if (servers) said.push(`mcp servers: ${servers}`);
    said.push(`mode ${session.mode}, model ${session.model}`);
    for (const [name, arg] of directives(text)) {
      if (cancelled) break;
      if (name === 'write') {
        const [rel, ...words] = arg.split(' ');
        const path = join(session.cwd, rel);
        let oldText = null;
        try {
          oldText = readFileSync(path, 'utf8');
        } catch {
          // a new file
        }
        const toolCall = {
          toolCallId: `write-${rel}`,
          title: `Write ${rel}`,
          kind: 'edit',
          status: 'pending',
          content: [{ type: 'diff', path, oldText, newText: words.join(' ') }],
        };
        await update(client, params.sessionId, { sessionUpdate: 'tool_call', ...toolCall });
        const answer = await client.request('session/request_permission', {
          sessionId: params.sessionId,
          toolCall,
          options: [
            { optionId: 'allow', name: 'Allow once', kind: 'allow_once' },
            { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
          ],
        });
        const allowed = answer.outcome.outcome === 'selected' && answer.outcome.optionId === 'allow';
        if (allowed) {
          mkdirSync(dirname(path), { recursive: true });
          writeFileSync(path, words.join(' '));
        }
        await update(client, params.sessionId, {
          sessionUpdate: 'tool_call_update',
          toolCallId: toolCall.toolCallId,
          status: allowed ? 'completed' : 'failed',
        });
        said.push(`${rel} ${allowed ? 'written' : 'refused'}`);
      } else if (name === 'fs-write') {
        const [path, ...words] = arg.split(' ');
        try {
          await client.request('fs/write_text_file', { sessionId: params.sessionId, path, content: words.join(' ') });
          said.push(`fs-write ${path} ok`);
        } catch (error) {
          said.push(`fs-write ${path} failed: ${error.message}`);
        }
      } else if (name === 'fs-read') {
        try {
          const got = await client.request('fs/read_text_file', { sessionId: params.sessionId, path: arg });
          said.push(`fs-read ${arg}: ${JSON.stringify(got.content)}`);
        } catch (error) {
          said.push(`fs-read ${arg} failed: ${error.message}`);
        }
      } else if (name === 'sleep') {
        const child = spawn('sleep', [String(Number(arg) + 30)], { stdio: 'ignore' });
        await Promise.race([new Promise((r) => setTimeout(r, Number(arg) * 1000)), cancelledNow]);
        if (!flag('--ignore-cancel')) child.kill();
      } else if (name === 'flood') {
        for (let i = 0; i < Number(arg); i++)
          void update(client, params.sessionId, {
            sessionUpdate: 'agent_thought_chunk',
            content: { type: 'text', text: 'x'.repeat(1000) },
          });
      } else if (name === 'permissions') {
        for (let i = 0; i < Number(arg); i++) {
          await client.request('session/request_permission', {
            sessionId: params.sessionId,
            toolCall: { toolCallId: `p${i}`, title: `Run step ${i}`, kind: 'execute' },
            options: [
              { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
              { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
            ],
          });
        }
        said.push(`asked ${arg} times`);
      } else if (name === 'tools') {
        for (let i = 0; i < Number(arg); i++)
          await update(client, params.sessionId, {
            sessionUpdate: 'tool_call',
            toolCallId: `t${i}`,
            title: `Step ${i}`,
            kind: 'read',
            status: 'completed',
          });
      } else if (name === 'cost') {
        await update(client, params.sessionId, {
          sessionUpdate: 'usage_update',
          used: 100,
          size: 1000,
          cost: { amount: Number(arg), currency: 'USD' },
        });
      } else if (name === 'crash') {
        process.exit(3);
      } else if (name === 'foreign') {
        const other = randomUUID();
        await update(client, other, {
          sessionUpdate: 'agent_message_chunk',
          content: { type: 'text', text: 'FOREIGN' },
        });
        await update(client, other, {
          sessionUpdate: 'tool_call',
          toolCallId: 'x',
          title: 'Foreign',
          status: 'pending',
        });
        await update(client, other, {
          sessionUpdate: 'usage_update',
          used: 1,
          size: 9,
          cost: { amount: 99, currency: 'USD' },
        });
        for (const [what, ask] of [
          [
            'permission',
            () => client.request('session/request_permission', { sessionId: other, ...permissionOf('f') }),
          ],
          [
            'fs-write',
            () =>
              client.request('fs/write_text_file', {
                sessionId: other,
                path: join(session.cwd, 'foreign.txt'),
                content: 'x',
              }),
          ],
        ]) {
          try {
            said.push(`foreign ${what}: ${JSON.stringify(await ask())}`);
          } catch (error) {
            said.push(`foreign ${what} refused: ${error.message}`);
          }
        }
      } else if (name === 'try-write' || name === 'try-read') {
        try {
          if (name === 'try-write') writeFileSync(arg, 'fake acp');
          else readFileSync(arg);
          said.push(`${name} ${arg}: ok`);
        } catch (error) {
          said.push(`${name} ${arg}: ${error.code}`);
        }
      } else if (name === 'bigdiff') {
        const big = 'z'.repeat(Number(arg) * 1024 * 1024);
        const toolCall = {
          toolCallId: 'big',
          title: 'Write big.txt',
          kind: 'edit',
          status: 'pending',
          content: [{ type: 'diff', path: join(session.cwd, 'big.txt'), oldText: big, newText: `${big}!` }],
        };
        const answer = await client.request('session/request_permission', {
          sessionId: params.sessionId,
          ...permissionOf('big'),
          toolCall,
        });
        said.push(`bigdiff answered ${JSON.stringify(answer.outcome)}`);
      } else if (name === 'ask-after-cancel') {
        await cancelledNow;
        const answer = await client.request('session/request_permission', {
          sessionId: params.sessionId,
          ...permissionOf('late'),
        });
        process.stderr.write(`after cancel: ${JSON.stringify(answer.outcome)}\n`);
      }
    }
    if (cancelled) return { stopReason: 'cancelled' };
    await update(client, params.sessionId, {
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: said.join('; ') },
    });
    return { stopReason: 'end_turn', usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } };
  });

/** A permission request's tool call (an edit of nothing in particular) and options. */
function permissionOf(id) {
  return {
    toolCall: { toolCallId: id, title: `Run ${id}`, kind: 'execute' },
    options: [
      { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
      { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
    ],
  };
}

function update(client, sessionId, update) {
  return client.notify('session/update', { sessionId, update });
}

app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
