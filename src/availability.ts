// Whether a backend can run on this machine, and if not, one sentence that says how to fix it.
import which from 'which';
import type { Backend, BackendSettings } from '../backends/types.js';

export type Availability = { usable: true; detail: string } | { usable: false; detail: string };

export function checkBackend(backend: Backend, settings: BackendSettings, env: NodeJS.ProcessEnv = process.env): Availability {
  if (backend.kind !== 'cli') return { usable: true, detail: 'HTTP API' };
  const wanted = settings.bin ?? backend.executable;
  const found = which.sync(wanted, { nothrow: true, path: env.PATH });
  if (found) return { usable: true, detail: found };
  return {
    usable: false,
    detail: settings.bin
      ? `${settings.bin} (from ${backend.binEnv} or the config) is not an executable file: fix the path`
      : `\`${backend.executable}\` is not on PATH: ${backend.installHint}, or set ${backend.binEnv} to its path`,
  };
}
