import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAdminHmac } from '../../server/auth.ts';
import { cleanEnv, ROOT } from '../support/cli.ts';
import { GeminiLiveFake } from '../support/gemini-live-fake.ts';
import { httpFetch, tempDir } from '../support/server.ts';
import { startSipp, type SippRun } from '../support/sipp.ts';
import { until } from '../support/until.ts';
import { Receiver } from '../plugins/webhooks/support.ts';
import { clean } from '../../scripts/build.ts';
import { buildOnce, DIST_BIN, OUT } from './build-once.ts';

/**
 * `npm run build` output runs on its own: `node dist/bin/sovcomms.js` (no TypeScript loader)
 * passes the very smoke test the TypeScript entry passes. Each entry, in turn: CLI commands on a
 * fresh data dir (an OIDC client, a webhook subscription, an API key), then `serve` with the
 * embedded telephony bridge, a token from the token endpoint found through discovery, an
 * outbound AI call through the real bridge to SIPp (the bridge and its media threads running from
 * the same tree as the server), and the webhook of that call delivered to a local receiver.
 */
const TS_BIN = path.join(ROOT, 'bin/sovcomms.mjs');
const V1 = '/api.ashx/v1';

let engine: GeminiLiveFake;
let receiver: Receiver;
const sipps: SippRun[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  await buildOnce();
  engine = new GeminiLiveFake({
    apiKey: 'AIza-smoke-key',
    usage: { prompt: 10, response: 5 },
    script: [{ say: 'Hello from the appliance.', audioMs: 400 }, { tool: 'end_call' }],
  });
  await engine.start();
  receiver = await new Receiver().start();
}, 600_000);

