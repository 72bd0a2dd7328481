// dist/src/snapshot.cjs, built by scripts/bundle.mjs. Two roles:
//
// - Under `node --snapshot-blob <blob> --build-snapshot snapshot.cjs`: evaluates the bundle
//   (cli.bundle.cjs) and sets the snapshot's main, which runs the command in process.argv. The
//   evaluation must read nothing of the process that makes the snapshot (the environment, the
//   clock, the disk): whatever it read would be frozen into every start. `evaluateUntouched`
//   enforces it, so a module that starts reading at load fails the snapshot here (the build says
//   so), not a user at run time.
// - Run by itself (`node dist/src/snapshot.cjs`): makes this installation's snapshot for this node
//   (src/lib/start-snapshot.ts), prints where or why not, and exits 0 either way.
//
// Inside a deserialized snapshot Node 20.20 has no `import()` (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING)
// and the entry's `require` loads only Node's own modules: the HTTP SDKs the API backends import
// lazily are required from node_modules instead (every one of them ships a CommonJS build), their
// exports shaped as `import()` would give them.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString, startupSnapshot } from 'node:v8';
import { Script } from 'node:vm';
import { makeSnapshot, type SnapshotInstall } from './lib/start-snapshot.js';
import { VERSION } from './lib/version.js';

type Cli = { runCli: (argv: string[]) => void };
type Bundle = (
  require: NodeJS.Require,
  filename: string,
  dirname: string,
  importModule: (specifier: string) => Promise<unknown>,
) => Cli;

const install: SnapshotInstall = {
  node: process.execPath,
  cli: join(__dirname, 'cli.js'),
  bundle: join(__dirname, 'cli.bundle.cjs'),
  entry: __filename,
};

/** `import(specifier)` from the bundle's folder, through require: a CommonJS module's exports as its default. */
function importByRequire(specifier: string): Promise<unknown> {
  return new Promise((resolve) => {
    const loaded = createRequire(install.bundle)(specifier) as { __esModule?: boolean };
    resolve(loaded.__esModule ? loaded : { ...loaded, default: loaded });
  });
}

/** What evaluation must not touch: read from the process at load, it would be frozen into the snapshot. */
const GUARDED: [object, string[]][] = [
  [
    fs,
    ['readFileSync', 'existsSync', 'statSync', 'lstatSync', 'readdirSync', 'openSync', 'accessSync', 'realpathSync'],
  ],
  [os, ['homedir', 'tmpdir', 'hostname', 'userInfo']],
  [process, ['cwd', 'hrtime', 'uptime']],
  [Date, ['now']],
];

/** isexe (in which) reads its own tests' variable when it loads: frozen, it changes nothing. */
const HARMLESS = new Set(['process.env._ISEXE_TEST_PLATFORM_']);

function evaluateUntouched<T>(run: () => T): T {
  const touched = new Set<string>();
  // Only the bundle's own reads count: Node reads too, e.g. FORCE_COLOR for a warning it prints.
  const note = (what: string) => {
    if (!HARMLESS.has(what) && new Error().stack?.includes(install.bundle)) touched.add(what);
  };
  const restore: (() => void)[] = [];
  for (const [owner, names] of GUARDED)
    for (const name of names) {
      const table = owner as Record<string, unknown>;
      const original = table[name] as (...args: unknown[]) => unknown;
      table[name] = function (this: unknown, ...args: unknown[]) {
        note(`${name}(${args.length ? JSON.stringify(args[0]) : ''})`);
        return original.apply(this, args);
      };
      restore.push(() => (table[name] = original));
    }
  const env = process.env;
  process.env = new Proxy(env, {
    get: (target, key) => (typeof key === 'string' && note(`process.env.${key}`), Reflect.get(target, key)),
  });
  restore.push(() => (process.env = env));
  try {
    return run();
  } finally {
    for (const undo of restore) undo();
    if (touched.size)
      throw new Error(`the bundle read ${[...touched].join(', ')} while it was evaluated: read it when it is used`);
  }
}

if (startupSnapshot.isBuildingSnapshot()) {
  const source = fs.readFileSync(install.bundle, 'utf8');
  const cli = evaluateUntouched(() =>
    (new Script(source, { filename: install.bundle }).runInThisContext() as Bundle)(
      require,
      install.bundle,
      __dirname,
      importByRequire,
    ),
  );
  startupSnapshot.setDeserializeMainFunction(() => {
    setFlagsFromString('--semi-space-growth-factor=1'); // as src/boot.ts, which says why
    cli.runCli(process.argv.slice(2));
  });
} else {
  const made = makeSnapshot(process.env, install, VERSION);
  // stderr, as every diagnostic of the server's code: its stdout is JSON-RPC when it serves.
  process.stderr.write(
    'launcher' in made
      ? `start-up snapshot: ${made.launcher}\n`
      : `start-up snapshot: none (${made.reason}); polyspawn starts through its code cache\n`,
  );
}
