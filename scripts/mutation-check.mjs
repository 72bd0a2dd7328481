// The mutation check: puts deliberate bugs into the core behaviours, one at a time, and checks
// that the tests named for each one fail. Each mutation runs in a scratch copy of the checkout
// (its tracked and untracked files, uncommitted changes included, node_modules linked), which
// is built (`npm run build`) and tested there: the checkout itself is never touched.
//
//   npm run test:mutation                  every mutation (113 of them, about 35 minutes on 2 cores)
//   npm run test:mutation -- wait lock     only the mutations whose name contains a word
//   npm run test:mutation -- --no-baseline skip the first run of the tests unmutated
//   node scripts/mutation-check.mjs --anchors   only check that every `find` still matches once
//
// A mutation's `find` must occur exactly once in its file: when the code changes so that it no
// longer does, the check stops and says so; update the mutation with the code. A new core
// behaviour gets a mutation here, with the fewest test files that should catch it.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Ends the job's leader alone (SIGTERM, then SIGKILL after the grace period), never its group.
const leaderOnly = (why) =>
  `{ if (!stopping) { end = '${why}'; stopping = (async () => {
      const leader = (s: NodeJS.Signals | 0) => { try { return process.kill(pgid!, s); } catch { return false; } };
      leader('SIGTERM');
      const deadline = Date.now() + spec.graceMs;
      while (leader(0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      leader('SIGKILL');
    })(); } }`;

