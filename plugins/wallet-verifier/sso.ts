import crypto from 'node:crypto';
import { AppError, type Clock, type DB, type KeyService, type Tenant, type User, type UserService } from '../../server/sdk.ts';
import type { GrantDefinition } from '../oidc/api.ts';
import type { VerifierConfig } from './schemas.ts';

/** The grant type a relying party uses at /oauth2/v1/token to redeem an sso_assertion. */
export const SSO_GRANT = 'urn:sovcomms:params:oauth:grant-type:sso_assertion';

const aad = (t: Tenant, h: string) => `wallet-verifier:sso:${t.id}:${h}`;
const hashOf = (a: string) => crypto.createHash('sha256').update(a).digest('hex');

/**
 * Wallet sign-in (spec VpResponseResult.sso_assertion). Tenant policy decides who may sign in and
 * which account a PID maps to: `signIn.mode` `match-user` renders `usernameTemplate` over the
 * disclosed claims and signs in the active user of that name; no such user, or mode `off`: no
 * assertion is minted. An assertion lives `ttlSeconds`, is redeemable once (even when the exchange
 * then fails), and only its hash is stored.
 */
export class SsoAssertions {
  /** Told when an assertion is redeemed (the session becomes `completed`). */
  onRedeemed: ((tenant: Tenant, sessionId: string, who: { ip: string; ua: string }) => void) | undefined;

  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
    private readonly users: UserService,
    private readonly clock: Clock,
    private readonly cfg: VerifierConfig['signIn'],
  ) {}

  private policy(tenant: Tenant) {
    return { ...this.cfg, ...this.cfg.tenants[tenant.host] };
  }

  /** The account a PID maps to under the tenant's policy, or why none. */
  account(tenant: Tenant, claims: Record<string, unknown>): { user: User } | { reason: string } {
    const p = this.policy(tenant);
    if (p.mode === 'off') return { reason: 'wallet sign-in is off for this tenant' };
    const name = p.usernameTemplate
      .replace(/\{([a-z_0-9]+)\}/g, (_m, k: string) => (typeof claims[k] === 'string' ? (claims[k] as string) : ''))
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase();
    const user = this.users.byName(tenant, name);
    if (!user || user.status !== 'active') return { reason: 'no active account matches this PID' };
    return { user };
  }

  mint(tenant: Tenant, sessionId: string, user: User, claims: Record<string, unknown>): string {
    const assertion = 'vpa_' + crypto.randomBytes(32).toString('base64url');
    const h = hashOf(assertion);
    this.db
      .prepare('INSERT INTO vp_sso_assertion (tenant_id, hash, session_id, user_id, sealed_claims, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(
        tenant.id,
        h,
        sessionId,
        user.id,
        this.keys.seal(JSON.stringify(claims), aad(tenant, h)),
        new Date(this.clock.now() + this.cfg.ttlSeconds * 1000).toISOString(),
      );
    return assertion;
  }

  /** Consumes the assertion: one redemption, then never again. */
  redeem(tenant: Tenant, assertion: string): { userId: string; claims: Record<string, unknown>; sessionId: string } | undefined {
    const h = hashOf(assertion);
    const now = new Date(this.clock.now()).toISOString();
    const row = this.db
      .prepare(
        'UPDATE vp_sso_assertion SET used_at = ? WHERE tenant_id = ? AND hash = ? AND used_at IS NULL AND expires_at > ? RETURNING user_id, sealed_claims, session_id',
      )
      .get(now, tenant.id, h, now) as { user_id: string; sealed_claims: string; session_id: string } | undefined;
    if (!row) return undefined;
    return {
      userId: row.user_id,
      claims: JSON.parse(this.keys.openString(row.sealed_claims, aad(tenant, h))) as Record<string, unknown>,
      sessionId: row.session_id,
    };
  }

  /**
   * The token endpoint grant (an authorization-code-style exchange: `assertion` instead of
   * `code`); a relying party redeems it, so the client must authenticate.
   */
  grant(): GrantDefinition<'assertion' | 'scope'> {
    return {
      type: SSO_GRANT,
      parameters: ['assertion', 'scope'],
      clientAuth: 'required',
      handler: async (g) => {
        const { tenant, form } = g;
        const fail = (d: string) => new AppError(400, 'invalid_grant', d);
        if (!form.assertion) throw new AppError(400, 'invalid_request', 'assertion is required');
        if (!g.client) throw fail('the client must authenticate');
        const got = this.redeem(tenant, form.assertion);
        if (!got) throw fail('the sso_assertion is unknown, expired or already used');
        const user = g.activeUser(got.userId);
        if (!user) throw fail('the account of this sign-in is no longer active');
        this.onRedeemed?.(tenant, got.sessionId, g.req);
        const scope = g.scope(form.scope, ['openid']).filter((s) => s !== 'offline_access');
        const tokens = await g.issue({ user, scope, idToken: scope.includes('openid'), amr: ['pid'] });
        return { ...tokens, wallet_presentation: got.claims };
      },
    };
  }
}
