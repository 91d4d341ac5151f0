import { parse, str, table, UsageError } from '../cli-args.ts';
import type { CliContext } from '../plugin.ts';
import { type Role, USER_LANGUAGES, type UserLanguage } from '../users.ts';
import type { CoreCommand } from './command.ts';

/** --password P or --password-stdin (the trailing newline of a here-string or echo dropped). */
async function readPassword(values: Record<string, unknown>, ctx: CliContext): Promise<string | undefined> {
  if (values['password-stdin']) {
    if (values.password !== undefined) throw new UsageError('--password and --password-stdin exclude each other');
    return (await ctx.readStdin()).replace(/\r?\n$/, '');
  }
  return str(values.password);
}

/** en, de, or none (the request's language). */
function mailLanguage(v: string, what: string): UserLanguage | null {
  if (v === 'none') return null;
  if (!(USER_LANGUAGES as readonly string[]).includes(v)) throw new UsageError(`${what}: must be ${USER_LANGUAGES.join(', ')} or none, got ${v}`);
  return v as UserLanguage;
}

export const userCommand: CoreCommand = {
  opens: 'store',
  summary: "A tenant's users",
  usage: [
    'user add NAME [--tenant HOST] [--role admin|user] [--email E] [--language en|de] [--password P | --password-stdin]',
    'user list [--tenant HOST] [--json]',
    'user passwd NAME [--tenant HOST] [--password P | --password-stdin]',
    'user set-role NAME ROLE [--tenant HOST]',
    'user set-language NAME en|de|none [--tenant HOST]   (the language of the user’s mails; none follows the request)',
  ],
  changes: ['add', 'passwd', 'set-role', 'set-language'],
  audited: ['tenant', 'role', 'email', 'language'],
  async run(args, ctx) {
    const [sub, ...rest] = args;
    const users = ctx.users;
    switch (sub) {
      case 'add': {
        const { values, positionals } = parse(
          rest,
          {
            tenant: { type: 'string' },
            role: { type: 'string' },
            email: { type: 'string' },
            language: { type: 'string' },
            password: { type: 'string' },
            'password-stdin': { type: 'boolean' },
          },
          1,
        );
        if (!positionals[0]) throw new UsageError('user add: NAME is required');
        const role = str(values.role) ?? 'user';
        if (role !== 'admin' && role !== 'user') throw new UsageError(`--role: must be admin or user, got ${role}`);
        const tenant = ctx.tenants.require(str(values.tenant));
        const password = await readPassword(values, ctx);
        const language = mailLanguage(str(values.language) ?? 'none', '--language');
        const u = await users.add(tenant, { name: positionals[0], role, email: str(values.email) ?? null, password: password ?? null, language });
        ctx.out(`user ${u.name} added to ${tenant.host} (role ${u.role}${u.status === 'invited' ? ', invited: no password yet' : ''})`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
        const tenant = ctx.tenants.require(str(values.tenant));
        const list = users.list(tenant).map((u) => ({
          id: u.id,
          name: u.name,
          email: u.email,
          language: u.language,
          role: u.role,
          status: u.status,
          createdAt: u.createdAt,
        }));
        if (values.json) ctx.out(JSON.stringify(list, null, 2));
        else for (const l of table(list, ['name', 'role', 'status', 'email', 'id'])) ctx.out(l);
        return 0;
      }
      case 'passwd': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' }, password: { type: 'string' }, 'password-stdin': { type: 'boolean' } }, 1);
        if (!positionals[0]) throw new UsageError('user passwd: NAME is required');
        const tenant = ctx.tenants.require(str(values.tenant));
        const password = await readPassword(values, ctx);
        if (!password) throw new UsageError('user passwd: --password or --password-stdin is required');
        await users.setPassword(tenant, positionals[0], password);
        ctx.out(`password of ${positionals[0]} changed`);
        return 0;
      }
      case 'set-role': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 2);
        if (!positionals[0] || !positionals[1]) throw new UsageError('user set-role: NAME and ROLE are required');
        const role = positionals[1];
        if (role !== 'admin' && role !== 'user') throw new UsageError(`ROLE: must be admin or user, got ${role}`);
        const tenant = ctx.tenants.require(str(values.tenant));
        users.setRole(tenant, positionals[0], role as Role);
        ctx.out(`${positionals[0]} is now ${role}`);
        return 0;
      }
      case 'set-language': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 2);
        if (!positionals[0] || !positionals[1]) throw new UsageError('user set-language: NAME and en|de|none are required');
        const language = mailLanguage(positionals[1], 'LANGUAGE');
        const tenant = ctx.tenants.require(str(values.tenant));
        users.setLanguage(tenant, positionals[0], language);
        ctx.out(`mails to ${positionals[0]} are now in ${language ?? "the request's language"}`);
        return 0;
      }
      default:
        throw new UsageError(sub ? `user: unknown subcommand ${sub}` : 'user: subcommand required (add, list, passwd, set-role, set-language)');
    }
  },
};
