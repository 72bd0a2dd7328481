// Every backend polyspawn offers. Adding one: a new file beside this one (its models table
// included) and one line here (docs/ARCHITECTURE.md, "Adding a backend").
import type { Backend } from './types.js';
import { claude } from './claude.js';
import { codex } from './codex.js';
import { copilot } from './copilot.js';
import { geminiCli } from './gemini-cli.js';
import { grok } from './grok.js';
import { gemini } from './gemini.js';
import { mistral } from './mistral.js';

export const backends: readonly Backend[] = [claude, codex, copilot, geminiCli, grok, gemini, mistral];

export type { Backend } from './types.js';
