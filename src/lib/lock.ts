// proper-lockfile's `lock`, with the package loaded at the first lock rather than with this
// module: loading it (and the graceful-fs it brings, which patches fs and process.cwd) takes
// 10-20 ms here, which a start that has not locked yet (most commands; a stdio server until its
// first job is recorded) does not pay.
import { createRequire } from 'node:module';
import type { LockOptions } from 'proper-lockfile';

type ProperLockfile = typeof import('proper-lockfile');
let loaded: ProperLockfile | undefined;

export function lock(file: string, options: LockOptions): Promise<() => Promise<void>> {
  loaded ??= createRequire(import.meta.url)('proper-lockfile') as ProperLockfile;
  return loaded.lock(file, options);
}
