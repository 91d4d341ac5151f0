import { type CliCommand, type CliContext, parse, type Tenant, UsageError, zodMessage } from '../../server/sdk.ts';
import { numberView } from './trunks/admin.ts';
import { trunkInput, trunkView } from './trunks/trunk.ts';
import { numberInput } from './schemas.ts';
import type { TelephonyServices } from './services.ts';
import { phoneAdd } from './inbound/phones.ts';

export function tenantOf(ctx: CliContext, host: unknown): Tenant {
  return typeof host === 'string' ? ctx.tenants.require(host) : ctx.tenants.require();
}

/** `sovcomms trunk add|list|remove`: SIP trunks of a tenant (the running server pushes changes to the bridge). */
export const trunkCommand: CliCommand<TelephonyServices> = {
  summary: 'SIP trunks',
  usage: [
    'trunk add --name NAME --host HOST [--id ID] [--port 5060] [--transport udp|tcp] [--username U] [--password-stdin] [--register] [--from-domain D] [--caller-id N] [--max-calls 10] [--codecs PCMU,PCMA] [--srv] [--inbound-auth address|digest] [--default] [--tenant HOST]',
    'trunk list [--tenant HOST]',
    'trunk remove ID [--tenant HOST]',
  ],
  changes: ['add', 'remove'],
  audited: ['tenant', 'name', 'host', 'id'],
  async run(args, ctx, { admin: a }) {
    const [sub, ...rest] = args;
    const { values, positionals } = parse(rest, {
      tenant: { type: 'string' },
      id: { type: 'string' },
      name: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      transport: { type: 'string' },
      username: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      register: { type: 'boolean' },
      'from-domain': { type: 'string' },
      'caller-id': { type: 'string' },
      'max-calls': { type: 'string' },
      codecs: { type: 'string' },
      default: { type: 'boolean' },
      srv: { type: 'boolean' },
      'inbound-auth': { type: 'string' },
    });
    const t = tenantOf(ctx, values.tenant);
    switch (sub) {
      case 'add': {
        const password = values['password-stdin'] ? (await ctx.readStdin()).replace(/\r?\n$/, '') : undefined;
        const parsed = trunkInput.safeParse({
          id: values.id,
          name: values.name,
          host: values.host,
          port: values.port ? Number(values.port) : undefined,
          transport: values.transport,
          username: values.username,
          password,
          register: values.register ?? false,
          fromDomain: values['from-domain'],
          callerId: values['caller-id'],
          maxConcurrentCalls: values['max-calls'] ? Number(values['max-calls']) : undefined,
          codecs: typeof values.codecs === 'string' ? values.codecs.split(',') : undefined,
          dnsSrv: values.srv ?? false,
          inboundAuth: values['inbound-auth'],
        });
        if (!parsed.success) throw new UsageError(`trunk add: ${zodMessage(parsed.error)}`);
        const row = a.saveTrunk(t, parsed.data);
        if (values.default) a.saveSettings(t, { defaultTrunkId: row.id });
        ctx.out(`trunk ${row.id} saved for ${t.host}${values.default ? ' (default)' : ''}`);
        return 0;
      }
      case 'list': {
        const def = a.settings(t).defaultTrunkId;
        for (const r of a.trunks(t)) {
          const v = trunkView(r);
          ctx.out(
            `${v.id}${v.id === def ? ' (default)' : ''}\t${v.name}\t${v.transport}://${v.host}${v.dnsSrv ? ' (SRV)' : `:${v.port}`}\tuser=${v.username || '-'}\tpassword=${v.hasPassword ? 'set' : 'none'}\tregister=${v.register}\tmax=${v.maxConcurrentCalls}\t${v.codecs.join(',')}`,
          );
        }
        return 0;
      }
      case 'remove': {
        const id = positionals[0];
        if (!id) throw new UsageError('trunk remove: give the trunk id');
        a.removeTrunk(t, id);
        ctx.out(`trunk ${id} removed from ${t.host}`);
        return 0;
      }
      default:
        throw new UsageError('usage: sovcomms trunk add|list|remove');
    }
  },
};

