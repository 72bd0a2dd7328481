// integrate: bring an isolated agent's branch back into the user's checkout, as a patch, or not
// at all (src/jobs/worktree/integrate.ts does it).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { integrate, INTEGRATE_MODES } from '../../jobs/worktree/integrate.js';
import { toolResult } from '../views.js';

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

export function registerIntegrateTool(server: McpServer, app: App): void {
  server.registerTool(
    'integrate',
    {
      title: 'Integrate agent work',
      description:
        "Take an isolated agent's branch polyspawn/<agent_id>: merge or cherry-pick it into your branch (refused over uncommitted changes; a conflict changes nothing and names the files), patch (its diff only) or discard.",
      inputSchema: z
        .object({
          agent_id: z.string().min(1).max(64),
          how: z.enum(INTEGRATE_MODES),
        })
        .strict(),
      outputSchema,
      annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ agent_id, how }) => {
      const done = await integrate(app, agent_id, how);
      return toolResult({
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
      });
    },
  );
}
