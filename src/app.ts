// Everything a running polyspawn holds, built once from the environment: config, models
// table, enabled backends and the job table. The MCP layer and the CLI both start here.
import { backends as allBackends } from '../backends/registry.js';
import { configuredSecrets, secrets } from '../iac/redact.js';
import { createIacRuntime, type IacRuntime } from '../iac/runtime.js';
import type { Backend } from '../backends/types.js';
import { checkBackend, type Availability } from './availability.js';
import { loadConfig, type Config } from './config.js';
import { createExecutor } from './execute.js';
import { JobTable } from './jobs.js';
import { loadModels, modelsFiles, type ModelsTable } from './models.js';

export type App = {
  config: Config;
  models: ModelsTable;
  /** The enabled backends, in registry order. */
  backends: readonly Backend[];
  jobs: JobTable;
  /** The run store and IAC.md. */
  iac: IacRuntime;
  availability(backend: Backend): Availability;
};

const stderrLog = (message: string) => process.stderr.write(`polyspawn: ${message}\n`);

export function createApp(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd(), log = stderrLog): App {
  const config = loadConfig(allBackends, env, cwd);
  const files = modelsFiles(config.projectDir, config.userConfigDir, env);
  const models = loadModels(files);
  config.files.push(...files.slice(1));
  const backends = allBackends.filter((b) => config.backends[b.name]!.enabled);
  // Every key polyspawn could hand out is redacted from everything it writes or returns.
  secrets.addValues(configuredSecrets(allBackends.map((b) => b.name), config, env));
  const iac = createIacRuntime(config, secrets, log);
  const jobs = new JobTable({
    concurrency: config.concurrency,
    execute: iac.guard(createExecutor(backends, config, models)),
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
  };
}
