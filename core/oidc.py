"""OpenID Connect ID-token verification against the configured issuer.

The issuer's discovery document and JWKS are fetched over HTTP and cached; an unknown ``kid``
triggers one refetch (rate-limited, since anyone can send a random ``kid``). Every check of
OpenID Connect Core 3.1.3.7 that applies to a bearer ID token is made on every request, because
the spec makes the ID token itself the session credential.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from core.clock import Clock
from core.errors import InvalidToken, UpstreamError

log = logging.getLogger(__name__)

#: Asymmetric algorithms only: ``none`` and HMAC (keyed by a shared secret) are never accepted.
SAFE_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_SECONDS = 60
CACHE_SECONDS = 3600
#: Least time between two forced JWKS refetches caused by unknown ``kid`` values.
REFETCH_SECONDS = 10
HTTP_TIMEOUT_SECONDS = 10


class OidcVerifier:
    """Verifies ID tokens of one issuer for one client id."""

    def __init__(self, *, issuer: str, client_id: str, clock: Clock) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self.clock = clock
        self._discovery: dict[str, Any] | None = None
        self._discovery_at = 0.0
        self._keys: KeySet | None = None
        self._keys_at = 0.0
        self._forced_at = float("-inf")

    async def _get_json(self, url: str) -> dict[str, Any]:
        # The issuer is operator configuration, trusted, so no outbound address guard applies.
        request = HTTPRequest(url, connect_timeout=HTTP_TIMEOUT_SECONDS, request_timeout=HTTP_TIMEOUT_SECONDS)
        try:
            response = await AsyncHTTPClient().fetch(request)
            data = json.loads(response.body)
        except (HTTPClientError, OSError, ValueError) as exc:
            log.warning("identity provider request %s failed: %s", url, exc)
            raise UpstreamError("The identity provider did not answer; try again shortly.") from None
        if not isinstance(data, dict):
            raise UpstreamError("The identity provider sent an unexpected document.")
        return data

    async def discovery(self) -> dict[str, Any]:
        """The issuer's discovery document, cached for an hour."""
        if self._discovery is None or time.monotonic() - self._discovery_at > CACHE_SECONDS:
            doc = await self._get_json(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
            if doc.get("issuer") != self.issuer:
                log.error("discovery issuer %r differs from configured %r", doc.get("issuer"), self.issuer)
                raise UpstreamError("The identity provider's discovery document names another issuer.")
            self._discovery, self._discovery_at = doc, time.monotonic()
        return self._discovery

    async def _key_set(self, *, refresh: bool = False) -> KeySet:
        now = time.monotonic()
        stale = self._keys is None or now - self._keys_at > CACHE_SECONDS
        forced = refresh and now - self._forced_at > REFETCH_SECONDS
        if forced:
            self._forced_at = now
        if stale or forced:
            doc = await self.discovery()
            data = await self._get_json(doc["jwks_uri"])
            try:
                self._keys = KeySet.import_key_set(data)
            except (JoseError, ValueError, KeyError, TypeError):
                raise UpstreamError("The identity provider's JWKS could not be read.") from None
            self._keys_at = time.monotonic()
        assert self._keys is not None
        return self._keys

    async def _allowed_algorithms(self) -> set[str]:
        doc = await self.discovery()
        offered = doc.get("id_token_signing_alg_values_supported") or ["RS256"]
        return SAFE_ALGORITHMS.intersection(offered)

    async def _signing_key(self, kid: str | None) -> Any:
        for refresh in (False, True):
            keys = await self._key_set(refresh=refresh)
            if kid is None and len(keys.keys) == 1:
                return keys.keys[0]
            for key in keys.keys:
                if key.kid == kid:
                    return key
        raise InvalidToken("The session token was signed with a key the identity provider does not publish.")

    async def verify(self, token: str, *, nonce: str | None = None) -> dict[str, Any]:
        """Verify signature and claims; return the claims or raise ``InvalidToken``."""
        try:
            header = jws.extract_compact(token.encode()).protected
        except (JoseError, ValueError, UnicodeError):
            raise InvalidToken("The bearer is neither an API key nor a signed ID token.") from None
        if str(header.get("typ", "")).lower() in ("at+jwt", "application/at+jwt"):
            raise InvalidToken(
                "Access tokens are not accepted; send the ID token (the 'token' field of the sign-in exchange)."
            )
        alg = header.get("alg")
        if alg not in await self._allowed_algorithms():
            raise InvalidToken(f"The session token's signing algorithm {alg!r} is not allowed.")
        key = await self._signing_key(header.get("kid"))
        try:
            claims = jwt.decode(token, key, algorithms=[alg]).claims
        except JoseError:
            raise InvalidToken("The session token's signature is not valid.") from None
        self._check_claims(claims, nonce=nonce)
        return claims

    def _check_claims(self, claims: dict[str, Any], *, nonce: str | None) -> None:
        now = self.clock.now().timestamp()
        if claims.get("iss") != self.issuer:
            raise InvalidToken("The session token comes from another issuer.")
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.client_id not in audiences:
            raise InvalidToken("The session token was issued for another client (audience).")
        # With several audiences, the authorized party must be us (OIDC Core 3.1.3.7 items 4-5).
        if ("azp" in claims or len(audiences) > 1) and claims.get("azp") != self.client_id:
            raise InvalidToken("The session token's authorized party is another client.")
        for name in ("exp", "iat"):
            if not isinstance(claims.get(name), (int, float)) or isinstance(claims.get(name), bool):
                raise InvalidToken(f"The session token lacks a numeric '{name}' claim.")
        if claims["exp"] <= now - LEEWAY_SECONDS:
            raise InvalidToken("The session token has expired; sign in again.")
        if claims["iat"] > now + LEEWAY_SECONDS:
            raise InvalidToken("The session token was issued in the future.")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and nbf > now + LEEWAY_SECONDS:
            raise InvalidToken("The session token is not valid yet.")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise InvalidToken("The session token lacks a subject.")
        if not isinstance(claims.get("email"), str) or "@" not in claims["email"]:
            raise InvalidToken("The session token carries no e-mail address.")
        if claims.get("email_verified") is not True:
            raise InvalidToken("The identity provider has not verified this e-mail address.")
        if nonce is not None and claims.get("nonce") != nonce:
            raise InvalidToken("The session token's nonce does not match.")
