// The server as two files, so that a client starting it pays as little as possible
// (bench/coldstart.mjs, issue 7):
//
//   dist/src/cli.bundle.cjs  src/cli.ts and everything it imports, in one file: one read instead
//                            of resolving and loading ~400 modules. It is the body of one function
//                            (CommonJS-style, not an ES module) because Node 20 caches the
//                            compilation of scripts only (vm.Script cachedData), not of ES modules.
//   dist/src/cli.js          src/boot.ts: what package.json `bin`, the MCP client configs and the
//                            tests run. It runs the bundle through a V8 code cache (see there).
//
// Run after tsc (npm run build): the other files tsc wrote stay in dist/ for whoever imports them
// one by one (bench/store.mjs, the package's file list).
//
// Left out of the bundle: the HTTP SDKs, which the API backends import lazily on their first
// call; they stay `import()`s of the installed packages, so start-up never loads them. A script
// compiled from a code cache cannot `import()` (what Node needs to serve it, the script's
// host-defined options, does not survive the cache), so each of those `import()`s becomes a call
// of a function the boot file passes in, which imports the same specifier from the same folder.
// (On those lines the source map's columns after the call are off by the longer name.)
import { createHash } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = join(root, 'dist', 'src');
const bundleFile = join(outdir, 'cli.bundle.cjs');
const bootFile = join(outdir, 'cli.js');

/** The parameters the bundle's function takes; src/boot.ts passes them in this order. */
const PARAMS = ['require', '__filename', '__dirname', '__polyspawnImport'];
const IMPORT = '__polyspawnImport';

/**
 * `import.meta.url` keeps meaning "where tsc put this module" (dist/<dir>/<file>.js), so code
 * that finds files beside itself (package.json, cli.js) finds them from
 * inside the bundle too: each use becomes that path, resolved against the bundle's own URL.
 */
const importMetaUrlAsCompiled = {
  name: 'import-meta-url-as-compiled',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const rel = relative(root, args.path);
      if (rel.startsWith('..') || rel.includes(`node_modules${sep}`) || !source.includes('import.meta.url'))
        return undefined;
      const compiled = join(root, 'dist', rel.replace(/\.ts$/, '.js'));
      let fromBundle = relative(outdir, compiled).split(sep).join('/');
      if (!fromBundle.startsWith('.')) fromBundle = `./${fromBundle}`;
      return {
        contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, __polyspawnUrl).href`),
        loader: 'ts',
      };
    });
  },
};

const server = await build({
  entryPoints: [join(root, 'src', 'cli.ts')],
  outfile: bundleFile,
  write: false,
  metafile: true,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // ES module builds first: jsonc-parser's `main` is a UMD build whose require()s a bundler
  // cannot follow.
  mainFields: ['module', 'main'],
  // The API backends' SDKs, and the dashboard's renderers: loaded when first used, not at every start.
  external: ['openai', '@google/genai', '@mistralai/mistralai', '@mistralai/mistralai/*', 'markdown-it', 'diff'],
  // Strict, as the ES modules it is made of: the directive must open the function's body.
  banner: {
    js: `(function (${PARAMS.join(', ')}) {'use strict';\nconst __polyspawnUrl = require('node:url').pathToFileURL(__filename).href;`,
  },
  footer: { js: '})' },
  sourcemap: 'linked',
  legalComments: 'none',
  // A third less to read at every start; identifiers are kept, so stack traces still name
  // functions (and dist/src/cli.bundle.cjs.map maps them back to the sources).
  minifyWhitespace: true,
  minifySyntax: true,
  // zod declares itself free of side effects ("sideEffects" in its package.json); trusting that,
  // esbuild drops the call that initializes zod's modules where an eagerly run module (the MCP
  // SDK's types) reaches zod, which the commands' lazily loaded modules also import: the server
  // then dies at start with "Class2 is not a constructor". Ignoring the annotations keeps every init.
  ignoreAnnotations: true,
  plugins: [importMetaUrlAsCompiled],
  logLevel: 'warning',
});

const dynamicImports = Object.values(server.metafile.outputs).flatMap((o) =>
  o.imports.filter((i) => i.kind === 'dynamic-import' && i.external).map((i) => i.path),
);
let bundleId = '';
for (const out of server.outputFiles) {
  let text = out.text;
  if (out.path === bundleFile) {
    // The entry's `#!` line cannot stand inside a function: blanked, same length (the map holds).
    text = text.replace(/^#![^\n]*/, (line) => `//${' '.repeat(line.length - 2)}`);
    for (const path of new Set(dynamicImports)) {
      const call = `import(${JSON.stringify(path)})`;
      if (!text.includes(call)) throw new Error(`bundle: no ${call} in the output, yet the metafile lists it`);
      text = text.replaceAll(call, `${IMPORT}(${JSON.stringify(path)})`);
    }
    const left = text.match(/\bimport\s*\(|\bimport\.meta\b/g);
    if (left)
      throw new Error(
        `bundle: ${left.join(', ')} left in the bundle, which runs as a script: route it through ${IMPORT}`,
      );
    bundleId = createHash('sha256').update(text).digest('hex').slice(0, 16);
  }
  await writeFile(out.path, text);
}

await build({
  entryPoints: [join(root, 'src', 'boot.ts')],
  outfile: bootFile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  define: { __POLYSPAWN_BUNDLE_ID__: JSON.stringify(bundleId) },
  banner: { js: '// Built from src/boot.ts by scripts/bundle.mjs: it runs cli.bundle.cjs through a V8 code cache.' },
  legalComments: 'none',
  logLevel: 'warning',
});
// tsc's own output for these two is replaced (cli.js) or never meant to run (boot.js: its bundle id
// is set above); their source maps would describe code that is not there.
await Promise.all(['cli.js.map', 'boot.js', 'boot.js.map'].map((name) => rm(join(outdir, name), { force: true })));
console.log(`bundle: ${relative(root, bundleFile)} (id ${bundleId}), run by ${relative(root, bootFile)}`);
