import path from 'node:path';
import { parse } from '../cli-args.ts';
import type { CoreCommand } from './command.ts';

/** Opening the data dir with every plugin is the migration: this command only says it is done. */
export const migrateCommand: CoreCommand = {
  opens: 'all',
  summary: 'Applies the pending schema migrations of the core and every plugin',
  usage: ['migrate'],
  changes: false,
  async run(args, ctx) {
    parse(args, {}, 0);
    ctx.out(`database ${path.join(ctx.dataDir, 'appliance.db')} is up to date`);
    return 0;
  },
};
