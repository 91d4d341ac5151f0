/**
 * Issue 12's benchmark: the operator console in Chromium on loopback, against the real appliance.
 *
 * 1. Initial JavaScript (gzip) of /console/: the boot script and the app root with every chunk
 *    they import statically (what the first screen runs), beside
 *    the bare Vite React template (`npm create vite` react-ts: a counter) built the same way (Vite,
 *    @vitejs/plugin-react) in the same run. Target < 250 KB.
 * 2. Navigation to an interactive dashboard (the first figure shown, through the OIDC redirect and
 *    the token exchange, since tokens live in memory only), median of RUNS, beside the template's
 *    navigation to its interactive counter served by a bare node:http static server. Target < 1 s.
 * 3. The calls page with 100 000 calls in the tenant: from the menu click to the first page of rows
 *    shown (the server pages; the browser never holds them all). Target < 1.5 s.
 * Knobs (env): BENCH_CONSOLE_RUNS (5), BENCH_CONSOLE_CALLS (100000).
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { Appliance } from '../server/app.ts';
import { envNumber, type BenchResult } from './lib/contract.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const RUNS = envNumber('BENCH_CONSOLE_RUNS', 5);
const CALLS = envNumber('BENCH_CONSOLE_CALLS', 100_000);
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const r1 = (n: number) => Math.round(n * 10) / 10;

interface ManifestChunk {
  file: string;
  imports?: string[];
  dynamicImports?: string[];
}

/**
 * gzip -9 size of what the console's first screen runs: the boot entry, the app root it imports
 * at /console/callback, and every chunk either pulls in statically (from Vite's manifest). Pages
 * past the dashboard load on demand and are not counted.
 */
function consoleFirstScreenGzip(distDir: string): number {
  const m = JSON.parse(fs.readFileSync(path.join(distDir, '.vite', 'manifest.json'), 'utf8')) as Record<string, ManifestChunk>;
  const seen = new Set<string>();
  const visit = (key: string) => {
    if (seen.has(key) || !m[key]) return;
    seen.add(key);
    for (const i of m[key].imports ?? []) visit(i);
  };
  visit('index.html');
  visit('src/root.tsx');
  return [...seen].reduce((n, k) => n + zlib.gzipSync(fs.readFileSync(path.join(distDir, m[k]!.file)), { level: 9 }).length, 0);
}

/** gzip -9 size of the entry script and its modulepreloads named in an index.html. */
function initialJsGzip(distDir: string, base: string): number {
  const html = fs.readFileSync(path.join(distDir, 'index.html'), 'utf8');
  const files = [...html.matchAll(/(?:src|href)="([^"]+\.js)"/g)].map((m) => m[1]!.replace(base, ''));
  return files.reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(distDir, f)), { level: 9 }).length, 0);
}

/** The bare Vite React template (react-ts), written out and built with the same Vite. */
function buildTemplate(dir: string): string {
  fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
  // The template resolves react and react-dom from this checkout's node_modules, as a fresh one would from its own.
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  fs.writeFileSync(
    path.join(dir, 'index.html'),
    '<!doctype html><html lang="en"><head><meta charset="UTF-8" /><title>Vite + React + TS</title></head><body><div id="root"></div><script type="module" src="/src/main.tsx"></script></body></html>',
  );
  fs.writeFileSync(
    path.join(dir, 'src', 'main.tsx'),
    `import { StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
function App() {
  const [count, setCount] = useState(0);
  return (<><h1>Vite + React</h1><div className="card"><button id="counter" onClick={() => setCount((c) => c + 1)}>count is {count}</button>
  <p>Edit <code>src/App.tsx</code> and save to test HMR</p></div></>);
}
createRoot(document.getElementById('root')!).render(<StrictMode><App /></StrictMode>);
`,
  );
  fs.writeFileSync(
    path.join(dir, 'vite.config.mjs'),
    `import react from '${path.join(ROOT, 'node_modules/@vitejs/plugin-react/dist/index.js').replace(/\\/g, '/')}';\nexport default { root: ${JSON.stringify(dir)}, plugins: [react()], logLevel: 'warn', build: { outDir: ${JSON.stringify(path.join(dir, 'dist'))} } };\n`,
  );
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--config', path.join(dir, 'vite.config.mjs')], {
    cwd: ROOT,
    stdio: 'pipe',
  });
  return path.join(dir, 'dist');
}

