// OpenID Connect provider for Berth's integration tests (started by scripts/oidc-fixture).
//
// Built on the certified `oidc-provider` package. Everything lives in memory and
// nothing is seeded: each test registers its own client at /reg and creates its
// own accounts through the /test/ control endpoints:
//
//   PUT    /test/accounts/:id   JSON claims -> create or replace the account (204)
//   DELETE /test/accounts/:id   remove it; its refresh tokens stop working (204)
//   POST   /test/accounts/:id/revoke  revoke every refresh token of the account ({"revoked": n})
//   POST   /test/rotate         new RS256 signing key; the old one leaves the JWKS ({"kid"})
//   POST   /test/id-token       {"sub","aud","nonce"?,"exp_in"?,"iss"?,"claims"?}
//                               -> {"id_token"} signed with the current key
//   GET    /test/health         200
//
// Sign-in needs no browser: GET /interaction/:uid shows a form with one field,
// `login` (an account id), posted to /interaction/:uid/login. Consent is implied:
// everything the client asked for is granted at sign-in.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';
import { exportJWK, generateKeyPair, importJWK, SignJWT } from 'jose';

const port = Number.parseInt(process.env.PORT ?? '', 10);
if (!Number.isInteger(port) || port <= 0) {
  console.error('oidc-provider: set PORT');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

// ---------------------------------------------------------------------------
// Storage shared by every Provider instance (a rotation rebuilds the Provider).

const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }
const grantMembers = new Map(); // grantId -> Set of store keys
const sessionUids = new Map(); // session uid -> session id
const userCodes = new Map(); // user code -> device code id

const GRANT_BOUND = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
]);

function live(key) {
  const entry = store.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
    store.delete(key);
    return undefined;
  }
  return entry.payload;
}

class SharedMemoryAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    const expiresAt = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : undefined;
    store.set(key, { payload: structuredClone(payload), expiresAt });
    if (GRANT_BOUND.has(this.model) && payload.grantId) {
      if (!grantMembers.has(payload.grantId)) grantMembers.set(payload.grantId, new Set());
      grantMembers.get(payload.grantId).add(key);
    }
    if (this.model === 'Session' && payload.uid) sessionUids.set(payload.uid, id);
    if (payload.userCode) userCodes.set(payload.userCode, id);
  }

  async find(id) {
    const payload = live(this.key(id));
    return payload === undefined ? undefined : structuredClone(payload);
  }

  async findByUid(uid) {
    const id = sessionUids.get(uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = userCodes.get(userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const entry = store.get(this.key(id));
    if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const key of grantMembers.get(grantId) ?? []) store.delete(key);
    grantMembers.delete(grantId);
  }
}

// ---------------------------------------------------------------------------
// Accounts: id -> claims. The id is both the `login` typed in the form and `sub`.

const accounts = new Map();

async function findAccount(_ctx, id) {
  const claims = accounts.get(id);
  if (claims === undefined) return undefined;
  return {
    accountId: id,
    async claims() {
      return { ...accounts.get(id), sub: id };
    },
  };
}

// ---------------------------------------------------------------------------
// Signing keys and the Provider built around the current one.

const cookieKeys = [randomBytes(32).toString('base64url')];
let signing; // { kid, privateJwk }
let provider;
let handle; // provider.callback()

async function newSigningKey() {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { kid: `k-${randomUUID()}`, privateJwk: jwk };
}