const RUNNER = 'src/jobs/process/runner.ts';
const SANDBOX = 'src/jobs/process/sandbox.ts';
const MUTATIONS = [
  {
    name: 'cancel signals the leader only',
    file: RUNNER,
    find: `const onAbort = () => stop('cancelled');`,
    replace: `const onAbort = () => ${leaderOnly('cancelled')};`,
    tests: ['test/integration/runner.test.ts'],
  },
  {
    name: 'time-out signals the leader only',
    file: RUNNER,
    find: `setTimeout(() => stop('timeout'), spec.timeoutMs)`,
    replace: `setTimeout(() => ${leaderOnly('timeout')}, spec.timeoutMs)`,
    tests: ['test/integration/runner.test.ts', 'test/e2e/tools.test.ts'],
  },
  {
    name: 'what a leader that exits leaves is not ended',
    file: RUNNER,
    find: `if (pgid !== undefined && !stopping && runAlive(pgid, mark)) stopping = terminateGroup(pgid, spec.graceMs, mark);`,
    replace: ``,
    tests: ['test/integration/runner.test.ts'],
  },
  {
    name: 'what a job started in a session of its own (setsid) is not ended',
    file: RUNNER,
    find: `const strays = process.platform === 'linux' ? (liveRunProcesses(pgid ?? NO_GROUP, mark, fs)?.strays ?? []) : [];`,
    replace: `const strays: number[] = [];`,
    tests: ['test/integration/runner.test.ts'],
  },
  {
    name: 'a run past its max_turns is not stopped',
    file: 'src/jobs/execute.ts',
    find: `if (hit) overBudget.abort();`,
    replace: ``,
    tests: ['test/e2e/budgets.test.ts'],
  },
  {
    name: 'max_turns lets one turn too many begin',
    file: 'src/jobs/budget.ts',
    find: `++turns <= maxTurns`,
    replace: `++turns <= maxTurns + 1`,
    tests: ['test/unit/budget.test.ts'],
  },
  {
    name: 'configured keys are not redacted',
    file: 'src/lib/redact.ts',
    find: `if (value.length >= MIN_VALUE_LENGTH) this.values.add(value);`,
    replace: `if (value.length < 0) this.values.add(value);`,
    tests: ['test/unit/iac-redact.test.ts'],
  },
  {
    name: "a run's outcome leaves the executor guard unredacted",
    file: 'src/jobs/recorder.ts',
    find: `return { ...result, outcome: redactor.deep(result.outcome) };`,
    replace: `return result;`,
    tests: ['test/unit/iac-redact.test.ts', 'test/e2e/iac-secrets.test.ts'],
  },
  {
    name: "a run's folder is left unredacted when it ends",
    file: 'src/jobs/recorder.ts',
    find: `await scrubDir(runDir(job.id), redactor).catch(`,
    replace: `await Promise.resolve(void scrubDir).catch(`,
    tests: ['test/unit/iac-redact.test.ts', 'test/e2e/iac-secrets.test.ts'],
  },
  {
    name: 'keys added to api_keys.json after the start are not redacted',
    file: 'src/config/keys.ts',
    find: `secrets?.addValues(stringValues(read.values));`,
    replace: ``,
    tests: ['test/e2e/iac-secrets.test.ts'],
  },
  {
    name: 'a job runs before its record is saved',
    file: 'src/jobs/recorder.ts',
    find: `if (this.unsaved.has(job.id)) this.saveNow(job);`,
    replace: ``,
    tests: ['test/unit/recorder.test.ts'],
  },
  {
    name: 'IAC.md written without the lock',
    file: 'iac/writer.ts',
    find: `release = await lock(`,
    replace: `release = await (async (..._: Parameters<typeof lock>) => async () => undefined)(`,
    tests: ['test/integration/store.test.ts', 'test/e2e/iac-multi.test.ts'],
  },
  {
    name: 'IAC.md written in place, not atomically',
    file: 'iac/writer.ts',
    find: `renameSync(temp, file);`,
    replace: `(await import('node:fs')).writeFileSync(file, document), rmSync(temp, { force: true });`,
    tests: ['test/integration/store.test.ts', 'test/e2e/iac-multi.test.ts'],
  },
  {
    name: "dead servers' jobs are not marked interrupted",
    file: 'iac/store.ts',
    find: `live = pid !== undefined && !unproven && sameProcessAlive(pid, start);`,
    replace: `live = true;`,
    tests: ['test/integration/store.test.ts'],
  },
  {
    name: "dead servers' process groups are not ended",
    file: 'iac/runtime.ts',
    find: `work.push(endGroup(leaderIsOurs ? group.pgid : undefined, graceMs, mark));`,
    replace: `void endGroup;`,
    tests: ['test/integration/store.test.ts', 'test/reliability/sigkill-restart.test.ts'],
  },
  {
    name: 'a wait is not woken by a job finishing',
    file: 'src/jobs/table.ts',
    find: `if (isFinished(record.state)) records.set(record.id, record);\n          wake();`,
    replace: `if (isFinished(record.state)) records.set(record.id, record);`,
    tests: ['test/unit/jobs.test.ts', 'test/integration/store.test.ts'],
  },
  {
    name: 'a wait leaves its listener behind',
    file: 'src/lib/wait.ts',
    find: `      unsubscribe();\n`,
    replace: ``,
    tests: ['test/unit/wait.test.ts'],
  },
  {
    name: 'a wait that has ended is woken again',
    file: 'src/lib/wait.ts',
    find: `if (settled) return;`,
    replace: ``,
    tests: ['test/unit/wait.test.ts'],
  },
  {
    name: 'a state change is not sent to the state listeners',
    file: 'src/jobs/table.ts',
    find: `this.events.emit('state', record);`,
    replace: ``,
    tests: ['test/unit/teams.test.ts', 'test/unit/agent-sessions.test.ts'],
  },
  {
    name: 'a process group becoming known is sent as a state change',
    file: 'src/jobs/table.ts',
    find: `record.processGroup = group;\n          this.changed(record);`,
    replace: `record.processGroup = group;\n          this.stateChanged(record);`,
    tests: ['test/e2e/resources.test.ts'],
  },
  {
    name: 'the concurrency limit is ignored',
    file: 'src/jobs/table.ts',
    find: `new PQueue({ concurrency: options.concurrency })`,
    replace: `new PQueue({ concurrency: Infinity })`,
    tests: ['test/unit/jobs.test.ts'],
  },
  {
    name: 'resume of an agent_id is not turned into its session id',
    file: 'src/jobs/spawn.ts',
    find: `sessionId = earlier.outcome.sessionId;`,
    replace: ``,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: 'no retry when the answer does not match the output schema',
    file: 'src/jobs/structured-output.ts',
    find: `const second = await execute(retry, control);`,
    replace: `const second = first;`,
    tests: ['test/unit/structured-output.test.ts'],
  },
  {
    name: 'resume passes any string to the CLI',
    file: 'src/jobs/spawn.ts',
    find: `if (!SESSION_ID.test(sessionId))`,
    replace: `if (!SESSION_ID.test(sessionId) && sessionId === '')`,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: "a project's config sets bin and base_url",
    file: 'src/config/config.ts',
    find: `delete keptSettings[key];`,
    replace: ``,
    tests: ['test/unit/config.test.ts'],
  },
  {
    name: 'a foreign IAC.md is overwritten',
    file: 'iac/writer.ts',
    find: `if (!mayWriteIac(file))`,
    replace: `if (!mayWriteIac(file) && file === '')`,
    tests: ['test/integration/store.test.ts'],
  },
  {
    name: 'a cwd outside the project is taken',
    file: 'src/jobs/spawn.ts',
    find: `if (!config.allowCwdOutsideProject && !isInside(projectDir, dir))`,
    replace: `if (!config.allowCwdOutsideProject && !isInside(projectDir, dir) && dir === '')`,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: 'define_agent and remove_agent follow links',
    file: 'src/mcp/tools/agents.ts',
    find: `if (link)`,
    replace: `if (link === '')`,
    tests: ['test/e2e/agents.test.ts'],
  },
  {
    name: 'a question sends no resources/updated',
    file: 'src/mcp/resources.ts',
    find: `const offQuestion = app.jobs.onQuestion((job) => updated(job.id));`,
    replace: `const offQuestion = () => undefined;`,
    tests: ['test/e2e/resources.test.ts'],
  },
  {
    name: "a definition's ask_parent: false is ignored",
    file: 'src/jobs/spawn.ts',
    find: `definition?.askParent === false || request.askParent === false`,
    replace: `request.askParent === false`,
    tests: ['test/e2e/ask-parent.test.ts'],
  },
  {
    name: 'open questions are shown unredacted',
    file: 'src/jobs/result.ts',
    find: `ctx.secrets.deep({
      message_id: q.messageId,`,
    replace: `({
      message_id: q.messageId,`,
    tests: ['test/e2e/ask-parent.test.ts'],
  },
  {
    name: 'an empty POLYSPAWN_DEPTH counts as not nested',
    file: 'src/jobs/agents/nesting.ts',
    find: `if (raw === undefined) return { depth: 0, canSpawn: true };`,
    replace: `if (raw === undefined || raw.trim() === '') return { depth: 0, canSpawn: true };`,
    tests: ['test/unit/nesting.test.ts'],
  },
  {
    name: 'a polyspawn started with a cleared environment forgets it is nested',
    file: 'src/app.ts',
    find: `nestingFrom(env, ancestorVariables(NESTING_ENV))`,
    replace: `nestingFrom(env, ancestorVariables(NESTING_ENV) && {})`,
    tests: ['test/e2e/agents.test.ts'],
  },
  {
    name: "an output schema's patterns run on the backtracking RegExp",
    file: 'src/jobs/structured-output.ts',
    find: `code: { regExp: linearRegExp() } };`,
    replace: `code: {} }; void linearRegExp;`,
    tests: ['test/unit/structured-output.test.ts'],
  },
  {
    name: 'CLI agents inherit every secret of the server',
    file: 'src/jobs/execute.ts',
    find: `(!apiKeyNames.includes(name) && !SECRET_NAME.test(name))`,
    replace: `(apiKeyNames.length >= 0 || !SECRET_NAME.test(name))`,
    tests: ['test/e2e/child-env.test.ts'],
  },
  {
    name: "an agent's definition passes the shared server's token on",
    file: 'src/jobs/execute.ts',
    find: `name !== TOKEN_ENV &&`,
    replace: ``,
    tests: ['test/e2e/sandbox.test.ts'],
  },
  {
    name: 'the server follows a link an agent left in its run folder',
    file: 'src/lib/fs.ts',
    find: `rmSync(path, { force: true });
  writeFileSync(path, data, { mode: PRIVATE_FILE, flag: 'wx' });`,
    replace: `writeFileSync(path, data, { mode: PRIVATE_FILE });`,
    tests: ['test/e2e/sandbox.test.ts', 'test/integration/store-damaged.test.ts'],
  },
  {
    name: 'a sandbox without network keeps the network',
    file: SANDBOX,
    find: `if (!run.sandbox.network) args.push('--unshare-net');`,
    replace: ``,
    tests: ['test/e2e/sandbox.test.ts'],
  },
  {
    name: 'a sandbox shows the rest of the home folder',
    file: SANDBOX,
    find: `if (home && home !== sep) args.push('--tmpfs', home);`,
    replace: ``,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a sandbox run as root keeps its capabilities',
    file: SANDBOX,
    find: `args.push('--cap-drop', 'ALL');`,
    replace: ``,
    tests: ['test/e2e/sandbox.test.ts'],
  },
  {
    name: 'a sandbox shows the run store',
    file: SANDBOX,
    find: `const hidden = run.hidden.flatMap((path) => realpathOrUndefined(path) ?? []);`,
    replace: `const hidden: string[] = [];`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: "a sandbox lets the agent write the repository's .git",
    file: SANDBOX,
    find: `...wanted.flatMap((bind) => (bind.as === 'write' ? gitBinds(bind) : []))`,
    replace: `...wanted.flatMap(() => [])`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a sandbox binds the folder that holds a standalone CLI',
    file: 'backends/sandbox-paths.ts',
    find: `return realExecutable;`,
    replace: `return dirname(dirname(realExecutable));`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a sandbox without network starts a CLI that cannot reach its model API',
    file: SANDBOX,
    find: `if (!run.sandbox.network) refuseWithoutModelApi(run);`,
    replace: ``,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a sandbox binds by path what another agent can swap for a link',
    file: SANDBOX,
    find: `const pinned = bindsByFd(bwrap) ? pin(binds) : undefined;`,
    replace: `const pinned = bindsByFd(bwrap) && false ? pin(binds) : undefined;`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: "a sandbox's container outlives its cancel",
    file: SANDBOX,
    find: `stop: () => engineCommand(client.file, [...client.args, ...removeArgs(engine, run.container)], run.env)`,
    replace: `stop: undefined`,
    tests: ['test/e2e/sandbox.test.ts', 'test/e2e/containers.test.ts'],
  },
  {
    name: "a project's config sets the sandbox",
    file: 'src/config/config.ts',
    find: `'bin', 'base_url', 'env', 'sandbox'`,
    replace: `'bin', 'base_url', 'env'`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a definition turns off the sandbox the user configured',
    file: 'src/config/sandbox.ts',
    find: `if (mode === 'none' && configured.mode !== 'none') {`,
    replace: `if (mode === 'none' && configured.mode !== 'none' && where.backend === '') {`,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: "a library's console.log reaches stdout",
    file: 'src/mcp/serve.ts',
    find: `keepConsoleOffStdout();`,
    replace: ``,
    tests: ['test/reliability/stdout.test.ts'],
  },
  {
    name: 'an answer past the limit is recorded through a door without a schema',
    file: 'src/jobs/table.ts',
    find: `    checkLength('the answer', answer, CONVERSATION_LIMITS.answerChars);`,
    replace: ``,
    tests: ['test/unit/conversation.test.ts'],
  },
  {
    name: 'the dashboard reads a log on without waiting for a slow reader',
    file: 'src/mcp/dashboard/dashboard.ts',
    find: `if (page.text && !send(page.text)) await drained(res);`,
    replace: `if (page.text) send(page.text);`,
    tests: ['test/e2e/http-load.test.ts'],
  },
  {
    name: 'a link in place of a log, a record or a prompt file is followed',
    file: 'src/lib/fs.ts',
    find: `const OPEN_REGULAR = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;`,
    replace: `const OPEN_REGULAR = constants.O_RDONLY | constants.O_NONBLOCK;`,
    tests: [
      'test/unit/log-reader.test.ts',
      'test/integration/store-damaged.test.ts',
      'test/integration/runner.test.ts',
    ],
  },
  {
    name: 'a busy session is ended to make room for a new one',
    file: 'src/mcp/http/sessions.ts',
    find: `if (t.sessionId === undefined || t.unanswered.size > 0) continue;`,
    replace: `if (t.sessionId === undefined) continue;`,
    tests: ['test/integration/http-listener.test.ts'],
  },
  {
    name: "a session's events are kept past its byte bound",
    file: 'src/mcp/http/event-store.ts',
    find: `while (this.bytes + bytes > this.budget.limits.sessionBytes && this.oldestSeq() !== undefined) this.dropOldest();`,
    replace: ``,
    tests: ['test/unit/event-store.test.ts'],
  },
  {
    name: 'two members can claim one task',
    file: 'src/jobs/teams/topologies/task-list.ts',
    find: `      if (task.status !== 'open')`,
    replace: `      if ((task.status as string) === 'never')`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a topology takes another topology's option",
    file: 'src/jobs/teams/options.ts',
    find: `if (!takenBy.includes(topology.name)) misplaced ??=`,
    replace: `if (takenBy.length === 0) misplaced ??=`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: 'a member an option names is not checked before the team starts',
    file: 'src/jobs/teams/options.ts',
    find: `return [...new Set([...spec.members, ...named])];`,
    replace: `return [...new Set(spec.members)];`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: 'a team starts members past its budget',
    file: 'src/jobs/teams/table.ts',
    find: `if (spent + committed < max) continue;`,
    replace: `if (spent + committed < max || max > 0) continue;`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a queued member starts without the job table's start guard",
    file: 'src/jobs/table.ts',
    find: `if (refusal) return this.endUnstarted(record, 'cancelled', \`not started: \${refusal}\`);`,
    replace: `void refusal;`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a supervisor's child team widens its parent's limits",
    file: 'src/jobs/teams/table.ts',
    find: `const spec = parent ? childSpec(parent.record.spec, asked) : asked;`,
    replace: `const spec = asked;`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a team that ends leaves its supervisor's teams running",
    file: 'src/jobs/teams/table.ts',
    find: `for (const child of record.children ?? []) await this.cancel(child);`,
    replace: ``,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: 'allowed_callers is not checked in the spawn use case',
    file: 'src/jobs/spawn.ts',
    find: `if (definition) checkCaller(request.label, definition, request.caller);`,
    replace: ``,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: "a crashed team's members read back as running",
    file: 'iac/teams.ts',
    find: `for (const member of team.members) if (!isFinished(member.state)) member.state = 'interrupted';`,
    replace: ``,
    tests: ['test/e2e/teams.test.ts'],
  },
  {
    name: 'cancelling a team leaves its members running',
    file: 'src/jobs/teams/table.ts',
    find: `    await run.cancelMembers();`,
    replace: `    await Promise.resolve();`,
    tests: ['test/e2e/teams.test.ts'],
  },
  {
    name: 'an isolated agent runs in the checkout, not its worktree',
    file: 'src/jobs/worktree/worktree.ts',
    find: `let result = await execute({ ...job, cwd: wt.cwd }, control);`,
    replace: `let result = await execute(job, control);`,
    tests: ['test/integration/worktree.test.ts'],
  },
  {
    name: "a remote engine's branch is taken whatever refs its bundle holds",
    file: 'src/jobs/worktree/engine-branch.ts',
    find: `if (!head || head[2] !== wanted)`,
    replace: `if (!head)`,
    tests: ['test/integration/engine-branch.test.ts'],
  },
  {
    name: 'a merge that conflicts is left half-done',
    file: 'src/jobs/worktree/integrate.ts',
    find: `if (marker.some((name) => existsSync(join(repo.gitDir, name)))) await gitOk(repo, [op, '--abort']);`,
    replace: ``,
    tests: ['test/integration/worktree.test.ts'],
  },
  {
    name: "polyspawn's git runs the filters a repository's config defines",
    file: 'src/jobs/worktree/git.ts',
    find: `return run(place.workTree, place, [...pinned, ...args], neutralized(drivers));`,
    replace: `return run(place.workTree, place, [...pinned, ...args]);`,
    tests: ['test/integration/worktree-hostile.test.ts'],
  },
  {
    name: "polyspawn's git follows a worktree's .git file",
    file: 'src/jobs/worktree/git.ts',
    find: `const pinned = [\`--git-dir=\${place.gitDir}\`, \`--work-tree=\${place.workTree}\`];`,
    replace: `const pinned: string[] = [];`,
    tests: ['test/integration/worktree-hostile.test.ts'],
  },
  {
    name: "the end-of-run commit follows a HEAD the agent moved onto the user's branch",
    file: 'src/jobs/worktree/worktree.ts',
    find: `if (on.code !== 0 || on.stdout.trim() !== \`refs/heads/\${branch}\`)`,
    replace: `if (on.code > 1)`,
    tests: ['test/integration/worktree-hostile.test.ts'],
  },
  {
    name: 'integrate merges onto a detached HEAD',
    file: 'src/jobs/worktree/integrate.ts',
    find: `  if (on.code !== 0)\n    throw new InputError(\n      \`your checkout is on a detached HEAD`,
    replace: `  if (on.code > 1)\n    throw new InputError(\n      \`your checkout is on a detached HEAD`,
    tests: ['test/integration/worktree-hostile.test.ts'],
  },
  {
    name: 'integrate merges over an ignored file in the way',
    file: 'src/jobs/worktree/integrate.ts',
    find: `  await refuseOverwrites(repo, base, branch);`,
    replace: ``,
    tests: ['test/integration/worktree-hostile.test.ts'],
  },
  {
    name: 'two processes integrate in one repository at once',
    file: 'src/jobs/worktree/worktree.ts',
    find: `  const next = before.then(locked, locked);`,
    replace: `  const next = before.then(work, work);`,
    tests: ['test/e2e/worktree-concurrent.test.ts'],
  },
  {
    name: "a closed session's server leaves its listeners on the shared app",
    file: 'src/mcp/server.ts',
    find: `for (const dispose of disposers.splice(0)) dispose();`,
    replace: ``,
    tests: ['test/integration/shared-sessions.test.ts'],
  },
  {
    name: 'the shared server admits any token',
    file: 'src/mcp/serve-http.ts',
    find: `tokenMatches(token, given) ? CLIENT : undefined`,
    replace: `CLIENT`,
    tests: ['test/e2e/http-serve.test.ts'],
  },
  {
    name: 'an index line with an unknown state becomes a run',
    file: 'iac/index-line.ts',
    find: `  st: z.enum(JOB_STATES),`,
    replace: `  st: z.string() as unknown as z.ZodEnum<{ [K in (typeof JOB_STATES)[number]]: K }>,`,
    tests: ['test/integration/store-damaged.test.ts'],
  },
  {
    name: 'a stdio line past the read limit closes the transport',
    file: 'src/mcp/stdio-transport.ts',
    find: `if (this.pendingBytes <= MAX_MESSAGE_BYTES) return;`,
    replace: `if (this.pendingBytes <= MAX_MESSAGE_BYTES) return;\n    void this.close();`,
    tests: ['test/reliability/malformed.test.ts'],
  },
  {
    name: "the stdio transport's close does not end the server",
    file: 'src/mcp/serve.ts',
    find: `new StdioTransport(() => void shutdown('the client closed stdio'))`,
    replace: `new StdioTransport()`,
    tests: ['test/reliability/disconnect.test.ts'],
  },
  {
    name: 'the relay believes a daemon.json whose process does not listen on its port',
    file: 'src/lib/daemon-file.ts',
    find: `if (!listening) return \`does not listen on port \${info.port}\`;`,
    replace: `if (!listening) return { endpoint: info.url };`,
    tests: ['test/e2e/daemon-trust.test.ts'],
  },
  {
    name: "the shared server gives an agent's session spawn tools",
    file: 'src/mcp/serve-http.ts',
    find: `return createServer(app, agent ?? app.nesting, era === 'modern' ? 'published' : 'subscribed');`,
    replace: `return createServer(app, app.nesting, era === 'modern' ? 'published' : 'subscribed');`,
    tests: ['test/e2e/daemon-trust.test.ts'],
  },
  {
    name: 'a relayed session the daemon ended is not opened again',
    file: 'src/mcp/bridge.ts',
    find: `if (!ended || !opening || !alive()) throw error;`,
    replace: `throw error;`,
    tests: ['test/e2e/daemon.test.ts'],
  },
  {
    name: "a project's agent definition passes on a secret",
    file: 'src/jobs/agents/definitions.ts',
    find: `if (SECRET_NAME.test(variable))`,
    replace: `if (variable === '')`,
    tests: ['test/unit/agent-definitions.test.ts'],
  },
  {
    name: 'the log holds whole session ids',
    file: 'src/mcp/http/sessions.ts',
    find: `\`\${sessionId.slice(0, 8)}…\``,
    replace: `sessionId`,
    tests: ['test/integration/http-listener.test.ts'],
  },
  {
    name: "a resumed run whose session's totals were reset reports negative usage",
    file: 'src/jobs/budget.ts',
    find: `const less = (a: number, b: number) => (a >= b ? a - b : a);`,
    replace: `const less = (a: number, b: number) => a - b;`,
    tests: ['test/unit/budget.test.ts'],
  },
  {
    name: "a definition turns on the network the user's config turned off",
    file: 'src/config/sandbox.ts',
    find: `network: configured.network && (fromDefinition?.network ?? true),`,
    replace: `network: fromDefinition?.network ?? configured.network,`,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: 'every channel session speaks as the run whose session came first',
    file: 'src/mcp/channel/channel.ts',
    find: `serverFor: (jobId) => channelServer(app, jobId),`,
    replace: `serverFor: ((first?: string) => (jobId: string) => channelServer(app, (first ??= jobId)))(),`,
    tests: ['test/e2e/ask-parent.test.ts'],
  },
  {
    name: "the dashboard's routes admit a foreign Origin",
    file: 'src/mcp/http/listener.ts',
    find: `if (options.otherPath && pathOf(req) !== path && !checkOrigin(req) && (await options.otherPath(req, res))) return;`,
    replace: `if (options.otherPath && pathOf(req) !== path && (await options.otherPath(req, res))) return;`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: "the dashboard's fragments and event streams are served without the cookie",
    file: 'src/mcp/dashboard/dashboard.ts',
    find: `    if (!admitted(req)) {`,
    replace: `    if (!admitted(req) && path !== '/events' && !path.includes('/fragment') && !path.endsWith('/log')) {`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: "a question's text is put on the dashboard unescaped",
    file: 'src/mcp/dashboard/render.ts',
    find: `<span class="question-text">\${esc(q.question)}</span>`,
    replace: `<span class="question-text">\${q.question}</span>`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: 'the relay does not tell its client that the daemon died under an open response stream',
    file: 'src/mcp/bridge.ts',
    find: `: daemonGone('has stopped'),`,
    replace: `: log('has stopped'),`,
    tests: ['test/e2e/daemon.test.ts'],
  },
  {
    name: 'a compaction loses the lines appended to the old index after it read it',
    file: 'iac/index-file.ts',
    find: `    if (tailEnd > 0) appendToIndex(livePath, tail.toString('utf8', 0, tailEnd));`,
    replace: ``,
    tests: ['test/integration/store-compact.test.ts'],
  },
  {
    name: "a compaction appends a finished run to the index's base again",
    file: 'iac/index-file.ts',
    find: `else if (!inBase.has(id)) finished.push`,
    replace: `else finished.push`,
    tests: ['test/integration/store-compact.test.ts'],
  },
  {
    name: 'a compaction lets a late line move its run back',
    file: 'iac/index-file.ts',
    find: `if (held && rank(held.st) > rank(key.st)) return;`,
    replace: ``,
    tests: ['test/integration/store-compact.test.ts'],
  },
  {
    name: 'a worktree that holds only uncommitted work is removed',
    file: 'src/jobs/worktree/worktree.ts',
    find: `const removed = files.length === 0;`,
    replace: `const removed = committed.length === 0;`,
    tests: ['test/integration/worktree.test.ts'],
  },
  {
    name: "the dashboard's log stream is not ended when its agent has",
    file: 'src/mcp/dashboard/dashboard.ts',
    find: `        return void res.end();`,
    replace: `          return;`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: "the dashboard's cookie can be read by a script and sent from another site",
    file: 'src/mcp/dashboard/dashboard.ts',
    find: `HttpOnly; SameSite=Strict; Path=/`,
    replace: `Path=/`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: 'the dashboard trades any token for its cookie',
    file: 'src/mcp/dashboard/dashboard.ts',
    find: `if (!tokenMatches(token, url.searchParams.get('token') ?? ''))`,
    replace: `if (url.searchParams.get('token') === '')`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: "a team's budget is held against each member's cost alone, not the team's",
    file: 'src/jobs/teams/table.ts',
    find: `if (m.costUsd !== undefined) spent += m.costUsd;`,
    replace: `if (m.costUsd !== undefined) spent = Math.max(spent, m.costUsd);`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a run's channel token stays valid after the run ends",
    file: 'src/mcp/channel/channel.ts',
    find: `tokens.revoke(jobId);`,
    replace: ``,
    tests: ['test/e2e/ask-parent.test.ts'],
  },
  {
    name: 'a question is answered twice',
    file: 'src/jobs/table.ts',
    find: `if (earlier)\n      throw new InputError(`,
    replace: `if (earlier && messageId === '')\n      throw new InputError(`,
    tests: ['test/unit/conversation.test.ts'],
  },
  {
    name: 'a read-only sandbox mount is bound writable',
    file: SANDBOX,
    find: `as: mount.write ? 'write' : 'read'`,
    replace: `as: 'write'`,
    tests: ['test/unit/sandbox.test.ts'],
  },
  {
    name: 'a stopped daemon leaves its daemon.json behind',
    file: 'src/mcp/serve-http.ts',
    find: `      removeDaemonFile(stateDir);`,
    replace: ``,
    tests: ['test/e2e/daemon.test.ts'],
  },
  {
    name: 'the relay passes the answer to its replayed initialize on to its client',
    file: 'src/mcp/bridge.ts',
    find: `if (replayed && message.id === replayed.id) return replayed.answered();`,
    replace: `if (replayed && message.id === replayed.id) replayed.answered();`,
    tests: ['test/e2e/daemon.test.ts'],
  },
  {
    name: "a child team's spending is not held against its parent team's budget",
    file: 'src/jobs/teams/table.ts',
    find: `for (const owner of this.lineage(entry)) {`,
    replace: `for (const owner of [entry]) {`,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: "a running member's own max_budget_usd is not counted against its team's",
    file: 'src/jobs/teams/table.ts',
    find: `else if (m.state === 'running') committed += this.host.jobs.get(m.jobId)?.maxBudgetUsd ?? 0;`,
    replace: ``,
    tests: ['test/unit/teams.test.ts'],
  },
  {
    name: 'a worktree in which the agent changed nothing is kept with its branch',
    file: 'src/jobs/worktree/worktree.ts',
    find: `if (removed) await removeWorktree(wt.repo, path, branch);`,
    replace: ``,
    tests: ['test/integration/worktree.test.ts'],
  },
  {
    name: "a definition's sandbox mounts replace the ones the user's config set",
    file: 'src/config/sandbox.ts',
    find: `mounts: [...configured.mounts, ...(fromDefinition?.mounts ?? [])],`,
    replace: `mounts: fromDefinition?.mounts.length ? fromDefinition.mounts : configured.mounts,`,
    tests: ['test/unit/spawn.test.ts'],
  },
  {
    name: 'a run that ends closes the channel other runs still use',
    file: 'src/mcp/channel/channel.ts',
    find: `if (--leases > 0) return;`,
    replace: `--leases;`,
    tests: ['test/e2e/ask-parent.test.ts'],
  },
  {
    name: "the project's token is matched by its first characters",
    file: 'src/lib/daemon-file.ts',
    find: `return timingSafeEqual(digest(expected), digest(given));`,
    replace: `return timingSafeEqual(digest(expected.slice(0, 8)), digest(given.slice(0, 8)));`,
    tests: ['test/e2e/dashboard-http.test.ts'],
  },
  {
    name: 'the relay leaves its client waiting on a request the daemon refused',
    file: 'src/mcp/bridge.ts',
    find: `      if (request) {\n        unanswered.delete(message.id);`,
    replace: `      if (request && message.id === '') {\n        unanswered.delete(message.id);`,
    tests: ['test/e2e/daemon.test.ts'],
  },
  {
    name: "the backends' own models tables are not the base the overrides apply to",
    file: 'src/config/models.ts',
    find: `const table = shippedModels(backends);`,
    replace: `const table: ModelsTable = {};`,
    tests: ['test/unit/config.test.ts'],
  },
  {
    name: "an override's aliases replace the shipped ones instead of merging",
    file: 'src/config/models.ts',
    find: `aliases: { ...current.aliases, ...entry.aliases },`,
    replace: `aliases: { ...entry.aliases },`,
    tests: ['test/unit/config.test.ts'],
  },
  {
    name: "a models.json's default model may be any string",
    file: 'src/config/models.ts',
    find: `    default: modelName,`,
    replace: `    default: z.string().min(1),`,
    tests: ['test/unit/config.test.ts'],
  },
];