afterAll(async () => {
  for (const s of sipps) await s.stop();
  await engine?.stop();
  await receiver?.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function run(bin: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [bin, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    c.once('error', reject);
    c.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function smoke(bin: string): Promise<void> {
  const dataDir = tempDir('sovcomms-smoke-');
  dirs.push(dataDir);
  const base = 30000 + 2 * Math.floor(Math.random() * 4000);
  fs.writeFileSync(
    path.join(dataDir, 'config.json'),
    JSON.stringify({
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 49}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          ringTimeoutSec: 10,
        },
        webhooks: { allowLoopback: true },
        lotl: { autoRefresh: false },
      },
    }),
  );
  // No SOVCOMMS_CONFIG_JSON (cleanEnv's quiet default turns the bridge off): config.json rules.
  const env = { ...cleanEnv({ SOVCOMMS_LOG_LEVEL: 'warn', SOVCOMMS_BRIDGE_KEEPALIVE_SEC: '0' }) };
  delete env.SOVCOMMS_CONFIG_JSON;
  const cli = async (...args: string[]) => {
    const r = await run(bin, [...args, '--data-dir', dataDir], env);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };
  const clientSecret = /client_secret: (\S+)/.exec(
    await cli('client', 'add', 'smoke', '--grant', 'client_credentials', '--auth-method', 'client_secret_post'),
  )![1]!;
  await cli('webhook', 'add', '--url', `${receiver.url}/hook/${path.basename(dataDir)}`, '--events', '*');
  const apiKey = (await cli('apikey', 'create', '--user', 'admin')).trim();
  const adminSecret = (await cli('admin-secret', 'show')).trim();

  const server = spawn(process.execPath, [bin, 'serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', dataDir], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  server.stdout.on('data', (d: Buffer) => (out += d.toString()));
  server.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => server.once('exit', (code) => r(code)));
  try {
    const url = (await until(() => /listening on (http:\/\/\S+)/.exec(out)?.[1], 60_000, `serve listening (${out})`))!;
    const host = new URL(url).host;
    const adm = (p: string, bucket: string, json?: unknown) => {
      const body = json === undefined ? undefined : JSON.stringify(json);
      return httpFetch(url + p, {
        method: body ? 'POST' : 'GET',
        body,
        headers: {
          'x-service-admin-signature': signAdminHmac(adminSecret, bucket, host, body ? Buffer.byteLength(body) : undefined),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
      });
    };

    // A token from the OIDC token endpoint, found through discovery.
    const disco = (await (await httpFetch(`${url}/.well-known/openid-configuration`)).json()) as { token_endpoint: string };
    const tokenRes = await httpFetch(url + new URL(disco.token_endpoint).pathname, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'smoke', client_secret: clientSecret }),
    });
    const token = (await tokenRes.json()) as { access_token?: string; token_type?: string };
    expect(tokenRes.status, JSON.stringify(token)).toBe(200);
    expect(token.access_token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);

    // A call through the bridge (spawned from the same tree) to SIPp.
    await until(
      async () => ((await (await adm('/signal.ashx?bridge=status', 'bridge-status')).json()) as { state: string }).state === 'ready',
      30_000,
      'bridge ready',
    );
    // The bridge runs from the same tree as the server: compiled JavaScript under dist/, no loader.
    const bridgeArgs = execFileSync('ps', ['-o', 'args=', '--ppid', String(server.pid)]).toString();
    if (bin === DIST_BIN) expect(bridgeArgs).toContain(path.join(OUT, 'plugins/telephony/bridge/main.js'));
    else expect(bridgeArgs).toMatch(/run-ts\.mjs \S+plugins\/telephony\/bridge\/main\.ts/);
    expect(bridgeArgs).not.toContain(bin === DIST_BIN ? 'run-ts' : '.js');
    const sipp = await startSipp({ scenario: 'answer-play-pcap', timeoutSec: 40 });
    sipps.push(sipp);
    const save = await adm('/signal.ashx?trunks=save', 'trunks-save', {
      id: 'sipp',
      name: 'sipp',
      host: '127.0.0.1',
      port: sipp.port,
      transport: 'udp',
      codecs: ['PCMA', 'PCMU'],
    });
    expect(save.status, await save.clone().text()).toBe(200);
    await until(
      async () => ((await (await adm('/signal.ashx?bridge=status', 'bridge-status')).json()) as { health?: { trunks?: unknown[] } }).health?.trunks?.length,
      10_000,
      'trunk at the bridge',
    );
    expect((await adm('/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'sipp' })).status).toBe(200);
    const placed = await httpFetch(`${url}${V1}/calls`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ phone: '+4930123456', displayName: 'Smoke', systemPrompt: 'Say hello.', apiKey: 'AIza-smoke-key', voice: 'Puck' }),
    });
    const callId = ((await placed.json()) as { callId: string }).callId;
    expect(placed.status).toBe(200);
    const rec = await until(
      async () => {
        const c = (await (await httpFetch(`${url}${V1}/calls/${callId}`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as { status: string };
        return c.status.startsWith('ended') ? c : null;
      },
      40_000,
      'call ended',
    );
    expect(rec).toMatchObject({ status: 'ended-success', trunkId: 'sipp' });
    expect((await sipp.exited).code).toBe(0);

    // The call's webhook, delivered to the local receiver.
    const hook = await until(
      () => receiver.received.find((r) => r.path.endsWith(path.basename(dataDir)) && r.body.includes('call.ended') && r.body.includes(callId)),
      20_000,
      'webhook delivery of call.ended',
    );
    expect(hook.headers['webhook-signature']).toBeTruthy();
  } finally {
    server.kill('SIGTERM');
    expect(await exited, out).toBe(0);
  }
  // A clean stop checkpoints the store: no WAL left behind.
  expect(fs.existsSync(path.join(dataDir, 'appliance.db-wal')) ? fs.statSync(path.join(dataDir, 'appliance.db-wal')).size : 0).toBe(0);
}

describe('compiled output (npm run build)', () => {
  it('dist/ holds no TypeScript to load and nothing that imports a TypeScript loader', () => {
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        if (e.name === 'console') continue;
        const p = path.join(d, e.name);
        if (e.isDirectory()) walk(p);
        else files.push(p);
      }
    };
    walk(OUT);
    expect(files.filter((f) => f.endsWith('.ts'))).toEqual([]);
    const js = files.filter((f) => /\.m?js$/.test(f) && !f.includes(`${path.sep}resources${path.sep}`));
    expect(js.length).toBeGreaterThan(50);
    // (A type in a bundled package's JSDoc, `import('./list.d.ts')`, is not an import.)
    for (const f of js) expect(fs.readFileSync(f, 'utf8'), f).not.toMatch(/from ['"]tsx|import\(['"][^'"]+(?<!\.d)\.ts['"]\)|from ['"]\.{1,2}\/[^'"]+\.ts['"]/);
    // Source maps beside the code, migrations and resources copied.
    expect(fs.existsSync(`${DIST_BIN}.map`)).toBe(true);
    expect(fs.existsSync(path.join(OUT, 'server/migrations/0001-core.sql'))).toBe(true);
    expect(fs.existsSync(path.join(OUT, 'resources/login/login.html'))).toBe(true);
    expect(fs.existsSync(path.join(OUT, 'plugins/telephony/bridge/media/worker-boot.mjs'))).toBe(true);
  });

  it('the compiled entry runs the bundle; the bundle finds the files beside the per-file compile', () => {
    // bin/sovcomms.js imports the bundle (scripts/bundle.ts), not the per-file tree.
    expect(fs.readFileSync(DIST_BIN, 'utf8')).toMatch(/import\(["']\.\.\/bundle\/cli\.js["']\)/);
    const dir = path.join(OUT, 'bundle');
    const chunks = fs.readdirSync(dir).filter((f) => f.endsWith('.js'));
    expect(chunks).toContain('cli.js');
    const text = chunks.map((f) => fs.readFileSync(path.join(dir, f), 'latin1')).join('\n');
    // Every import.meta.url of our code became the URL of its per-file compile, which exists.
    const selfUrls = [...text.matchAll(/new URL\("(\.\.\/[^"]+)", import\.meta\.url\)\.href/g)].map((m) => m[1]!);
    expect(selfUrls.length).toBeGreaterThan(10);
    for (const rel of selfUrls) expect(fs.existsSync(path.resolve(dir, rel)), rel).toBe(true);
    expect(selfUrls).toContain('../server/core.js');
    // Native addons and the bridge stay outside; of zod's locales only English is in.
    expect(text).not.toMatch(/node_modules\/better-sqlite3\/lib/);
    expect(text).toMatch(/node_modules\/zod\/v4\/locales\/en\.js/);
    expect(text).not.toMatch(/node_modules\/zod\/v4\/locales\/de\.js/);
    expect(text).not.toMatch(/telephony\/bridge\/main\.js/);
  });

  it('npm run build runs the console build after the server build, when the console has one', () => {
    const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.build).toBe('node bin/run-ts.mjs scripts/build.ts && npm run --if-present build:console');
    // npm start runs the compiled dist/ when it is built and current, else the TypeScript entry (bin/start.mjs).
    expect(scripts.start).toBe('node bin/start.mjs');
  });

  it('a build cleans what an older build left, never dist/console (the console build writes it)', () => {
    const out = tempDir('sovcomms-clean-');
    dirs.push(out);
    for (const f of ['console/index.html', 'server/stale.js', 'bin/sovcomms.js', 'bundle/chunk-OLD.js', 'resources/login/x.html', 'package.json']) {
      fs.mkdirSync(path.dirname(path.join(out, f)), { recursive: true });
      fs.writeFileSync(path.join(out, f), 'old');
    }
    clean(out);
    expect(fs.readdirSync(out)).toEqual(['console']);
    expect(fs.readFileSync(path.join(out, 'console/index.html'), 'utf8')).toBe('old');
  });

  it('node dist/bin/sovcomms.js: token, SIPp call through the bridge, webhook delivery', async () => {
    await smoke(DIST_BIN);
  }, 180_000);

  it('the TypeScript entry passes the same smoke test', async () => {
    await smoke(TS_BIN);
  }, 180_000);
});
