// The dashboard the shared server serves beside MCP: `/` (the agents, history, cost), an agent's
// page with its log streaming live, the answer box for its questions. Admission: the project's
// token once, in the URL `polyspawn dashboard` prints (`/?token=...`), traded at once for an
// HttpOnly, SameSite=Strict cookie that holds a secret of this server process only, and a
// redirect that takes the token out of the address bar and history. The listener has checked
// Host and Origin already, so a form posted from another site never gets here. Every form (an
// answer; integrate, discard and cancel from an agent's review; cancel of a team) is a POST
// under that same admission; a GET changes nothing.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody } from '../http/body.js';
import { cutWhenStalled } from '../http/stalled.js';
import type { App } from '../../app.js';
import { openQuestions } from '../../jobs/conversation.js';
import { isFinished, type JobRecord } from '../../jobs/table.js';
import { TEAM_ID, type TeamRecord } from '../../jobs/teams/record.js';
import { branchDiff, reviewedBranch } from '../../jobs/worktree/diff.js';
import { integrate, INTEGRATE_MODES, type IntegrateMode } from '../../jobs/worktree/integrate.js';
import { InputError } from '../../lib/errors.js';
import { runFolder } from '../../lib/run-folder.js';
import { tokenMatches } from '../../lib/daemon-file.js';
import { readLogPage } from '../../jobs/process/log-page.js';
import { esc } from './html.js';
import { loadRenderers } from './markdown.js';
import { costSection } from './money.js';
import {
  activeSection,
  agentPage,
  historySection,
  overviewPage,
  page,
  recordSection,
  SCRIPT_SOURCE,
} from './render.js';
import { diffSection, integrationSection, reviewSection } from './review.js';
import { teamSection, teamsSection } from './team-view.js';
import { TranscriptStream, type RenderedStep } from './transcript.js';

const COOKIE = 'polyspawn_dashboard';
const ID = /^[a-z0-9]{1,64}$/;
/** How often a streaming log is read again while its agent runs. */
const LOG_POLL_MS = 300;
const LOG_CHUNK_BYTES = 64 * 1024;
const MAX_FORM_BYTES = 64 * 1024;
/** What an event stream may leave unread before it is cut off: a few chunks of a log, as JSON. */
const MAX_UNREAD_BYTES = 4 * 1024 * 1024;
const STALLED_MS = 60_000;

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): true {
  res.writeHead(status, {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    // No script but our own inline one (by its hash: no handler in an attribute, none injected); no frames of this page elsewhere.
    'Content-Security-Policy': `default-src 'none'; script-src ${SCRIPT_SOURCE}; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'`,
    'X-Content-Type-Options': 'nosniff',
    // Not no-referrer: with it a browser sends "Origin: null" on a form post, which the listener refuses.
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(body);
  return true;
}

const redirect = (res: ServerResponse, to: string, headers: Record<string, string> = {}) =>
  send(res, 303, '', { Location: to, ...headers });

function cookieOf(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === COOKIE) return value.join('=');
  }
  return undefined;
}

/**
 * Server-sent events: the headers, then `event(name, data)` until the client goes away. event()
 * says whether the client keeps up (res.write's answer); one that leaves more than
 * MAX_UNREAD_BYTES unread, or takes nothing for STALLED_MS, is cut off (its browser reconnects),
 * so a stream nobody reads cannot grow the server nor hold it for good.
 */
function eventStream(req: IncomingMessage, res: ServerResponse) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
  res.write(': polyspawn\n\n');
  cutWhenStalled(res, STALLED_MS, () => {});
  return {
    event(name: string, data: unknown): boolean {
      if (res.destroyed) return false;
      const ready = res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
      if (res.writableLength > MAX_UNREAD_BYTES) res.destroy();
      return ready;
    },
    onClose: (fn: () => void) => void req.once('close', fn),
  };
}

/** Resolves once the response takes more again, or has closed. */
const drained = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    if (res.destroyed) return resolve();
    const done = () => {
      res.off('drain', done).off('close', done);
      resolve();
    };
    res.on('drain', done).on('close', done);
  });

/** The job's backend reads its own output as transcript entries, or undefined (an API backend: raw text). */
function transcriptOf(app: App, job: JobRecord): TranscriptStream | undefined {
  const backend = app.backends.find((b) => b.name === job.backend);
  if (backend?.kind !== 'cli' || !backend.transcript) return undefined;
  const parse = backend.transcript.bind(backend);
  const conversation = () => app.jobs.get(job.id)?.conversation ?? [];
  return new TranscriptStream(parse, {
    jobId: job.id,
    answerOf: (messageId) => {
      const answer = conversation().find((e) => e.kind === 'answer' && e.messageId === messageId);
      return answer ? app.secrets.text(answer.text) : undefined;
    },
    // The step's question is read from the (redacted) log: it is compared redacted.
    openQuestion: (text) => openQuestions(conversation()).find((q) => app.secrets.text(q.text) === text)?.messageId,
  });
}

