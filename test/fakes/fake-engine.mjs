#!/usr/bin/env node
// A stand-in for docker and podman (test/fakes/engine/ wrappers), for the container sandbox: no
// engine answers on this machine. `run` runs the command after the image on the host, in the -w
// folder, with the environment it was started with (what `-e NAME` would pass on); `kill <name>`
// and `rm -f <name>` end the command a `run --name <name>` started; `version` answers when env
// FAKE_ENGINE_UP is set, else fails as a client without a daemon does. `context inspect … <name>`
// prints the endpoint env FAKE_ENGINE_CONTEXTS ({"name": "unix:///…"}) gives it as JSON, as
// `--format '{{json .Endpoints.docker.Host}}'` does, else fails as docker does for no such context.
//
// Env FAKE_ENGINE_DIR (required): each call appends {engine, argv} as a line to calls.jsonl
// there, and a running container's pid is kept in <name>.pid.
import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const engine = process.argv[2];
const argv = process.argv.slice(3);
const dir = process.env.FAKE_ENGINE_DIR;
if (!dir) {
  process.stderr.write('fake engine: set FAKE_ENGINE_DIR\n');
  process.exit(2);
}
appendFileSync(join(dir, 'calls.jsonl'), JSON.stringify({ engine, argv }) + '\n');

const pidFile = (name) => join(dir, `${basename(name)}.pid`);
const end = (name) => {
  try {
    process.kill(Number(readFileSync(pidFile(name), 'utf8')), 'SIGKILL');
  } catch {
    // no such container
  }
};

const [command, ...rest] = argv;
if (command === 'version') {
  if (process.env.FAKE_ENGINE_UP) process.stdout.write(`${engine} 0.0.0-fake\n`);
  else {
    process.stderr.write(`Cannot connect to the ${engine} daemon. Is the daemon running?\n`);
    process.exit(1);
  }
} else if (command === 'context' && rest[0] === 'inspect') {
  const contexts = JSON.parse(process.env.FAKE_ENGINE_CONTEXTS ?? '{}');
  const name = rest.at(-1);
  if (Object.hasOwn(contexts, name)) process.stdout.write(JSON.stringify(contexts[name]) + '\n');
  else {
    process.stderr.write(`context "${name}": context not found: open meta.json: no such file or directory\n`);
    process.exit(1);
  }
} else if (command === 'kill') end(rest[0]);
else if (command === 'rm') end(rest.at(-1));
else if (command === 'run') run(rest);
else {
  process.stderr.write(`fake engine: ${command} is not played\n`);
  process.exit(2);
}

function run(args) {
  const withValue = new Set([
    '--name',
    '--pull',
    '--label',
    '--user',
    '--network',
    '--cap-drop',
    '--security-opt',
    '-v',
    '--tmpfs',
    '-w',
    '-e',
  ]);
  let name;
  let cwd = process.cwd();
  let i = 0;
  for (; i < args.length && args[i].startsWith('-'); i++) {
    if (!withValue.has(args[i])) continue;
    const value = args[++i];
    if (args[i - 1] === '--name') name = value;
    if (args[i - 1] === '-w') cwd = value;
  }
  const [, file, ...fileArgs] = args.slice(i); // the image, then the command
  const child = spawn(file, fileArgs, { cwd, stdio: 'inherit' });
  if (name) writeFileSync(pidFile(name), String(child.pid));
  child.on('exit', (code, signal) => {
    if (name) rmSync(pidFile(name), { force: true });
    process.exit(code ?? (signal ? 137 : 1));
  });
}