/** `sovcomms number add|list|remove`: virtual numbers of a tenant. */
export const numberCommand: CliCommand<TelephonyServices> = {
  summary: 'Virtual numbers',
  usage: [
    'number add NUMBER [--name N] [--voice V] [--language en-US] [--visibility public|signed-in] [--max-duration 3500] [--system-prompt TEXT] [--no-transcripts] [--api-key-stdin] [--tenant HOST]',
    'number list [--tenant HOST]',
    'number remove NUMBER [--tenant HOST]',
  ],
  changes: ['add', 'remove'],
  audited: ['tenant', 'name'],
  async run(args, ctx, { admin: a }) {
    const [sub, ...rest] = args;
    const { values, positionals } = parse(rest, {
      tenant: { type: 'string' },
      name: { type: 'string' },
      voice: { type: 'string' },
      language: { type: 'string' },
      visibility: { type: 'string' },
      'max-duration': { type: 'string' },
      'system-prompt': { type: 'string' },
      'no-transcripts': { type: 'boolean' },
      'api-key-stdin': { type: 'boolean' },
    });
    const t = tenantOf(ctx, values.tenant);
    switch (sub) {
      case 'add': {
        const key = values['api-key-stdin'] ? (await ctx.readStdin()).trim() : undefined;
        const parsed = numberInput.safeParse({
          number: positionals[0],
          name: values.name,
          voice: values.voice,
          language: values.language,
          visibility: values.visibility,
          maxDurationSec: values['max-duration'] ? Number(values['max-duration']) : undefined,
          systemPrompt: values['system-prompt'],
          saveTranscripts: !values['no-transcripts'],
          geminiApiKey: key,
        });
        if (!parsed.success) throw new UsageError(`number add: ${zodMessage(parsed.error)}`);
        const row = a.saveNumber(t, parsed.data);
        ctx.out(`number ${row.number} saved for ${t.host}`);
        return 0;
      }
      case 'list':
        for (const r of a.numbers(t).rows) {
          const v = numberView(r);
          ctx.out(
            `${v.number}\t${v.name}\t${v.mode}\t${v.voice}\t${v.language}\t${v.visibility}\tmax=${v.maxDurationSec}s\tkey=${v.hasEngineKey ? 'set' : 'none'}`,
          );
        }
        return 0;
      case 'remove': {
        const n = positionals[0];
        if (!n) throw new UsageError('number remove: give the number');
        a.removeNumber(t, n);
        ctx.out(`number ${n} removed from ${t.host}`);
        return 0;
      }
      default:
        throw new UsageError('usage: sovcomms number add|list|remove');
    }
  },
};

/** `sovcomms phone add|list|remove`: desk-phone logins of office users (the bridge's registrar). */
export const phoneCommand: CliCommand<TelephonyServices> = {
  summary: 'Desk-phone logins (SIP registrar)',
  usage: ['phone add USER [--password-stdin] [--tenant HOST]', 'phone list [--tenant HOST]', 'phone remove USER [--tenant HOST]'],
  changes: ['add', 'remove'],
  audited: ['tenant'],
  async run(args, ctx, { phones }) {
    const [sub, ...rest] = args;
    const { values, positionals } = parse(rest, { tenant: { type: 'string' }, 'password-stdin': { type: 'boolean' } });
    const t = tenantOf(ctx, values.tenant);
    switch (sub) {
      case 'add': {
        const password = values['password-stdin'] ? (await ctx.readStdin()).replace(/\r?\n$/, '') : undefined;
        const parsed = phoneAdd.safeParse({ user: positionals[0], password });
        if (!parsed.success) throw new UsageError(`phone add: ${zodMessage(parsed.error)}`);
        const out = phones.add(t, parsed.data.user, parsed.data.password);
        ctx.out(`desk phone login ${out.username} saved for ${t.host}`);
        // Shown this once: only a generated password (one given on stdin is the caller's own).
        if (out.generatedPassword) ctx.out(`password: ${out.generatedPassword}`);
        return 0;
      }
      case 'list':
        for (const p of phones.list(t)) ctx.out(`${p.user}\tusername=${p.username}\tcreated=${p.createdAtUtc}`);
        return 0;
      case 'remove': {
        const user = positionals[0];
        if (!user) throw new UsageError('phone remove: give the user');
        phones.remove(t, user);
        ctx.out(`desk phone login ${user} removed from ${t.host}`);
        return 0;
      }
      default:
        throw new UsageError('usage: sovcomms phone add|list|remove');
    }
  },
};
