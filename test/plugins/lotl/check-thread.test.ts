import { afterAll, describe, expect, it } from 'vitest';
import { checkNationalList, ListChecker } from '../../../plugins/lotl/check.ts';

/**
 * National lists are parsed and verified on a thread of their own (plugins/lotl/check.ts): the
 * answer is the same as checking inline, and the event loop keeps turning while a large document
 * is worked on (issue 18: parse large imports off the event loop).
 */
const checker = new ListChecker();
afterAll(() => checker.close());

/** A large, well-formed document that is not a trusted list: megabytes for the parser to walk. */
function bigXml(elements: number): Buffer {
  const parts = ['<?xml version="1.0" encoding="UTF-8"?><TrustServiceStatusList xmlns="http://uri.etsi.org/02231/v2#">'];
  for (let i = 0; i < elements; i++) parts.push(`<Item n="${i}" kind="filler">text ${i}</Item>`);
  parts.push('</TrustServiceStatusList>');
  return Buffer.from(parts.join(''));
}

describe('list-check thread', () => {
  it('answers as the inline check does (malformed, not a list)', async () => {
    const malformed = Buffer.from('<a><b></a>');
    expect(await checker.check(malformed, undefined, [])).toEqual(checkNationalList(malformed, undefined, []));
    const notAList = bigXml(10);
    const r = await checker.check(notAList, undefined, []);
    expect(r).toEqual(checkNationalList(notAList, undefined, []));
    expect(r).toMatchObject({ kind: 'unparsed', reason: 'bad_list' });
  });

  it('the event loop keeps turning while a large document is parsed on the thread', async () => {
    const doc = bigXml(300_000);
    await checker.check(Buffer.from('<x/>'), undefined, []); // the thread is up
    const ticks: number[] = [];
    const timer = setInterval(() => ticks.push(performance.now()), 5);
    const t0 = performance.now();
    const r = await checker.check(doc, undefined, []);
    const took = performance.now() - t0;
    clearInterval(timer);
    expect(r.kind).toBe('unparsed');
    // Parsed inline, the whole check would be one gap; on the thread the loop ticks throughout.
    const gaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
    expect(ticks.length).toBeGreaterThan(3);
    expect(Math.max(...gaps)).toBeLessThan(Math.max(took / 2, 50));
  });
});
