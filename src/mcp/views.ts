// What every tool shares: a result as MCP carries it, and a job looked up by the id a caller gave.
// The job's own shapes are src/jobs/result.ts.
import type { App } from '../app.js';
import type { JobRecord } from '../jobs/table.js';
import type { TeamRecord } from '../jobs/teams/record.js';
import { InputError } from '../lib/errors.js';

/** A tool result: structured content plus the same as JSON text for clients that read only text. */
export function toolResult<T extends Record<string, unknown>>(structured: T) {
  return { structuredContent: structured, content: [{ type: 'text' as const, text: JSON.stringify(structured) }] };
}

export function findJob(app: App, id: string): JobRecord {
  const job = app.jobs.get(id);
  if (!job) throw new InputError(`no agent with id "${id}": call \`list\` to see the ids of current and recent agents`);
  return job;
}

export function findTeam(app: App, id: string): TeamRecord {
  const team = app.teams.get(id);
  if (!team) throw new InputError(`no team with id "${id}": call \`list\` to see the current and recent teams`);
  return team;
}