/**
 * An agent's log, a chunk at a time at the reader's pace: the next chunk is read once the last
 * one is taken (drain), and the event loop runs between chunks, so a log of any size read by a
 * slow browser costs a chunk of memory and never holds up the server. Where the backend reads
 * its output, each chunk goes out as rendered transcript steps, else as text.
 */
function streamLog(app: App, req: IncomingMessage, res: ServerResponse, job: JobRecord): void {
  const events = eventStream(req, res);
  const transcript = transcriptOf(app, job);
  /** Sends what a chunk holds; false when the client has not taken it all yet. */
  const send = (text: string): boolean => {
    if (!transcript) return events.event('chunk', text);
    return sendSteps(transcript.push(text));
  };
  const sendSteps = (steps: RenderedStep[]) => steps.map((step) => events.event('step', step)).every(Boolean);
  const file = runFolder(app.config.stateDir, job.id).stdout;
  let closed = false;
  let wake: (() => void) | undefined;
  events.onClose(() => {
    closed = true;
    wake?.();
  });
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const state = () => app.jobs.get(job.id)?.state;
  const pump = async () => {
    let offset = 0;
    while (!closed) {
      // Read after looking at the state: once it has ended, what the log holds now is all of it.
      const ended = isFinished(state() ?? 'interrupted');
      // The logs tool's reading: whole lines and characters, secrets redacted.
      const page = readLogPage(file, { offset, limit: LOG_CHUNK_BYTES }, app.secrets);
      // Only forward: a log replaced by something unreadable, or cut shorter, has nothing new.
      if (page.next_offset > offset) {
        offset = page.next_offset;
        if (page.text && !send(page.text)) await drained(res);
        await new Promise((resolve) => setImmediate(resolve));
      } else if (ended) {
        if (transcript) sendSteps(transcript.end());
        events.event('end', state() ?? 'unknown');
        return void res.end();
      } else {
        if (transcript && !sendSteps(transcript.refresh())) await drained(res);
        await pause(LOG_POLL_MS);
      }
    }
  };
  pump().catch((error: unknown) => {
    res.destroy(error instanceof Error ? error : new Error(String(error)));
  });
}

/** The event stream the pages refresh by: the id of each job or team that changed. */
function streamChanges(app: App, req: IncomingMessage, res: ServerResponse): void {
  const events = eventStream(req, res);
  const offChange = app.jobs.onChange((job) => events.event('change', job.id));
  const offQuestion = app.jobs.onQuestion((job) => events.event('change', job.id));
  const offTeam = app.teams.onChange((team) => events.event('change', team.id));
  events.onClose(() => {
    offChange();
    offQuestion();
    offTeam();
  });
}

/** A form's fields, or undefined once a body too large was refused (413). */
async function readForm(req: IncomingMessage, res: ServerResponse): Promise<URLSearchParams | undefined> {
  const body = await readBody(req, MAX_FORM_BYTES);
  if (body !== 'too-large') return new URLSearchParams(body.toString('utf8'));
  send(res, 413, page('too large', '<p>What the form sent is too long.</p>'), { Connection: 'close' });
  return undefined;
}

/** The answer form's post: the answer given to the job's question, then back to its page. */
async function reply(app: App, req: IncomingMessage, res: ServerResponse, job: JobRecord): Promise<boolean> {
  const form = await readForm(req, res);
  if (!form) return true;
  try {
    app.jobs.reply(job.id, form.get('message_id') ?? '', form.get('answer') ?? '', 'dashboard');
  } catch (error) {
    return send(res, 400, page('not answered', `<p>${esc((error as Error).message)}</p><p><a href="/">back</a></p>`));
  }
  return redirect(res, `/agents/${job.id}`);
}

/**
 * An agent's review: its live part, and on the page its branch's diff (read once: git runs for
 * a page, not for every change a refresh follows); or why there is nothing to review.
 */
async function review(app: App, job: JobRecord, withDiff: boolean): Promise<string> {
  try {
    if (!withDiff) return (await reviewedBranch(app, job.id), reviewSection(app, job, undefined));
    const diff = await branchDiff(app, job.id);
    return reviewSection(app, job, undefined) + diffSection(diff);
  } catch (error) {
    return reviewSection(app, job, error instanceof Error ? error : new Error(String(error)));
  }
}

/**
 * A review's integrate button: the `integrate` tool's use case, so its refusals (a dirty checkout,
 * a conflict, a branch gone) are the tool's own words; what it did is shown, never redone on a reload.
 */
async function integrateFromPage(app: App, req: IncomingMessage, res: ServerResponse, job: JobRecord) {
  const form = await readForm(req, res);
  if (!form) return true;
  const how = form.get('how') ?? '';
  const back = `<p><a href="/agents/${esc(job.id)}/review">back to the review</a></p>`;
  if (!(INTEGRATE_MODES as readonly string[]).includes(how))
    return send(
      res,
      400,
      page(
        'not integrated',
        `<p class="error">how must be one of ${INTEGRATE_MODES.join(', ')}, not "${esc(how)}".</p>${back}`,
      ),
    );
  try {
    const done = await integrate(app, job.id, how as IntegrateMode);
    return send(res, 200, page(`${how} of agent ${job.id}`, integrationSection(done)));
  } catch (error) {
    const status = error instanceof InputError ? 409 : 500;
    return send(res, status, page('not integrated', `<p class="error">${esc((error as Error).message)}</p>${back}`));
  }
}

