// Steering work from the dashboard, in Debian's chromium against `polyspawn serve --http` in a real
// git repository, with the fake CLIs: an isolated agent's branch reviewed (its diff, the files
// another agent changed too) and landed or refused with the integrate tool's own words, discarded,
// a running agent cancelled; and a running team of each shape drawn as what it is (a pipeline's
// stages, a debate's rounds and judge, a leader's task list, a board, a supervisor's team), its
// members' states live and its events as a timeline. The screenshots for the note are written to
// test/browser/output/ (git-ignored): overview-team.png, team-view.png, team-supervisor.png, review.png.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { initRepo, userGit } from '../helpers/git.js';
import { httpClient, startHttpServer, type HttpTestClient, type HttpTestServer } from '../helpers/http.js';
import { repoRoot } from '../helpers/mcp.js';

vi.setConfig({ testTimeout: 180_000 });

const CHROMIUM = '/usr/bin/chromium';
const OUTPUT = join(repoRoot, 'test', 'browser', 'output');
/** Long enough that only the behaviour under test ends these waits. */
const APPEARS_MS = 60_000;

type Job = { agent_id: string; state: string };
type Team = { team_id: string; state: string; members: { agent_id: string; role: string; state: string }[] };

let server: HttpTestServer;
let mcp: HttpTestClient;
let browser: Browser;
let page: Page;
let origin: string;
let project: string;
/** What the page's buttons asked to confirm, in order; `refuseNext` answers the next one no. */
const asked: string[] = [];
let refuseNext = false;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  mkdirSync(OUTPUT, { recursive: true });
  project = mkdtempSync(join(tmpdir(), 'polyspawn-dashboard-work-'));
  initRepo(project);
  // The test's own files (the server's config home) are no part of the user's checkout.
  writeFileSync(join(project, '.gitignore'), '.xdg-config/\n');
  userGit(project, 'add', '.gitignore');
  userGit(project, 'commit', '-q', '-m', 'ignore the config home');
  server = await startHttpServer({ projectDir: project, env: { POLYSPAWN_CONCURRENCY: '6' } });
  mcp = await httpClient(server.url, server.token, 'browser-work-test');
  origin = new URL(server.url).origin;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // Every confirm() a button asks is answered yes, as a user who means it would, unless a test says no.
  page.on('dialog', (dialog) => {
    asked.push(dialog.message());
    void (refuseNext ? dialog.dismiss() : dialog.accept());
    refuseNext = false;
  });
  await page.goto(`${origin}/?token=${encodeURIComponent(server.token)}`);
});
afterAll(async () => {
  await browser?.close();
  await mcp?.close();
  await server?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

const shot = (name: string) => page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });

async function finished(id: string): Promise<Job> {
  for (let i = 0; i < 10; i++) {
    const waited = await mcp.callOk<{ finished: Job[] }>('wait_for_agents', { agent_ids: [id], timeout_s: 50 });
    if (waited.finished[0]) return waited.finished[0];
  }
  throw new Error(`agent ${id} did not finish`);
}

/** An agent isolated in a worktree that writes `files` (name → text) and ends. */
async function isolatedAgent(task: string, files: Record<string, string>): Promise<string> {
  const writes = Object.entries(files)
    .map(([name, text]) => `[[cli:write:${name}=${text}]]`)
    .join(' ');
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: `${task} ${writes}`, isolation: 'worktree' });
  expect((await finished(job.agent_id)).state).toBe('succeeded');
  return job.agent_id;
}

const branches = () => userGit(project, 'branch', '--list', 'polyspawn/*');

