#!/usr/bin/env node
// A fake codex whose process misbehaves in the ways real programs do, for the reliability
// suite (test/reliability/children.test.ts). Run it as a CLI backend's binary
// (POLYSPAWN_CODEX_BIN). It reads the prompt from stdin, then prints a successful
// `codex exec --json` stream whose answer is `ODD: <prompt>`, changed by directives:
//
//   [[odd:pids:FILE]]              write "<own pid> <child pid, if any>" to FILE once started
//   [[odd:close-stdout]]           after printing, close stdout (fd 1) and stderr (fd 2) ...
//   [[odd:close-stdout-first]]     ... or close them before printing anything
//   [[odd:then-exit:MS]]           ... and exit 0 MS ms later (default: never exit)
//   [[odd:fork-and-exit]]          start a child in the same process group that outlives this
//                                  process by far (stdio detached), then exit 0 at once
//   [[odd:not-utf8]]               an answer and a stderr line holding bytes that are not UTF-8,
//                                  and a multi-byte character split across two writes
import { spawn } from 'node:child_process';
import { closeSync, writeFileSync, writeSync } from 'node:fs';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const prompt = Buffer.concat(chunks).toString('utf8');
const value = (key) => new RegExp(`\\[\\[odd:${key}(?::([^\\]]*))?\\]\\]`).exec(prompt);
const has = (key) => value(key) !== null;

let childPid = '';
if (has('fork-and-exit')) {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  child.unref();
  childPid = String(child.pid);
}
const pids = value('pids');
if (pids) writeFileSync(pids[1], `${process.pid} ${childPid}`.trim());

const threadId = `odd-${process.pid}`;
const line = (o) => Buffer.from(`${JSON.stringify(o)}\n`);
const head = Buffer.concat([line({ type: 'thread.started', thread_id: threadId }), line({ type: 'turn.started' })]);
let message;
if (has('not-utf8')) {
  // JSON with raw bytes inside the string: 0xff and 0xfe never occur in UTF-8, 0xe9 is Latin-1
  // "é", and E2 82 starts a euro sign that never ends.
  const text = Buffer.concat([
    Buffer.from('ODD: caf'),
    Buffer.from([0xe9, 0x20, 0xff, 0xfe, 0x20, 0xe2, 0x82]),
    Buffer.from(' end'),
  ]);
  message = Buffer.concat([
    Buffer.from('{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"'),
    text,
    Buffer.from('"}}\n'),
  ]);
} else {
  message = line({ type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text: `ODD: ${prompt}` } });
}
const done = line({ type: 'turn.completed', usage: { input_tokens: 12, cached_input_tokens: 0, output_tokens: 7 } });

const closeOutput = () => {
  closeSync(1);
  closeSync(2);
};
const write = (fd, bytes) => {
  for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
};

if (has('close-stdout-first')) closeOutput();
else {
  write(1, head);
  if (has('not-utf8')) {
    // "日" is E6 97 A5: its first byte in one write, the rest in the next, a moment later.
    write(1, Buffer.from('{"type":"item.started","item":{"id":"item_x","type":"reasoning","text":"\xe6', 'latin1'));
    await new Promise((r) => setTimeout(r, 50));
    write(1, Buffer.from('\x97\xa5"}}\n', 'latin1'));
    write(2, Buffer.from([0x77, 0x61, 0x72, 0x6e, 0x3a, 0x20, 0xc3, 0x28, 0xff, 0x0a])); // "warn: " + invalid bytes
  }
  write(1, message);
  write(1, done);
  if (has('close-stdout')) closeOutput();
}

const exitAfter = value('then-exit');
if (has('fork-and-exit')) process.exit(0);
else if (exitAfter) setTimeout(() => process.exit(0), Number(exitAfter[1] ?? 0));
else if (has('close-stdout') || has('close-stdout-first')) setInterval(() => {}, 1 << 30);
