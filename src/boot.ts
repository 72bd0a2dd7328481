#!/usr/bin/env node
// The `polyspawn` executable (dist/src/cli.js, built by scripts/bundle.mjs): runs the bundled
// server through a V8 code cache. A client starts a server for every session; with the cache, a
// start neither parses the bundle's 1.4 MB nor compiles what start-up runs (bench/coldstart.mjs).
// Node 20 caches no ES module (module.enableCompileCache is 22.1+), so the bundle is one function
// in a vm.Script. Any failure only means a start without cache. Nothing here writes to stdout.
import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { Script } from 'node:vm';
import { makeDirs, writeAtomic } from './lib/fs.js';

/** A hash of the bundle, set by scripts/bundle.mjs. */
declare const __POLYSPAWN_BUNDLE_ID__: string;

type Bundle = (
  require: NodeJS.Require,
  filename: string,
  dirname: string,
  importModule: (specifier: string) => Promise<unknown>,
) => void;

const bundle = fileURLToPath(new URL('./cli.bundle.cjs', import.meta.url));
/** Other installs' caches untouched this long are removed when this one writes its own. */
const STALE_MS = 24 * 3600 * 1000;

/** FNV-1a: a short, stable name for a path (a collision costs a cache miss, nothing more). */
function fnv(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

/** One file per installed bundle, Node version and CPU; POLYSPAWN_CODE_CACHE moves the folder, or (0) turns it off. */
function cacheFile(env: NodeJS.ProcessEnv): string | undefined {
  const setting = env.POLYSPAWN_CODE_CACHE;
  if (setting === '0') return undefined;
  let dir = setting;
  try {
    dir ||= join(
      env.XDG_CACHE_HOME || (process.platform === 'win32' && env.LOCALAPPDATA) || join(homedir(), '.cache'),
      'polyspawn',
    );
  } catch {
    return undefined; // no home folder: no cache (never a shared folder such as /tmp)
  }
  return join(dir, `cli-${fnv(bundle)}-${process.version}-${process.arch}.v8cache`);
}

/**
 * V8 makes and checks a code cache's checksum (so a damaged file is rejected, not run) only under
 * --verify-snapshot-checksum (on in debug builds only). On while a cache is read or made; off
 * again at once, since the flag is part of the hash against which Node checks the caches of its
 * own built-in modules.
 */
function withChecksum<T>(use: () => T): T {
  setFlagsFromString('--verify-snapshot-checksum');
  try {
    return use();
  } finally {
    setFlagsFromString('--no-verify-snapshot-checksum');
  }
}

// The server keeps little that lives long, and it forks a child for every job: a young
// generation let grow to V8's 32 MiB in a burst of jobs stays resident, in the server and in the
// page tables each fork copies. It keeps its starting size instead (bench/burst.mjs: peak RSS).
// Read by V8 whenever it would grow the young generation, so setting it here takes effect.
setFlagsFromString('--semi-space-growth-factor=1');

// The file starts with the bundle's id: a rebuilt or upgraded bundle at the same path finds the
// old cache not its own and replaces it, so rebuilds leave no trail of stale files.
const id = Buffer.from(__POLYSPAWN_BUNDLE_ID__, 'latin1');
const file = cacheFile(process.env);
let cachedData: Buffer | undefined;
try {
  const data = file ? readFileSync(file) : undefined;
  if (data && data.length > id.length && id.equals(data.subarray(0, id.length))) cachedData = data.subarray(id.length);
} catch {
  // none yet
}
const source = readFileSync(bundle, 'utf8');
let script: Script | undefined;
try {
  if (cachedData) script = withChecksum(() => new Script(source, { filename: bundle, cachedData }));
} catch {
  cachedData = undefined; // a Node whose V8 flags cannot change: no cache (a real error recurs below)
}
script ??= new Script(source, { filename: bundle });
(script.runInThisContext() as Bundle)(createRequire(bundle), bundle, dirname(bundle), (specifier) => import(specifier));

function writeCache(file: string, compiled: Script): void {
  try {
    makeDirs(dirname(file)); // not mkdir's `recursive`, which can loop forever (this may run at exit)
    writeAtomic(file, Buffer.concat([id, withChecksum(() => compiled.createCachedData())]));
  } catch {
    return; // a folder we cannot write to: no cache, nothing worse
  }
  try {
    // Installs that were removed (a temporary npx, a test's) leave their caches behind.
    const dir = dirname(file);
    for (const name of readdirSync(dir)) {
      const other = join(dir, name);
      if (other !== file && /^cli-.*\.v8cache/.test(name) && Date.now() - statSync(other).mtimeMs > STALE_MS)
        rmSync(other, { force: true });
    }
  } catch {
    // another process pruned first
  }
}

// Only `serve` writes the cache: it is what clients start, and a cache made by a one-off command
// would hold little of what serving runs. It writes one when it found none, or none V8 accepts,
// once its start is over (a second in, or at exit if sooner), so that the cache holds what
// start-up and the first requests ran.
const [command = 'serve', ...rest] = process.argv.slice(2);
if (
  file &&
  (!cachedData || script.cachedDataRejected) &&
  command === 'serve' &&
  !rest.includes('--help') &&
  !rest.includes('-h')
) {
  const compiled = script;
  let written = false;
  const write = () => {
    if (!written) writeCache(file, compiled);
    written = true;
  };
  setTimeout(write, 1000).unref();
  process.once('exit', write);
}
