import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CALL_STATES } from '../../renderer/src/lib/calls.ts';
import { OUTCOMES } from '../../plugins/telephony/control.ts';

/**
 * The console's texts: English and German have the same keys (a missing German text fails here),
 * every key the code asks for exists, and no locale keeps keys nobody uses.
 */
const SRC = path.resolve(import.meta.dirname, '../../renderer/src');
type Tree = Record<string, unknown>;

function keys(t: Tree, prefix = ''): string[] {
  return Object.entries(t).flatMap(([k, v]) => (v && typeof v === 'object' ? keys(v as Tree, `${prefix}${k}.`) : [`${prefix}${k}`]));
}
const load = (lang: string) => JSON.parse(fs.readFileSync(path.join(SRC, 'locales', `${lang}.json`), 'utf8')) as Tree;
// i18next plural forms (`total_one`, `total_other`) answer for `total`.
const base = (k: string) => k.replace(/_(one|other|zero|two|few|many)$/, '');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.(ts|tsx)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

describe('console texts', () => {
  const en = keys(load('en'));
  const de = keys(load('de'));

  it('German has every English key and no other', () => {
    expect(de.filter((k) => !en.includes(k))).toEqual([]);
    expect(en.filter((k) => !de.includes(k))).toEqual([]);
  });

  it('no text is empty or left in English in the German file by mistake (beyond shared terms)', () => {
    const flat = (t: Tree) => Object.fromEntries(keys(t).map((k) => [k, k.split('.').reduce<unknown>((o, p) => (o as Tree)[p], t)]));
    const e = flat(load('en'));
    const d = flat(load('de'));
    for (const k of de) expect(String(d[k]).trim(), k).not.toBe('');
    // The product's name is a name, not a text to translate.
    const same = de.filter((k) => k !== 'app.name' && d[k] === e[k] && String(e[k]).length > 12);
    expect(same).toEqual([]);
  });

  it('every key the code uses exists', () => {
    const known = new Set(en.map(base));
    const missing: string[] = [];
    for (const f of sources(SRC)) {
      const text = fs.readFileSync(f, 'utf8');
      for (const m of text.matchAll(/\bt\('([a-zA-Z]+\.[a-zA-Z.]+)'/g)) if (!known.has(m[1]!)) missing.push(`${path.relative(SRC, f)}: ${m[1]}`);
      // Template keys over a fixed list: each member must exist.
      for (const m of text.matchAll(/\bt\(`([a-zA-Z.]+)\.\$\{/g)) {
        if (![...known].some((k) => k.startsWith(`${m[1]}.`))) missing.push(`${path.relative(SRC, f)}: ${m[1]}.*`);
      }
    }
    expect(missing).toEqual([]);
    // The error texts: lib/errors.ts asks for `errors.issue.<key>` by its short key.
    const errorsSrc = fs.readFileSync(path.join(SRC, 'lib', 'errors.ts'), 'utf8');
    const issueKeys = [...errorsSrc.matchAll(/\bt\('([a-zA-Z]+)'/g)].map((m) => `errors.issue.${m[1]}`);
    expect(issueKeys.length).toBeGreaterThan(5);
    expect(issueKeys.filter((k) => !known.has(k))).toEqual([]);
    // The states come from the API's union (lib/calls.ts): each has its words.
    for (const st of CALL_STATES) expect(known.has(`calls.status.${st}`), st).toBe(true);
    // So do the call outcomes the telephony plugin declares (the transcripts list shows them).
    for (const o of OUTCOMES) expect(known.has(`transcripts.outcomes.${o}`), o).toBe(true);
  });
});
