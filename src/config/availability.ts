// Whether a backend can run on this machine, and if not, one sentence that says how to fix it.
import which from 'which';
import type { Backend, BackendSettings } from '../../backends/types.js';
import type { Redactor } from '../lib/redact.js';
import { findApiKey } from './keys.js';
import { CONTAINER_MODES, type SandboxSettings } from './sandbox.js';

export type Availability =
  | { usable: true; detail: string }
  | {
      usable: false;
      detail: string;
      /** Shorter, for the model's instructions (what is missing, not every file tried or how to install), when it differs. */
      summary?: string;
    };

export function checkBackend(
  backend: Backend,
  settings: BackendSettings & { baseUrl?: string; sandbox?: SandboxSettings },
  env: NodeJS.ProcessEnv,
  /** Where api_keys.json lives: the config's folders. */
  dirs: { projectDir: string; userConfigDir: string },
  /** Told every key read, to redact it from then on. */
  secrets?: Pick<Redactor, 'addValues'>,
): Availability {
  if (backend.kind === 'api') {
    // Read on every check, so a key added while the server runs is picked up by the next spawn.
    const key = findApiKey(backend, dirs, env, secrets);
    if (!key.found) return { usable: false, detail: key.detail, summary: key.summary };
    return {
      usable: true,
      detail: `HTTP API, key from ${key.source}${settings.baseUrl ? `, base URL ${settings.baseUrl}` : ''}`,
    };
  }
  // Its agents run in the image only: the host needs no installation (`doctor` checks the image).
  const { sandbox } = settings;
  if (sandbox?.image && CONTAINER_MODES.includes(sandbox.mode))
    return { usable: true, detail: `\`${backend.executable}\` in the ${sandbox.mode} image ${sandbox.image}` };
  const wanted = settings.bin ?? backend.executable;
  const found = which.sync(wanted, { nothrow: true, path: env.PATH });
  if (found) return { usable: true, detail: found };
  if (settings.bin)
    return {
      usable: false,
      detail: `${settings.bin} (from ${backend.binEnv} or the config) is not an executable file: fix the path`,
    };
  const missing = `\`${backend.executable}\` is not on PATH`;
  return {
    usable: false,
    detail: `${missing}: ${backend.installHint}, or set ${backend.binEnv} to its path`,
    summary: missing,
  };
}
