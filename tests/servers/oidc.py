"""A real OpenID Connect issuer on loopback: discovery document, JWKS, and token minting.

Tokens are signed with real RSA keys and verified by the service over HTTP, so the
verification code runs exactly as in production.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import tornado.web
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.servers._thread import ThreadedServer

CLIENT_ID = "test-client"


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class _Discovery(tornado.web.RequestHandler):
    def initialize(self, issuer: OidcIssuer) -> None:
        self.issuer = issuer

    def get(self) -> None:
        self.issuer.discovery_fetches += 1
        self.write(
            {
                "issuer": self.issuer.issuer,
                "authorization_endpoint": self.issuer.issuer + "/authorize",
                "token_endpoint": self.issuer.issuer + "/token",
                "jwks_uri": self.issuer.issuer + "/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )


class _Jwks(tornado.web.RequestHandler):
    def initialize(self, issuer: OidcIssuer) -> None:
        self.issuer = issuer

    def get(self) -> None:
        self.issuer.jwks_fetches += 1
        self.write({"keys": [k.as_dict(private=False) for k in self.issuer.published]})


class OidcIssuer:
    """Publishes ``published`` keys and signs with ``signing_key`` unless told otherwise."""

    def __init__(self) -> None:
        self.signing_key = new_key("key-1")
        self.published = [self.signing_key]
        self.jwks_fetches = 0
        self.discovery_fetches = 0
        args = {"issuer": self}
        self._server = ThreadedServer(
            tornado.web.Application(
                [
                    (r"/\.well-known/openid-configuration", _Discovery, args),
                    (r"/jwks", _Jwks, args),
                ]
            )
        )
        self.issuer = self._server.url

    def start(self) -> OidcIssuer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def rotate(self) -> RSAKey:
        """Publish a new key and sign with it from now on (old one stays published)."""
        self.signing_key = new_key(f"key-{uuid.uuid4().hex[:8]}")
        self.published.append(self.signing_key)
        return self.signing_key

    def mint(
        self,
        *,
        now: dt.datetime,
        email: str,
        subject: str | None = None,
        key: RSAKey | None = None,
        header: dict[str, Any] | None = None,
        without: tuple[str, ...] = (),
        **claims: Any,
    ) -> str:
        """An ID token; ``claims`` override defaults and ``without`` names claims to leave out."""
        issued = int(now.timestamp())
        body = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": subject or f"sub-{email}",
            "email": email,
            "email_verified": True,
            "iat": issued,
            "exp": issued + 3600,
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if k not in without}
        key = key or self.signing_key
        head = {"alg": "RS256", "kid": key.kid, "typ": "JWT", **(header or {})}
        return jwt.encode(head, body, key)
