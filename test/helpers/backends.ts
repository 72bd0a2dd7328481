// What tests say about "every backend", derived from the registry: adding a backend (one file
// and one line in backends/registry.ts) must not turn a test red merely because a list grew.
import { backends } from '../../backends/registry.js';

/** Every backend's name, in the registry's order (the order errors and lists name them in). */
export const backendNames: readonly string[] = backends.map((b) => b.name);

/** How many of them are HTTP APIs (each gets a key prompt from `init`, for instance). */
export const apiBackendCount = backends.filter((b) => b.kind === 'api').length;

/** The HTTP APIs' names, comma-separated, as `init --keys` lists them. */
export const apiBackendKeys = backends
  .filter((b) => b.kind === 'api')
  .map((b) => b.name)
  .join(',');

/** The names as errors list them: "a, b, c". */
export const backendList = backendNames.join(', ');

/** Doctor's closing line when `usable` of the registry's backends work here. */
export const usableLine = (usable: number) => `${usable} of ${backendNames.length} backends usable.`;

/** `text` matched literally inside a RegExp. */
export const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