const root = fileURLToPath(new URL('..', import.meta.url));
let scratch = '';
const args = process.argv.slice(2);
const words = args.filter((a) => !a.startsWith('--'));
const chosen = MUTATIONS.filter((m) => !words.length || words.some((w) => m.name.includes(w)));

// Two entries joined into one object keep only the last one's keys: the other would never run.
const written = readFileSync(fileURLToPath(import.meta.url), 'utf8').match(/^    name: /gm)?.length ?? 0;
if (written !== MUTATIONS.length || new Set(MUTATIONS.map((m) => m.name)).size !== MUTATIONS.length)
  fail(
    `${written} mutations are written and ${MUTATIONS.length} listed, each named once: an entry lost its \`},\` or a name is repeated`,
  );

// Every `find` must still be in the code, once, before anything runs.
const stale = chosen.flatMap((m) => {
  const count = readFileSync(join(root, m.file), 'utf8').split(m.find).length - 1;
  return count === 1 ? [] : [`"${m.name}": found ${count} times in ${m.file} (must be once): update it with the code`];
});
if (stale.length) fail(stale.join('\n'));
if (!chosen.length) fail(`no mutation's name contains ${words.join(' or ')}`);
// `--anchors`: only that check (npm test runs it, so an anchor can never drift unseen).
if (args.includes('--anchors')) {
  console.log(`mutation check: all ${chosen.length} anchors found once`);
  process.exit(0);
}