describe("an isolated agent's work, reviewed and landed from the page", () => {
  const HOSTILE_NAME = '<b>bold</b> & "quotes".txt';
  const HOSTILE_TEXT = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
  let first: string;
  let second: string;

  beforeAll(async () => {
    // Both ran from the same base and changed shared.txt: each review names the other.
    [first, second] = await Promise.all([
      isolatedAgent('add the greeting', {
        'shared.txt': 'hello from the first',
        'README.md': 'a project that greets',
        [HOSTILE_NAME]: HOSTILE_TEXT,
      }),
      isolatedAgent('add another greeting', { 'shared.txt': 'hello from the second' }),
    ]);
  });

  test('the review shows the diff file by file, as text, and the files the other agent changed too', async () => {
    await page.goto(`${origin}/agents/${first}`);
    await page.click(`a[href="/agents/${first}/review"]`);
    const files = page.locator('details.file');
    await expect.poll(() => files.count()).toBe(3);
    const names = await page.locator('details.file summary code').allTextContents();
    expect(names.sort()).toEqual([HOSTILE_NAME, 'README.md', 'shared.txt'].sort());
    const readme = page.locator('details.file', { hasText: 'README.md' });
    expect(await readme.locator('tr.remove').textContent()).toBe('1−a project');
    expect(await readme.locator('tr.add').textContent()).toBe('1+a project that greets');
    const hostile = page.locator('details.file', { hasText: HOSTILE_NAME });
    expect(await hostile.locator('tr.add').textContent()).toContain(HOSTILE_TEXT);
    expect(await page.locator('details.file b, details.file img, details.file script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    const shared = page.locator('details.file', { hasText: 'shared.txt' });
    expect(await shared.locator('tr.add td').last().textContent()).toBe('+hello from the first');
    expect(await page.locator('.overlaps').textContent()).toContain(`shared.txt: also ${second}`);
    await shot('review');
  });

  test("merge lands the branch on the user's branch; the same merge of the other is refused in the tool's words", async () => {
    await page.goto(`${origin}/agents/${first}/review`);
    await page.click('form[action$="/integrate"]:has(input[value="merge"]) button');
    await expect.poll(() => page.locator('#integrated').getAttribute('data-how')).toBe('merge');
    expect(await page.locator('.done').textContent()).toContain(`Merged polyspawn/${first}`);
    expect(readFileSync(join(project, 'shared.txt'), 'utf8')).toBe('hello from the first\n');
    expect(userGit(project, 'log', '-1', '--format=%s')).toContain(`Merge polyspawn/${first}: agent ${first}`);
    expect(branches()).not.toContain(first);

    await page.goto(`${origin}/agents/${second}/review`);
    const refused = page.waitForResponse((r) => r.url().endsWith(`/agents/${second}/integrate`));
    await page.click('form[action$="/integrate"]:has(input[value="merge"]) button');
    expect((await refused).status()).toBe(409);
    const said = await page.locator('p.error').textContent();
    expect(said).toContain(`polyspawn/${second} conflicts with your branch in shared.txt: nothing was changed`);
    // The tool refuses in the same words, and the user's branch is as the first merge left it.
    const tool = await mcp.call('integrate', { agent_id: second, how: 'merge' });
    expect(tool.isError).toBe(true);
    expect(JSON.stringify(tool.content)).toContain(JSON.stringify(said).slice(1, -1));
    expect(readFileSync(join(project, 'shared.txt'), 'utf8')).toBe('hello from the first\n');
  });

  test('patch shows the diff and changes nothing; discard, once confirmed, deletes the branch', async () => {
    await page.goto(`${origin}/agents/${second}/review`);
    await page.click('form[action$="/integrate"]:has(input[value="patch"]) button');
    expect(await page.locator('pre.patch').textContent()).toContain('+hello from the second');
    expect(branches()).toContain(`polyspawn/${second}`);

    await page.goto(`${origin}/agents/${second}/review`);
    // Asked first: answered no, nothing is posted and the branch stays.
    refuseNext = true;
    await page.click('form.danger:has(input[value="discard"]) button');
    expect(asked.at(-1)).toBe(
      `Discard agent ${second}'s work? Its worktree and branch polyspawn/${second} are deleted.`,
    );
    expect(page.url()).toBe(`${origin}/agents/${second}/review`);
    expect(branches()).toContain(`polyspawn/${second}`);
    await page.click('form.danger:has(input[value="discard"]) button');
    await expect.poll(() => page.locator('#integrated').getAttribute('data-how')).toBe('discard');
    expect(branches()).not.toContain(second);
    await page.goto(`${origin}/agents/${second}/review`);
    expect(await page.locator('p.error').textContent()).toContain('is gone: it was integrated or discarded already');
    expect(await page.locator('form[action$="/integrate"]').count()).toBe(0);
  });
});

test('a running agent is cancelled from its page, and ends cancelled', async () => {
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'works forever [[cli:hang]]' });
  await page.goto(`${origin}/agents/${job.agent_id}`);
  await page.locator(`form[action="/agents/${job.agent_id}/cancel"] button`).click();
  expect(asked.at(-1)).toBe(`Stop agent ${job.agent_id} and every process it started?`);
  await expect.poll(() => page.url()).toBe(`${origin}/agents/${job.agent_id}`);
  expect((await finished(job.agent_id)).state).toBe('cancelled');
  await expect
    .poll(() => page.locator(`#record tr[data-agent="${job.agent_id}"]`).textContent(), { timeout: APPEARS_MS })
    .toContain('cancelled');
  expect(await page.locator(`form[action="/agents/${job.agent_id}/cancel"]`).count()).toBe(0);
});

