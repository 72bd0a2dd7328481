// Where the npm-installed CLIs keep their installation and state, for src/jobs/process/sandbox.ts.
import { basename, dirname, join } from 'node:path';
import type { Environment } from './types.js';

/**
 * An npm package's installation: the node_modules folder that holds it, where its platform's
 * native binary is a package beside it; outside node_modules (a standalone binary), the file
 * alone: the folder it lies in may be the home folder's bin, or /tmp.
 */
export function npmInstall(realExecutable: string): string {
  for (let dir = dirname(realExecutable); dir !== dirname(dir); dir = dirname(dir)) {
    if (basename(dir) === 'node_modules') return dir;
  }
  return realExecutable;
}

/** A state folder that a variable moves, else `<home>/<name>`. */
export const stateDir = (env: Environment, variable: string, home: string, name: string): string =>
  env[variable] || join(home, name);
