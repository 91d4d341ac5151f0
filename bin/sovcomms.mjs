#!/usr/bin/env node
// The `sovcomms` CLI. TypeScript sources run through tsx's loader, so the same entry works on a
// fresh checkout (Node 20) and inside Electron's Node 22 without a build step.
import { register } from 'tsx/esm/api';
import { fileURLToPath } from 'node:url';

register();
const cli = await import(fileURLToPath(new URL('../server/cli.ts', import.meta.url)));
process.exitCode = await cli.main(process.argv.slice(2));
