import { z } from 'zod';
import { definePlugin, resourcePath } from '../../server/sdk.ts';
import { ConsoleAssets, findConsoleDir } from './static.ts';

const consoleConfig = z
  .object({
    /** The built console (Vite output); default: dist/console of the installation. */
    dir: z.string().max(4096).optional(),
  })
  .strict()
  .default({});

/**
 * The operator console (renderer/, a React app built by `npm run build:console`) served at
 * /console/ with hashed assets cached for a year and index.html revalidated, under a strict CSP;
 * `GET /` redirects there. The console talks to the appliance only over the public API.
 */
export default definePlugin({
  name: 'console',
  description: 'Operator console: the single-page app at /console/',
  required: false,
  config: consoleConfig,
  setup(ctx) {
    const assets = new ConsoleAssets(findConsoleDir(resourcePath(), ctx.config.dir));
    if (!assets.built) ctx.log.warn('the console is not built (run `npm run build:console`); /console/ answers 404 until it is');
    return { assets };
  },
  routes(r, s) {
    r.preRouter((req, res) => s.assets.handle(req, res));
  },
  health(s) {
    return s.assets.built ? { status: 'ok', detail: { files: s.assets.count } } : { status: 'degraded', reason: 'console not built' };
  },
});
