#!/usr/bin/env node
// Runs one TypeScript file (benchmarks, scripts) through tsx's loader.
import { register } from 'tsx/esm/api';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

register();
const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: run-ts FILE [ARGS...]');
  process.exit(2);
}
process.argv = [process.argv[0], path.resolve(file), ...rest];
await import(pathToFileURL(path.resolve(file)).href);
