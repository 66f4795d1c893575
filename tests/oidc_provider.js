// A real OpenID provider for tests: npm's oidc-provider (panva), its development login and consent
// pages (any login name, any password), the clients and accounts tests/oidc_provider.py passes in
// OIDC_TEST_CONFIG. Prints READY once it listens.
const config = JSON.parse(process.env.OIDC_TEST_CONFIG);
const { default: Provider } = await import(config.module);

const provider = new Provider(config.issuer, {
  clients: config.clients,
  claims: { openid: ["sub"], profile: ["name"], email: ["email"], groups: ["groups"] },
  scopes: ["openid", "profile", "email", "groups"],
  conformIdTokenClaims: false, // the account's claims in the ID token itself, not only at userinfo
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["test-only-cookie-key"] },
  ttl: { IdToken: config.idTokenTtl ?? 3600 },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, ...(config.accounts[id] ?? {}) }; } };
  },
});
provider.listen(config.port, "127.0.0.1", () => console.log("READY"));
