// Teams in the run store: one file each, `<stateDir>/team-runs/<team id>.json`, rewritten whole
// (redacted, temp file and rename) on every change of the team. A team its server left running
// is read back as interrupted, like that server's jobs.
import { closeSync, openSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isFinished } from '../src/jobs/table.js';
import type { TeamRecord } from '../src/jobs/teams/record.js';
import type { TeamStore } from '../src/jobs/teams/table.js';
import { makeDirs, PRIVATE_FILE, readRegularFile, writeAtomic } from '../src/lib/fs.js';
import { sameProcessAlive, type ProcessIdentity } from '../src/lib/proc.js';
import type { Redactor } from '../src/lib/redact.js';

const TEAM_FILE = /^team-[a-z2-9]{6}\.json$/;

const teamRunsDir = (stateDir: string) => join(stateDir, 'team-runs');

export class TeamFiles implements TeamStore {
  readonly dir: string;

  constructor(
    stateDir: string,
    private readonly redactor: Redactor,
    private readonly identity: ProcessIdentity,
    /** false: a reader only (`polyspawn status`): a dead server's team is reported, not rewritten. */
    private readonly recover = true,
  ) {
    this.dir = teamRunsDir(stateDir);
  }

  private file(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  /** Claims the id by creating its file, which succeeds in exactly one process. */
  claimId(id: string): boolean {
    try {
      makeDirs(this.dir);
      closeSync(openSync(this.file(id), 'wx', PRIVATE_FILE));
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EEXIST';
    }
  }

  save(team: TeamRecord): void {
    const record: TeamRecord = { ...this.redactor.deep(team), owner: this.identity };
    makeDirs(this.dir);
    writeAtomic(this.file(team.id), `${JSON.stringify(record, null, 2)}\n`);
  }

  get(id: string): TeamRecord | undefined {
    if (!TEAM_FILE.test(`${id}.json`)) return undefined;
    let team: TeamRecord;
    // Never through a link nor from a FIFO (a cloned .polyspawn/ may hold either).
    const text = readRegularFile(this.file(id), 64 << 20);
    if (typeof text !== 'string') return undefined;
    try {
      team = JSON.parse(text) as TeamRecord;
    } catch {
      return undefined;
    }
    return this.recovered(team);
  }

  recent(n: number): TeamRecord[] {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((f) => TEAM_FILE.test(f));
    } catch {
      return [];
    }
    const dated = names.flatMap((name) => {
      try {
        return [{ id: name.slice(0, -'.json'.length), mtime: statSync(join(this.dir, name)).mtimeMs }];
      } catch {
        return [];
      }
    });
    dated.sort((a, b) => b.mtime - a.mtime);
    return dated.flatMap(({ id }) => this.get(id) ?? []).slice(0, n);
  }

  /** A team still running in a server that is gone: interrupted, and stored so. */
  private recovered(team: TeamRecord): TeamRecord {
    const owner = team.owner;
    if (team.state !== 'running' || !owner) return team;
    if (owner.pid === this.identity.pid && owner.start === this.identity.start) return team;
    if (sameProcessAlive(owner.pid, owner.start) || !this.recover) return team;
    const now = new Date().toISOString();
    team.state = 'interrupted';
    team.endedAt = now;
    team.error = `interrupted: the polyspawn server that ran it (pid ${owner.pid}) ended before it finished; its members were interrupted with it`;
    // Its members' jobs are recovered as interrupted by the run store: the team's list says so too.
    for (const member of team.members) if (!isFinished(member.state)) member.state = 'interrupted';
    team.events.push({ at: now, kind: 'end', text: 'the team was interrupted: its server ended' });
    try {
      writeAtomic(this.file(team.id), `${JSON.stringify(team, null, 2)}\n`);
    } catch {
      // read-only store: reported as interrupted all the same
    }
    return team;
  }
}