function serveStatic(dir: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const p = (req.url ?? '/').split('?')[0]!;
    const file = path.join(dir, p === '/' ? 'index.html' : path.normalize(p).replace(/^(\.\.[/\\])+/, ''));
    if (!file.startsWith(dir) || !fs.existsSync(file)) return res.writeHead(404).end();
    const type = file.endsWith('.js') ? 'text/javascript' : file.endsWith('.css') ? 'text/css' : 'text/html';
    res.writeHead(200, { 'Content-Type': type }).end(fs.readFileSync(file));
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

async function signIn(page: Page, base: string, password: string): Promise<void> {
  await page.goto(`${base}/`);
  await page.getByLabel('User name or e-mail').fill('admin');
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByTestId('calls-today').waitFor();
}

/** 100 000 calls over the last 30 days, straight into the table (what months of use leave). */
function seedCalls(a: Appliance, n: number): void {
  const tenant = a.core.tenants.primary()!;
  const ins = a.core.db.prepare(
    `INSERT INTO tel_calls (call_id, tenant_id, requested_by, phone, display_name, email, system_prompt, api_key_sealed, model, voice, language,
       max_seconds, status, created_at, scheduled_for, dispatched_at, answered_at, ended_at, ended_reason, duration_sec, trunk_id, transcript_path,
       error_detail, attempt, retries_left, retry_delay_minutes)
     VALUES (?, ?, 'bench', ?, '', '', 'p', '', 'm', 'Aoede', 'en-US', 300, ?, ?, NULL, '', '', ?, 'finished', 42, 'main', '', '', 1, 0, 5)`,
  );
  const now = Date.now();
  const states = ['ended-success', 'ended-success', 'ended-success', 'ended-failed-final', 'cancelled'];
  a.core.db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const at = new Date(now - Math.floor((i / n) * 30 * 86_400_000)).toISOString();
      ins.run(`oac-${crypto.randomBytes(6).toString('hex')}`, tenant.id, `+4930${String(i).padStart(7, '0')}`, states[i % states.length], at, at);
    }
  })();
}

export default async function run(): Promise<BenchResult[]> {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'console', '.vite', 'manifest.json')))
    execFileSync('npm', ['run', '--silent', 'build:console'], { cwd: ROOT, stdio: 'pipe' });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-console-'));
  const tplDist = buildTemplate(path.join(tmp, 'template'));
  const oursKb = consoleFirstScreenGzip(path.join(ROOT, 'dist', 'console')) / 1024;
  const tplKb = initialJsGzip(tplDist, '/') / 1024;

  let password = '';
  const a = await Appliance.create({
    dataDir: path.join(tmp, 'data'),
    env: {},
    overrides: { log: { level: 'silent' }, http: { port: 0 }, plugins: { lotl: { autoRefresh: false } } },
    onFirstRun: (i) => (password = i.password),
  });
  const { port } = await a.start();
  const base = `http://localhost:${port}`;
  const tpl = await serveStatic(tplDist);
  const tplBase = `http://127.0.0.1:${(tpl.address() as AddressInfo).port}`;
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
  try {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await signIn(page, base, password);
    const dash: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // A new tab each time (cold JS heap; the HTTP cache warm, as for an operator's second visit).
      const p = await ctx.newPage();
      let t0 = performance.now();
      await p.goto(`${base}/console/`);
      await p.getByTestId('calls-today').filter({ hasText: /\d/ }).waitFor();
      dash.push(performance.now() - t0);
      await p.close();
      const q = await ctx.newPage();
      t0 = performance.now();
      await q.goto(tplBase);
      await q.locator('#counter').click();
      await q.locator('#counter', { hasText: 'count is 1' }).waitFor();
      bare.push(performance.now() - t0);
      await q.close();
    }

    seedCalls(a, CALLS);
    const big: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await page.locator('nav a[href="/console/"]').click();
      await page.getByTestId('calls-today').waitFor();
      const t0 = performance.now();
      await page.locator('nav a[href="/console/calls"]').click();
      await page.locator('[data-status]').first().waitFor();
      await page.getByRole('button', { name: 'Next page' }).waitFor();
      big.push(performance.now() - t0);
    }
    const d = median(dash);
    const b = median(bare);
    return [
      {
        name: 'console initial JS (gzip)',
        value: r1(oursKb),
        unit: 'KB',
        peer: 'bare Vite React template',
        peerValue: r1(tplKb),
        ratio: r1(oursKb / tplKb),
        target: '< 250 KB',
      },
      {
        name: 'navigation to interactive dashboard',
        value: Math.round(d),
        unit: 'ms',
        peer: 'bare Vite React template to interactive counter',
        peerValue: Math.round(b),
        ratio: r1(d / b),
        target: '< 1000 ms',
        note: `median of ${RUNS}; includes the OIDC redirect, code exchange and userinfo`,
      },
      {
        name: `calls page with ${CALLS} calls interactive`,
        value: Math.round(median(big)),
        unit: 'ms',
        target: '< 1500 ms',
        note: `median of ${RUNS}; menu click to the first page of rows and the pager`,
      },
    ];
  } finally {
    await browser.close();
    await new Promise<void>((r) => tpl.close(() => r()));
    await a.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
