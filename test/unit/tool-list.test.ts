// tools/list as served (src/tool-list.ts): what a model needs, not the size limits the server
// enforces anyway; output schemas as plain objects; only non-default hints; and the SDK's own
// list with POLYSPAWN_TOOL_SCHEMAS=full.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { compactToolList } from '../../src/tool-list.js';

async function listed(env: NodeJS.ProcessEnv, change?: (tool: ReturnType<McpServer['registerTool']>) => void) {
  const server = new McpServer({ name: 't', version: '1' });
  const tool = server.registerTool(
    'spawn_x',
    {
      title: 'X agent',
      description: 'Runs X.',
      inputSchema: z
        .object({
          prompt: z.string().max(2_000_000).describe('The task'),
          timeout_s: z.number().int().min(1).max(100).optional(),
          mode: z.enum(['a', 'b']).optional(),
          schema: z.record(z.string(), z.unknown()).optional(),
        })
        .strict(),
      outputSchema: z.object({ agent_id: z.string(), state: z.enum(['queued', 'running']) }),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async () => ({ content: [], structuredContent: { agent_id: 'a', state: 'queued' } }),
  );
  server.registerTool('look', { description: 'Looks.', inputSchema: z.object({}).strict(), annotations: { readOnlyHint: true, openWorldHint: false } }, async () => ({ content: [] }));
  compactToolList(server, env);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'c', version: '1' });
  await client.connect(b);
  const first = (await client.listTools()).tools;
  change?.(tool);
  const second = (await client.listTools()).tools;
  await client.close();
  return { first, second };
}

describe('the tool list', () => {
  test('types, enums, required fields and descriptions; no limits, no $schema, no keywords that say nothing', async () => {
    const { first } = await listed({});
    const spawn = first.find((t) => t.name === 'spawn_x')!;
    expect(spawn).toEqual({
      name: 'spawn_x',
      title: 'X agent',
      description: 'Runs X.',
      inputSchema: {
        type: 'object',
        properties: {
          prompt: { type: 'string', description: 'The task' },
          timeout_s: { type: 'integer' },
          mode: { type: 'string', enum: ['a', 'b'] },
          schema: { type: 'object' },
        },
        required: ['prompt'],
        additionalProperties: false,
      },
      outputSchema: { type: 'object' },
    });
    // Only the hints that differ from the spec's defaults.
    expect(first.find((t) => t.name === 'look')!.annotations).toEqual({ readOnlyHint: true, openWorldHint: false });
  });

  test('a tool changed in place is listed anew', async () => {
    const { second } = await listed({}, (tool) => tool.update({ description: 'Runs X, now better.' }));
    expect(second.find((t) => t.name === 'spawn_x')!.description).toBe('Runs X, now better.');
  });

  test('POLYSPAWN_TOOL_SCHEMAS=full: the SDK list, output fields and limits included', async () => {
    const { first } = await listed({ POLYSPAWN_TOOL_SCHEMAS: 'full' });
    const spawn = first.find((t) => t.name === 'spawn_x')!;
    expect(spawn.outputSchema?.properties).toHaveProperty('agent_id');
    expect(spawn.inputSchema.properties!.prompt).toMatchObject({ maxLength: 2_000_000 });
  });
});
