// Where IAC.md goes and how many entries it keeps: defaults, config file, environment.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { loadConfig } from '../../src/config/config.js';
import { tempDir } from '../helpers/temp.js';

const dir = () => tempDir('iac-config');
const base = (d: string) => ({ XDG_CONFIG_HOME: join(d, 'xdg'), PATH: process.env.PATH });

describe('IAC.md settings', () => {
  test('defaults: IAC.md in the project, 200 entries, the store in .polyspawn', () => {
    const d = dir();
    expect(loadConfig(backends, base(d), d)).toMatchObject({
      iacFile: join(d, 'IAC.md'),
      iacEntries: 200,
      stateDir: join(d, '.polyspawn'),
    });
  });

  test('the project config file, then the environment', () => {
    const d = dir();
    writeFileSync(
      join(d, 'polyspawn.config.json'),
      JSON.stringify({ iac_file: 'docs/AGENTS-LOG.md', iac_entries: 50 }),
    );
    expect(loadConfig(backends, base(d), d)).toMatchObject({
      iacFile: join(d, 'docs', 'AGENTS-LOG.md'),
      iacEntries: 50,
    });
    expect(
      loadConfig(backends, { ...base(d), POLYSPAWN_IAC_FILE: '/abs/IAC.md', POLYSPAWN_IAC_ENTRIES: '0' }, d),
    ).toMatchObject({ iacFile: '/abs/IAC.md', iacEntries: 0 });
  });

  test('bad values say what to fix', () => {
    const d = dir();
    expect(() => loadConfig(backends, { ...base(d), POLYSPAWN_IAC_ENTRIES: 'lots' }, d)).toThrow(
      /POLYSPAWN_IAC_ENTRIES=lots is not a number from 0 to 10000/,
    );
    writeFileSync(join(d, 'polyspawn.config.json'), JSON.stringify({ iac_entries: -1 }));
    expect(() => loadConfig(backends, base(d), d)).toThrow(/iac_entries/);
  });
});
