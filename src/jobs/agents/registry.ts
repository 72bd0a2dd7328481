// The agent definitions in effect, reloaded when their files change on disk. Watching is
// fs.watch on each agents folder and on each agent's own folder (so a save by an editor that
// writes a temp file and renames it over agent.md is seen), debounced, and robust to a folder
// that does not exist yet: its nearest existing parent is watched until it appears.
import { existsSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, relative, sep } from 'node:path';
import type { Redactor } from '../../lib/redact.js';
import {
  agentFolders,
  loadAgents,
  type AgentContext,
  type AgentFileCache,
  type AgentDefinition,
  type AgentProblem,
  type LoadedAgents,
} from './definitions.js';

const DEFAULT_DEBOUNCE_MS = 150;

export class AgentRegistry {
  private loaded: LoadedAgents = { agents: new Map(), shadowed: [], problems: [] };
  private fingerprint = '';
  private readonly files: AgentFileCache = new Map();
  private readonly reported = new Set<string>();
  private readonly listeners = new Set<() => void>();
  private readonly watchers = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | undefined;
  private watching = false;

  constructor(
    readonly ctx: AgentContext,
    /** Learns the secrets in the definitions' MCP server settings as they load. */
    private readonly secrets: Redactor,
    private readonly log: (message: string) => void = () => undefined,
    private readonly debounceMs = DEFAULT_DEBOUNCE_MS,
  ) {
    this.reload();
  }

  get agents(): ReadonlyMap<string, AgentDefinition> {
    return this.loaded.agents;
  }

  get problems(): readonly AgentProblem[] {
    return this.loaded.problems;
  }

  get shadowed(): readonly AgentDefinition[] {
    return this.loaded.shadowed;
  }

  get folders() {
    return agentFolders(this.ctx.config);
  }

  /** Called after every reload that changed the definitions or their problems. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads every agent file again; returns whether anything changed. */
  reload(): boolean {
    const next = loadAgents(this.ctx, this.files);
    const fingerprint = JSON.stringify([[...next.agents.values()], next.shadowed.map((d) => d.file), next.problems]);
    if (this.watching) this.rewatch(next);
    if (fingerprint === this.fingerprint) return false;
    this.loaded = next;
    this.fingerprint = fingerprint;
    this.secrets.addValues(mcpSecrets([...next.agents.values(), ...next.shadowed]));
    const current = new Set<string>();
    for (const p of next.problems) {
      const key = `${p.file}\n${p.problem}`;
      current.add(key);
      if (!this.reported.has(key)) this.log(`agent definition ${p.file} skipped: ${p.problem}`);
    }
    this.reported.clear();
    for (const key of current) this.reported.add(key);
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        this.log(`updating the agent tools failed: ${(error as Error).message}`);
      }
    }
    return true;
  }

  /** Starts watching the agents folders; reloads (debounced) on any change in them. */
  watch(): void {
    if (this.watching) return;
    this.watching = true;
    this.rewatch(this.loaded);
  }

  close(): void {
    this.watching = false;
    clearTimeout(this.timer);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.watching) this.reload();
    }, this.debounceMs);
    this.timer.unref();
  }

  /** Watches each folder (and every agent folder in it), or the nearest existing parent of a missing one. */
  private rewatch(loaded: LoadedAgents): void {
    const wanted = new Map<string, (file: string | null) => boolean>();
    for (const { dir } of this.folders) {
      if (existsSync(dir)) {
        wanted.set(dir, () => true);
        for (const p of loaded.problems) if (p.file.startsWith(dir + sep)) wanted.set(dirname(p.file), () => true);
      } else {
        // Only the entry on the way to the missing folder matters (not IAC.md in the project).
        let child = dir;
        let parent = dirname(dir);
        while (parent !== child && !existsSync(parent)) {
          child = parent;
          parent = dirname(parent);
        }
        const next = basename(child);
        const previous = wanted.get(parent);
        wanted.set(parent, (file) => file === null || file === next || (previous?.(file) ?? false));
      }
    }
    for (const definition of [...loaded.agents.values(), ...loaded.shadowed])
      wanted.set(dirname(definition.file), () => true);
    for (const [dir, watcher] of this.watchers) {
      if (!wanted.has(dir)) {
        watcher.close();
        this.watchers.delete(dir);
      }
    }
    for (const [dir, relevant] of wanted) {
      const inode = inodeOf(dir);
      const existing = this.watchers.get(dir) as Watcher | undefined;
      if (existing && existing.inode === inode) {
        existing.relevant = relevant;
        continue;
      }
      // A folder removed and made again is another folder: the old watch sees nothing more.
      existing?.close();
      this.watchers.delete(dir);
      if (inode === undefined) continue;
      try {
        const watcher = watch(dir, { persistent: false }) as Watcher;
        watcher.relevant = relevant;
        watcher.inode = inode;
        watcher.on('change', (_event, file) => {
          const name = file === null || file === undefined ? null : String(file);
          if (watcher.relevant?.(name) ?? true) this.schedule();
        });
        watcher.on('error', () => {
          // The folder went away (or the watch broke): drop it; the next reload watches again.
          watcher.close();
          if (this.watchers.get(dir) === watcher) this.watchers.delete(dir);
          this.schedule();
        });
        this.watchers.set(dir, watcher);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT')
          this.log(
            `cannot watch ${dir} for agent definitions (${code ?? (error as Error).message}); changes there are seen after a restart`,
          );
      }
    }
  }

  /** For messages: a definition's file relative to the project when inside it. */
  displayPath(file: string): string {
    const rel = relative(this.ctx.config.projectDir, file);
    return rel && !rel.startsWith('..') ? rel : file;
  }
}

/** An MCP server's header values and secret-named env values: redacted wherever jobs are recorded. */
function mcpSecrets(definitions: AgentDefinition[]): string[] {
  const values: string[] = [];
  for (const d of definitions) {
    for (const spec of Object.values(d.mcpServers ?? {})) {
      if ('url' in spec) values.push(...Object.values(spec.headers ?? {}));
      else
        for (const [k, v] of Object.entries(spec.env ?? {}))
          if (/KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL/i.test(k)) values.push(v);
    }
  }
  return values;
}

type Watcher = FSWatcher & { relevant?: (file: string | null) => boolean; inode?: number };

function inodeOf(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}
