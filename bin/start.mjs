#!/usr/bin/env node
// `npm start`: the compiled server (`dist/`, plain JavaScript, no loader) when it is built and no
// source is newer than it; otherwise the TypeScript sources through the loader (development).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const compiled = path.join(root, 'dist/bin/sovcomms.js');

/** The newest modification time of the TypeScript sources the server runs. */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') || e.name.endsWith('.sql')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  for (const d of ['server', 'plugins']) if (fs.existsSync(path.join(root, d))) walk(path.join(root, d));
  return newest;
}

let useDist = false;
if (fs.existsSync(compiled)) {
  useDist = newestSource() <= fs.statSync(compiled).mtimeMs;
  if (!useDist) process.stderr.write('sovcomms: sources are newer than dist/ (npm run build); running them through the TypeScript loader\n');
}
process.argv.splice(2, 0, 'serve');
await import(pathToFileURL(useDist ? compiled : path.join(root, 'bin/sovcomms.mjs')).href);
