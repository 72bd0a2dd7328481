// The dashboard in a real browser: Debian's chromium (/usr/bin/chromium; `.ci/run` installs it)
// driven by playwright-core, against `polyspawn serve --http` with the fake CLIs. The page is
// admitted by the token once, then shows agents appear and finish, streams a run as a
// transcript (a command, an edit, a plan, a question answered in place, the answer as Markdown),
// counts a running agent's time, shows a failed agent's error, takes an answer to a question,
// and shows an agent's markup as text. Screenshots go to
// test/browser/output/ (git-ignored); the last one is also copied to /tmp/dashboard.png.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { httpClient, startHttpServer, type HttpTestClient, type HttpTestServer } from '../helpers/http.js';
import { repoRoot } from '../helpers/mcp.js';

vi.setConfig({ testTimeout: 120_000 });

const CHROMIUM = '/usr/bin/chromium';
const OUTPUT = join(repoRoot, 'test', 'browser', 'output');
/** Long enough that only the behaviour under test ends these waits. */
const APPEARS_MS = 30_000;

type Job = { agent_id: string; state: string; text?: string };

let server: HttpTestServer;
let mcp: HttpTestClient;
let browser: Browser;
let page: Page;
let origin: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  mkdirSync(OUTPUT, { recursive: true });
  server = await startHttpServer({ env: { POLYSPAWN_CONCURRENCY: '4' } });
  mcp = await httpClient(server.url, server.token, 'browser-test');
  origin = new URL(server.url).origin;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
});
afterAll(async () => {
  await browser?.close();
  await mcp?.close();
  await server?.stop();
});

const shot = (name: string) => page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });
/** At a laptop's widths nothing makes the page scroll sideways (a wide table scrolls in its own box). */
async function fitsLaptops(name: string) {
  for (const width of [1280, 1024]) {
    await page.setViewportSize({ width, height: 900 });
    expect(
      Number(await page.evaluate('document.documentElement.scrollWidth')),
      `${name} at ${width} px`,
    ).toBeLessThanOrEqual(width);
    await shot(`${name}-${width}`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}
const row = (id: string) => page.locator(`tr[data-agent="${id}"]`).first();

test('without the token the page is refused; with it once, a cookie admits the browser and the token leaves the URL', async () => {
  const refused = await page.goto(`${origin}/`);
  expect(refused!.status()).toBe(401);
  await page.goto(`${origin}/?token=${encodeURIComponent(server.token)}`);
  expect(page.url()).toBe(`${origin}/`);
  await expect.poll(() => page.locator('h2').first().textContent()).toContain('Running and queued');
  const [cookie] = await page.context().cookies();
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  expect(cookie!.value).not.toContain(server.token);
});

test('an agent appears while it runs, then finishes into the history, and its log streams', async () => {
  await page.goto(`${origin}/`);
  // Runs long enough that a page slowed by a loaded machine still sees it running.
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'dashboard sees me [[cli:sleep:10000]]' });
  await row(job.agent_id).waitFor({ timeout: APPEARS_MS });
  await expect.poll(() => row(job.agent_id).textContent(), { timeout: APPEARS_MS }).toContain('running');
  await shot('running');
  await expect
    .poll(() => page.locator(`#history tr[data-agent="${job.agent_id}"]`).textContent(), { timeout: APPEARS_MS })
    .toContain('succeeded');
  await page.click(`a[href="/agents/${job.agent_id}"]`);
  await expect.poll(() => page.locator('#transcript').getAttribute('data-ended'), { timeout: APPEARS_MS }).toBe('true');
  expect(await page.locator('#transcript .message').textContent()).toContain('FAKE codex: dashboard sees me');
  await shot('agent-log');
});

test('a question is answered from the page, and the agent carries on with the answer', async () => {
  await page.goto(`${origin}/`);
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'asks [[cli:ask:Which color should the button be?]]' });
  const form = page.locator(`form[action="/agents/${job.agent_id}/reply"]`);
  await form.waitFor({ timeout: APPEARS_MS });
  expect(await form.textContent()).toContain('Which color should the button be?');
  await shot('question');
  await form.locator('input[name="answer"]').fill('blue, please');
  await form.locator('button').click();
  // A wait returns early with an open question (once); the next one waits for the end.
  let finished: Job | undefined;
  for (let i = 0; i < 3 && !finished; i++) {
    const waited = await mcp.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: 60,
    });
    finished = waited.finished[0];
  }
  expect(finished).toMatchObject({ state: 'succeeded' });
  expect(finished!.text).toContain('ANSWER blue, please');
});

