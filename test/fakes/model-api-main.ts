/**
 * Start the fake model API for manual use and print its URL:
 *
 *   npx tsx test/fakes/model-api-main.ts        (or: node --experimental-strip-types ...)
 *
 * Point a CLI at it, e.g. ANTHROPIC_BASE_URL=<url> ANTHROPIC_API_KEY=x claude -p, and press
 * Ctrl-C to stop. With --log, each request is printed to stderr as it is answered; with
 * --dump DIR, each recorded request is also written to DIR/NNN-<protocol>.json.
 *
 * Node 20 cannot run .ts directly: `npx --yes tsx test/fakes/model-api-main.ts --log`, or
 * compile it: `npx tsc --outDir /tmp/fake --module NodeNext --moduleResolution NodeNext
 * --target ES2023 --skipLibCheck --types node test/fakes/model-api-main.ts && node /tmp/fake/model-api-main.js`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startFakeModelApi } from './model-api.js';

const api = await startFakeModelApi();
process.stdout.write(`${api.url}\n`);

const log = process.argv.includes('--log');
const dumpAt = process.argv.indexOf('--dump');
const dumpDir = dumpAt > 0 ? process.argv[dumpAt + 1] : undefined;
if (dumpDir) mkdirSync(dumpDir, { recursive: true });
if (log || dumpDir) {
  let seen = 0;
  setInterval(() => {
    while (seen < api.requests.length) {
      const r = api.requests[seen++];
      if (!r) continue;
      if (log) {
        process.stderr.write(
          `${r.method} ${r.path} ${r.protocol} turn=${r.turn} status=${r.status} outcome=${r.outcome} prompt=${JSON.stringify(r.prompt.slice(0, 80))}\n`,
        );
      }
      if (dumpDir) {
        const { rawBody: _raw, ...rest } = r;
        writeFileSync(
          join(dumpDir, `${String(seen).padStart(3, '0')}-${r.protocol}.json`),
          JSON.stringify(rest, null, 2),
        );
      }
    }
  }, 100);
}

const stop = () => {
  void api.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
