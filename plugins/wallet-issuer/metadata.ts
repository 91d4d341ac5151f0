import { MDOC_CONFIG_ID, PID_DOCTYPE, PID_VCT, PRE_AUTH_GRANT, SD_JWT_CONFIG_ID, type IssuerConfig } from './schemas.ts';

/** The addresses of the issuer, from the origin the wallet used (the credential issuer identifier). */
export function endpoints(origin: string) {
  return {
    credentialIssuer: origin,
    /** The issuer's own authorization server (RFC 8414 issuer with a path, so it never collides with the OIDC provider's). */
    authorizationServer: `${origin}/vci`,
    credential: `${origin}/vci.ashx?credential`,
    nonce: `${origin}/vci.ashx?nonce`,
    token: `${origin}/vci.ashx?token`,
    par: `${origin}/vci.ashx?par`,
    // Clients append `?client_id=...` to the authorization endpoint: it must have no query of its own.
    authorize: `${origin}/vci/authorize`,
    jwks: `${origin}/.well-known/openid-credential-issuer/jwks`,
    offer: (id: string) => `${origin}/vci.ashx?offer=${encodeURIComponent(id)}`,
    offerPage: (id: string) => `${origin}/vci.ashx?offer-page=${encodeURIComponent(id)}`,
    statusList: (listId: number) => `${origin}/vci.ashx?status-list=${listId}`,
  };
}

const PID_CLAIMS: [string, string][] = [
  ['family_name', 'Family name'],
  ['given_name', 'Given name'],
  ['birthdate', 'Date of birth'],
  ['nationalities', 'Nationalities'],
  ['email', 'E-mail'],
  ['place_of_birth', 'Place of birth'],
];
const MDOC_NAMES: Record<string, string> = { birthdate: 'birth_date', nationalities: 'nationality', email: 'email_address' };

/**
 * Credential issuer metadata: OpenID4VCI 1.0 (final) §12.2 (credential_configurations_supported
 * with credential_metadata, nonce_endpoint, batch_credential_issuance), plus the seed's
 * authorization-server fields at the top level (authorization and PAR endpoints, both grants,
 * S256 only, response type code, token auth none) for wallets that read them there.
 */
export function issuerMetadata(origin: string, config: IssuerConfig): Record<string, unknown> {
  const e = endpoints(origin);
  const display = [{ name: config.displayName, locale: config.locale }];
  const proofJwt = { jwt: { proof_signing_alg_values_supported: ['ES256'] } };
  return {
    credential_issuer: e.credentialIssuer,
    authorization_servers: [e.authorizationServer],
    credential_endpoint: e.credential,
    nonce_endpoint: e.nonce,
    batch_credential_issuance: { batch_size: 5 },
    display,
    jwks_uri: e.jwks,
    credential_configurations_supported: {
      [SD_JWT_CONFIG_ID]: {
        format: 'dc+sd-jwt',
        vct: PID_VCT,
        scope: SD_JWT_CONFIG_ID,
        cryptographic_binding_methods_supported: ['jwk'],
        credential_signing_alg_values_supported: ['ES256'],
        proof_types_supported: { ...proofJwt, cwt: { proof_signing_alg_values_supported: ['ES256'] } },
        credential_metadata: {
          display: [{ name: 'PID (SD-JWT VC)', locale: config.locale }],
          claims: PID_CLAIMS.map(([k, name]) => ({ path: [k], display: [{ name, locale: config.locale }] })),
        },
      },
      [MDOC_CONFIG_ID]: {
        format: 'mso_mdoc',
        doctype: PID_DOCTYPE,
        scope: MDOC_CONFIG_ID,
        cryptographic_binding_methods_supported: ['cose_key'],
        // OpenID4VCI 1.0 Appendix A.2.2: COSE algorithm identifiers (-7 = ES256).
        credential_signing_alg_values_supported: [-7],
        proof_types_supported: proofJwt,
        credential_metadata: {
          display: [{ name: 'PID (mdoc)', locale: config.locale }],
          claims: PID_CLAIMS.map(([k, name]) => ({ path: [PID_DOCTYPE, MDOC_NAMES[k] ?? k], display: [{ name, locale: config.locale }] })),
        },
      },
    },
    // The seed's shape: the authorization server's fields, also here.
    authorization_endpoint: e.authorize,
    pushed_authorization_request_endpoint: e.par,
    require_pushed_authorization_requests: false,
    token_endpoint: e.token,
    grant_types_supported: ['authorization_code', PRE_AUTH_GRANT],
    code_challenge_methods_supported: ['S256'],
    response_types_supported: ['code'],
    token_endpoint_auth_methods_supported: ['none'],
  };
}

/** RFC 8414 authorization server metadata of the issuer's authorization server (PAR: RFC 9126 §5). */
export function authorizationServerMetadata(origin: string): Record<string, unknown> {
  const e = endpoints(origin);
  return {
    issuer: e.authorizationServer,
    authorization_endpoint: e.authorize,
    token_endpoint: e.token,
    pushed_authorization_request_endpoint: e.par,
    require_pushed_authorization_requests: false,
    jwks_uri: e.jwks,
    grant_types_supported: ['authorization_code', PRE_AUTH_GRANT],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [SD_JWT_CONFIG_ID, MDOC_CONFIG_ID],
    authorization_response_iss_parameter_supported: true,
    // OpenID4VCI 1.0 §12.3: anonymous access with a pre-authorized code.
    'pre-authorized_grant_anonymous_access_supported': true,
  };
}
