// Everything a running polyspawn holds, built once from the environment and folder it was
// started in: the context (config, secrets, log), models table, enabled backends and the job
// table. The MCP layer and the CLI both start here.
import { backends as registry } from '../backends/registry.js';
import { Redactor } from './lib/redact.js';
import { ancestorVariables } from './lib/proc.js';
import { configuredSecrets } from './config/keys.js';
import { createIacRuntime, type IacRuntime } from '../iac/runtime.js';
import type { Backend } from '../backends/types.js';
import { AgentRegistry } from './jobs/agents/registry.js';
import { nestingFrom, NESTING_ENV, type Nesting } from './jobs/agents/nesting.js';
import { AgentSessions } from './jobs/agents/sessions.js';
import { checkBackend, type Availability } from './config/availability.js';
import { loadConfig, projectConfigNote } from './config/config.js';
import type { Context } from './config/context.js';
import { createExecutor } from './jobs/execute.js';
import { JobTable } from './jobs/table.js';
import { JobRecorder } from './jobs/recorder.js';
import { terminateGroup } from './jobs/process/runner.js';
import { containerName, removeContainer } from './jobs/process/sandbox.js';
import { CONTAINER_MODES } from './config/sandbox.js';
import { checkDefaultModels, loadModels, modelsOverrideFiles, type ModelsTable } from './config/models.js';
import { withStructuredOutput } from './jobs/structured-output.js';
import { withWorktree } from './jobs/worktree/worktree.js';
import type { ParentChannel } from './jobs/conversation.js';
import { TeamTable } from './jobs/teams/table.js';
import { memberHost } from './jobs/teams/members.js';

/** The context the layers below are given, and what the app built with it. */
export type App = Context & {
  models: ModelsTable;
  /** The enabled backends, in registry order. */
  backends: readonly Backend[];
  jobs: JobTable;
  /** The run store and IAC.md. */
  iac: IacRuntime;
  availability(backend: Backend): Availability;
  /** Named agents (agents/<name>/agent.md), their sessions, and how deep this polyspawn is nested. */
  agents: AgentRegistry;
  sessions: AgentSessions;
  nesting: Nesting;
  /** Teams of agents (run_team): their members are jobs of `jobs`. */
  teams: TeamTable;
  /** The channel running CLI agents ask the orchestrator through, when this polyspawn serves one. */
  parentChannel?: ParentChannel;
};

type AppOptions = {
  /**
   * Builds the channel to the orchestrator over the finished app (the MCP server does: it serves
   * the channel's tools); `channel: false` in the config turns it off.
   */
  parentChannel?: (app: App) => ParentChannel;
};

const stderrLog = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);

/**
 * env and cwd: the process's, from the entry point (src/cli.ts); no layer below reads them itself.
 * `builtInBackends`: the backends polyspawn ships (the registry; a test may give others); the ACP agents
 * the user declares join them.
 */
export function createApp(
  env: NodeJS.ProcessEnv,
  cwd: string,
  log = stderrLog,
  builtInBackends: readonly Backend[] = registry,
  options: AppOptions = {},
): App {
  const config = loadConfig(builtInBackends, env, cwd);
  // The ACP agents the user declared are backends like the built-in ones from here on.
  const allBackends = [...builtInBackends, ...config.acpAgents];
  const projectNote = config.projectConfig && projectConfigNote(config.projectConfig);
  if (projectNote) log(`the project's config ${projectNote}`);
  const modelsFiles = modelsOverrideFiles(config.projectDir, config.userConfigDir, env);
  const models = loadModels(allBackends, modelsFiles);
  config.files.push(...modelsFiles);
  const backends = allBackends.filter((b) => config.backends[b.name]!.enabled);
  checkDefaultModels(models, backends);
  // Every key polyspawn could hand out, and anything shaped like one of its backends' keys,
  // is redacted from everything it writes or returns.
  const secrets = new Redactor(
    configuredSecrets(allBackends, config, env),
    allBackends.flatMap((b) => b.secretPatterns),
  );
  const context: Context = { env, cwd, config, secrets, log };
  // The job layer keeps its jobs in the run store (the recorder saves every change, the table
  // claims ids and reads back); the record renders IAC.md from what was saved.
  const iac = createIacRuntime(context, {
    endGroup: terminateGroup,
    endSandbox: (record) =>
      record.sandbox && CONTAINER_MODES.includes(record.sandbox.mode)
        ? removeContainer(record.sandbox, containerName(config.stateDir, record.id), env)
        : Promise.resolve(),
    beforeClose: () => recorder.flush(),
  });
  const recorder = new JobRecorder(iac.store, secrets, log);
  const nesting = nestingFrom(env, ancestorVariables(NESTING_ENV));
  // Built last (it serves the finished app), read by the executor when a job starts.
  let parentChannel: ParentChannel | undefined;
  const executor = createExecutor(
    backends,
    context,
    models,
    nesting,
    () => parentChannel,
    () => jobs,
  );
  const jobs = new JobTable({
    concurrency: config.concurrency,
    execute: recorder.guard(withWorktree(withStructuredOutput(executor, backends, config), context)),
    store: iac.store,
  });
  jobs.onChange((job) => {
    recorder.changed(job);
    iac.record();
  });
  const base: Omit<App, 'teams'> = {
    ...context,
    models,
    backends,
    jobs,
    iac,
    availability: (backend) => checkBackend(backend, config.backends[backend.name]!, env, config, secrets),
    agents: new AgentRegistry({ config, models, backends: allBackends }, secrets, log),
    sessions: new AgentSessions(config.stateDir, jobs, log),
    nesting,
  };
  // A supervisor's team is one level below its own (supervisor_tree), never more.
  const teams = new TeamTable({
    ...memberHost({ ...base, channel: config.channel }),
    jobs,
    store: iac.teams,
    maxTeamDepth: 1,
    maxAgents: config.teamMaxAgents,
  });
  teams.onChange((team) => iac.recordTeam(team));
  const app: App = { ...base, teams };
  if (options.parentChannel && config.channel) app.parentChannel = parentChannel = options.parentChannel(app);
  return app;
}