/** A team's page and its fragment, and its cancel button. */
async function teamRoute(app: App, req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
  const [, , id = '', ...rest] = path.split('/');
  const team: TeamRecord | undefined = TEAM_ID.test(id) ? app.teams.get(id) : undefined;
  if (!team) return send(res, 404, page('not found', `<p>No team "${esc(id)}" here.</p>`));
  const sub = rest.join('/');
  if (req.method === 'GET' && sub === '') return send(res, 200, page(`team ${team.id}`, teamSection(app, team)));
  if (req.method === 'GET' && sub === 'fragment/record') return send(res, 200, teamSection(app, team));
  if (req.method === 'POST' && sub === 'cancel') {
    if (!(await readForm(req, res))) return true;
    await app.teams.cancel(team.id);
    return redirect(res, `/teams/${team.id}`);
  }
  return send(res, 404, page('not found', '<p>Nothing here.</p>'));
}

export function dashboard(app: App, token: string): Handler {
  const secret = randomBytes(32).toString('base64url');
  const admitted = (req: IncomingMessage) => {
    const given = cookieOf(req);
    return (
      given !== undefined && given.length === secret.length && timingSafeEqual(Buffer.from(given), Buffer.from(secret))
    );
  };

  const findJob = (id: string): JobRecord | undefined => (ID.test(id) ? app.jobs.get(id) : undefined);

  return async (req, res) => {
    await loadRenderers();
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const path = url.pathname;
    if (req.method === 'GET' && path === '/' && url.searchParams.has('token')) {
      if (!tokenMatches(token, url.searchParams.get('token') ?? ''))
        return send(res, 401, page('not admitted', "<p>That token is not this project's.</p>"));
      return redirect(res, '/', { 'Set-Cookie': `${COOKIE}=${secret}; HttpOnly; SameSite=Strict; Path=/` });
    }
    const known =
      path === '/' ||
      path === '/events' ||
      path.startsWith('/fragment/') ||
      path.startsWith('/agents/') ||
      path.startsWith('/teams/');
    if (!known) return false;
    if (!admitted(req)) {
      return send(
        res,
        401,
        page(
          'not admitted',
          '<p>Open the address <code>polyspawn dashboard</code> prints (it holds the token once; this browser then keeps a cookie until the server restarts).</p>',
        ),
      );
    }
    const filter = {
      backend: url.searchParams.get('backend') || undefined,
      state: url.searchParams.get('state') || undefined,
      text: url.searchParams.get('text') || undefined,
    };
    if (req.method === 'GET' && path === '/') return send(res, 200, overviewPage(app, filter));
    if (req.method === 'GET' && path === '/events') return (streamChanges(app, req, res), true);
    if (req.method === 'GET' && path === '/fragment/active') return send(res, 200, activeSection(app));
    if (req.method === 'GET' && path === '/fragment/history') return send(res, 200, historySection(app, filter));
    if (req.method === 'GET' && path === '/fragment/cost') return send(res, 200, costSection(app));
    if (req.method === 'GET' && path === '/fragment/teams') return send(res, 200, teamsSection(app));
    if (path.startsWith('/teams/')) return teamRoute(app, req, res, path);
    const [, , id = '', rest = '', more = ''] = path.split('/');
    const job = path.startsWith('/agents/') ? findJob(id) : undefined;
    if (!job) return send(res, 404, page('not found', `<p>No agent "${esc(id)}" here.</p>`));
    if (req.method === 'GET' && rest === '')
      return send(res, 200, agentPage(app, job, transcriptOf(app, job) !== undefined));
    if (req.method === 'GET' && rest === 'log') return (streamLog(app, req, res, job), true);
    if (req.method === 'GET' && rest === 'fragment' && more === 'record')
      return send(res, 200, recordSection(app, job));
    if (req.method === 'GET' && rest === 'fragment') return send(res, 200, '');
    if (req.method === 'POST' && rest === 'reply') return reply(app, req, res, job);
    const sub = path.split('/').slice(3).join('/');
    if (req.method === 'GET' && sub === 'review')
      return send(res, 200, page(`review of ${job.id}`, await review(app, job, true)));
    if (req.method === 'GET' && sub === 'review/fragment/record') return send(res, 200, await review(app, job, false));
    if (req.method === 'POST' && sub === 'integrate') return integrateFromPage(app, req, res, job);
    if (req.method === 'POST' && sub === 'cancel') {
      if (!(await readForm(req, res))) return true;
      await app.jobs.cancel(job.id);
      return redirect(res, `/agents/${job.id}`);
    }
    return send(res, 404, page('not found', '<p>Nothing here.</p>'));
  };
}
