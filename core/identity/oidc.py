"""OpenID Connect ID-token verification against the configured issuer.

The issuer's discovery document and JWKS are fetched over HTTP and cached; an unknown ``kid``
triggers one refetch (rate-limited, since anyone can send a random ``kid``). At most one fetch of
each document is in flight: concurrent requests wait for it instead of fetching again. Calls to
the identity provider (these fetches and the sign-in's token request) go through their own small
HTTP client, so slow calls elsewhere in the service cannot queue them. Every check of OpenID
Connect Core 3.1.3.7 that applies to a bearer ID token is made on every request, because the spec
makes the ID token itself the session credential.

joserfc (with cryptography's X.509 under it) is imported by the functions that use it, at the
first token or key set: with Authlib, a tenth of a start-up that verifies none yet (issue 49).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from core.clock import Clock
from core.errors import InvalidToken, UpstreamError
from core.outbound.http import OwnClient

if TYPE_CHECKING:
    from joserfc.jwk import KeySet
    from tornado.simple_httpclient import SimpleAsyncHTTPClient

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Asymmetric algorithms only: ``none`` and HMAC (keyed by a shared secret) are never accepted.
SAFE_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LEEWAY_SECONDS = 60
CACHE_SECONDS = 3600
#: Least time between two forced JWKS refetches caused by unknown ``kid`` values.
REFETCH_SECONDS = 10
HTTP_TIMEOUT_SECONDS = 10
#: Identity-provider requests in flight at once (discovery, JWKS, token exchanges); more wait.
MAX_CLIENTS = 10
#: Payload markers of access tokens: Keycloak's ``typ`` and Cognito's ``token_use``.
_ACCESS_TYPES = frozenset({"bearer", "at+jwt", "application/at+jwt"})
ACCESS_TOKEN_MESSAGE = (
    "An access token is not a session token; send the ID token (the 'token' field of the sign-in exchange)."
)


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
        self._fetches: dict[str, asyncio.Task[Any]] = {}
        self._http = OwnClient(max_clients=MAX_CLIENTS)

    def http(self) -> SimpleAsyncHTTPClient:
        """The pool for identity-provider calls (discovery, JWKS, the code exchange)."""
        return self._http.get()

    def close(self) -> None:
        self._http.close()

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def _expired(self, fetched_at: float, now: float) -> bool:
        # A clock that went backwards counts as expired too: refetching is always safe.
        return not 0 <= now - fetched_at <= CACHE_SECONDS

    def _in_flight(self, kind: str) -> asyncio.Task[Any] | None:
        task = self._fetches.get(kind)
        return task if task is not None and task.get_loop() is asyncio.get_running_loop() else None

    async def _once(self, kind: str, fetch: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Await the fetch of this kind already in flight on this loop, or start one."""
        task = self._in_flight(kind)
        if task is None:
            task = asyncio.get_running_loop().create_task(fetch())
            self._fetches[kind] = task
            task.add_done_callback(lambda done: self._settled(kind, done))
        # Shielded: a waiter that goes away (client disconnect) does not cancel the others' fetch.
        return await asyncio.shield(task)

    def _settled(self, kind: str, task: asyncio.Task[Any]) -> None:
        if self._fetches.get(kind) is task:
            del self._fetches[kind]
        if not task.cancelled():
            task.exception()  # its waiters got it; never "exception was never retrieved"

    async def _get_json(self, url: str) -> dict[str, Any]:
        # The issuer is operator configuration, trusted, so no outbound address guard applies.
        # Tornado's client here, not above: a sign-in's, it was 0.01 s of every start-up (issue 49).
        from tornado.httpclient import HTTPClientError, HTTPRequest

        request = HTTPRequest(url, connect_timeout=HTTP_TIMEOUT_SECONDS, request_timeout=HTTP_TIMEOUT_SECONDS)
        try:
            response = await self.http().fetch(request)
            data = json.loads(response.body)
        except (HTTPClientError, OSError, ValueError) as exc:
            log.warning("identity provider request %s failed: %s", url, exc)
            raise UpstreamError("The identity provider did not answer; try again shortly.") from None
        if not isinstance(data, dict):
            raise UpstreamError("The identity provider sent an unexpected document.")
        return data

    async def discovery(self) -> dict[str, Any]:
        """The issuer's discovery document, cached for an hour."""
        if self._discovery is None or self._expired(self._discovery_at, self._now()):
            return await self._once("discovery", self._fetch_discovery)
        return self._discovery

    async def _fetch_discovery(self) -> dict[str, Any]:
        doc = await self._get_json(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        if doc.get("issuer") != self.issuer:
            log.error("discovery issuer %r differs from configured %r", doc.get("issuer"), self.issuer)
            raise UpstreamError("The identity provider's discovery document names another issuer.")
        self._discovery, self._discovery_at = doc, self._now()
        return doc

    async def _key_set(self, *, refresh: bool = False) -> KeySet:
        now, keys = self._now(), self._keys
        if keys is not None and not self._expired(self._keys_at, now):
            if not refresh:
                return keys
            if self._in_flight("jwks") is None:
                # An unknown kid: refetch, unless one was forced moments ago (anyone can send one).
                if 0 <= now - self._forced_at <= REFETCH_SECONDS:
                    return keys
                self._forced_at = now
        # Stale, or a refetch: join the fetch in flight, if any, else start one.
        return await self._once("jwks", self._fetch_keys)

    async def _fetch_keys(self) -> KeySet:
        uri = (await self.discovery()).get("jwks_uri")
        if not isinstance(uri, str):
            raise UpstreamError("The identity provider's discovery document names no JWKS.")
        data = await self._get_json(uri)
        # joserfc in the functions that use it: see the module's docstring
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        try:
            keys = KeySet.import_key_set(data)  # type: ignore[arg-type]  # any JSON: a bad shape raises, caught below
        except (JoseError, ValueError, KeyError, TypeError):
            raise UpstreamError("The identity provider's JWKS could not be read.") from None
        self._keys, self._keys_at = keys, self._now()
        return keys

    async def _allowed_algorithms(self) -> frozenset[str]:
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
        from joserfc import jws, jwt
        from joserfc.errors import JoseError

        try:
            header = jws.extract_compact(token.encode()).protected
        except (JoseError, ValueError, UnicodeError):
            raise InvalidToken("The bearer is neither an API key nor a signed ID token.") from None
        if str(header.get("typ", "")).lower() in ("at+jwt", "application/at+jwt"):
            raise InvalidToken(ACCESS_TOKEN_MESSAGE)
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
        # Some providers type their access tokens in the payload only, and sign them with the
        # same keys for the same audience: Keycloak (typ "Bearer"; its ID tokens say "ID") and
        # Cognito (token_use "access"; its ID tokens say "id").
        if str(claims.get("typ", "")).lower() in _ACCESS_TYPES or claims.get("token_use", "id") != "id":
            raise InvalidToken(ACCESS_TOKEN_MESSAGE)
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
