// Every backend polyspawn offers. Adding one: a new file beside this one, and one line here.
import type { Backend } from './types.js';
import { claude } from './claude.js';
import { codex } from './codex.js';
import { copilot } from './copilot.js';

export const backends: readonly Backend[] = [claude, codex, copilot];

export type { Backend } from './types.js';
