import { readFileSync } from 'node:fs';

/** package.json sits two folders up from both src/version.ts and dist/src/version.js... or three. */
function findVersion(): string {
  for (const up of ['../package.json', '../../package.json']) {
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
