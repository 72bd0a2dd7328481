// Agent definitions: agents/<name>/agent.md parsed and checked, project over user, bad files
// skipped with a reason.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import {
  namedAgentSettings,
  loadAgents,
  parseAgentFile,
  renderAgentFile,
  type AgentContext,
  type AgentFileCache,
} from '../../src/jobs/agents/definitions.js';
import { loadConfig } from '../../src/config/config.js';
import { loadModels, modelsOverrideFiles } from '../../src/config/models.js';
import { tempDir } from '../helpers/temp.js';

function setup(env: NodeJS.ProcessEnv = {}) {
  const dir = tempDir('agents');
  const fullEnv = { XDG_CONFIG_HOME: join(dir, 'xdg'), ...env } as NodeJS.ProcessEnv;
  const config = loadConfig(backends, fullEnv, dir);
  const ctx: AgentContext = {
    config,
    models: loadModels(backends, modelsOverrideFiles(config.projectDir, config.userConfigDir, fullEnv)),
    backends,
  };
  const write = (scope: 'project' | 'user', name: string, text: string) => {
    const folder = join(scope === 'project' ? config.agentsDir : join(config.userConfigDir, 'agents'), name);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'agent.md'), text);
    return join(folder, 'agent.md');
  };
  return { dir, config, ctx, write };
}

const file = (frontmatter: string, body = 'You review code.') => `---\n${frontmatter}\n---\n${body}\n`;

const GOOD = `
description: Reviews a diff for bugs. Use before merging.
backend: claude
model: opus
timeout_s: 900
allow: [Read, Grep]
deny: [Write]
mcp_servers:
  docs: { command: npx, args: [-y, docs-mcp], env: { DOCS_TOKEN: abc } }
  web: { url: "https://mcp.example.com/mcp" }
session: true
allowed_callers: [claude-code]
output_schema:
  type: object
  properties: { verdict: { enum: [approve, request_changes] } }
  required: [verdict]
allow_nesting: true`;

