import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { applySections, readmeSections } from '../../scripts/readme-sections.ts';
import { API_ENUMS_FILE, API_TYPES_FILE, apiFiles } from '../../scripts/api-types.ts';

describe('README', () => {
  it('lists every endpoint, HMAC bucket and CLI command the code registers (run `npm run docs` to update)', async () => {
    const readme = fs.readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(applySections(readme, await readmeSections())).toBe(readme);
  });

  it("the console's API types are generated from the current description (run `npm run docs` to update)", async () => {
    const { types, enums } = await apiFiles();
    expect(fs.readFileSync(API_TYPES_FILE, 'utf8')).toBe(types);
    expect(fs.readFileSync(API_ENUMS_FILE, 'utf8')).toBe(enums);
  });

  it('has the Quick start with the two commands', () => {
    const readme = fs.readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(readme).toMatch(/## Quick start/);
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm run test:all');
    expect(fs.readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8')).toContain('npm run test:all');
  });
});