// The scratch copy: what `git ls-files` knows (committed or not), not what git ignores.
scratch = mkdtempSync(join(tmpdir(), 'polyspawn-mutation-'));
const logs = mkdtempSync(join(tmpdir(), 'polyspawn-mutation-logs-'));
process.on('SIGINT', () => (removeScratch(), process.exit(130)));
const files = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], root).stdout.split('\0');
for (const file of new Set(files)) {
  const from = join(root, file);
  if (!file || file === 'node_modules' || file.startsWith('node_modules/') || !existsSync(from)) continue;
  mkdirSync(dirname(join(scratch, file)), { recursive: true });
  if (lstatSync(from).isSymbolicLink()) symlinkSync(readlinkSync(from), join(scratch, file));
  else copyFileSync(from, join(scratch, file));
}
symlinkSync(realpathSync(join(root, 'node_modules')), join(scratch, 'node_modules'));

const started = Date.now();
const rows = [];
try {
  if (!args.includes('--no-baseline')) {
    const tests = [...new Set(chosen.flatMap((m) => m.tests))];
    console.log(`baseline: building and running ${tests.length} test files unmutated...`);
    const build = run('npm', ['run', 'build'], scratch);
    if (build.status !== 0) fail(`the unmutated build fails:\n${build.stdout}${build.stderr}`);
    const base = vitest(tests, 'baseline');
    if (base.failed) fail(`the tests fail without any mutation (see ${base.log}): fix them first`);
  }
  for (const m of chosen) {
    const path = join(scratch, m.file);
    const original = readFileSync(path, 'utf8');
    writeFileSync(
      path,
      original.replace(m.find, () => m.replace),
    );
    const t0 = Date.now();
    console.log(`${m.name}...`);
    const build = run('npm', ['run', 'build'], scratch);
    const result =
      build.status !== 0
        ? { verdict: 'BUILD FAILED', log: save(m.name, build.stdout + build.stderr) }
        : vitest(m.tests, m.name, ['--bail=1']);
    writeFileSync(path, original);
    rows.push([m.name, m.file, m.tests.map((t) => basename(t, '.test.ts')).join(', '), result.verdict, seconds(t0)]);
    console.log(`  ${result.verdict} in ${seconds(t0)}${result.by ? ` by ${result.by}` : ''} (log: ${result.log})`);
  }
} finally {
  removeScratch();
}

