// How a team is drawn (the dashboard's team page): its shape, the steps it runs in order with the
// members each holds, planned ones included, and what its members share (a task list, a board),
// as plain data. Each topology declares its own (`Topology.view`); one it does not declare is one
// step per role, in the order the members started.
import { clip } from '../../lib/text.js';
import type { TeamRecord } from './record.js';

/** One place in a step: the member as planned, and its job once it started. */
type ViewSlot = { member: string; jobId?: string };

/** A step of the team's shape: a stage, a round, the judge. */
type ViewStep = { title: string; slots: ViewSlot[] };

/** A table cell: text, or an agent's id (which the page links to the agent). */
type ViewCell = string | { agent: string };

/** What the members share, as a table. */
type ViewTable = { title: string; columns: string[]; rows: ViewCell[][]; empty: string };

/** `together`: its steps run at the same time (a leader and its teammates), not one after another. */
export type TeamView = { steps: ViewStep[]; tables: ViewTable[]; together?: boolean };

/** What a cell shows of a member's text (a task's result, a board's value): the rest is in its agent's record. */
const CELL_CHARS = 1000;
export const cell = (text: string | undefined) => clip(text ?? '', CELL_CHARS);

/** The members that started in `role`, in order. */
export const slotsIn = (team: TeamRecord, role: string): ViewSlot[] =>
  team.members.filter((m) => m.role === role).map((m) => ({ member: m.member, jobId: m.jobId }));

/** One step per role, in the order the members started. */
export function stepsByRole(team: TeamRecord): ViewStep[] {
  const roles = [...new Set(team.members.map((m) => m.role))];
  return roles.map((role) => ({ title: role, slots: slotsIn(team, role) }));
}

/** A step of one planned member: its job once one started in `role`. */
export const plannedStep = (team: TeamRecord, title: string, member: string, role = title): ViewStep => ({
  title,
  slots: [{ member, jobId: team.members.find((m) => m.role === role)?.jobId }],
});