describe('a running team, drawn as what it is', () => {
  const runTeam = (args: Record<string, unknown>) => mcp.callOk<Team>('run_team', args);
  const waitTeam = async (id: string) => {
    for (let i = 0; i < 10; i++) {
      const waited = await mcp.callOk<{ teams?: Team[] }>('wait_for_agents', { agent_ids: [id], timeout_s: 50 });
      const team = waited.teams?.find((t) => t.team_id === id);
      if (team && team.state !== 'running') return team;
    }
    throw new Error(`team ${id} did not finish`);
  };
  const steps = () => page.locator('#record .shape > .step > .step-title').allTextContents();
  const slot = (step: string) =>
    page.locator('#record .shape > .step', { has: page.locator(`.step-title:text-is("${step}")`) });

  test('pipeline: its stages in order, the next one not started while the first runs; the overview shows it too', async () => {
    const team = await runTeam({
      topology: 'pipeline',
      members: ['codex', 'claude'],
      task: 'draft then polish <i>the parser</i> [[cli:sleep:4000]]',
    });
    await page.goto(`${origin}/`);
    const card = page.locator(`article[data-team="${team.team_id}"]`);
    await expect.poll(() => card.locator('.slot.state-running').count(), { timeout: APPEARS_MS }).toBe(1);
    expect(await card.locator('.slot.planned').textContent()).toContain('claude');
    expect(await card.locator('.task').textContent()).toContain('<i>the parser</i>');
    // The agents' table says whose member each row is.
    const first = (await mcp.callOk<Team>('result', { agent_id: team.team_id })).members[0]!;
    const row = page.locator(`#active tr[data-agent="${first.agent_id}"]`);
    await expect
      .poll(() => row.textContent(), { timeout: APPEARS_MS })
      .toMatch(new RegExp(`${team.team_id}\\s*stage 1`));
    await shot('overview-team');

    await card.locator('h3 a').click();
    expect(await steps()).toEqual(['stage 1', 'stage 2']);
    await expect
      .poll(() => slot('stage 2').locator('.slot').getAttribute('class'), { timeout: APPEARS_MS })
      .toContain('state-running');
    expect(await slot('stage 1').locator('.slot').getAttribute('class')).toContain('state-succeeded');
    await expect
      .poll(() => page.locator('#record h2').first().textContent(), { timeout: APPEARS_MS })
      .toContain('succeeded');
    const timeline = await page.locator('.timeline').textContent();
    expect(timeline).toMatch(/started[\s\S]*stage 1: codex started[\s\S]*answer[\s\S]*stage 2: claude started/);
    expect(await page.locator('details pre.answer').textContent()).toContain('FAKE claude');
  });

  test('a running team is cancelled from its page: its members end, the page says cancelled', async () => {
    const team = await runTeam({ topology: 'pipeline', members: ['codex', 'claude'], task: 'forever [[cli:hang]]' });
    await page.goto(`${origin}/teams/${team.team_id}`);
    await expect.poll(() => slot('stage 1').locator('.slot.state-running').count(), { timeout: APPEARS_MS }).toBe(1);
    await page.click(`form[action="/teams/${team.team_id}/cancel"] button`);
    expect(asked.at(-1)).toBe(`Cancel team ${team.team_id} and every member still running?`);
    expect((await waitTeam(team.team_id)).state).toBe('cancelled');
    await expect
      .poll(() => page.locator('#record h2').first().textContent(), { timeout: APPEARS_MS })
      .toContain('cancelled');
    expect(await slot('stage 1').locator('.slot').getAttribute('class')).toContain('state-cancelled');
    expect(await page.locator(`form[action="/teams/${team.team_id}/cancel"]`).count()).toBe(0);
  });

  test('debate: its rounds, then the judge', async () => {
    const team = await runTeam({
      topology: 'peer_ring',
      members: ['codex', 'claude'],
      options: { rounds: 2, judge: 'copilot' },
      task: 'which parser design? [[cli:sleep:1500]]',
    });
    await page.goto(`${origin}/teams/${team.team_id}`);
    expect(await steps()).toEqual(['round 1', 'round 2', 'judge']);
    await expect.poll(() => slot('round 1').locator('.slot.state-running').count(), { timeout: APPEARS_MS }).toBe(2);
    expect(await slot('judge').locator('.slot').textContent()).toContain('copilot');
    expect(await slot('judge').locator('.slot').getAttribute('class')).toContain('planned');
    await waitTeam(team.team_id);
    await expect.poll(() => slot('judge').locator('.slot').getAttribute('class')).toContain('state-succeeded');
    expect(await slot('round 2').locator('.slot.state-succeeded').count()).toBe(2);
  });

  test('leader and teammates: the task list with who claimed what, done or not, live', async () => {
    const team = await runTeam({
      topology: 'leader_teammate',
      members: ['claude', 'codex', 'copilot'],
      task: 'Split the parser work [[cli:team]] [[cli:tasks:lexer|grammar|<img src=x onerror="window.pwned=3">]] [[cli:task-ms:2500]]',
    });
    await page.goto(`${origin}/teams/${team.team_id}`);
    expect(await steps()).toEqual(['leader', 'teammates']);
    const tasks = page.locator('#record table.shared tr');
    await expect.poll(() => tasks.count(), { timeout: APPEARS_MS }).toBe(4);
    // A task claimed and not yet done names the teammate that took it.
    const owner = await page
      .locator('#record table.shared tr:has(td:text-is("claimed")) td a')
      .first()
      .textContent({ timeout: APPEARS_MS });
    const team2 = await mcp.callOk<Team>('result', { agent_id: team.team_id });
    const teammates = team2.members.filter((m) => m.role.startsWith('teammate')).map((m) => m.agent_id);
    expect(teammates).toContain(owner);
    await shot('team-view');
    await waitTeam(team.team_id);
    await expect
      .poll(() => page.locator('#record table.shared td:nth-child(3)').allTextContents(), { timeout: APPEARS_MS })
      .toEqual(['done', 'done', 'done']);
    expect(await page.locator('#record table.shared tr', { hasText: 'lexer' }).textContent()).toMatch(/lexer by \d+/);
    // A task's subject is the leader's writing: shown as text, never run.
    expect(await page.locator('#record table.shared').textContent()).toContain('<img src=x onerror="window.pwned=3">');
    expect(await page.locator('#record img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
  });

  test("blackboard: its rounds and the board's entries with their authors", async () => {
    const team = await runTeam({
      topology: 'blackboard',
      members: ['codex', 'claude'],
      options: { rounds: 3 },
      task: 'Find the bug [[cli:team]] [[cli:done-round:2]] [[cli:sleep:1000]]',
    });
    await page.goto(`${origin}/teams/${team.team_id}`);
    expect(await steps()).toEqual(['round 1', 'round 2', 'round 3']);
    await expect.poll(() => slot('round 1').locator('.slot.state-running').count(), { timeout: APPEARS_MS }).toBe(2);
    await waitTeam(team.team_id);
    const board = page.locator('#record table.shared');
    await expect
      .poll(() => board.locator('tr', { hasText: 'DONE in round 2' }).count(), { timeout: APPEARS_MS })
      .toBe(1);
    expect(await board.locator('tr', { hasText: 'seen-' }).count()).toBeGreaterThanOrEqual(3);
    expect(await board.locator('td a').count()).toBeGreaterThanOrEqual(4);
    // The third round never ran: the board was done in the second.
    expect(await slot('round 3').locator('.slot.planned').count()).toBe(2);
  });

  test('supervisor: the supervisor, and the team it started drawn below it with its own shape', async () => {
    // The child's task holds a sleep its own members read; escaped so the supervisor's prompt does not.
    const sub =
      '{"topology":"pipeline","members":["codex","copilot"],"task":"the part \\u005b\\u005bcli:sleep:2500\\u005d\\u005d"}';
    const team = await runTeam({
      topology: 'supervisor_tree',
      members: ['claude'],
      task: `Supervise the parser work [[cli:team]] [[cli:subteam:${sub}]]`,
    });
    await page.goto(`${origin}/teams/${team.team_id}`);
    expect(await steps()).toEqual(['supervisor']);
    const child = page.locator('#record .children > li');
    await child.waitFor({ timeout: APPEARS_MS });
    await expect.poll(() => child.locator('.slot.state-running').count(), { timeout: APPEARS_MS }).toBe(1);
    expect(await child.locator('.step > .step-title').allTextContents()).toEqual(['stage 1', 'stage 2']);
    await shot('team-supervisor');
    const childId = (await child.getAttribute('data-team'))!;
    expect(await page.locator('.timeline').textContent()).toContain(`started team ${childId} (pipeline, 2 member(s))`);
    await waitTeam(team.team_id);
    await expect
      .poll(() => page.locator('#record h2').first().textContent(), { timeout: APPEARS_MS })
      .toContain('succeeded');
    await child.locator('h3 a').click();
    expect(await page.locator('#record').textContent()).toContain(`started by team ${team.team_id}`);
    expect(page.url()).toBe(`${origin}/teams/${childId}`);
  });
});