const header = ['mutation', 'file', 'tests', 'result', 'time'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
console.log(['', line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n'));
const missed = rows.filter((r) => !r[3].startsWith('caught'));
console.log(`\n${rows.length - missed.length} of ${rows.length} caught in ${seconds(started)}; logs in ${logs}`);
process.exit(missed.length ? 1 : 0);

/** Runs the tests in the scratch copy: a mutation is caught when they fail. */
function vitest(tests, name, options = []) {
  const r = run('node', ['node_modules/vitest/vitest.mjs', 'run', ...options, ...tests], scratch, {
    timeout: 15 * 60_000, // a hang the tests' own time-outs missed: killed, and counted as caught
  });
  const failed = r.status !== 0;
  const verdict = r.signal ? `caught (killed: ${r.signal})` : failed ? 'caught' : 'NOT CAUGHT';
  const by = /^ FAIL +(.+)$/m.exec(r.stdout + r.stderr)?.[1];
  return { failed, verdict, by, log: save(name, r.stdout + r.stderr) };
}

function run(command, argv, cwd, options = {}) {
  const r = spawnSync(command, argv, {
    cwd,
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    env: { ...process.env, NO_COLOR: '1' },
    ...options,
  });
  if (r.error && r.error.code !== 'ETIMEDOUT') fail(`${command}: ${r.error.message}`);
  return r;
}

function save(name, text) {
  const path = join(logs, `${name.replace(/[^a-z0-9]+/gi, '-')}.log`);
  writeFileSync(path, text);
  return path;
}

function seconds(since) {
  return `${Math.round((Date.now() - since) / 1000)} s`;
}

function removeScratch() {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
}

function fail(message) {
  console.error(`mutation check: ${message}`);
  removeScratch();
  process.exit(2);
}
