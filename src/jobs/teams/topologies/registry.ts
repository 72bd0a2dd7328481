// Every topology run_team offers, in the order its description and schema name them. Adding one:
// a new file beside this one and one line here (docs/ARCHITECTURE.md, "Adding a topology").
import type { Topology } from '../topology.js';
import { mapReduce } from './map-reduce.js';
import { pipeline } from './pipeline.js';
import { peerRing } from './peer-ring.js';
import { leaderTeammate } from './leader-teammate.js';
import { blackboard } from './blackboard.js';
import { supervisorTree } from './supervisor-tree.js';

export const topologies: readonly Topology[] = [
  mapReduce,
  pipeline,
  peerRing,
  leaderTeammate,
  blackboard,
  supervisorTree,
];