test("an agent's <script> and <img onerror> show as text and never run", async () => {
  const markup = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">';
  const job = await mcp.callOk<Job>('spawn_claude', { prompt: `hostile ${markup} [[cli:sleep:10]]`, wait_s: 60 });
  expect(job.state).toBe('succeeded');
  await page.goto(`${origin}/`);
  await row(job.agent_id).waitFor({ timeout: APPEARS_MS });
  expect(await row(job.agent_id).textContent()).toContain(markup);
  await page.goto(`${origin}/agents/${job.agent_id}`);
  await expect.poll(() => page.locator('#transcript').getAttribute('data-ended'), { timeout: APPEARS_MS }).toBe('true');
  expect(await page.locator('.answer').textContent()).toContain(markup);
  expect(await page.locator('#transcript').textContent()).toContain('<script>');
  expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
  expect(await page.locator('img').count()).toBe(0);
  await shot('hostile');
});

test('a run reads as a transcript: its plan, a command with exit code and output, an edit with its diff, a question answered in place, the answer as Markdown', async () => {
  const job = await mcp.callOk<Job>('spawn_claude', {
    prompt: 'tidy the notes [[cli:steps]] [[cli:ask:Which <b>heading</b> style?]]',
  });
  await page.goto(`${origin}/agents/${job.agent_id}`);
  const transcript = page.locator('#transcript');
  // While the agent waits on its question, the steps before it are there, and the question waits.
  const question = transcript.locator('.question');
  await expect.poll(() => question.locator('form').count(), { timeout: APPEARS_MS }).toBe(1);
  expect(await question.textContent()).toContain('Asked you: Which <b>heading</b> style?');
  expect(await transcript.locator('.plan li').allTextContents()).toEqual([
    '☐ look around (pending)',
    '☐ write the notes (pending)',
  ]);
  const command = transcript.locator('.command');
  expect(await command.locator('summary').textContent()).toMatch(/\$ ls\s+exit 0/);
  expect(await command.locator('pre.output').textContent()).toBe('notes.md\nsrc');
  const edit = transcript.locator('.edit');
  expect(await edit.locator('summary').textContent()).toContain('edited notes.md');
  expect(await edit.locator('.del').allTextContents()).toEqual(['- old line']);
  expect(await edit.locator('.ins').allTextContents()).toEqual(['+ new line']);
  await shot('transcript-question');

  // Answered in place, in the transcript's own form.
  await question.locator('input[name="answer"]').fill('**ATX**, please');
  await Promise.all([page.waitForEvent('load'), question.locator('button').click()]);
  await expect.poll(() => page.locator('#transcript').getAttribute('data-ended'), { timeout: APPEARS_MS }).toBe('true');
  // In the transcript the answer is the text given; the agent's final answer is Markdown, rendered.
  expect(await page.locator('#transcript .question').textContent()).toContain('Answer: **ATX**, please');
  await expect.poll(() => page.locator('.answer strong').textContent(), { timeout: APPEARS_MS }).toBe('ATX');
  await shot('transcript');
  await fitsLaptops('transcript');
});

test("a running agent's elapsed time counts on between the server's events", async () => {
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'counting [[cli:sleep:20000]]' });
  await page.goto(`${origin}/`);
  const cell = row(job.agent_id).locator('td.elapsed');
  await expect.poll(() => cell.getAttribute('data-elapsed'), { timeout: APPEARS_MS }).not.toBeNull();
  const first = await cell.textContent();
  // Nothing changes on the server while the fake sleeps: only the page's script moves the time.
  await expect.poll(() => cell.textContent(), { timeout: APPEARS_MS }).not.toBe(first);
  await mcp.callOk('cancel', { agent_id: job.agent_id });
});

test("a failed agent's page shows its error, not an empty answer", async () => {
  const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'this will fail [[cli:fail]]', wait_s: 60 });
  expect(job.state).toBe('failed');
  await page.goto(`${origin}/agents/${job.agent_id}`);
  const record = page.locator('#record');
  expect(await record.locator('h2').allTextContents()).toEqual(['Error']);
  expect(await record.locator('.error').textContent()).toContain('401 Unauthorized');
  await expect.poll(() => page.locator('#transcript').getAttribute('data-ended'), { timeout: APPEARS_MS }).toBe('true');
  expect(await page.locator('#transcript .step.error').textContent()).toContain('401 Unauthorized');
  await shot('failed');
});

