// Everything a running polyspawn holds, built once from the environment: config, models
// table, enabled backends and the job table. The MCP layer and the CLI both start here.
import { backends as allBackends } from '../backends/registry.js';
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
  availability(backend: Backend): Availability;
};

export function createApp(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): App {
  const config = loadConfig(allBackends, env, cwd);
  const files = modelsFiles(config.projectDir, config.userConfigDir, env);
  const models = loadModels(files);
  config.files.push(...files.slice(1));
  const backends = allBackends.filter((b) => config.backends[b.name]!.enabled);
  const jobs = new JobTable({ concurrency: config.concurrency, execute: createExecutor(backends, config, models) });
  return {
    config,
    models,
    backends,
    jobs,
    availability: (backend) => checkBackend(backend, config.backends[backend.name]!, env),
  };
}
