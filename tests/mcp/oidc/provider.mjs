// A strict OAuth 2 / OpenID provider for the tests: PKCE (S256) required, single-use
// codes, rotating refresh tokens, no clock tolerance, short access tokens (ACCESS_TTL
// seconds). Login and consent complete by themselves, so the authorization request is a
// plain redirect chain that a cookie-keeping HTTP client can follow to the redirect URI.
// Prints "ready" when listening on PORT.
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [{
    client_id: 'aai-test',
    application_type: 'native',
    token_endpoint_auth_method: 'none',
    redirect_uris: ['http://127.0.0.1/callback'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
  }],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  clockTolerance: 0,
  scopes: ['openid', 'offline_access'],
  ttl: {
    AccessToken: Number(process.env.ACCESS_TTL || 3600),
    AuthorizationCode: 60,
    RefreshToken: 3600,
    Grant: 3600,
    Session: 3600,
    Interaction: 3600,
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: { devInteractions: { enabled: false }, userinfo: { enabled: true }, revocation: { enabled: true } },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/interaction/')) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: 'alice' } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  grant.addOIDCScope(details.params.scope);
  await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
});

provider.listen(port, '127.0.0.1', () => console.log('ready'));
