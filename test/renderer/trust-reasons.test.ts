import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIST_REASONS } from '../../plugins/lotl/schemas.ts';

/**
 * Why a trusted list was refused, in the console's words (issue 27 item 11): every reason code the
 * lotl plugin can report (its schema's enum, which the service's code is typed against) has its
 * own sentence in English and in German, so the Trust page never shows a raw code or the English
 * technical detail as the only explanation.
 */
const locale = (lang: string): { trust: { reasons: Record<string, string> } } =>
  JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, `../../renderer/src/locales/${lang}.json`), 'utf8')) as {
    trust: { reasons: Record<string, string> };
  };

describe('trusted-list reasons', () => {
  const en = locale('en').trust.reasons;
  const de = locale('de').trust.reasons;

  it('every reason the plugin reports has words in English and German, and no words for a reason it does not report', () => {
    for (const r of LIST_REASONS) {
      expect(en[r], `en ${r}`).toMatch(/\S{3}/);
      expect(de[r], `de ${r}`).toMatch(/\S{3}/);
      expect(de[r], `de ${r} is not the English text`).not.toBe(en[r]);
    }
    expect(Object.keys(en).sort()).toEqual([...LIST_REASONS].sort());
    expect(Object.keys(de).sort()).toEqual([...LIST_REASONS].sort());
  });

  it('no two reasons read the same', () => {
    expect(new Set(Object.values(en)).size).toBe(LIST_REASONS.length);
    expect(new Set(Object.values(de)).size).toBe(LIST_REASONS.length);
  });
});
