import { readFileSync } from 'node:fs';

/** package.json: two folders up from src/lib/version.ts, three from dist/src/lib/version.js. */
function findVersion(): string {
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'polyspawn' && pkg.version) return pkg.version;
    } catch {
      // not this one
    }
  }
  return '0.0.0';
}

export const VERSION = findVersion();
