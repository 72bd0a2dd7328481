// `npm run bench`: every benchmark in this folder, one after the other (they share 2 cores).
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const only = process.argv[2];
let failed = false;
for (const file of readdirSync(dir).filter((f) => f.endsWith('.mjs') && !['run.mjs', 'lib.mjs'].includes(f)).sort()) {
  if (only && !file.startsWith(only)) continue;
  const { status } = spawnSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url))], { stdio: 'inherit' });
  if (status !== 0) failed = true;
}
process.exitCode = failed ? 1 : 0;
