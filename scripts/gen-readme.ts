import fs from 'node:fs';
import { applySections, readmeSections } from './readme-sections.ts';

const file = new URL('../README.md', import.meta.url);
const before = fs.readFileSync(file, 'utf8');
const after = applySections(before, await readmeSections());
if (after !== before) fs.writeFileSync(file, after);
console.log(after === before ? 'README.md is up to date' : 'README.md sections regenerated');
