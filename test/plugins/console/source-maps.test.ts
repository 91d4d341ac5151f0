import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';

/**
 * The console's source maps are for a developer's tools: the build writes them unreferenced
 * (`sourcemap: 'hidden'`) and the appliance never serves them, whoever asks.
 */
let s: TestServer;
const dir = tempDir('console-maps-');

beforeAll(async () => {
  // A build as Vite lays it out: a script, its map beside it, and a map a later rebuild dropped in.
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><script type="module" src="/console/assets/app-abc123.js"></script>');
  fs.writeFileSync(path.join(dir, 'assets', 'app-abc123.js'), 'console.log(1);\n');
  fs.writeFileSync(path.join(dir, 'assets', 'app-abc123.js.map'), '{"version":3,"sources":["../src/secret-internals.tsx"],"mappings":""}');
  fs.writeFileSync(path.join(dir, 'assets', 'vendor.map'), '{}');
  s = await startTestServer({ overrides: { plugins: { console: { dir } } } });
});
afterAll(async () => {
  await s?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('console source maps', () => {
  it('are not served, to anyone: 404 without and with an admin credential; the script is', async () => {
    expect((await s.fetch('/console/assets/app-abc123.js', { key: null })).status).toBe(200);
    for (const p of ['/console/assets/app-abc123.js.map', '/console/assets/vendor.map', '/console/assets/app-abc123.js.map?x=1']) {
      for (const key of [null, s.adminKey]) {
        const r = await s.fetch(p, { key });
        expect(r.status, `${p} ${key ? 'admin' : 'anonymous'}`).toBe(404);
        expect(await r.text()).not.toContain('secret-internals');
      }
    }
  });

  it('the production build writes them unreferenced: no served script names its map', () => {
    const vite = fs.readFileSync(path.resolve(import.meta.dirname, '../../../renderer/vite.config.ts'), 'utf8');
    expect(vite).toMatch(/sourcemap: 'hidden'/);
    const built = path.resolve(import.meta.dirname, '../../../dist/console/assets');
    const scripts = fs.existsSync(built) ? fs.readdirSync(built).filter((f) => f.endsWith('.js')) : [];
    for (const f of scripts) expect(fs.readFileSync(path.join(built, f), 'utf8'), f).not.toMatch(/sourceMappingURL/);
  });
});
