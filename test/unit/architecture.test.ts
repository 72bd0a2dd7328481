// The house rules, executed: which layer may import which, who may speak MCP, where vendor names
// may appear, and no import cycles. Read from the product code (src/, backends/, iac/) with the
// TypeScript compiler; the tables below are the rules, the code under them only applies them.
import { readdirSync, readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';

type Layer = {
  /** Folders (ending in /) or files; a file belongs to the layer with the longest path that holds it. */
  holds: string[];
  /** The other layers its files may import (its own always); npm packages and node: are free. */
  mayImport: string[];
  /** What to do instead, said after a forbidden import. */
  fix: string;
};

/** The layers, bottom up. */
const LAYERS: Record<string, Layer> = {
  lib: {
    holds: ['src/lib/'],
    mayImport: [],
    fix: 'src/lib/ holds leaves: take what the code needs as a parameter, or move the code up into the layer that owns it',
  },
  backends: {
    holds: ['backends/'],
    mayImport: [],
    fix: 'a backend knows only its contract (backends/types.ts) and the helpers in backends/: move the helper into backends/, or receive the value through the contract',
  },
  config: {
    holds: ['src/config/'],
    mayImport: ['backends', 'lib'],
    fix: 'configuration sits under the job lifecycle: move the shared code down to src/lib/, or have the caller pass it in',
  },
  jobs: {
    holds: ['src/jobs/'],
    mayImport: ['process', 'config', 'backends', 'lib'],
    fix: 'the job lifecycle never reaches up: have src/app.ts pass it in, or move the shared code down to src/config/ or src/lib/',
  },
  process: {
    holds: ['src/jobs/process/'],
    mayImport: ['jobs', 'config', 'backends', 'lib'],
    fix: 'the process runner is part of the job lifecycle: have src/app.ts pass it in, or move the shared code down to src/lib/',
  },
  iac: {
    holds: ['iac/'],
    mayImport: ['jobs', 'config', 'backends', 'lib'],
    fix: 'the run store records jobs; it never runs a process nor serves a client: have src/app.ts pass the function in (as createIacRuntime gets terminateGroup), or move the shared code down to src/lib/',
  },
  app: {
    holds: ['src/app.ts'],
    mayImport: ['iac', 'jobs', 'process', 'config', 'backends', 'lib'],
    fix: 'src/app.ts composes the layers below the MCP layer and the commands: move the code it needs down',
  },
  mcp: {
    holds: ['src/mcp/'],
    mayImport: ['app', 'iac', 'jobs', 'process', 'config', 'backends', 'lib'],
    fix: 'the MCP layer and the commands are peers: move what both use down to src/jobs/, src/config/ or src/lib/',
  },
  commands: {
    holds: ['src/commands/'],
    mayImport: ['app', 'iac', 'jobs', 'process', 'config', 'backends', 'lib'],
    fix: 'the commands and the MCP layer are peers: move what both use down to src/jobs/, src/config/ or src/lib/',
  },
  entry: {
    holds: ['src/cli.ts', 'src/boot.ts'],
    mayImport: ['mcp', 'commands', 'app', 'iac', 'jobs', 'process', 'config', 'backends', 'lib'],
    fix: 'nothing imports the executable: move the code into a layer',
  },
};

/** Only these layers may import the MCP SDK: the rest of the house knows nothing of the protocol. */
const MCP_SDK = { package: '@modelcontextprotocol/', onlyIn: ['mcp', 'commands'] };

/** Vendor names are vendor knowledge: it lives in backends/ and reaches the rest through the registry. */
const VENDOR_NAMES = {
  words: ['claude', 'codex', 'copilot', 'grok', 'gemini', 'mistral', 'anthropic', 'openai', 'google', 'xai'],
  allowedIn: ['backends'],
  /** The one module that writes each client's configuration names the clients it configures. */
  exceptFiles: ['src/commands/init.ts'],
};

const PRODUCT_FOLDERS = ['src', 'backends', 'iac'];

// --- the checker ------------------------------------------------------------------------------

type Rule = `layer:${string}` | 'mcp-sdk' | 'vendor-name' | 'cycle' | 'no-layer';
type Violation = { rule: Rule; where: string; problem: string };
type Import = { specifier: string; line: number };

function layerOf(file: string): string | undefined {
  let best: { name: string; length: number } | undefined;
  for (const [name, layer] of Object.entries(LAYERS)) {
    for (const path of layer.holds) {
      const holds = path.endsWith('/') ? file.startsWith(path) : file === path;
      if (holds && path.length > (best?.length ?? -1)) best = { name, length: path.length };
    }
  }
  return best?.name;
}

const lineOf = (source: ts.SourceFile, node: ts.Node) =>
  source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;

/** Every module the file imports: static and dynamic, values and types, re-exports, require(). */
function importsOf(source: ts.SourceFile): Import[] {
  const found: Import[] = [];
  const add = (node: ts.Node, specifier: ts.Node | undefined) => {
    if (specifier && ts.isStringLiteralLike(specifier))
      found.push({ specifier: specifier.text, line: lineOf(source, node) });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node, node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
      add(node, node.moduleReference.expression);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal);
    else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require'))
        add(node, node.arguments[0]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The project file a relative specifier names (`./x.js` is `./x.ts`), or undefined for a package. */
function resolve(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  return posix.join(posix.dirname(file), specifier).replace(/\.js$/, '.ts');
}

const VENDOR_NAME = new RegExp(VENDOR_NAMES.words.join('|'), 'i');
/** The tokens that name something: identifiers and literals (a regular expression is one too). */
const NAMING_KINDS = new Set([
  ts.SyntaxKind.Identifier,
  ts.SyntaxKind.PrivateIdentifier,
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateHead,
  ts.SyntaxKind.TemplateMiddle,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.RegularExpressionLiteral,
]);

/**
 * The code's tokens, as the compiler's scanner reads them between the parsed nodes: comments are
 * trivia there, never tokens (JSDoc, which the parser attaches to nodes, is skipped). A bare
 * scanner would need the parser anyway to tell a regular expression from a division.
 */
function* codeTokens(node: ts.Node, source: ts.SourceFile): Generator<ts.Node> {
  for (const child of node.getChildren(source)) {
    if (ts.isJSDoc(child)) continue;
    if (child.getChildCount(source) === 0) yield child;
    else yield* codeTokens(child, source);
  }
}

/** The path of each import cycle, found as a depth-first walk comes back to a file it is still in. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const found: string[][] = [];
  const walking: string[] = [];
  const walked = new Set<string>();
  const walk = (file: string) => {
    const at = walking.indexOf(file);
    if (at >= 0) return void found.push([...walking.slice(at), file]);
    if (walked.has(file)) return;
    walking.push(file);
    for (const next of [...(graph.get(file) ?? [])].sort()) walk(next);
    walking.pop();
    walked.add(file);
  };
  for (const file of [...graph.keys()].sort()) walk(file);
  return found;
}

function checkImports(
  file: string,
  layer: string,
  source: ts.SourceFile,
  files: Map<string, string>,
  graph: Map<string, Set<string>>,
): Violation[] {
  const violations: Violation[] = [];
  const edges = new Set<string>();
  graph.set(file, edges);
  for (const { specifier, line } of importsOf(source)) {
    const where = `${file}:${line}`;
    const target = resolve(file, specifier);
    if (!target) {
      if (specifier.startsWith(MCP_SDK.package) && !MCP_SDK.onlyIn.includes(layer)) {
        const speakers = MCP_SDK.onlyIn.flatMap((l) => LAYERS[l]!.holds).join(' and ');
        violations.push({
          rule: 'mcp-sdk',
          where,
          problem: `imports ${specifier}: only ${speakers} speak MCP; move the code that needs it there, and pass plain values down`,
        });
      }
      continue;
    }
    if (files.has(target)) edges.add(target);
    const targetLayer = layerOf(target);
    const { mayImport, fix } = LAYERS[layer]!;
    if (targetLayer === layer || (targetLayer && mayImport.includes(targetLayer))) continue;
    const may = mayImport.length ? `may import only ${mayImport.join(', ')}` : 'may import no other layer';
    violations.push({
      rule: `layer:${layer}`,
      where,
      problem: `imports ${target} (${targetLayer ?? 'no layer'}); ${layer} ${may}: ${fix}`,
    });
  }
  return violations;
}

function checkVendorNames(file: string, source: ts.SourceFile): Violation[] {
  const onLine = new Map<number, Set<string>>();
  for (const token of codeTokens(source, source)) {
    const text = token.getText(source);
    if (!NAMING_KINDS.has(token.kind) || !VENDOR_NAME.test(text)) continue;
    const line = lineOf(source, token);
    onLine.set(line, (onLine.get(line) ?? new Set()).add(text.length > 60 ? `${text.slice(0, 57)}...` : text));
  }
  return [...onLine].map(([line, tokens]) => ({
    rule: 'vendor-name',
    where: `${file}:${line}`,
    problem: `names a vendor in ${[...tokens].join(', ')}: vendor facts live in backends/; take this from the backends through the registry (a field of the contract in backends/types.ts)`,
  }));
}

/** Checks a set of files (path from the repository's root → source text) against the rules above. */
function checkArchitecture(files: Map<string, string>): Violation[] {
  const violations: Violation[] = [];
  const graph = new Map<string, Set<string>>();
  for (const [file, text] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const layer = layerOf(file);
    if (!layer) {
      violations.push({
        rule: 'no-layer',
        where: file,
        problem: `belongs to no layer: put it in a layer's folder, or add it to LAYERS in test/unit/architecture.test.ts`,
      });
      continue;
    }
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    violations.push(...checkImports(file, layer, source, files, graph));
    if (!VENDOR_NAMES.allowedIn.includes(layer) && !VENDOR_NAMES.exceptFiles.includes(file))
      violations.push(...checkVendorNames(file, source));
  }
  for (const path of cycles(graph)) {
    violations.push({
      rule: 'cycle',
      where: path.join(' → '),
      problem:
        'is an import cycle: move what these files share into one that all of them import (type imports count too)',
    });
  }
  return violations;
}

function productFiles(root: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const folder of PRODUCT_FOLDERS) {
    for (const entry of readdirSync(posix.join(root, folder), { recursive: true, encoding: 'utf8' })) {
      const file = posix.join(folder, entry.split('\\').join('/'));
      if (file.endsWith('.ts')) files.set(file, readFileSync(posix.join(root, file), 'utf8'));
    }
  }
  return files;
}

/** Every file that may use a product file's export: the product, its tests, benchmarks and scripts. */
function readers(root: string): Map<string, string> {
  const files = productFiles(root);
  for (const folder of ['test', 'bench', 'scripts']) {
    for (const entry of readdirSync(posix.join(root, folder), { recursive: true, encoding: 'utf8' })) {
      const file = posix.join(folder, entry.split('\\').join('/'));
      if (/\.(ts|mjs)$/.test(file)) files.set(file, readFileSync(posix.join(root, file), 'utf8'));
    }
  }
  return files;
}

/**
 * The exported declarations no other file names: an export is a promise to other files, so one
 * only its own file uses is unexported (and one nothing uses, removed). Names are matched as words.
 */
function exportedButUnused(product: Map<string, string>, readers: Map<string, string>): string[] {
  const unused: string[] = [];
  for (const [file, text] of product) {
    if (file.endsWith('.d.ts')) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    for (const statement of source.statements) {
      const exported = ts.canHaveModifiers(statement)
        ? ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
        : false;
      if (!exported) continue;
      const names = ts.isVariableStatement(statement)
        ? statement.declarationList.declarations.map((d) => d.name.getText(source))
        : 'name' in statement && statement.name && ts.isIdentifier(statement.name as ts.Node)
          ? [(statement.name as ts.Identifier).text]
          : [];
      for (const name of names) {
        const word = new RegExp(`\\b${name}\\b`);
        if (![...readers].some(([other, otherText]) => other !== file && word.test(otherText)))
          unused.push(`${file}:${lineOf(source, statement)} exports ${name}, which no other file uses: unexport it`);
      }
    }
  }
  return unused;
}

// --- the tests --------------------------------------------------------------------------------

const root = fileURLToPath(new URL('../..', import.meta.url));
const found = checkArchitecture(productFiles(root));
const messages = (rule: Rule) => found.filter((v) => v.rule === rule).map((v) => `${v.where} ${v.problem}`);

describe('the product code keeps the house rules', () => {
  test('every file belongs to a layer', () => {
    expect(messages('no-layer')).toEqual([]);
  });

  for (const [layer, { holds, mayImport }] of Object.entries(LAYERS)) {
    test(`${holds.join(', ')} import${holds.length > 1 ? '' : 's'} only ${[layer, ...mayImport].join(', ')} (and packages)`, () => {
      expect(messages(`layer:${layer}`)).toEqual([]);
    });
  }

  test(`only ${MCP_SDK.onlyIn.join(' and ')} import ${MCP_SDK.package}`, () => {
    expect(messages('mcp-sdk')).toEqual([]);
  });

  test(`no vendor name in code outside ${VENDOR_NAMES.allowedIn.join(', ')} (except ${VENDOR_NAMES.exceptFiles.join(', ')})`, () => {
    expect(messages('vendor-name')).toEqual([]);
  });

  test('no import cycles, type imports included', () => {
    expect(messages('cycle')).toEqual([]);
  });

  test('nothing is exported that no other file uses (tests, benchmarks and scripts count)', () => {
    expect(exportedButUnused(productFiles(root), readers(root))).toEqual([]);
  });
});

describe('the checker', () => {
  const check = (files: Record<string, string>) => checkArchitecture(new Map(Object.entries(files)));

  test('catches each kind of violation, in every form of import', () => {
    const violations = check({
      'backends/one.ts': `import { leaf } from '../src/lib/leaf.js';`,
      'iac/store.ts': [
        `import { runProcess } from '../src/jobs/process/runner.js';`,
        `export { serve } from '../src/mcp/server.js';`,
        `const later = () => import('../src/commands/run.js');`,
      ].join('\n'),
      'src/app.ts': `import { serve } from './mcp/server.js';`,
      'src/commands/run.ts': `import { serve } from '../mcp/server.js';`,
      'src/config/config.ts': `type Serve = typeof import('../jobs/table.js');`,
      'src/jobs/a.ts': `import type { B } from './b.js';\nexport type A = B[];`,
      'src/jobs/b.ts': `import { type A } from './a.js';\nexport type B = number;`,
      'src/jobs/process/runner.ts': `export const runProcess = 1;`,
      'src/jobs/table.ts': [
        `import type { Server } from '@modelcontextprotocol/sdk/server/index.js';`,
        `import type { App } from '../app.js';`,
        `// a comment may say claude`,
        `/** and so may JSDoc: Gemini */`,
        `const backend = 'Codex CLI';`,
        'const line = `run ${backend} with grok`, pattern = /xai-[a-z]+/;',
        `const openAiKey = 1;`,
      ].join('\n'),
      'src/lib/leaf.ts': `const config = require('../config/config.js');`,
      'src/mcp/server.ts': `import type { Run } from '../commands/run.js';`,
      'src/stray.ts': `export const stray = 1;`,
    });
    expect(violations.map((v) => `${v.rule} ${v.where}`)).toEqual([
      'layer:backends backends/one.ts:1',
      'layer:iac iac/store.ts:1',
      'layer:iac iac/store.ts:2',
      'layer:iac iac/store.ts:3',
      'layer:app src/app.ts:1',
      'layer:commands src/commands/run.ts:1',
      'layer:config src/config/config.ts:1',
      'mcp-sdk src/jobs/table.ts:1',
      'layer:jobs src/jobs/table.ts:2',
      'vendor-name src/jobs/table.ts:5',
      'vendor-name src/jobs/table.ts:6',
      'vendor-name src/jobs/table.ts:7',
      'layer:lib src/lib/leaf.ts:1',
      'layer:mcp src/mcp/server.ts:1',
      'no-layer src/stray.ts',
      'cycle src/mcp/server.ts → src/commands/run.ts → src/mcp/server.ts',
      'cycle src/jobs/a.ts → src/jobs/b.ts → src/jobs/a.ts',
    ]);
    const problem = (where: string) => violations.find((v) => v.where === where)?.problem;
    expect(problem('iac/store.ts:1')).toBe(
      `imports src/jobs/process/runner.ts (process); iac may import only jobs, config, backends, lib: ${LAYERS.iac!.fix}`,
    );
    expect(problem('src/jobs/table.ts:6')).toContain(
      'names a vendor in } with grok`, /xai-[a-z]+/: vendor facts live in backends/',
    );
  });

  test('lets the allowed arrows, packages, comments and the client-config exception pass', () => {
    expect(
      check({
        'backends/claude.ts': `import type { Backend } from './types.js';\nexport const claude = (sdk = () => import('openai')) => sdk;`,
        'backends/types.ts': `export type Backend = { name: 'claude' };`,
        'iac/store.ts': `import type { Table } from '../src/jobs/table.js';`,
        'src/app.ts': `import { runProcess } from './jobs/process/runner.js';\nimport type { Table } from '../iac/store.js';`,
        'src/cli.ts': `import { clients } from './commands/init.js';\nimport { serve } from './mcp/server.js';`,
        'src/commands/init.ts': `export const clients = ['Claude Code', 'VS Code', 'Codex'];`,
        'src/config/config.ts': `import type { Backend } from '../../backends/types.js';\nimport { text } from '../lib/text.js';`,
        'src/jobs/process/runner.ts': `export const runProcess = 1;`,
        'src/jobs/table.ts': `import { runProcess } from './process/runner.js';\n// spawns claude, codex and the rest`,
        'src/lib/text.ts': `import { join } from 'node:path';\nexport const text = join('a', 'b');`,
        'src/mcp/server.ts': `import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';\nimport type { App } from '../app.js';`,
      }),
    ).toEqual([]);
  });
});
