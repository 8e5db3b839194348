"""The built-in development identity provider: a minimal OpenID Connect provider.

It exists so that ``python app.py`` works end to end on a fresh machine without an external
provider. It is active only while ``[oidc] issuer`` is empty, serves only loopback addresses
(enforced at start-up by the configuration), accepts any e-mail address without a password and
says so on its pages. The service consumes its tokens exactly like an external provider's:
discovery document and JWKS over HTTP, the same verification code.

Flow: authorization code with PKCE (S256 only), confidential client (``client_secret_basic``
or ``client_secret_post``), codes valid for one minute and redeemable once. Codes live in the
database (store/stand_ins.py, hashed), so that processes sharing a PostgreSQL database behind one
address each redeem the codes any of them issued (README, "More than one machine": a trial on one
machine); expired ones are dropped whenever a new one is issued, and at most ``MAX_CODES`` are kept
(the oldest go first), so a flood of sign-in forms cannot grow the table.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode

import attrs

from core.clock import Clock
from core.text import email_address, normalise_email

if TYPE_CHECKING:
    from joserfc.jwk import RSAKey

    from store import Store

log = logging.getLogger(__name__)

CODE_SECONDS = 60
#: Unredeemed codes kept at most; issuing one more drops the oldest.
MAX_CODES = 10_000
TOKEN_SECONDS = 3600
DEFAULT_CLIENT_ID = "dev-portal"


class AuthorizeError(Exception):
    """An authorization request that must not be redirected back (unknown client or URI)."""


class InvalidEmail(ValueError):
    """The sign-in form was sent without a usable e-mail address."""


@attrs.frozen
class TokenError(Exception):
    """An OAuth error answer of the token endpoint (RFC 6749 section 5.2)."""

    status: int
    error: str
    description: str


@attrs.frozen
class _Code:
    email: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    expires: float
    "Timestamp (seconds) of the injected clock after which the code is refused."


def _hash(code: str) -> str:
    # A code in the table could be redeemed by whoever reads it; its hash cannot.
    return hashlib.sha256(code.encode()).hexdigest()


def load_key(path: Path) -> RSAKey:
    """The signing key kept under the storage folder (created with mode 0600 when missing)."""
    from joserfc.jwk import RSAKey  # joserfc here and below, not above: see core/identity/oidc.py

    create_key(path)
    return RSAKey.import_key(json.loads(path.read_text()))


def create_key(path: Path) -> None:
    """The signing key file under the storage folder, created with mode 0600 when missing; an
    existing one is left as it is, unread."""
    if path.exists():
        return
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(8), "use": "sig", "alg": "RS256"})
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # beside secrets: private
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process won the race: its key is the one read
    with os.fdopen(fd, "w") as f:
        json.dump(key.as_dict(private=True), f)


class DevIdentityProvider:
    def __init__(
        self, *, issuer: str, client_id: str, client_secret: str, redirect_uri: str, key: RSAKey | Path,
        clock: Clock, store: Store, max_codes: int = MAX_CODES,
    ) -> None:
        """``key``: the signing key, or the file that keeps it (``create_key``), read when a token is
        first signed or the JWKS first asked for: reading it (joserfc, x509, the RSA key's checks)
        was 0.08 s of every start-up, before the first answer (issue 49)."""
        self.issuer = issuer
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self._key = key
        self.clock = clock
        self.store = store
        self.max_codes = max_codes
        log.warning(
            "identity provider: built-in DEVELOPMENT provider at %s; any e-mail signs in without a "
            "password. Set [oidc] issuer for real use.",
            issuer,
        )

    @property
    def key(self) -> RSAKey:
        if isinstance(self._key, Path):
            self._key = load_key(self._key)
        return self._key

    async def pending_codes(self) -> int:
        """How many issued codes are kept, waiting to be redeemed."""
        return await self.store.run(self.store.stand_ins.count_codes)

    async def _keep(self, code: str, entry: _Code) -> None:
        now = self.clock.now().timestamp()

        def keep() -> None:
            with self.store.transaction():
                self.store.stand_ins.keep_code(_hash(code), attrs.asdict(entry), now=now, at_most=self.max_codes)

        await self.store.run(keep)

    async def _take(self, code: str) -> _Code | None:
        def take() -> dict[str, Any] | None:
            with self.store.transaction():
                return self.store.stand_ins.take_code(_hash(code))

        found = await self.store.run(take)
        return None if found is None else _Code(**found)

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "scopes_supported": ["openid", "email"],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "email", "email_verified", "nonce"],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.as_dict(private=False)]}

    def check_authorize(self, params: dict[str, str]) -> dict[str, str]:
        """Validate an authorization request; the parameters to carry through the form."""
        if params.get("client_id") != self.client_id:
            raise AuthorizeError("Unknown client_id.")
        # Exact redirect URI match (OAuth security BCP): never redirect anywhere else.
        if params.get("redirect_uri", self.redirect_uri) != self.redirect_uri:
            raise AuthorizeError(f"redirect_uri must be {self.redirect_uri}.")
        if params.get("response_type") != "code":
            raise AuthorizeError("response_type must be code.")
        if not params.get("code_challenge") or params.get("code_challenge_method") != "S256":
            raise AuthorizeError("PKCE is required: send code_challenge with code_challenge_method=S256.")
        keep = ("client_id", "redirect_uri", "response_type", "scope", "state", "nonce", "code_challenge", "code_challenge_method")
        return {k: params[k] for k in keep if k in params}

    async def issue_code(self, params: dict[str, str], email: str) -> str:
        """A one-minute, single-use code for this e-mail; returns the redirect location."""
        request = self.check_authorize(params)
        address = email_address(email)
        if address is None:
            raise InvalidEmail("Enter an e-mail address.")
        email = normalise_email(address)
        code = secrets.token_urlsafe(32)
        await self._keep(code, _Code(
            email=email,
            redirect_uri=self.redirect_uri,
            challenge=request["code_challenge"],
            nonce=request.get("nonce"),
            expires=self.clock.now().timestamp() + CODE_SECONDS,
        ))
        query = {"code": code, **({"state": request["state"]} if "state" in request else {})}
        return f"{self.redirect_uri}?{urlencode(query)}"

    def _client_ok(self, form: dict[str, str], authorization: str | None) -> bool:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization and authorization.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(authorization[6:]).decode()
            except (ValueError, UnicodeError):
                return False
            raw_id, _, raw_secret = decoded.partition(":")
            client_id, secret = unquote(raw_id), unquote(raw_secret)
        # Constant-time comparisons for the shared secret.
        return (
            client_id is not None
            and secret is not None
            and hmac.compare_digest(client_id.encode(), self.client_id.encode())
            and hmac.compare_digest(secret.encode(), self.client_secret.encode())
        )

    async def token(self, form: dict[str, str], authorization: str | None) -> dict[str, Any]:
        """Redeem a code; raise ``TokenError`` with the RFC 6749 error otherwise."""
        if not self._client_ok(form, authorization):
            raise TokenError(401, "invalid_client", "Client authentication failed.")
        if form.get("grant_type") != "authorization_code":
            raise TokenError(400, "unsupported_grant_type", "Only authorization_code is supported.")
        code = await self._take(form.get("code", ""))  # single use, even when it then fails
        if code is None or code.expires < self.clock.now().timestamp():
            raise TokenError(400, "invalid_grant", "The code is unknown, expired or already used.")
        if form.get("redirect_uri") != code.redirect_uri:
            raise TokenError(400, "invalid_grant", "redirect_uri does not match the authorization request.")
        verifier = form.get("code_verifier") or ""
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        if not hmac.compare_digest(create_s256_code_challenge(verifier).encode(), code.challenge.encode()):
            raise TokenError(400, "invalid_grant", "The PKCE code_verifier does not match the code_challenge.")
        return self._tokens(code)

    def subject(self, email: str) -> str:
        """A stable subject per e-mail address."""
        return "dev-" + hashlib.sha256(email.encode()).hexdigest()[:24]

    def _tokens(self, code: _Code) -> dict[str, Any]:
        now = int(self.clock.now().timestamp())
        claims = {
            "iss": self.issuer,
            "sub": self.subject(code.email),
            "aud": self.client_id,
            "email": code.email,
            "email_verified": True,
            "iat": now,
            "exp": now + TOKEN_SECONDS,
            **({"nonce": code.nonce} if code.nonce else {}),
        }
        from joserfc import jwt

        header = {"alg": "RS256", "kid": self.key.kid, "typ": "JWT"}
        id_token = jwt.encode(header, claims, self.key)
        access = {"iss": self.issuer, "sub": claims["sub"], "aud": f"{self.issuer}/userinfo", "client_id": self.client_id,
                  "scope": "openid email", "iat": now, "exp": now + TOKEN_SECONDS, "jti": secrets.token_hex(8)}
        access_token = jwt.encode({**header, "typ": "at+jwt"}, access, self.key)
        return {
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": TOKEN_SECONDS,
            "id_token": id_token,
            "scope": "openid email",
        }