test('the history is newest-ended first, in the same order after a restart', async () => {
  const projectDir = mkdtempSync(join(tmpdir(), 'polyspawn-history-'));
  // A context of its own: a cookie is the host's whatever the port, and would replace the main server's.
  const context = await browser.newContext();
  const historyOf = async (running: HttpTestServer) => {
    const tab = await context.newPage();
    await tab.goto(`${new URL(running.url).origin}/?token=${encodeURIComponent(running.token)}`);
    const rows = tab.locator('#history tr[data-agent]');
    const ids = await rows.evaluateAll((all) => all.map((r) => r.getAttribute('data-agent')));
    await tab.close();
    return ids;
  };
  let first: HttpTestServer | undefined = await startHttpServer({ projectDir });
  let second: HttpTestServer | undefined;
  try {
    const client = await first.connect('history');
    // Submitted in one order, ended in another.
    const ids: string[] = [];
    for (const ms of [1500, 10, 700])
      ids.push(
        (await client.callOk<Job>('spawn_codex', { prompt: `ends after ${ms} ms [[cli:sleep:${ms}]]` })).agent_id,
      );
    let pending = ids;
    while (pending.length) {
      const waited = await client.callOk<{ pending?: { agent_id: string }[] }>('wait_for_agents', {
        agent_ids: pending,
        timeout_s: 60,
      });
      pending = (waited.pending ?? []).map((j) => j.agent_id);
    }
    const endedAt = new Map<string, string>();
    for (const id of ids)
      endedAt.set(id, (await client.callOk<{ ended_at: string }>('result', { agent_id: id })).ended_at);
    const newestEnded = [...ids].sort((a, b) => endedAt.get(b)!.localeCompare(endedAt.get(a)!));
    const before = await historyOf(first);
    await first.stop();
    first = undefined;
    second = await startHttpServer({ projectDir });
    const after = await historyOf(second);
    expect(before).toEqual(newestEnded);
    expect(after).toEqual(before);
  } finally {
    await context.close();
    await first?.stop();
    await second?.stop();
    rmSync(projectDir, { recursive: true, force: true });
  }
});

test('a team shows with its members, live, then its answer; its task is text', async () => {
  await page.goto(`${origin}/`);
  const team = await mcp.callOk<{ team_id: string }>('run_team', {
    topology: 'pipeline',
    members: ['codex', 'claude'],
    task: 'draft then polish <b>bold</b> [[cli:sleep:1500]]',
  });
  const article = page.locator(`article[data-team="${team.team_id}"]`);
  await article.waitFor({ timeout: APPEARS_MS });
  await expect.poll(() => article.locator('.slot[data-agent]').count(), { timeout: APPEARS_MS }).toBe(2);
  await expect.poll(() => article.locator('h3').textContent(), { timeout: APPEARS_MS }).toContain('succeeded');
  expect(await article.locator('.task').textContent()).toContain('<b>bold</b>');
  expect(await article.locator('b').count()).toBe(0);
  expect(await article.locator('.shape').textContent()).toMatch(
    /stage 1\s*codex\s*succeeded[\s\S]*stage 2\s*claude\s*succeeded/,
  );
  expect(await article.locator('pre.answer').textContent()).toContain('FAKE claude: draft then polish');
  await shot('team');
});

test('the overview with running and finished agents and the cost chart (the screenshot for the note)', async () => {
  await mcp.callOk<Job>('spawn_copilot', { prompt: 'still working on the refactor [[cli:hang]]' });
  await mcp.callOk<Job>('spawn_claude', {
    prompt: 'review the parser [[cli:usage:1200:300]] [[cli:sleep:10]]',
    wait_s: 60,
  });
  await page.goto(`${origin}/`);
  await expect.poll(() => page.locator('#active tr[data-agent]').count(), { timeout: APPEARS_MS }).toBeGreaterThan(0);
  await shot('overview');
  await fitsLaptops('overview');
  copyFileSync(join(OUTPUT, 'overview.png'), '/tmp/dashboard.png');
});
