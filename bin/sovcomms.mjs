#!/usr/bin/env node
// The `sovcomms` CLI. TypeScript sources run through tsx's loader, so the same entry works on a
// fresh checkout (Node 20) and inside Electron's Node 22 without a build step.
import { register } from 'tsx/esm/api';
import { fileURLToPath } from 'node:url';

// The core's own dependencies are plain JavaScript: loaded before the loader is registered, they
// skip its hooks (on Node 20 every module loaded after register() is a round trip to the hooks
// thread), and the TypeScript sources later get the very same module instances from the cache.
// About 15 % less CPU until ready (bench/core.bench.ts, "CPU time to ready").
// Express only for `serve`: the other commands never load it.
const preload = ['zod', 'pino', 'better-sqlite3', ...(process.argv[2] === 'serve' ? ['express'] : [])];
await Promise.all(preload.map((m) => import(m)));
register();
const cli = await import(fileURLToPath(new URL('../server/cli.ts', import.meta.url)));
process.exitCode = await cli.main(process.argv.slice(2));