describe('parsing and checking agent.md', () => {
  test('a complete definition', () => {
    const { ctx, write } = setup();
    const path = write('project', 'reviewer', file(GOOD, 'You are a careful reviewer.\n\nBe brief.'));
    const { agents, problems } = loadAgents(ctx);
    expect(problems).toEqual([]);
    const reviewer = agents.get('reviewer')!;
    expect(reviewer).toEqual({
      name: 'reviewer',
      description: 'Reviews a diff for bugs. Use before merging.',
      backend: 'claude',
      model: 'opus',
      systemPrompt: 'You are a careful reviewer.\n\nBe brief.',
      timeoutS: 900,
      allow: ['Read', 'Grep'],
      deny: ['Write'],
      mcpServers: {
        docs: { command: 'npx', args: ['-y', 'docs-mcp'], env: { DOCS_TOKEN: 'abc' } },
        web: { url: 'https://mcp.example.com/mcp' },
      },
      session: true,
      allowedCallers: ['claude-code'],
      outputSchema: {
        type: 'object',
        properties: { verdict: { enum: ['approve', 'request_changes'] } },
        required: ['verdict'],
      },
      nesting: 1,
      scope: 'project',
      file: path,
    });
    // An allow list with no permission runs in the backend's allow-list mode.
    expect(
      namedAgentSettings(
        reviewer,
        backends.find((b) => b.name === 'claude')!,
      ),
    ).toMatchObject({
      name: 'reviewer',
      permission: 'dontAsk',
      allowTools: ['Read', 'Grep'],
      denyTools: ['Write'],
      session: true,
      nesting: 1,
    });
  });

  test('the smallest definition, CRLF line ends and a BOM', () => {
    const { ctx, write } = setup();
    write('project', 'min_1', '\uFEFF---\r\ndescription: Small.\r\nbackend: codex\r\n---\r\nDo it.\r\n');
    const { agents, problems } = loadAgents(ctx);
    expect(problems).toEqual([]);
    expect(agents.get('min_1')).toMatchObject({ backend: 'codex', session: false, nesting: 0, systemPrompt: 'Do it.' });
  });

  test.each([
    ['Bad_Name', file('description: x\nbackend: claude'), /lower-case letters, digits/],
    ['-rf', file('description: x\nbackend: claude'), /the name "-rf" must start with a lower-case letter/],
    ['_', file('description: x\nbackend: claude'), /the name "_" must start with a lower-case letter/],
    ['1st', file('description: x\nbackend: claude'), /must start with a lower-case letter/],
    ['claude', file('description: x\nbackend: claude'), /spawn_claude, the claude backend's own tool/],
    ['a'.repeat(49), file('description: x\nbackend: claude'), /longer than 48/],
    ['x1', file('description: x\nbackend: gpt'), /unknown backend "gpt" \(known: claude, codex/],
    ['x2', file('description: "  "\nbackend: claude'), /description is empty/],
    ['x3', file('backend: claude'), /description: is required/],
    ['x4', file('description: x\nbackend: claude', '   \n'), /system prompt .* is empty/],
    [
      'x5',
      file('description: x\nbackend: claude\noutput_schema: { type: nope }'),
      /output_schema: the output schema is not a valid JSON Schema/,
    ],
    ['x6', file('description: x\nbackend: claude\noutput_schema: [1]'), /output_schema: .*expected record/i],
    ['x7', file('description: x\nbackend: claude\nalowed_callers: [a]'), /unknown setting alowed_callers/],
    ['x8', file('description: x\nbackend: claude\nmodel: "gpt 0"'), /model: unknown model "gpt 0" for claude, and not/],
    ['x9', file('description: x\nbackend: claude\npermission: yolo'), /permission "yolo" is not one of claude's/],
    ['x10', file('description: x\nbackend: codex\nallow: [shell]'), /codex has no per-tool allow or deny lists/],
    [
      'x11',
      file('description: x\nbackend: grok\nmcp_servers: { a: { command: x } }'),
      /mcp_servers: backend grok is an HTTP API/,
    ],
    ['x12', file('description: x\nbackend: gemini\nsession: true'), /session: backend gemini cannot continue/],
    ['x13', file('description: x\nbackend: claude\nname: other'), /differs from the folder's name/],
    ['x14', file('description: [unclosed\nbackend: claude'), /not valid YAML/],
    ['x15', 'description: x\nbackend: claude\n', /does not start with a YAML frontmatter/],
    ['x16', '---\ndescription: x\nbackend: claude\n', /frontmatter is not closed/],
    ['x17', file('- a list'), /must be a mapping/],
    ['x18', file('description: x\nbackend: claude\ntimeout_s: 0'), /timeout_s/],
    [
      'x19',
      file('description: x\nbackend: claude\nmcp_servers: { "a.b": { command: x } }'),
      /"a.b" is not a valid MCP server name/,
    ],
    ['x20', file('description: x\nbackend: claude\nmcp_servers: { a: { url: "ftp://x" } }'), /mcp_servers\.a/],
    ['x21', file('description: x\ndescription: y\nbackend: claude'), /not valid YAML/],
    [
      'x22',
      file(
        'description: x\nbackend: codex\nmcp_servers: { a: { command: x, env: { T: "1" } }, b: { command: y, env: { T: "2" } } }',
      ),
      /mcp_servers: a and b give T different values, and codex passes/,
    ],
    [
      'x23',
      file('description: x\nbackend: codex\nmcp_servers: { a: { command: x, env: { CODEX_HOME: /tmp } } }'),
      /mcp_servers\.a\.env\.CODEX_HOME: codex gets .* codex's or polyspawn's own setting/,
    ],
  ])('%s is skipped with a reason', (name, text, reason) => {
    const { ctx, write } = setup();
    const path = write('project', name, text);
    const { agents, problems } = loadAgents(ctx);
    expect(agents.size).toBe(0);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ file: path, scope: 'project', name });
    expect(problems[0]!.problem).toMatch(reason);
  });

  test('a disabled backend, a folder without agent.md and a loose .md file are reported', () => {
    const { ctx, write, config } = setup({ POLYSPAWN_COPILOT_ENABLED: 'false' });
    write('project', 'pilot', file('description: x\nbackend: copilot'));
    mkdirSync(join(config.agentsDir, 'empty'));
    writeFileSync(join(config.agentsDir, 'loose.md'), file('description: x\nbackend: claude'));
    mkdirSync(join(config.agentsDir, '.hidden'));
    const problems = loadAgents(ctx).problems.map((p) => `${p.name}: ${p.problem}`);
    expect(problems).toEqual([
      'empty: the folder has no agent.md',
      expect.stringMatching(/^loose: an agent is a folder: move this file to .*loose\/agent\.md$/),
      'pilot: backend copilot is disabled in this configuration',
    ]);
  });

  test('at most 100 named agents: the first 100 by name load (the project folder first), the others are reported', () => {
    const { ctx, write } = setup();
    for (let i = 0; i < 100; i++)
      write('project', `p${String(i).padStart(3, '0')}`, file('description: x\nbackend: codex'));
    write('user', 'a-user-one', file('description: x\nbackend: codex'));
    write('user', 'p000', file('description: shadowed, not counted\nbackend: codex'));
    const { agents, shadowed, problems } = loadAgents(ctx);
    expect(agents.size).toBe(100);
    expect(agents.has('p099')).toBe(true);
    expect(agents.has('a-user-one')).toBe(false);
    expect(shadowed).toHaveLength(1);
    expect(problems).toEqual([
      expect.objectContaining({
        name: 'a-user-one',
        scope: 'user',
        problem: expect.stringMatching(/^skipped: 100 named agents are loaded already, the most polyspawn serves/),
      }),
    ]);
  });

  test('with a cache, a load reads again only the files that changed, and forgets removed ones', () => {
    const { ctx, write } = setup();
    write('project', 'same', file('description: unchanged\nbackend: codex'));
    const changing = write('project', 'edited', file('description: first\nbackend: codex'));
    const gone = write('project', 'gone', file('description: removed later\nbackend: codex'));
    const cache: AgentFileCache = new Map();
    const first = loadAgents(ctx, cache);
    write('project', 'edited', file('description: second, longer\nbackend: codex'));
    rmSync(dirname(gone), { recursive: true });
    const second = loadAgents(ctx, cache);
    expect(second.agents.get('same')).toBe(first.agents.get('same')); // the same object: not read again
    expect(second.agents.get('edited')).toMatchObject({ description: 'second, longer', file: changing });
    expect([...second.agents.keys()]).toEqual(['edited', 'same']);
    expect([...cache.keys()].sort()).toEqual([changing, first.agents.get('same')!.file].sort());
  });

  test('a configured agents folder replaces the project default', () => {
    const { ctx, dir } = setup({ POLYSPAWN_AGENTS_DIR: 'my-agents' });
    expect(ctx.config.agentsDir).toBe(join(dir, 'my-agents'));
  });
});

describe('project over user', () => {
  test('the project definition wins; the user one is shadowed; other user ones load', () => {
    const { ctx, write } = setup();
    const projectFile = write('project', 'helper', file('description: project helper\nbackend: codex'));
    const userFile = write('user', 'helper', file('description: user helper\nbackend: claude'));
    write('user', 'mine', file('description: only mine\nbackend: claude'));
    const { agents, shadowed, problems } = loadAgents(ctx);
    expect(problems).toEqual([]);
    expect([...agents.keys()]).toEqual(['helper', 'mine']);
    expect(agents.get('helper')).toMatchObject({ description: 'project helper', scope: 'project', file: projectFile });
    expect(agents.get('mine')!.scope).toBe('user');
    expect(shadowed.map((d) => d.file)).toEqual([userFile]);
  });

  test('an invalid project file does not hide a valid user one (and is reported)', () => {
    const { ctx, write } = setup();
    write('project', 'helper', file('description: broken\nbackend: nope'));
    write('user', 'helper', file('description: user helper\nbackend: claude'));
    const { agents, problems } = loadAgents(ctx);
    expect(agents.get('helper')).toMatchObject({ scope: 'user' });
    expect(problems).toHaveLength(1);
    expect(problems[0]!.scope).toBe('project');
  });
});

describe('rendering', () => {
  test('a rendered file parses back to the same settings', () => {
    const frontmatter = {
      name: 'r',
      description: 'Multi\nline: "quoted"',
      backend: 'claude',
      output_schema: { type: 'object', required: ['a'] },
      allowed_callers: ['x-y'],
    };
    const text = renderAgentFile(frontmatter, '  You: do # this\n---\nnot frontmatter\n');
    const parsed = parseAgentFile(text);
    expect(parsed).toEqual({ frontmatter, body: '\nYou: do # this\n---\nnot frontmatter\n' });
  });
});

describe('polyspawn doctor', () => {
  test('lists the agent files it skipped, and why', async () => {
    const { collectDoctor, formatDoctor } = await import('../../src/commands/doctor.js');
    const { dir, write } = setup();
    const path = write('project', 'oops', file('description: x\nbackend: nope'));
    const report = await collectDoctor({ XDG_CONFIG_HOME: join(dir, 'xdg'), PATH: '/nonexistent' }, dir);
    expect(report.agentProblems).toEqual([
      expect.objectContaining({ file: path, problem: expect.stringMatching(/unknown backend "nope"/) }),
    ]);
    expect(formatDoctor(report)).toContain(`agent file skipped: ${path}: unknown backend "nope"`);
  });
});

describe('isolation in a definition', () => {
  test('worktree for a CLI agent; refused for an API agent and for a session agent', () => {
    const { ctx, write } = setup();
    const cli = backends.find((b) => b.kind === 'cli' && b.supportsResume)!;
    const api = backends.find((b) => b.kind === 'api')!;
    write('project', 'builder', file(`description: Builds.\nbackend: ${cli.name}\nisolation: worktree`));
    write('project', 'asker', file(`description: Asks.\nbackend: ${api.name}\nisolation: worktree`));
    write('project', 'talker', file(`description: Talks.\nbackend: ${cli.name}\nsession: true\nisolation: worktree`));
    const loaded = loadAgents(ctx);
    expect(loaded.agents.get('builder')!.isolation).toBe('worktree');
    const problems = Object.fromEntries(loaded.problems.map((p) => [p.name, p.problem]));
    expect(problems.asker).toMatch(/isolation: backend \w+ is an HTTP API with no tools, so isolation does not apply/);
    expect(problems.talker).toMatch(/isolation: a session agent keeps one conversation in one folder/);
  });
});

describe("a project's definition (it came with the repository)", () => {
  test('passes on no variable named like a secret; a user definition may', () => {
    const { ctx, write } = setup();
    const cli = backends.find((b) => b.kind === 'cli')!;
    const env = 'env:\n  - AWS_SECRET_ACCESS_KEY\n  - GITHUB_TOKEN\n  - LANG';
    write('project', 'leaky', file(`description: Leaks.\nbackend: ${cli.name}\n${env}`));
    write('project', 'plain', file(`description: Plain.\nbackend: ${cli.name}\nenv:\n  - LANG\n  - MAX_OUTPUT_TOKENS`));
    write('user', 'mine', file(`description: Mine.\nbackend: ${cli.name}\n${env}`));
    const loaded = loadAgents(ctx);
    const problems = Object.fromEntries(loaded.problems.map((p) => [p.name, p.problem]));
    expect(problems.leaky).toMatch(/env: AWS_SECRET_ACCESS_KEY is named like a secret, and a project's agent/);
    expect(problems.leaky).toMatch(/env: GITHUB_TOKEN is named like a secret/);
    expect(loaded.agents.get('plain')!.env).toEqual(['LANG', 'MAX_OUTPUT_TOKENS']);
    expect(loaded.agents.get('mine')!.env).toEqual(['AWS_SECRET_ACCESS_KEY', 'GITHUB_TOKEN', 'LANG']);
  });
});
