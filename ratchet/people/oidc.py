"""OpenID Connect sign-in, the relying party's half: the authorization code flow with PKCE (RFC 7636,
S256), and the ID token checked as OpenID Connect Core 3.1.3.7 says.

- The provider's discovery document (ISSUER/.well-known/openid-configuration) is fetched once and
  must name the same issuer; its JWKS is fetched once and again when a token names a key id the
  cached set lacks (the provider rotated its keys), at most once per REFETCH_AFTER_S.
- `start` makes a fresh state, nonce and code verifier (kept by the caller in a signed cookie, never
  sent to anyone but the provider) and the URL to send the browser to.
- `finish` exchanges the code (with the verifier, and the client secret when there is one) and
  verifies the ID token: signature by a key of the provider's JWKS (asymmetric algorithms only),
  `iss`, `aud` (and `azp` when there are several), `exp` and `iat` with a leeway, and the `nonce`.
Every failure is `SignInRefused`, whose message says which check failed and never holds a token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx2
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The ID token signatures taken: asymmetric only (`none` and HS256 with the client secret are not)."""
REFETCH_AFTER_S = 30.0
HTTP_TIMEOUT_S = 10.0


class SignInRefused(Exception):
    """The provider, the callback or the ID token failed a check: nobody is signed in."""


@dataclass(frozen=True)
class Flow:
    """One sign-in in progress: what the callback must match (`state`, `nonce`) and prove (`verifier`)."""

    state: str
    nonce: str
    verifier: str
    url: str
    """Where the browser goes: the provider's authorization endpoint with the request."""


@dataclass
class OidcClient:
    issuer: str
    client_id: str
    client_secret: str | None = None
    scopes: str = "openid profile email"
    leeway_s: float = 60.0
    clock: Callable[[], float] = time.time
    _discovery: dict[str, Any] | None = field(default=None, repr=False)
    _keys: KeySet | None = field(default=None, repr=False)
    _keys_at: float = field(default=0.0, repr=False)

    async def start(self, redirect_uri: str) -> Flow:
        meta = await self.discovery()
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "scope": self.scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
        }
        return Flow(state, nonce, verifier, f"{meta['authorization_endpoint']}?{urlencode(query)}")

    async def finish(self, code: str, verifier: str, nonce: str, redirect_uri: str) -> dict[str, Any]:
        """The verified ID token's claims for the callback's `code`."""
        return await self.verify(await self.exchange(code, verifier, redirect_uri), nonce)

    async def exchange(self, code: str, verifier: str, redirect_uri: str) -> str:
        """The ID token the provider gives for `code` (not yet verified)."""
        meta = await self.discovery()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        auth = (self.client_id, self.client_secret) if self.client_secret else None
        if auth is None:
            form["client_id"] = self.client_id
        answer = await self._http("POST", meta["token_endpoint"], data=form, auth=auth)
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused("the provider's token response holds no id_token")
        return id_token

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of `id_token` once every check passes; SignInRefused naming the one that failed."""
        kid = _header(id_token).get("kid")
        keys = await self.keys()
        if kid is not None and not _has(keys, kid):
            keys = await self.keys(refresh=True)
        if kid is not None and not _has(keys, kid):
            raise SignInRefused(f"the ID token is signed by key {kid!r}, which the provider does not publish")
        try:
            token = jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
        except JoseError as exc:
            raise SignInRefused(f"the ID token's signature does not verify ({exc.error})") from None
        claims = dict(token.claims)
        self._check_claims(claims, nonce)
        return claims

    def _check_claims(self, claims: dict[str, Any], nonce: str) -> None:
        now, leeway = self.clock(), self.leeway_s
        if claims.get("iss") != self.issuer:
            raise SignInRefused(f"the ID token's issuer is {claims.get('iss')!r}, not {self.issuer!r}")
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.client_id not in audiences:
            raise SignInRefused(f"the ID token is for audience {audience!r}, not this console ({self.client_id!r})")
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise SignInRefused("the ID token has several audiences and is not authorized for this console (azp)")
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)) or now > exp + leeway:
            raise SignInRefused(
                "the ID token has expired" if isinstance(exp, (int, float)) else "the ID token has no exp"
            )
        if isinstance(iat, (int, float)) and iat > now + leeway:
            raise SignInRefused("the ID token is issued in the future (check the clocks)")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise SignInRefused("the ID token names no subject (sub)")
        if not secrets.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
            raise SignInRefused("the ID token's nonce is not this sign-in's (a replayed or injected token)")

    async def discovery(self) -> dict[str, Any]:
        if self._discovery is None:
            meta = await self._http("GET", f"{self.issuer}/.well-known/openid-configuration")
            if meta.get("issuer") != self.issuer:
                raise SignInRefused(f"the provider's discovery document names issuer {meta.get('issuer')!r}")
            for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(meta.get(name), str):
                    raise SignInRefused(f"the provider's discovery document has no {name}")
            self._discovery = meta
        return self._discovery

    async def keys(self, refresh: bool = False) -> KeySet:
        stale = refresh and time.monotonic() - self._keys_at > REFETCH_AFTER_S
        if self._keys is None or stale:
            document = await self._http("GET", (await self.discovery())["jwks_uri"])
            try:
                self._keys = KeySet.import_key_set(document)  # type: ignore[arg-type]  # a JWKS document, checked by the import
            except (JoseError, ValueError, KeyError, TypeError) as exc:
                raise SignInRefused(f"the provider's JWKS does not load: {exc}") from None
            self._keys_at = time.monotonic()
        return self._keys

    async def _http(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
                response = await http.request(method, url, **kwargs)
        except httpx2.HTTPError as exc:
            raise SignInRefused(f"the provider at {url} cannot be reached: {type(exc).__name__}") from None
        if response.status_code != 200:
            said = _said(response)
            raise SignInRefused(f"the provider answered {response.status_code} at {url}{said}")
        try:
            body = response.json()
        except ValueError:
            raise SignInRefused(f"the provider's answer at {url} is not JSON") from None
        if not isinstance(body, dict):
            raise SignInRefused(f"the provider's answer at {url} is not a JSON object")
        return body


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _header(token: str) -> dict[str, Any]:
    try:
        head = token.split(".")[0]
        value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, IndexError):
        raise SignInRefused("the ID token is not a JWT") from None
    if not isinstance(value, dict):
        raise SignInRefused("the ID token is not a JWT")
    return value


def _has(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)


def _said(response: httpx2.Response) -> str:
    """The provider's `error` (and description), never the body's other content."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return f": {body['error']}" + (f" ({body['error_description']})" if body.get("error_description") else "")
    return ""
