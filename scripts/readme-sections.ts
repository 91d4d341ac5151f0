import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Appliance } from '../server/app.ts';
import { authText } from '../server/openapi.ts';
import { cliUsage } from '../server/cli.ts';

/**
 * The README's endpoint overview, HMAC bucket list and CLI reference are generated from the
 * registered routes and commands, so they cannot drift from the code: `npm run docs` rewrites
 * them, and test/readme.test.ts fails when the README is behind.
 */
export async function readmeSections(): Promise<Record<string, string>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-docs-'));
  const a = await Appliance.create({ dataDir: dir, env: {}, overrides: { log: { level: 'silent' } } });
  try {
    const byArea = new Map<string, string[]>();
    const buckets: string[] = [];
    for (const r of a.dispatcher.routes) {
      const d = r.def;
      if (d.hidden) continue;
      const area = d.area ?? r.plugin;
      const [first, ...aliases] = r.addresses;
      const addr = `\`${first}\`` + (aliases.length ? ` (${aliases.map((x) => `\`${x}\``).join(', ')})` : '');
      if (!byArea.has(area)) byArea.set(area, []);
      byArea.get(area)!.push(`| ${d.method} | ${addr.replace(/\|/g, '\\|')} | ${authText(d.auth)} | ${d.summary.replace(/\|/g, '\\|')} |`);
      if (d.auth.kind === 'credentials' && d.auth.hmacBucket) buckets.push(`| \`${d.auth.hmacBucket}\` | ${d.method} \`${first}\` |`);
    }
    const endpoints = [...byArea.entries()]
      .sort(([x], [y]) => x.localeCompare(y))
      .map(([area, rows]) => [`#### ${area}`, '', '| Method | Path (aliases) | Auth | What it does |', '|---|---|---|---|', ...rows].join('\n'))
      .join('\n\n');
    const hmac = buckets.length
      ? ['| Bucket | Endpoint |', '|---|---|', ...[...new Set(buckets)].sort()].join('\n')
      : '(no endpoint accepts the admin HMAC yet)';
    const cli = ['```', ...(await cliUsage()).map((l) => `sovcomms ${l}`), '```'].join('\n');
    return { endpoints, 'hmac-buckets': hmac, cli };
  } finally {
    await a.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function applySections(readme: string, sections: Record<string, string>): string {
  let out = readme;
  for (const [name, body] of Object.entries(sections)) {
    const re = new RegExp(`(<!-- ${name}:start -->)[\\s\\S]*?(<!-- ${name}:end -->)`);
    if (!re.test(out)) throw new Error(`README has no <!-- ${name}:start --> ... <!-- ${name}:end --> markers`);
    out = out.replace(re, (_m, a: string, b: string) => `${a}\n${body}\n${b}`);
  }
  return out;
}
