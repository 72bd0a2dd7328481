// The server as one file: dist/src/cli.js (what package.json `bin`, the MCP client configs and
// the tests run) is replaced by a bundle of src/cli.ts and everything it imports, so a client
// starting the server pays for one file's parse instead of resolving and loading ~400 modules
// (bench/coldstart.mjs). Run after tsc (npm run build): the other files tsc wrote stay in dist/
// for whoever imports them one by one (bench/store.mjs, the package's file list).
//
// Left out of the bundle: the HTTP SDKs, which the API backends import lazily on their first
// call; they stay `import()`s of the installed packages, so start-up never loads them.
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outfile = join(root, 'dist', 'src', 'cli.js');

/**
 * `import.meta.url` keeps meaning "where tsc put this module" (dist/<dir>/<file>.js), so code
 * that finds files beside itself (backends/models.json, package.json, cli.js) finds them from
 * inside the bundle too: each use becomes that path, resolved against the bundle's own URL.
 */
const importMetaUrlAsCompiled = {
  name: 'import-meta-url-as-compiled',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const rel = relative(root, args.path);
      if (rel.startsWith('..') || rel.includes(`node_modules${sep}`) || !source.includes('import.meta.url')) return undefined;
      const compiled = join(root, 'dist', rel.replace(/\.ts$/, '.js'));
      let fromBundle = relative(dirname(outfile), compiled).split(sep).join('/');
      if (!fromBundle.startsWith('.')) fromBundle = `./${fromBundle}`;
      return { contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`), loader: 'ts' };
    });
  },
};

await build({
  entryPoints: [join(root, 'src', 'cli.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // ES module builds first: jsonc-parser's `main` is a UMD build whose require()s a bundler
  // cannot follow.
  mainFields: ['module', 'main'],
  external: ['openai', '@google/genai', '@mistralai/mistralai', '@mistralai/mistralai/*'],
  // CommonJS dependencies (proper-lockfile, write-file-atomic, ...) call require() for Node's
  // built-in modules and read __filename (write-file-atomic names its temp files with it),
  // which an ES module does not have: give the bundle them.
  banner: {
    js: [
      "import { createRequire as __polyspawnRequire } from 'node:module';",
      "import { fileURLToPath as __polyspawnPath } from 'node:url';",
      'const require = __polyspawnRequire(import.meta.url);',
      'const __filename = __polyspawnPath(import.meta.url);',
      "const __dirname = __polyspawnPath(new URL('.', import.meta.url));",
    ].join('\n'),
  },
  sourcemap: 'linked',
  legalComments: 'none',
  // A third less to parse at every start; identifiers are kept, so stack traces still name
  // functions (and dist/src/cli.js.map maps them back to the sources).
  minifyWhitespace: true,
  minifySyntax: true,
  plugins: [importMetaUrlAsCompiled],
  logLevel: 'warning',
});
