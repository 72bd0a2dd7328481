// Vendor knowledge stays in backends/: each backend declares the shapes of its vendor's keys,
// src/lib/redact.ts knows only the shapes no vendor owns, and the app's redactor has both.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { createApp } from '../../src/app.js';
import { REDACTED, Redactor } from '../../src/lib/redact.js';

const VENDOR_KEYS: Record<string, string[]> = {
  claude: ['sk-ant-api03-abcdefghijklmnop_QRSTUV-1234'],
  codex: ['sk-proj-AbCdEf0123456789GhIjKl', 'sk-AbCdEf0123456789GhIjKl'],
  copilot: ['ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz'],
  grok: ['xai-AbCdEfGhIjKlMnOpQrStUv0123'],
  gemini: ['AIzaSyA1234567890abcdefghijklmnopqrstu'],
};

describe('key shapes', () => {
  test.each(Object.entries(VENDOR_KEYS))(
    "%s declares its vendor's key shapes; the generic redactor alone knows none of them",
    (name, keys) => {
      const backend = backends.find((b) => b.name === name)!;
      const own = new Redactor([], backend.secretPatterns);
      const generic = new Redactor();
      for (const key of keys) {
        expect(own.text(`key=${key}`)).toBe(`key=${REDACTED}`);
        expect(generic.text(`key=${key}`)).toBe(`key=${key}`);
      }
    },
  );

  test('a backend whose keys have no shape declares none; generic shapes need no backend', () => {
    expect(backends.find((b) => b.name === 'mistral')!.secretPatterns).toEqual([]);
    expect(new Redactor().text('AKIAIOSFODNN7EXAMPLE and Bearer abcdefghijklmnopqrstuvwxyz')).toBe(
      `${REDACTED} and Bearer ${REDACTED}`,
    );
  });

  test("the app's redactor knows every backend's shapes, keys it was never given included", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'polyspawn-shapes-'));
    const app = createApp({ PATH: process.env.PATH, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }, dir, () => true);
    try {
      for (const key of Object.values(VENDOR_KEYS).flat())
        expect(app.secrets.text(`key=${key}`)).toBe(`key=${REDACTED}`);
    } finally {
      app.agents.close();
      await app.iac.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
