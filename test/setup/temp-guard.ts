// Vitest globalSetup: tests must remove the folders they make (test/helpers/temp.ts). At the end
// of a run this names the polyspawn-* folders that appeared in the temporary folder meanwhile and
// are still there. A warning, not a failure: another run sharing the folder adds its own, so only
// a private TMPDIR (`TMPDIR=$(mktemp -d) npx vitest run ...`) makes the list this run's alone.
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';

const ours = () => readdirSync(tmpdir()).filter((name) => name.startsWith('polyspawn-'));

export default function setup(): () => void {
  const before = new Set(ours());
  return () => {
    const left = ours().filter((name) => !before.has(name));
    if (left.length === 0) return;
    const shown = left.slice(0, 20).join(', ') + (left.length > 20 ? ', ...' : '');
    console.warn(`\n${left.length} polyspawn-* folders appeared in ${tmpdir()} during the run and remain: ${shown}`);
  };
}
