// Nothing but JSON-RPC on the server's stdout. Every file of this suite checks every server it
// started (test/helpers/rpc.ts keeps each one's stdout and parses it line by line); this file
// drives the paths most likely to leak something else: children that write to stdout and
// stderr, a flood, failures, time-outs, cancels, logging notifications, resources, requests
// that are not JSON, unknown methods, a configuration error, the shutdown on SIGTERM, and a
// library that logs with console.log, .info or .debug once the server is serving.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { waitFor } from '../helpers/processes.js';
import { startRpcServer, stopAllAndCollectStdoutProblems } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string };

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

describe('stdout carries JSON-RPC only', () => {
  test('through a busy session that ends with SIGTERM', { timeout: 90_000 }, async () => {
    const server = await startRpcServer({ env: { POLYSPAWN_CONCURRENCY: '8' } });
    expect((await server.request('logging/setLevel', { level: 'debug' })).error).toBeUndefined();
    const jobs = await Promise.all([
      server.callOk<Job>('spawn_claude', { prompt: 'noisy [[cli:stderr:a line on stderr]]' }),
      server.callOk<Job>('spawn_codex', { prompt: 'flood [[cli:flood:3]]' }),
      server.callOk<Job>('spawn_copilot', { prompt: 'fails [[cli:fail]] [[cli:stderr:boom]]' }),
      server.callOk<Job>('spawn_codex', { prompt: 'malformed [[cli:malformed]]' }),
      server.callOk<Job>('spawn_claude', { prompt: 'slow [[cli:hang]]', timeout_s: 1 }),
    ]);
    const hanging = await server.callOk<Job>('spawn_copilot', { prompt: 'to cancel [[cli:hang]]' });
    await server.callOk('cancel', { agent_id: hanging.agent_id });
    const waited = await server.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: jobs.map((j) => j.agent_id),
      timeout_s: 50,
    });
    expect(waited.finished.map((j) => j.state).sort()).toEqual([
      'failed',
      'failed',
      'succeeded',
      'succeeded',
      'timed_out',
    ]);
    await server.callOk('logs', { agent_id: jobs[1]!.agent_id, tail: 4096 });
    expect((await server.request('resources/list', {})).error).toBeUndefined();
    expect((await server.request('resources/read', { uri: 'polyspawn://IAC.md' })).error).toBeUndefined();
    expect((await server.request('no/such/method', {})).error?.code).toBe(-32601);
    // Lines that are not JSON, or not JSON-RPC: the transport reports them on its side.
    server.child.stdin.write('this is not json\n{"jsonrpc":"2.0"}\n\n');
    expect((await server.request('tools/list', {})).result).toBeDefined();
    expect(server.notifications.length).toBeGreaterThan(5); // logging messages went out, as JSON-RPC

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.stdoutLines()).toBeGreaterThan(20);
    expect(server.stdoutProblems()).toEqual([]);
    expect(server.stderr()).toMatch(/shutting down \(SIGTERM\)/);
  });

  test('answers that outrun the client wait for stdout to drain without piling up listeners', async () => {
    const server = await startRpcServer();
    const big = await server.callOk<Job>('spawn_codex', { prompt: `big answer ${'x'.repeat(30_000)}`, wait_s: 30 });
    expect(big.state).toBe('succeeded');
    // 60 answers of 30 KB at once: far more than the pipe holds, so most writes wait for 'drain'.
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 2
          ? server.callOk<Job>('result', { agent_id: big.agent_id })
          : server.callOk<{ finished: Job[] }>('wait_for_agents', { agent_ids: [big.agent_id], timeout_s: 30 }),
      ),
    );
    expect(answers).toHaveLength(60);
    expect(JSON.stringify(answers).length).toBeGreaterThan(60 * 30_000);
    expect(server.stderr()).not.toMatch(/MaxListenersExceededWarning|memory leak/);
  });

  test('a configuration error ends the server with nothing on stdout', async () => {
    const projectDir = tempDir('bad-config');
    writeFileSync(join(projectDir, 'polyspawn.config.json'), '{ "concurrency": "many" }');
    const server = await startRpcServer({ projectDir, initialize: false });
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(/configuration error: .*concurrency/);
    expect(server.stdoutLines()).toBe(0);
    expect(server.stdoutProblems()).toEqual([]);
  });

  test('console.log, .info and .debug, called by a library after start-up, go to stderr', async () => {
    // Loaded before the server (NODE_OPTIONS=--import): on SIGUSR2 it logs as @hono/node-server
    // does under the channel's HTTP transport ("The user aborted a request." with console.info).
    const library = `process.on('SIGUSR2', () => {
      console.log('library: console.log');
      console.info('library: console.info');
      console.debug('library: console.debug %d', 3);
    });`;
    const server = await startRpcServer({
      env: {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=data:text/javascript,${encodeURIComponent(library)}`,
      },
    });
    server.child.kill('SIGUSR2');
    await waitFor(
      'the library to have logged',
      () => server.stderr().includes('library: console.debug') || server.stdoutProblems().length > 0,
      30_000,
    );
    // Answered after the lines were written: on stdout, they would come before this answer.
    expect((await server.request('tools/list', {})).result).toBeDefined();
    expect(server.stdoutProblems()).toEqual([]);
    expect(server.stderr()).toContain('library: console.log\nlibrary: console.info\nlibrary: console.debug 3\n');
  });

  test('SIGTERM while a library holds a signal-exit handler (write-file-atomic does during each write) still shuts down', async () => {
    // signal-exit re-raises a signal when its own handlers are the only ones left: a shutdown
    // handler that removed itself on the first call (process.once) let it kill the server mid-write.
    const signalExit = pathToFileURL(createRequire(import.meta.url).resolve('signal-exit')).href;
    const library = `process.on('SIGUSR2', async () => {
      const { onExit } = await import(${JSON.stringify(signalExit)});
      onExit(() => undefined);
      process.stderr.write('library: holding an exit handler\\n');
    });`;
    const server = await startRpcServer({
      env: {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=data:text/javascript,${encodeURIComponent(library)}`,
      },
    });
    server.child.kill('SIGUSR2');
    await waitFor('the library to hold its handler', () => server.stderr().includes('library: holding'), 30_000);
    // A running agent makes the shutdown take its grace period: time for a re-raised signal to land.
    await server.callOk('spawn_codex', { prompt: 'runs on [[cli:hang]]' });
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.stderr()).toMatch(/shutting down \(SIGTERM\)/);
  });
});
