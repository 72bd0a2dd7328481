// Everything a running polyspawn holds, built once from the environment: config, models
// table, enabled backends and the job table. The MCP layer and the CLI both start here.
import { backends as registry } from '../backends/registry.js';
import { secrets } from './lib/redact.js';
import { configuredSecrets } from './config/keys.js';
import { createIacRuntime, type IacRuntime } from '../iac/runtime.js';
import type { Backend } from '../backends/types.js';
import { AgentRegistry } from './jobs/agents/registry.js';
import { nestingFrom, type Nesting } from './jobs/agents/nesting.js';
import { AgentSessions } from './jobs/agents/sessions.js';
import { checkBackend, type Availability } from './config/availability.js';
import { loadConfig, type Config } from './config/config.js';
import { createExecutor } from './jobs/execute.js';
import { JobTable } from './jobs/table.js';
import { terminateGroup } from './jobs/process/runner.js';
import { checkDefaultModels, loadModels, modelsFiles, type ModelsTable } from './config/models.js';
import { withStructuredOutput } from './jobs/structured-output.js';

export type App = {
  config: Config;
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
};

const stderrLog = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);

/** `allBackends`: every backend polyspawn offers (the registry; a test may give others). */
export function createApp(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd(), log = stderrLog, allBackends: readonly Backend[] = registry): App {
  const config = loadConfig(allBackends, env, cwd);
  const files = modelsFiles(config.projectDir, config.userConfigDir, env);
  const models = loadModels(files);
  config.files.push(...files.slice(1));
  const backends = allBackends.filter((b) => config.backends[b.name]!.enabled);
  checkDefaultModels(models, backends);
  // Every key polyspawn could hand out is redacted from everything it writes or returns.
  secrets.addValues(configuredSecrets(allBackends, config, env));
  const iac = createIacRuntime(config, secrets, log, terminateGroup);
  const nesting = nestingFrom(env);
  const jobs = new JobTable({
    concurrency: config.concurrency,
    execute: iac.guard(withStructuredOutput(createExecutor(backends, config, models, nesting), backends, config)),
    idTaken: (id) => iac.store.claimId(id),
    history: iac.store,
  });
  jobs.onChange((job) => iac.record(job));
  return {
    config,
    models,
    backends,
    jobs,
    iac,
    availability: (backend) => checkBackend(backend, config.backends[backend.name]!, env),
    agents: new AgentRegistry({ config, models, backends: allBackends }, log),
    sessions: new AgentSessions(config.stateDir, jobs, log),
    nesting,
  };
}
