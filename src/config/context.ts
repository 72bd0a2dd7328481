// What the composition root (src/app.ts) hands the layers below it in place of process-wide
// state: the environment and folder polyspawn was started in, the configuration read from them,
// the redactor of secrets, and where log lines go. createApp builds it once; below app.ts
// nothing reads process.env or process.cwd(), each part takes what it needs from here.
import type { Redactor } from '../lib/redact.js';
import type { Config } from './config.js';

export type Context = {
  /** The environment polyspawn runs in (a server's: what its MCP client set); its children start from it. */
  env: NodeJS.ProcessEnv;
  /** The working folder it was started in (the project, unless POLYSPAWN_PROJECT_DIR says otherwise). */
  cwd: string;
  config: Config;
  /** Masks the configured keys and every known key shape in whatever polyspawn writes or returns. */
  secrets: Redactor;
  /** One line for the server's log (stderr), never stdout. */
  log: (message: string) => void;
};
