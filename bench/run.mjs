// `npm run bench`: every benchmark in this folder, one after the other (they share 2 cores),
// then one table of every figure that has a target, beside its floor, written to
// bench/results/summary.json. `node bench/run.mjs <prefix>` runs only the matching ones.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const only = process.argv[2];
let failed = false;
const ran = [];
for (const file of readdirSync(dir)
  .filter((f) => f.endsWith('.mjs') && !['run.mjs', 'lib.mjs'].includes(f))
  .sort()) {
  if (only && !file.startsWith(only)) continue;
  const started = Date.now();
  const { status } = spawnSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url))], { stdio: 'inherit' });
  if (status !== 0) failed = true;
  else ran.push({ name: file.replace(/\.mjs$/, ''), started });
}

const rows = [];
for (const { name, started } of ran) {
  let result;
  try {
    result = JSON.parse(readFileSync(new URL(`results/${name}.json`, import.meta.url), 'utf8'));
  } catch {
    continue;
  }
  if (Date.parse(result.when) < started) continue; // not written by this run
  for (const r of result.rows) {
    if (!r.target) continue;
    rows.push({
      bench: name,
      figure: r.figure,
      value: r.value,
      unit: r.unit ?? '',
      floor: r.floor ?? '',
      ratio: r.ratio ?? '',
      target: r.target,
      met: r.met ?? '',
    });
  }
}
if (rows.length) {
  console.log(`\nsummary (node ${process.version}, ${new Date().toISOString()})`);
  console.table(rows);
  writeFileSync(
    new URL('results/summary.json', import.meta.url),
    JSON.stringify({ when: new Date().toISOString(), node: process.version, rows }, null, 2),
  );
}
process.exitCode = failed ? 1 : 0;
