// What the members of a leader_teammate team share over the channel: a task list and messages.
// Every change is one synchronous step on the event loop, so two members claiming one task at
// once cannot both win.
import { EventEmitter } from 'node:events';
import { InputError } from '../../../lib/errors.js';
import { clip } from '../../../lib/text.js';
import { waitUntil } from '../../../lib/wait.js';
import { checkLength } from '../../conversation.js';
import type { TeamReport } from '../topology.js';

type TaskStatus = 'open' | 'claimed' | 'done' | 'failed';

type TeamTask = {
  id: string;
  subject: string;
  description?: string;
  status: TaskStatus;
  /** The agent_id of the member that claimed it. */
  owner?: string;
  blockedBy: string[];
  result?: string;
  createdBy: string;
  updatedAt: string;
};

type TeamMessage = { id: number; from: string; to?: string; text: string; at: string };

export const TASK_LIST_LIMITS = {
  tasks: 200,
  messages: 1000,
  textChars: 20_000,
  subjectChars: 300,
} as const;

export class TaskList {
  private readonly tasks: TeamTask[] = [];
  private readonly messages: TeamMessage[] = [];
  /** Per member: how many messages it has read. */
  private readonly cursors = new Map<string, number>();
  /** Changes so far, and per member the count it last saw (read or listed): what it has not seen wakes it at once. */
  private version = 0;
  private readonly seen = new Map<string, number>();
  private readonly changes = new EventEmitter();

  constructor(private readonly report: TeamReport) {
    this.changes.setMaxListeners(0);
  }

  createTask(by: string, subject: string, description?: string, blockedBy: string[] = []): TeamTask {
    checkLength("the task's subject", subject, TASK_LIST_LIMITS.subjectChars);
    if (description !== undefined) checkLength("the task's description", description, TASK_LIST_LIMITS.textChars);
    if (this.tasks.length >= TASK_LIST_LIMITS.tasks)
      throw new InputError(`the task list holds ${TASK_LIST_LIMITS.tasks} tasks, the most it may: finish some first`);
    const unknown = blockedBy.filter((id) => !this.tasks.some((t) => t.id === id));
    if (unknown.length) throw new InputError(`blocked_by names no task: ${unknown.join(', ')} (see task_list)`);
    const task: TeamTask = {
      id: `t${this.tasks.length + 1}`,
      subject,
      description,
      status: 'open',
      blockedBy,
      createdBy: by,
      updatedAt: new Date().toISOString(),
    };
    this.tasks.push(task);
    this.report('task', `${by} created ${task.id}: ${clip(subject)}`, by);
    this.changed();
    return task;
  }

  /** The task list; `reader` has now seen every change so far. */
  listTasks(reader?: string): TeamTask[] {
    if (reader) this.seen.set(reader, this.version);
    return this.tasks.map((t) => ({ ...t, blockedBy: [...t.blockedBy] }));
  }

  /** Open tasks whose blockers are all done. */
  private unblocked(): TeamTask[] {
    const done = new Set(this.tasks.filter((t) => t.status === 'done').map((t) => t.id));
    return this.tasks.filter((t) => t.status === 'open' && t.blockedBy.every((b) => done.has(b)));
  }

  /**
   * Claims a task for `by`: the one named, or the next unblocked one. Undefined when there is
   * none to take. Atomic: the check and the claim are one synchronous step.
   */
  claim(by: string, taskId?: string): TeamTask | undefined {
    let task: TeamTask | undefined;
    if (taskId) {
      task = this.task(taskId);
      if (task.status !== 'open')
        throw new InputError(
          `task ${taskId} is ${task.status}${task.owner ? ` by ${task.owner}` : ''}: claim another (task_list)`,
        );
      if (!this.unblocked().includes(task))
        throw new InputError(`task ${taskId} waits for ${task.blockedBy.join(', ')} to be done first`);
    } else task = this.unblocked()[0];
    if (!task) return undefined;
    task.status = 'claimed';
    task.owner = by;
    task.updatedAt = new Date().toISOString();
    this.report('task', `${by} claimed ${task.id}: ${clip(task.subject)}`, by);
    this.changed();
    return { ...task };
  }

  update(by: string, taskId: string, status: 'done' | 'failed' | 'open', result?: string): TeamTask {
    if (result !== undefined) checkLength("the task's result", result, TASK_LIST_LIMITS.textChars);
    const task = this.task(taskId);
    if (task.owner && task.owner !== by)
      throw new InputError(`task ${taskId} is claimed by ${task.owner}: only it updates the task`);
    task.status = status;
    if (status === 'open') delete task.owner;
    if (result !== undefined) task.result = result;
    task.updatedAt = new Date().toISOString();
    this.report('task', `${by} marked ${task.id} ${status}${result ? `: ${clip(result)}` : ''}`, by);
    this.changed();
    return { ...task };
  }

  private task(id: string): TeamTask {
    const task = this.tasks.find((t) => t.id === id);
    if (!task) throw new InputError(`no task "${id}": task_list shows the ids`);
    return task;
  }

  /** A message to one member (`to`, its agent_id) or, without `to`, to every member. */
  send(from: string, text: string, to?: string): TeamMessage {
    checkLength('the message', text, TASK_LIST_LIMITS.textChars);
    if (this.messages.length >= TASK_LIST_LIMITS.messages)
      throw new InputError(`this team has sent ${TASK_LIST_LIMITS.messages} messages, the most it may`);
    const message: TeamMessage = {
      id: this.messages.length + 1,
      from,
      to,
      text,
      at: new Date().toISOString(),
    };
    this.messages.push(message);
    this.report('message', `${from} → ${to ?? 'everyone'}: ${clip(text)}`, from);
    this.changed();
    return message;
  }

  /**
   * The messages for `reader` it has not read yet; when there are none and nothing changed since
   * it last looked, waits up to timeoutMs for one (or for a change of the task list, which may be
   * what it waits for).
   */
  async read(reader: string, timeoutMs: number, signal?: AbortSignal): Promise<TeamMessage[]> {
    const unread = () => {
      const from = this.cursors.get(reader) ?? 0;
      return this.messages.slice(from).filter((m) => m.from !== reader && (!m.to || m.to === reader));
    };
    const seen = this.seen.get(reader) ?? 0;
    await waitUntil({
      subscribe: (wake) => {
        this.changes.on('change', wake);
        return () => this.changes.off('change', wake);
      },
      ready: () => (unread().length > 0 || this.version !== seen ? true : undefined),
      expired: () => false,
      timeoutMs,
      signal,
    });
    const messages = unread();
    this.cursors.set(reader, this.messages.length);
    this.seen.set(reader, this.version);
    return messages;
  }

  private changed(): void {
    this.version++;
    this.changes.emit('change');
  }
}
