import fs from 'node:fs';
import { type CliCommand, parse, UsageError } from '../../../server/sdk.ts';
import type { TelephonyServices } from '../services.ts';
import { PROMPT_MAX_CHARS } from './prompts.ts';
import { tenantOf } from '../cli.ts';

/** `sovcomms prompt add|list|remove`: the tenant's prompts, named by a call's systemPrompt slug. */
export const promptCommand: CliCommand<TelephonyServices> = {
  summary: 'Prompts a call names by slug',
  usage: ['prompt add SLUG --file F [--replace] [--tenant HOST]', 'prompt list [--tenant HOST]', 'prompt remove SLUG [--tenant HOST]'],
  changes: ['add', 'remove'],
  audited: ['tenant'],
  async run(args, ctx, { prompts }) {
    const [sub, ...rest] = args;
    const { values, positionals } = parse(rest, { tenant: { type: 'string' }, file: { type: 'string' }, replace: { type: 'boolean' } });
    const t = tenantOf(ctx, values.tenant);
    switch (sub) {
      case 'add': {
        const slug = positionals[0];
        if (!slug || typeof values.file !== 'string') throw new UsageError('prompt add: give the slug and --file F');
        let text: string;
        try {
          text = (await fs.promises.readFile(values.file, 'utf8')).replace(/\r?\n$/, '');
        } catch (e) {
          throw new UsageError(`prompt add: cannot read ${values.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        }
        if (!text.trim()) throw new UsageError(`prompt add: ${values.file} is empty`);
        if (text.length > PROMPT_MAX_CHARS) throw new UsageError(`prompt add: ${values.file} holds more than ${PROMPT_MAX_CHARS} characters`);
        const out = prompts.save(t, slug, text, 'cli', values.replace === true);
        ctx.out(`prompt ${slug} ${out.created ? 'added' : 'replaced'} for ${t.host} (${text.length} characters)`);
        return 0;
      }
      case 'list':
        for (const p of prompts.list(t))
          ctx.out(`${p.slug}\t${p.text.length} characters\tupdated=${p.updatedAtUtc}\t${p.text.slice(0, 60).replace(/\s+/g, ' ')}`);
        return 0;
      case 'remove': {
        const slug = positionals[0];
        if (!slug) throw new UsageError('prompt remove: give the slug');
        prompts.remove(t, slug);
        ctx.out(`prompt ${slug} removed from ${t.host}`);
        return 0;
      }
      default:
        throw new UsageError('usage: sovcomms prompt add|list|remove');
    }
  },
};
