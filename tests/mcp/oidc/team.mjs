// The team's authorization server for `--web` as a resource server (web.auth): the same
// certified provider (oidc-provider 9), issuing access tokens for one resource, AUDIENCE,
// as RS256 JWTs (RFC 9068) or, with TOKEN_FORMAT=opaque, as opaque tokens that only
// introspection can read. People sign in as `login_hint` (else who WHO_FILE names, else
// `alice`); only
// `alice` can get the admin scope `aai:admin`. Clients: `aai-ui` (confidential,
// the gateway's UI and introspection; its redirect URI is the gateway's /ui/callback),
// `cli-test` (public, for the tests' own sign-ins) and any client that registers itself
// (RFC 7591: the MCP SDKs do). Its signing key is written to KEY_FILE (a private JWK) so
// that the tests can forge tokens the gateway must refuse. With TOKEN_EXCHANGE=1 it also
// offers token exchange (RFC 8693) to `aai-ui`: a valid access token of its own (for
// AUDIENCE) is exchanged for one for the resource asked for, among UPSTREAMS
// (space-separated), for the same person; each exchange is appended to EXCHANGE_LOG as a
// JSON line. Prints "ready" on PORT.
import { generateKeyPairSync } from 'node:crypto';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { SignJWT, importJWK, jwtVerify } from 'jose';
import Provider from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const exchanging = process.env.TOKEN_EXCHANGE === '1';
const upstreams = (process.env.UPSTREAMS || '').split(' ').filter(Boolean);

const port = Number(process.env.PORT);
const audience = process.env.AUDIENCE;
const origin = new URL(audience).origin;
const issuer = `http://127.0.0.1:${port}`;
const ttl = Number(process.env.ACCESS_TTL || 600);
const format = process.env.TOKEN_FORMAT === 'opaque' ? 'opaque' : 'jwt';
const resourceScopes = 'mcp apps:notes apps:all aai:admin';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'team-1', alg: 'RS256', use: 'sig' };
if (process.env.KEY_FILE) writeFileSync(process.env.KEY_FILE, JSON.stringify(jwk));

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    {
      client_id: 'aai-ui',
      client_secret: 'ui-secret-for-tests-only',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [`${origin}/ui/callback`],
      grant_types: exchanging ? ['authorization_code', TOKEN_EXCHANGE] : ['authorization_code'],
      response_types: ['code'],
    },
    {
      client_id: 'cli-test',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  pkce: { required: () => true },
  clockTolerance: 0,
  // The resource's scopes too: clients register with what the resource metadata lists.
  scopes: ['openid', 'offline_access', ...resourceScopes.split(' ')],
  ttl: { AccessToken: ttl, AuthorizationCode: 60, Grant: 3600, Session: 3600, Interaction: 3600 },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== audience) throw new Error(`unknown resource ${indicator}`);
        // Only alice is an admin: for anyone else the resource has no admin scope, so
        // asking for it grants nothing (and asks nothing more).
        const account = ctx.oidc.session?.accountId
          ?? ctx.oidc.entities?.AuthorizationCode?.accountId
          ?? ctx.oidc.entities?.Account?.accountId;
        return {
          scope: account === 'alice' ? resourceScopes : resourceScopes.replace(' aai:admin', ''),
          audience,
          accessTokenTTL: ttl,
          accessTokenFormat: format,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});
provider.proxy = false;

provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/interaction/')) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.prompt.name === 'login') {
    // A browser sign-in (the gateway's UI) names nobody: WHO_FILE says who is at it.
    const who = details.params.login_hint
      || (process.env.WHO_FILE && readFileSync(process.env.WHO_FILE, 'utf8').trim())
      || 'alice';
    await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: who } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  const { missingOIDCScope, missingResourceScopes } = details.prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
  for (const [indicator, scopes] of Object.entries(missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
});

if (exchanging) {
  const { d, p, q, dp, dq, qi, ...publicJwk } = jwk;
  const [signing, verifying] = [await importJWK(jwk, 'RS256'), await importJWK(publicJwk, 'RS256')];
  const refuse = (ctx, error, description) => {
    ctx.status = 400;
    ctx.body = { error, error_description: description };
  };
  provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
    const params = ctx.oidc.params;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE || params.requested_token_type !== ACCESS_TOKEN_TYPE) {
      return refuse(ctx, 'invalid_request', 'only access tokens are exchanged');
    }
    if (!upstreams.includes(params.resource)) return refuse(ctx, 'invalid_target', 'unknown resource');
    let subject;
    try {
      ({ payload: subject } = await jwtVerify(params.subject_token, verifying, { issuer, audience }));
    } catch (e) {
      return refuse(ctx, 'invalid_grant', 'the subject token is not valid');
    }
    const access = await new SignJWT({ scope: params.scope || 'mcp', client_id: ctx.oidc.client.clientId })
      .setProtectedHeader({ alg: 'RS256', kid: 'team-1', typ: 'at+jwt' })
      .setIssuer(issuer).setAudience(params.resource).setSubject(subject.sub)
      .setIssuedAt().setExpirationTime('10m').sign(signing);
    if (process.env.EXCHANGE_LOG) {
      appendFileSync(process.env.EXCHANGE_LOG, JSON.stringify({ sub: subject.sub, resource: params.resource, client: ctx.oidc.client.clientId, scope: params.scope }) + '\n');
    }
    ctx.body = { access_token: access, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: 600 };
  }, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'scope', 'audience', 'actor_token', 'actor_token_type']);
}

provider.listen(port, '127.0.0.1', () => console.log('ready'));
