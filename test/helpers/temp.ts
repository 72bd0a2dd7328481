// The temporary folders tests make: each is removed when its test file ends (test/setup/end-processes.ts
// calls removeTempDirs after ending what the file spawned), passed or failed, so runs leave no
// polyspawn-* folders behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new empty folder `polyspawn-<name>-XXXXXX` in the temporary folder, removed when the test file ends. */
export function tempDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `polyspawn-${name}-`));
  made.push(dir);
  return dir;
}

/** Removes every folder tempDir made so far (retrying a moment: an ended process may still be closing files). */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
}
