// The channel to the orchestrator with the real CLIs (issue 12), through the built server,
// against the fake model API: the model calls ask_parent, the test (as the orchestrator) sees
// the question through wait_for_agents, answers with reply_subagent, and the CLI's final
// answer, in the same run, carries the reply. Under each backend's default permission and a
// stricter one (a named agent), so the allow rules polyspawn adds are what let the call through.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { startContractRig, type ContractRig } from './clis.js';

type Question = { agent_id: string; message_id: string; question: string; options?: string[]; asked_at: string };
type Job = {
  agent_id: string;
  state: string;
  text?: string;
  error?: string;
  conversation?: { kind: string; text: string }[];
};
type Waited = { finished: Job[]; pending: Job[]; questions?: Question[]; timed_out: boolean };

let rig: ContractRig;
let server: TestServer;

beforeAll(async () => {
  rig = await startContractRig();
  server = rig.server;
  // The stricter modes: claude asks before edits, codex is read-only, copilot runs listed tools only.
  const strict = { claude: 'acceptEdits', codex: 'read-only', copilot: 'listed' } as const;
  for (const [backend, permission] of Object.entries(strict)) {
    await server.callOk('define_agent', {
      name: `strict-${backend}`,
      description: `${backend} in ${permission} mode`,
      backend,
      permission,
      system_prompt: 'Answer briefly.',
    });
  }
}, 900_000);

afterAll(() => rig?.close());

const ASK = `[[fake:mcp:parent:ask_parent:${JSON.stringify({ question: 'Which colour?', options: ['red', 'blue'] })}]]`;

describe.each([
  ['claude', 'spawn_claude'],
  ['claude', 'spawn_strict-claude'],
  ['codex', 'spawn_codex'],
  ['codex', 'spawn_strict-codex'],
  ['copilot', 'spawn_copilot'],
  ['copilot', 'spawn_strict-copilot'],
])('%s through %s', (backend, tool) => {
  test(
    'the model asks; wait_for_agents returns the question; the reply reaches the CLI in the same run',
    { timeout: 300_000 },
    async () => {
      const { agent_id: id } = await server.callOk<Job>(tool, { prompt: `Pick a colour. ${ASK}` });
      const waited = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 150 });
      const returned = Date.now();
      expect(waited.questions, JSON.stringify(waited)).toHaveLength(1);
      const question = waited.questions![0]!;
      expect(question).toMatchObject({ agent_id: id, question: 'Which colour?', options: ['red', 'blue'] });
      // What the note reports: from ask_parent reaching polyspawn to the orchestrator's wait returning.
      console.log(
        `${backend} (${tool}): ask_parent → wait_for_agents returned in ${returned - Date.parse(question.asked_at)} ms`,
      );

      await server.callOk('reply_subagent', {
        agent_id: id,
        message_id: question.message_id,
        answer: 'blue, the colour of the sea',
      });
      let job: Job | undefined;
      for (let i = 0; i < 5 && !job; i++) {
        const w = await server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 150 });
        job = w.finished[0];
      }
      expect(job, `agent ${id} did not finish`).toBeDefined();
      expect(job!.state, job!.error).toBe('succeeded');
      // The fake model answers with the tool's result: the reply, as ask_parent returned it.
      expect(job!.text).toContain('TOOL_RESULT:');
      expect(job!.text).toContain('blue, the colour of the sea');
      expect(job!.conversation!.map((e) => e.kind)).toEqual(['question', 'answer']);

      // IAC.md, rewritten a moment after the end: this run's entry shows the conversation.
      const entryOf = () => {
        const iac = readFileSync(join(server.projectDir, 'IAC.md'), 'utf8');
        const start = iac.indexOf(`### \`${id}\``);
        return start < 0 ? '' : iac.slice(start, iac.indexOf('\n---\n', start) >>> 0);
      };
      const answered = `**answered** \`${question.message_id}\`: blue, the colour of the sea`;
      await waitFor('the conversation in IAC.md', () => entryOf().includes(answered), 20_000);
      // The conversation as the orchestrator and the audit trail saw it (for the record of a run).
      console.log(`${tool}: wait_for_agents questions ${JSON.stringify(waited.questions)}\n${entryOf()}`);
      expect(entryOf()).toContain(`**asked** \`${question.message_id}\`: Which colour? (options: red / blue)`);
    },
  );
});
