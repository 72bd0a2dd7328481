// API keys for the HTTP backends. Looked up, in order: api_keys.json in the project, then
// api_keys.json in the user's config folder, then environment variables. In each place the
// backend's names are tried in order; an empty value is skipped, so it never hides a key
// set further down. Only key *sources* (a name and a file) ever leave this module, never values;
// every value read from a file goes to the redactor at once, since the files may change while the
// server runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ApiBackend, Backend } from '../../backends/types.js';
import type { Redactor } from '../lib/redact.js';

const KEYS_FILE = 'api_keys.json';

export function keyFiles(dirs: { projectDir: string; userConfigDir: string }): string[] {
  return [join(dirs.projectDir, KEYS_FILE), join(dirs.userConfigDir, KEYS_FILE)];
}

type KeyLookup =
  | {
      found: true;
      key: string;
      /** e.g. "XAI_API_KEY in /p/api_keys.json" or "env XAI_API_KEY" */ source: string;
      name: string;
    }
  | {
      found: false;
      /** One sentence: where it looked and what to set. */
      detail: string;
      /** The same without the files it tried: what to set, and any problem found (doctor, the model's instructions). */
      summary: string;
    };

type FileRead = { ok: true; values: Record<string, unknown> } | { ok: false; problem?: string };

function readKeysFile(path: string): FileRead {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR'
      ? { ok: false }
      : { ok: false, problem: `${path} could not be read (${code})` };
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
      return { ok: true, values: parsed as Record<string, unknown> };
    return { ok: false, problem: `${path} is not a JSON object of key names to keys` };
  } catch {
    // Never echo the parser's message: it quotes the file's text, which holds keys.
    return { ok: false, problem: `${path} is not valid JSON` };
  }
}

const usable = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';
const stringValues = (values: Record<string, unknown>) =>
  Object.values(values).filter((v): v is string => typeof v === 'string');

/**
 * The backend's key. `secrets` (the app's redactor) is given every string in the key files read
 * on the way, so a key added after the start is redacted from the first job that could print it.
 */
export function findApiKey(
  backend: Pick<ApiBackend, 'keyNames'>,
  dirs: { projectDir: string; userConfigDir: string },
  env: NodeJS.ProcessEnv,
  secrets?: Pick<Redactor, 'addValues'>,
): KeyLookup {
  const names = backend.keyNames;
  const files = keyFiles(dirs);
  const problems: string[] = [];
  for (const file of files) {
    const read = readKeysFile(file);
    if (!read.ok) {
      if (read.problem) problems.push(read.problem);
      continue;
    }
    secrets?.addValues(stringValues(read.values));
    for (const name of names) {
      const value = read.values[name];
      if (usable(value)) return { found: true, key: value.trim(), name, source: `${name} in ${file}` };
      if (value !== undefined && typeof value !== 'string') problems.push(`${name} in ${file} is not a string`);
    }
  }
  for (const name of names) {
    const value = env[name];
    if (usable(value)) return { found: true, key: value.trim(), name, source: `env ${name}` };
  }
  const list = names.join(', ');
  const also = problems.length ? `; also: ${problems.join('; ')}` : '';
  const [first, ...others] = names;
  return {
    found: false,
    detail: `no API key found: set ${names.length > 1 ? `one of ${list}` : list} in the environment or in ${KEYS_FILE} (tried ${files.join(' and ')} for ${list}, then env ${list})${also}`,
    summary: `no API key: set ${first}${others.length ? ` (or ${others.join(', ')})` : ''} in ${KEYS_FILE} or the environment${also}`,
  };
}

/** Environment variables whose values are secrets even when no backend reads them here. */
const SECRET_ENV = /(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|ACCESS_KEY|AUTH)(?:_|$)/i;

/**
 * Every API key polyspawn could hand to a backend or a CLI: each API backend's key as
 * findApiKey finds it (and under every name it goes by in the environment), every string value
 * in the api_keys.json files, and the environment's variables whose names say they hold a key,
 * token or secret (which covers the CLIs' logins).
 */
export function configuredSecrets(
  backends: readonly Backend[],
  dirs: { projectDir: string; userConfigDir: string },
  env: NodeJS.ProcessEnv,
): string[] {
  const values: string[] = [];
  for (const backend of backends) {
    if (backend.kind !== 'api') continue;
    const found = findApiKey(backend, dirs, env);
    if (found.found) values.push(found.key);
    for (const n of backend.keyNames) if (env[n]) values.push(env[n]!);
  }
  for (const file of keyFiles(dirs)) {
    // Missing or unreadable: findApiKey reports that where it matters.
    const read = readKeysFile(file);
    if (read.ok) values.push(...stringValues(read.values));
  }
  for (const [name, value] of Object.entries(env)) if (value && SECRET_ENV.test(name)) values.push(value);
  return values;
}
