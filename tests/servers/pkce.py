"""What a browser-side OAuth client does before and after the identity provider's form."""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

from authlib.oauth2.rfc7636 import create_s256_code_challenge


def new_flow() -> dict[str, str]:
    verifier = secrets.token_urlsafe(48)
    return {
        "verifier": verifier,
        "challenge": create_s256_code_challenge(verifier),
        "state": secrets.token_urlsafe(12),
        "nonce": secrets.token_urlsafe(12),
    }


def authorize_params(flow: dict[str, str], *, client_id: str, redirect_uri: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "openid email",
        "state": flow["state"],
        "nonce": flow["nonce"],
        "code_challenge": flow["challenge"],
        "code_challenge_method": "S256",
    }


def query(params: dict[str, str]) -> str:
    return urlencode(params)


def code_from(location: str) -> str:
    """The code in a redirect back to the client."""
    return parse_qs(urlsplit(location).query)["code"][0]
