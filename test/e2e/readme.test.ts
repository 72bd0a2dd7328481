// The README and docs/: the tool reference (docs/tools.md) is generated from the live tools/list
// (npm run docs): this fails when a tool definition changed and it was not regenerated. The
// README stays short and names every tool; every link between the pages leads somewhere. And what
// they must say about the limits of what polyspawn guards (the security model).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';

const script = join(repoRoot, 'scripts', 'gen-tool-docs.mjs');
const check = (...args: string[]) =>
  spawnSync(process.execPath, [script, '--check', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 30_000 });

const read = (file: string) => readFileSync(join(repoRoot, file), 'utf8');
const README = 'README.md';
const pages = [README, ...readdirSync(join(repoRoot, 'docs')).flatMap((f) => (f.endsWith('.md') ? [`docs/${f}`] : []))];

/** The text of a `## ` section, up to the next one. */
const section = (text: string, title: string) => {
  const start = text.indexOf(`\n## ${title}\n`);
  expect(start, `no "## ${title}" section`).toBeGreaterThan(-1);
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end < 0 ? undefined : end);
};

/** The anchors GitHub gives a page's headings (outside code blocks). */
const anchors = (text: string) => {
  const found = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (heading)
      found.add(
        heading[1]!
          .toLowerCase()
          .replace(/[^\p{L}\p{N} _-]/gu, '')
          .replace(/ /g, '-'),
      );
  }
  return found;
};

describe('the tool reference, docs/tools.md', () => {
  test('matches the live tools/list (else: npm run docs)', () => {
    const r = check();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  test('the check catches a stale reference', () => {
    const reference = read('docs/tools.md');
    expect(reference).toContain('### `spawn_codex`');
    const stale = join(tempDir('readme'), 'tools.md');
    writeFileSync(stale, reference.replace('How many finished agents to include', 'How many agents'));
    const r = check('--file', stale);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('the tool reference is stale');
  });
});

describe('README.md', () => {
  test('the two commands stay at the top, each saying whom it is for', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(read(README))![1]!;
    expect(firstBlock).toMatch(/^npm ci && npm start\b.*# to use it\b.*\nnpm test\b.*# to work on it\b/);
  });

  test('is short, and its brief list names every tool of the reference', () => {
    const readme = read(README);
    expect(readme.split('\n').length).toBeLessThan(250);
    const brief = section(readme, 'Tools in brief');
    const tools = [...read('docs/tools.md').matchAll(/^### `([a-z_]+)`/gm)].map((m) => m[1]!);
    expect(tools.length).toBeGreaterThan(10);
    for (const tool of tools) expect(brief, tool).toContain(`\`${tool}\``);
  });

  test('links every page of docs/, and the install steps make the package they install', () => {
    const readme = read(README);
    for (const page of pages.filter((p) => p !== README)) expect(readme, page).toContain(`](${page})`);
    const install = section(readme, 'Install and set up your client');
    expect(install).toMatch(/^npm pack\b.*\n^npm install -g \.\/polyspawn-0\.1\.0\.tgz/m);
  });

  test('its security model in brief says allowed_callers is no boundary, and links the whole model', () => {
    const brief = section(read(README), 'Security model in brief').replace(/\s+/g, ' ');
    expect(brief).toMatch(/\*\*`allowed_callers`\*\* .*a guard against mistakes, not a security boundary/);
    expect(brief).toContain('](docs/security.md)');
  });
});

describe('docs/', () => {
  test('every relative link, in the README and in docs/, leads to a file there, and an anchor to its heading', () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = read(page);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const file = path ? join(dirname(page), path) : page;
        if (!existsSync(join(repoRoot, file))) broken.push(`${page}: ${target} (no ${file})`);
        else if (anchor && file.endsWith('.md') && !anchors(read(file)).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });

  test('allowed_callers is said to be a guard against mistakes, not a security boundary, where it is described', () => {
    const namedAgents = section(read('docs/agents.md'), 'Named agents');
    const paragraph = namedAgents.split('\n\n').find((p) => p.includes('`allowed_callers` names the MCP clients'))!;
    expect(paragraph.replace(/\s+/g, ' ')).toMatch(
      /`clientInfo\.name`.*which any client can set.*a guard against mistakes, not a security boundary/,
    );
  });

  test('the security model says what agents reach, what a project may change, allowed_callers, and secrets', () => {
    const model = section(read('docs/security.md'), 'Security model').replace(/\s+/g, ' ');
    for (const topic of [
      /\*\*What an agent can reach\.\*\*/,
      /\*\*What an agent cannot reach\.\*\*/,
      /\*\*What a project's config may change\.\*\*/,
      /\*\*`allowed_callers`\*\* .*not a security boundary/,
      /\*\*Secrets\.\*\*/,
    ])
      expect(model).toMatch(topic);
  });
});
