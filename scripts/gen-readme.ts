import fs from 'node:fs';
import { applySections, readmeSections } from './readme-sections.ts';
import { API_ENUMS_FILE, API_TYPES_FILE, apiFiles } from './api-types.ts';

const file = new URL('../README.md', import.meta.url);
const before = fs.readFileSync(file, 'utf8');
const after = applySections(before, await readmeSections());
if (after !== before) fs.writeFileSync(file, after);
console.log(after === before ? 'README.md is up to date' : 'README.md sections regenerated');

const { types, enums } = await apiFiles();
const prevTypes = fs.existsSync(API_TYPES_FILE) ? fs.readFileSync(API_TYPES_FILE, 'utf8') : '';
if (types !== prevTypes) {
  fs.mkdirSync(new URL('.', API_TYPES_FILE), { recursive: true });
  fs.writeFileSync(API_TYPES_FILE, types);
}
console.log(types === prevTypes ? 'renderer/src/api/schema.d.ts is up to date' : 'renderer/src/api/schema.d.ts regenerated');

const prevEnums = fs.existsSync(API_ENUMS_FILE) ? fs.readFileSync(API_ENUMS_FILE, 'utf8') : '';
if (enums !== prevEnums) fs.writeFileSync(API_ENUMS_FILE, enums);
console.log(enums === prevEnums ? 'renderer/src/api/enums.ts is up to date' : 'renderer/src/api/enums.ts regenerated');
