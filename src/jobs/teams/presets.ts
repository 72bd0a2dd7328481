// Team presets: `.polyspawn/teams/<name>.md` beside the agents folder, a YAML frontmatter with the
// topology, members and options (run_team's), and a body of instructions every member gets.
// run_team(team: "<name>", task) runs one; a file that fails the checks is reported by name and
// reason, as agent definitions are.
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { InputError } from '../../lib/errors.js';
import { parseAgentFile } from '../agents/definitions.js';
import { TEAM_LIMITS } from './spec.js';
import { teamOptionsSchema, type TeamOptions } from './options.js';

type TeamPreset = {
  name: string;
  file: string;
  options: TeamOptions;
  instructions: string;
  description?: string;
};
export type PresetProblem = { file: string; problem: string };

const PRESET_NAME = /^[a-z][a-z0-9_-]{0,47}$/;
const MAX_FILE_BYTES = 256 * 1024;

const presetSchema = teamOptionsSchema.extend({ description: z.string().max(1000).optional() });

/** The presets folder: `teams/` beside the agents folder (`.polyspawn/teams` by default). */
export const presetsDir = (agentsDir: string) => join(dirname(agentsDir), 'teams');

/** One preset, or a problem that names the file and says what is wrong. */
function loadPreset(dir: string, name: string): TeamPreset | PresetProblem {
  const file = join(dir, `${name}.md`);
  const problem = (text: string): PresetProblem => ({ file, problem: text });
  if (!PRESET_NAME.test(name)) return problem(`"${name}" is not a preset name (lowercase letters, digits, - and _)`);
  let text: string;
  try {
    const stat = lstatSync(file);
    if (!stat.isFile()) return problem('it is not a plain file (links are not followed)');
    if (stat.size > MAX_FILE_BYTES) return problem(`it is larger than ${MAX_FILE_BYTES / 1024} KB`);
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return problem(code === 'ENOENT' ? 'there is no such file' : `it cannot be read (${code})`);
  }
  const split = parseAgentFile(text);
  if ('problem' in split) return problem(split.problem);
  const parsed = presetSchema.safeParse(split.frontmatter);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return problem(`${issue.path.join('.') || 'frontmatter'}: ${issue.message}`);
  }
  const instructions = split.body.trim();
  if (instructions.length > TEAM_LIMITS.instructionsChars)
    return problem(`its instructions are longer than ${TEAM_LIMITS.instructionsChars} characters`);
  const { description, ...options } = parsed.data;
  return { name, file, options, instructions, description: description || undefined };
}

/** Every preset in the folder, and the files that failed the checks. */
export function loadPresets(dir: string): { presets: TeamPreset[]; problems: PresetProblem[] } {
  let names: string[];
  try {
    names = readdirSync(dir).filter((f) => f.endsWith('.md'));
  } catch {
    return { presets: [], problems: [] };
  }
  const presets: TeamPreset[] = [];
  const problems: PresetProblem[] = [];
  for (const f of names.sort()) {
    const loaded = loadPreset(dir, f.slice(0, -3));
    if ('problem' in loaded) problems.push(loaded);
    else presets.push(loaded);
  }
  return { presets, problems };
}

/** The preset named by run_team, or an InputError naming the file and the reason. */
export function presetFor(dir: string, name: string): TeamPreset {
  const loaded = loadPreset(dir, name);
  if ('problem' in loaded)
    throw new InputError(`team preset "${name}" (${loaded.file}) cannot be used: ${loaded.problem}`);
  return loaded;
}
