"""Sign-in: redeem an authorization code (with its PKCE verifier) for a verified ID token.

The service is the OAuth client: it sends the code to the provider's token endpoint (from the
discovery document) with its own client credentials and the configured redirect URI, verifies
the ID token it gets back exactly as it verifies every session bearer (plus the nonce when one
is given), and binds the identity to its user. The ID token is the session bearer; the access
token is handed back for the caller's own use but is never accepted as a bearer here.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import Forbidden, InvalidGrant, UpstreamError, ValidationError
from core.identity import accounts
from core.text import normalise_email

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

#: RFC 7636 section 4.1: 43 to 128 characters of [A-Z] [a-z] [0-9] - . _ ~
PKCE_VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
TIMEOUT_SECONDS = 10


@attrs.frozen
class OidcClient:
    """This service's registration at the identity provider."""

    client_id: str
    client_secret: str
    redirect_uri: str


@attrs.frozen
class ExchangeRequest:
    code: str
    code_verifier: str
    nonce: str | None = None


@attrs.frozen
class ExchangeResult:
    token: str
    "The verified ID token: the session bearer."
    access_token: str
    token_type: str
    expires_in_seconds: int
    "Seconds until the ID token expires."
    email: str


def _validate(request: ExchangeRequest) -> None:
    errors: dict[str, list[str]] = {}
    if not request.code.strip():
        errors["code"] = ["Must not be empty"]
    if not PKCE_VERIFIER.match(request.code_verifier):
        errors["codeVerifier"] = ["Must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_' and '~' (RFC 7636)"]
    if errors:
        raise ValidationError(field_errors=errors)


async def _redeem(services: Services, request: ExchangeRequest) -> dict[str, Any]:
    endpoint = (await services.oidc.discovery()).get("token_endpoint")
    if not isinstance(endpoint, str):
        raise UpstreamError("The identity provider's discovery document names no token endpoint.")
    client = services.oidc_client
    # Authlib here, not above: not at every start-up (core/identity/oidc.py)
    from authlib.oauth2.auth import ClientAuth
    from authlib.oauth2.rfc6749.parameters import prepare_token_request

    body = prepare_token_request(
        "authorization_code", code=request.code, redirect_uri=client.redirect_uri, code_verifier=request.code_verifier
    )
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    url, headers, body = ClientAuth(client.client_id, client.client_secret, "client_secret_basic").prepare(
        "POST", endpoint, headers, body
    )
    # The provider is operator configuration, trusted: no outbound address guard, but timeouts,
    # and the identity provider's own bounded client (shared with discovery and JWKS), imported here:
    # see core/identity/oidc.py.
    from tornado.httpclient import HTTPClientError, HTTPRequest

    http = HTTPRequest(url, method="POST", headers=headers, body=body, connect_timeout=TIMEOUT_SECONDS, request_timeout=TIMEOUT_SECONDS)
    try:
        response = await services.oidc.http().fetch(http, raise_error=False)
    except (HTTPClientError, OSError) as exc:
        log.warning("token endpoint %s failed: %s", endpoint, exc)
        raise UpstreamError("The identity provider did not answer; try again shortly.") from None
    if response.code == 599:
        log.warning("token endpoint %s failed: %s", endpoint, response.error)
        raise UpstreamError("The identity provider did not answer; try again shortly.")
    try:
        data = json.loads(response.body or b"null")
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UpstreamError(f"The identity provider's token endpoint answered HTTP {response.code} without JSON.")
    if response.code >= 400 or "error" in data:
        error, description = str(data.get("error", "")), str(data.get("error_description", ""))
        if error in ("invalid_grant", "invalid_request"):
            detail = f" ({description})" if description else ""
            raise InvalidGrant(f"The identity provider rejected the authorization code or PKCE verifier{detail}.")
        log.error("token endpoint %s refused the client: %s %s", endpoint, error, description)
        raise UpstreamError(
            f"The identity provider refused this service ({error or response.code}); check [oidc] client_id and client_secret."
        )
    if not isinstance(data.get("id_token"), str):
        raise UpstreamError("The identity provider returned no ID token; request the openid scope.")
    return data


def _sign_in(services: Services, claims: dict[str, Any]) -> None:
    """A unit of work: bind a first sign-in to its user. Someone with neither a workspace nor a
    pending invitation has nothing to sign in to (403); with invitations only, they may sign in
    to accept or decline them."""
    user = accounts.person(services, claims)
    store = services.store
    if not store.accounts.memberships_of_user(user.id) and not store.team.invitations_for_email(user.email):
        raise Forbidden(accounts.NO_ACCOUNT)


async def exchange(services: Services, request: ExchangeRequest) -> ExchangeResult:
    _validate(request)
    data = await _redeem(services, request)
    claims = await services.oidc.verify(data["id_token"], nonce=request.nonce)
    await services.store.run(_sign_in, services, claims)
    expires = max(0, int(claims["exp"] - services.clock.now().timestamp()))
    return ExchangeResult(
        token=data["id_token"],
        access_token=str(data.get("access_token", "")),
        token_type=str(data.get("token_type", "Bearer")),
        expires_in_seconds=expires,
        email=normalise_email(claims["email"]),
    )
