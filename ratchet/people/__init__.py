"""Who a request comes from (docs/SECURITY.md, "Sign-in"): OpenID Connect, a trusted proxy's header,
a person's API token or the console's single-user token, as a `Principal` (ratchet/contracts/identity.py)."""
