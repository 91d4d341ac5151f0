#!/usr/bin/env node
/**
 * The compiled `sovcomms` entry (`dist/bin/sovcomms.js` after `npm run build`): plain JavaScript,
 * no TypeScript loader. Electron's utilityProcess runs this very file with `serve`.
 */
import { main } from '../server/cli.ts';

process.exitCode = await main(process.argv.slice(2));
