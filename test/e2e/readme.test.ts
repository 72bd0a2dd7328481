// The README's tool reference is generated from the live tools/list (npm run docs): this fails
// when a tool definition changed and README.md was not regenerated. And what it must say about
// the limits of what polyspawn guards (the Security model).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';

const script = join(repoRoot, 'scripts', 'gen-tool-docs.mjs');
const check = (...args: string[]) =>
  spawnSync(process.execPath, [script, '--check', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 30_000 });

/** The text of a `## ` section, up to the next one. */
const section = (readme: string, title: string) => {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `README has no "## ${title}" section`).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
};

describe('README.md', () => {
  test('its tool reference matches the live tools/list (else: npm run docs)', () => {
    const r = check();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  test('the check catches a stale reference', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    expect(readme).toContain('### `spawn_codex`');
    const stale = join(tempDir('readme'), 'README.md');
    writeFileSync(stale, readme.replace('How many finished agents to include', 'How many agents'));
    const r = check('--readme', stale);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('the tool reference is stale');
  });

  test('allowed_callers is said to be a guard against mistakes, not a security boundary, where it is described', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const namedAgents = section(readme, 'Named agents');
    const paragraph = namedAgents.split('\n\n').find((p) => p.includes('`allowed_callers` names the MCP clients'))!;
    expect(paragraph.replace(/\s+/g, ' ')).toMatch(
      /`clientInfo\.name`.*which any client can set.*a guard against mistakes, not a security boundary/,
    );
  });

  test('a Security model section says what agents reach, what a project may change, allowed_callers, and secrets', () => {
    const model = section(readFileSync(join(repoRoot, 'README.md'), 'utf8'), 'Security model').replace(/\s+/g, ' ');
    for (const topic of [
      /\*\*What an agent can reach\.\*\*/,
      /\*\*What an agent cannot reach\.\*\*/,
      /\*\*What a project's config may change\.\*\*/,
      /\*\*`allowed_callers`\*\* .*not a security boundary/,
      /\*\*Secrets\.\*\*/,
    ])
      expect(model).toMatch(topic);
  });

  test('the two commands stay at the top', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)![1]!;
    expect(firstBlock).toMatch(/^npm ci && npm start\b.*\nnpm test\b/);
  });
});
