// Which live processes belong to one run: its process group, and what left the group. A CLI may
// start its tools in sessions of their own (Gemini CLI runs each shell command under setsid), out
// of reach of a signal to the group; they still carry the run's mark in their environment (each
// run's child gets RUN_MARK_ENV=<a value of its own>, and children inherit it), and until their
// parent dies they descend from a process of the run.

/** The variable whose value marks one run's processes (src/jobs/process/runner.ts sets it). */
export const RUN_MARK_ENV = 'POLYSPAWN_RUN_MARK';

type ProcReader = {
  readdirSync(path: string): string[];
  readFileSync(path: string, encoding: 'utf8'): string;
};

/**
 * The live (not zombie) pids of the run whose group is `pgid`: members of the group (`group`),
 * and outside it (`strays`) processes started with `${RUN_MARK_ENV}=${mark}` and the descendants
 * of any of them; undefined where /proc cannot be read. Self-contained (no imports, no closure,
 * the variable's name spelled out): the reaper sidecar runs its source text.
 */
export function liveRunProcesses(
  pgid: number,
  mark: string | undefined,
  fs: ProcReader,
): { group: number[]; strays: number[] } | undefined {
  let names: string[];
  try {
    names = fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  const markEntry = mark ? `\0POLYSPAWN_RUN_MARK=${mark}\0` : undefined;
  const parentOf = new Map<number, number>();
  const group: number[] = [];
  const ofRun = new Set<number>();
  for (const name of names) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state === 'Z' || state === 'X') continue;
    const pid = Number(name);
    parentOf.set(pid, Number(ppid));
    if (Number(pgrp) === pgid) {
      group.push(pid);
      ofRun.add(pid);
      continue;
    }
    if (!markEntry) continue;
    try {
      // Another user's environment is not ours to read: not ours to signal either.
      if (`\0${fs.readFileSync(`/proc/${name}/environ`, 'utf8')}`.includes(markEntry)) ofRun.add(pid);
    } catch {
      continue;
    }
  }
  // Descendants of the run's processes, whatever their environment (one cleared it) or group.
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parentOf) {
      if (!ofRun.has(pid) && ofRun.has(ppid)) {
        ofRun.add(pid);
        grew = true;
      }
    }
  }
  return { group, strays: [...ofRun].filter((pid) => !group.includes(pid)) };
}
