// The temporary folders tests make: each is removed when its test file ends (test/setup/end-processes.ts
// calls removeTempDirs after ending what the file spawned), passed or failed, so runs leave no
// polyspawn-* folders behind.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new empty folder `polyspawn-<name>-XXXXXX` in the temporary folder, removed when the test file ends. */
export function tempDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `polyspawn-${name}-`));
  made.push(dir);
  return dir;
}

/**
 * A project folder whose user configuration is inside it too (XDG_CONFIG_HOME=<dir>/xdg), so no
 * file of the machine's user is read; `config`, when given, is its polyspawn.config.json.
 */
export function tempProject(name: string, config?: unknown): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = tempDir(name);
  if (config !== undefined) writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify(config));
  return { dir, env: { XDG_CONFIG_HOME: join(dir, 'xdg') } };
}

/** The folders tempDir made so far (what the setup file cleans up after). */
export const tempDirs = (): readonly string[] => [...made];

/** Removes every folder tempDir made so far (retrying a moment: an ended process may still be closing files). */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
}