function page(title, body) {
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>
<body>
${body}
</body></html>
`;
}

function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  })[c]);
}

function buildProvider(key) {
  const configuration = {
    adapter: SharedMemoryAdapter,
    findAccount,
    jwks: { keys: [{ ...key.privateJwk, kid: key.kid, alg: 'RS256', use: 'sig' }] },
    // Plain http on 127.0.0.1: cookies are never `secure` (ctx.secure is false, proxy is
    // off); SameSite=None without Secure would be dropped by browsers, so use lax.
    cookies: {
      keys: cookieKeys,
      long: { httpOnly: true, sameSite: 'lax' },
      short: { httpOnly: true, sameSite: 'lax' },
    },
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    responseTypes: ['code'],
    scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username'],
      email: ['email', 'email_verified'],
      groups: ['groups'],
    },
    conformIdTokenClaims: false,
    pkce: { required: (_ctx, client) => client.clientAuthMethod === 'none' },
    issueRefreshToken: async (_ctx, client, source) => (
      client.grantTypeAllowed('refresh_token') && source.scopes.has('offline_access')
    ),
    rotateRefreshToken: false,
    ttl: {
      AccessToken: 3600,
      AuthorizationCode: 600,
      IdToken: 3600,
      Interaction: 3600,
      Session: 14 * 24 * 3600,
      Grant: 14 * 24 * 3600,
      RefreshToken: 14 * 24 * 3600,
    },
    interactions: {
      url: (_ctx, interaction) => `/interaction/${interaction.uid}`,
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true, initialAccessToken: false },
      revocation: { enabled: true },
      // Access tokens stay opaque (audience: the userinfo endpoint); no `resource` parameter.
      resourceIndicators: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          // `form` has id op.logoutForm and a hidden xsrf input; submit it with logout=yes.
          ctx.body = page('Sign out', `${form}
<button id="logout" type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>
<button id="stay" type="submit" form="op.logoutForm">Stay signed in</button>`);
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.body = page('Signed out', '<p id="signed-out">Signed out.</p>');
        },
      },
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      const rows = Object.entries(out)
        .map(([k, v]) => `<p><b>${escapeHtml(k)}</b>: <span id="${escapeHtml(k)}">${escapeHtml(v)}</span></p>`)
        .join('\n');
      ctx.body = page('Error', rows);
    },
    clientBasedCORS: () => true,
  };
  const p = new Provider(issuer, configuration);
  p.proxy = false;
  // oidc-provider drops offline_access from any authorization request whose `prompt`
  // lacks `consent` (OIDC Core 11), even when `prompt` is absent. Consent is implied
  // here anyway, so add it: requesting offline_access is enough to get a refresh token.
  p.use(async (ctx, next) => {
    if (ctx.path === '/auth' && ctx.method === 'GET') {
      const { scope, prompt = '' } = ctx.query;
      if (typeof scope === 'string' && scope.split(' ').includes('offline_access')
        && typeof prompt === 'string') {
        const prompts = prompt.split(' ').filter(Boolean);
        if (!prompts.includes('none') && !prompts.includes('consent')) {
          ctx.query = { ...ctx.query, prompt: [...prompts, 'consent'].join(' ') };
        }
      }
    }
    await next();
  });
  p.on('server_error', (_ctx, err) => console.error('oidc-provider server_error:', err));
  return p;
}

async function rotate() {
  const key = await newSigningKey();
  const next = buildProvider(key);
  signing = key;
  provider = next;
  handle = next.callback();
  return key.kid;
}

// ---------------------------------------------------------------------------
// Small HTTP helpers.

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

async function readJson(req) {
  const text = await readBody(req);
  return text === '' ? {} : JSON.parse(text);
}

function send(res, status, body, type) {
  res.statusCode = status;
  if (body === undefined) {
    res.end();
    return;
  }
  res.setHeader('content-type', type ?? 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------
// Test control endpoints.

async function testRoute(req, res, path) {
  const method = req.method;
  if (path === '/test/health' && method === 'GET') {
    send(res, 200, { ok: true });
    return;
  }
  const account = /^\/test\/accounts\/([^/]+)$/.exec(path);
  if (account && method === 'PUT') {
    const claims = await readJson(req);
    if (!isObject(claims)) {
      send(res, 400, { error: 'body must be a JSON object of claims' });
      return;
    }
    const id = decodeURIComponent(account[1]);
    delete claims.sub;
    accounts.set(id, claims);
    send(res, 204);
    return;
  }
  const revoke = /^\/test\/accounts\/([^/]+)\/revoke$/.exec(path);
  if (revoke && method === 'POST') {
    // Revokes every refresh token of the account (the account stays): what an
    // administrator does at a provider to end a user's offline access.
    const id = decodeURIComponent(revoke[1]);
    let revoked = 0;
    for (const [key, entry] of store) {
      if (key.startsWith('RefreshToken:') && entry.payload.accountId === id) {
        store.delete(key);
        revoked += 1;
      }
    }
    send(res, 200, { revoked });
    return;
  }
  if (account && method === 'DELETE') {
    accounts.delete(decodeURIComponent(account[1]));
    send(res, 204);
    return;
  }
  if (path === '/test/rotate' && method === 'POST') {
    send(res, 200, { kid: await rotate() });
    return;
  }
  if (path === '/test/id-token' && method === 'POST') {
    const body = await readJson(req);
    if (!isObject(body) || typeof body.sub !== 'string' || body.aud === undefined) {
      send(res, 400, { error: 'sub (string) and aud are required' });
      return;
    }
    const now = Math.floor(Date.now() / 1000);
    const expIn = typeof body.exp_in === 'number' ? body.exp_in : 300;
    const payload = {
      ...(isObject(body.claims) ? body.claims : {}),
      iss: body.iss ?? issuer,
      sub: body.sub,
      aud: body.aud,
      iat: Math.min(now, now + expIn - 60),
      exp: now + expIn,
    };
    if (body.nonce !== undefined) payload.nonce = body.nonce;
    const key = await importJWK(signing.privateJwk, 'RS256');
    const idToken = await new SignJWT(payload)
      .setProtectedHeader({ alg: 'RS256', kid: signing.kid, typ: 'JWT' })
      .sign(key);
    send(res, 200, { id_token: idToken });
    return;
  }
  send(res, 404, { error: 'not found' });
}

// ---------------------------------------------------------------------------
// Interactions: sign-in form, auto-consent.

function loginForm(uid, { error, login } = {}) {
  const message = error ? `<p id="error" role="alert">${escapeHtml(error)}</p>\n` : '';
  return page('Sign in', `${message}<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label for="login">Account</label>
<input id="login" name="login" type="text" autofocus value="${escapeHtml(login ?? '')}">
<button id="submit" type="submit">Sign in</button>
</form>`);
}

// Grant everything the authorization request asked for (scopes, claims, resource scopes).
async function grantAll(p, details, accountId) {
  const { params, prompt } = details;
  let grant;
  if (details.grantId) {
    const existing = await p.Grant.find(details.grantId);
    if (existing && existing.accountId === accountId) grant = existing;
  }
  grant ??= new p.Grant({ accountId, clientId: params.client_id });

  if (params.scope) grant.addOIDCScope(params.scope);
  const d = prompt?.details ?? {};
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  if (typeof params.claims === 'string') {
    try {
      const requested = JSON.parse(params.claims);
      const names = new Set();
      for (const part of [requested.id_token, requested.userinfo]) {
        if (isObject(part)) Object.keys(part).forEach((n) => names.add(n));
      }
      if (names.size) grant.addOIDCClaims([...names]);
    } catch {
      // the provider has already validated the claims parameter
    }
  }
  if (d.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  return grant.save();
}

async function interactionRoute(req, res, path) {
  const p = provider;
  const show = /^\/interaction\/([^/]+)$/.exec(path);
  const submit = /^\/interaction\/([^/]+)\/login$/.exec(path);
  let details;
  try {
    details = await p.interactionDetails(req, res);
  } catch (err) {
    send(res, 400, page('Sign in', `<p id="error">${escapeHtml(err.message)}</p>`), 'text/html; charset=utf-8');
    return;
  }
  const uid = details.uid;

  if (show && req.method === 'GET') {
    if (details.prompt.name !== 'login' && details.session?.accountId) {
      // Already signed in; only consent is missing: give it without asking.
      const grantId = await grantAll(p, details, details.session.accountId);
      await p.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return;
    }
    send(res, 200, loginForm(uid), 'text/html; charset=utf-8');
    return;
  }

  if (submit && req.method === 'POST') {
    const form = new URLSearchParams(await readBody(req));
    const login = (form.get('login') ?? '').trim();
    if (!accounts.has(login)) {
      send(res, 400, loginForm(uid, { error: `unknown account "${login}"`, login }), 'text/html; charset=utf-8');
      return;
    }
    const grantId = await grantAll(p, details, login);
    await p.interactionFinished(req, res, {
      login: { accountId: login },
      consent: { grantId },
    }, { mergeWithLastSubmission: false });
    return;
  }

  send(res, 405, { error: 'method not allowed' });
}

// ---------------------------------------------------------------------------

await rotate();

const server = createServer(async (req, res) => {
  const path = new URL(req.url, issuer).pathname;
  try {
    if (path.startsWith('/test/')) {
      await testRoute(req, res, path);
    } else if (path.startsWith('/interaction/')) {
      await interactionRoute(req, res, path);
    } else {
      handle(req, res);
    }
  } catch (err) {
    console.error('oidc-provider test server error:', err);
    if (!res.headersSent) send(res, 500, { error: String(err?.message ?? err) });
    else res.end();
  }
});

server.listen(port, '127.0.0.1');
