// The layout of one run's folder in the run store, `<stateDir>/runs/<id>/`: every layer that
// reads or writes a run's files finds them here.
import { join } from 'node:path';

export const RECORD_FILE = 'record.json';
export const PROMPT_FILE = 'prompt.txt';

type RunFolder = { dir: string; record: string; prompt: string; stdout: string; stderr: string };

export const runsDir = (stateDir: string): string => join(stateDir, 'runs');

/** The files of run `id`; `dir` may be another folder holding the same layout (a scratch fallback). */
export function runFolder(stateDir: string, id: string, dir = join(runsDir(stateDir), id)): RunFolder {
  return {
    dir,
    record: join(dir, RECORD_FILE),
    prompt: join(dir, PROMPT_FILE),
    stdout: join(dir, 'stdout.log'),
    stderr: join(dir, 'stderr.log'),
  };
}
