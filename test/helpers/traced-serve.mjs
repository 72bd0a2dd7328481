// `polyspawn serve` from the unbundled build (dist/src/mcp/serve.js, what the bundle is made of),
// appending every module it loads to the file POLYSPAWN_TEST_LOAD_TRACE, one a line, at once:
// ES modules through a resolve hook, CommonJS ones (require, createRequire) through Module._load.
// The bundle hides what it holds inside, so test/e2e/start-loads.test.ts reads the modules here.
import { appendFileSync } from 'node:fs';
import Module, { register } from 'node:module';

const trace = process.env.POLYSPAWN_TEST_LOAD_TRACE;
if (!trace) throw new Error('POLYSPAWN_TEST_LOAD_TRACE: the file to append loaded modules to');
const hooks = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(${JSON.stringify(trace)}, resolved.url + '\\n');
  return resolved;
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
const load = Module._load;
Module._load = function (request, ...rest) {
  appendFileSync(trace, `${request}\n`);
  return load.call(this, request, ...rest);
};
const { serveStdio } = await import(new URL('../../dist/src/mcp/serve.js', import.meta.url).href);
await serveStdio((message) => process.stderr.write(`polyspawn: ${message}\n`));
