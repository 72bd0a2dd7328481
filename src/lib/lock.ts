// proper-lockfile's `lock`, with the package loaded at the first lock rather than with this
// module: when it loads, its graceful-fs replaces process.cwd with one that remembers the first
// answer, which a start-up snapshot (src/snapshot.ts) would keep as every start's working folder.
import { createRequire } from 'node:module';
import type { LockOptions } from 'proper-lockfile';

type ProperLockfile = typeof import('proper-lockfile');
let loaded: ProperLockfile | undefined;

export function lock(file: string, options: LockOptions): Promise<() => Promise<void>> {
  loaded ??= createRequire(import.meta.url)('proper-lockfile') as ProperLockfile;
  return loaded.lock(file, options);
}
