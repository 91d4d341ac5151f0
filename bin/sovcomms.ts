#!/usr/bin/env node
/**
 * The compiled `sovcomms` entry (`dist/bin/sovcomms.js` after `npm run build`): plain JavaScript,
 * no TypeScript loader. Electron's utilityProcess runs this very file with `serve`.
 */
import module from 'node:module';

// Node 22.1+ keeps V8's compiled code of every module loaded from here on across runs (in the
// system's temporary directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off): compiling JavaScript
// is a large part of a start and of every CLI command. Node 20 has no such cache: nothing happens.
(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();

const { main } = await import('../server/cli.ts');
process.exitCode = await main(process.argv.slice(2));
