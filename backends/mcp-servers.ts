// What the CLI backends share in writing an MCP config file for one run.
import type { ParentEndpoint } from './types.js';

export const mapValues = <T, U>(o: Record<string, T>, f: (v: T) => U): Record<string, U> =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));

/**
 * The channel's Authorization header as claude and copilot read it from a config file: they
 * expand ${VAR} from their environment, so the token itself is never written to the file.
 */
export const bearerFromEnv = (parent: ParentEndpoint) => ({ Authorization: `Bearer \${${parent.tokenEnv}}` });
