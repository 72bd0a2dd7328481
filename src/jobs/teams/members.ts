// A team's members as the spawn use case runs them: a member is a backend (`codex`) or a named
// agent (`reviewer`), either with a model (`claude:opus`); each becomes an ordinary job.
import type { Backend } from '../../../backends/types.js';
import { InputError, SetupError } from '../../lib/errors.js';
import { namedAgentSettings, type AgentDefinition } from '../agents/definitions.js';
import {
  checkCaller,
  permissionProblem,
  spawnJob,
  type SpawnContext,
  type SpawnRequest,
  type Supervisor,
} from '../spawn.js';
import type { MemberRequest, TeamHost } from './table.js';
import { parseMember } from './spec.js';

type MemberContext = SpawnContext & {
  backends: readonly Backend[];
  agents: { readonly agents: ReadonlyMap<string, AgentDefinition> };
  /** Whether CLI agents get the channel (the config's `channel`). */
  channel: boolean;
};

/** The spawn request a member stands for, without its prompt; an InputError or SetupError says what to change. */
function memberSpawn(
  ctx: MemberContext,
  ref: string,
  needsChannel: boolean,
  caller: string | undefined,
  supervisor: Supervisor | undefined,
): Omit<SpawnRequest, 'prompt'> {
  const { name, model } = parseMember(ref);
  const label = `team member "${ref}"`;
  const definition = ctx.agents.agents.get(name);
  const backend = ctx.backends.find((b) => b.name === (definition?.backend ?? name));
  if (!backend) {
    if (definition)
      throw new SetupError(`${label}: its backend ${definition.backend} is not enabled in this polyspawn's config`);
    throw new InputError(
      `${label} is neither a backend (${ctx.backends.map((b) => b.name).join(', ')}) nor a named agent (list_agents shows them)`,
    );
  }
  // Said before the team starts; spawnJob checks it again for each member it submits.
  if (definition) checkCaller(label, definition, caller);
  if (definition?.model && model)
    throw new InputError(`${label}: agent ${name} fixes its model (${definition.model}); name it without ":${model}"`);
  if (needsChannel && (backend.kind !== 'cli' || !ctx.channel || definition?.askParent === false))
    throw new InputError(
      `${label} cannot take part: this topology's members talk to their team over the channel, which only CLI agents ` +
        `with ask_parent on have${ctx.channel ? '' : ' (the config turns the channel off: channel: false)'}`,
    );
  const availability = ctx.availability(backend);
  if (!availability.usable) throw new SetupError(`${label} cannot run here: ${availability.detail}`);
  const agent = definition && namedAgentSettings(definition, backend);
  const wider = supervisor && permissionProblem(ctx.config, { backend: backend.name, agent }, supervisor);
  if (wider) throw new InputError(`${label}: ${wider}`);
  return {
    backend,
    label,
    caller,
    model,
    agent: definition && { definition },
    supervisor,
  };
}

/** The TeamHost's member side over the spawn use case. */
export function memberHost(ctx: MemberContext): Pick<TeamHost, 'checkMember' | 'spawnMember'> {
  return {
    checkMember: (ref, options) =>
      void memberSpawn(ctx, ref, options.needsChannel === true, options.caller, options.supervisor),
    spawnMember: (ref, request: MemberRequest) => {
      const spawn = memberSpawn(ctx, ref, request.needsChannel === true, request.caller, request.supervisor);
      return spawnJob(ctx, {
        ...spawn,
        prompt: request.prompt,
        team: request.team,
        timeoutS: request.timeoutS,
        maxTurns: request.maxTurns,
        // An API member works in no folder: the team's isolation is for its CLI members.
        isolation: spawn.backend.kind === 'cli' ? request.isolation : undefined,
      });
    },
  };
}
