// integrate: bring an isolated agent's branch back into the user's checkout, as a patch, or not
// at all (src/jobs/worktree/integrate.ts does it).
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { integrate, INTEGRATE_MODES } from '../../jobs/worktree/integrate.js';

const outputSchema = z.object({
  agent_id: z.string(),
  how: z.enum(INTEGRATE_MODES),
  branch: z.string(),
  base: z.string(),
  files: z.array(z.string()).describe('The files the branch changes from its base'),
  commits: z.array(z.string()).optional().describe('merge, cherry-pick: the new commits on your branch, newest first'),
  patch: z.string().optional().describe('patch: the diff from the base; nothing is applied'),
  patch_cut: z.number().optional().describe('Characters of the patch left out'),
  removed: z.boolean().describe('The worktree and the branch were removed'),
  note: z.string().optional(),
});

export const integrateTool = (app: App) =>
  tool({
    name: 'integrate',
    spawning: true,
    title: 'Integrate agent work',
    description:
      "Take an isolated agent's branch polyspawn/<agent_id>: merge or cherry-pick it into your branch (refused over uncommitted changes; a conflict changes nothing and names the files), patch (its diff only) or discard.",
    input: z
      .object({
        agent_id: z.string().min(1).max(64),
        how: z.enum(INTEGRATE_MODES),
      })
      .strict(),
    output: outputSchema,
    annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
    handler: async ({ agent_id, how }) => {
      const done = await integrate(app, agent_id, how);
      return {
        agent_id: done.agentId,
        how: done.how,
        branch: done.branch,
        base: done.base,
        files: done.files,
        commits: done.commits,
        patch: done.patch,
        patch_cut: done.patchCut || undefined,
        removed: done.removed,
        note: done.note || undefined,
      };
    },
  });
