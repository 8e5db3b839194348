"""Who issues and who serves, in the words people read: decided here once for the configured provider.

With Cloudflare (and the sandbox that stands in for it) the edge provider validates, issues and
serves the certificate, and the pages say "the edge provider". With ``kind = "acme"`` the service
itself is the ACME client of a certificate authority and hands the certificate to its own TLS
terminator: the pages, the API's messages and the diagnosis name that CA (from its directory URL:
"Let's Encrypt", "Pebble", else the URL's host) and the terminator instead, never a provider that
is not there.

The providers' own status values (hostname ``status``, ``ssl.status``) stay raw in the API, as the
spec has them; wherever they reach a person they are said through ``hostname_words`` and
``ssl_words``, which read them here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

if TYPE_CHECKING:
    from core.config import ProviderConfig

#: CAs known by their directory's host (the end of it), as they name themselves.
_KNOWN_CAS = (
    ("acme-staging-v02.api.letsencrypt.org", "Let's Encrypt (staging)"),
    ("api.letsencrypt.org", "Let's Encrypt"),
    ("acme.zerossl.com", "ZeroSSL"),
    ("api.pki.goog", "Google Trust Services"),
    ("api.test4.buypass.no", "Buypass (test)"),
    ("api.buypass.com", "Buypass"),
    ("acme.ssl.com", "SSL.com"),
)
#: Pebble's directory path (``https://localhost:14000/dir``): the test CA, whatever its host.
_PEBBLE_PATH = "/dir"


def ca_name(directory_url: str) -> str:
    """The CA a directory URL belongs to, by name where it is known, else by the URL's host."""
    parts = urlsplit(directory_url)
    host = (parts.hostname or directory_url).lower()
    for suffix, name in _KNOWN_CAS:
        if host == suffix or host.endswith("." + suffix):
            return name
    if parts.path.rstrip("/") == _PEBBLE_PATH or "pebble" in host:
        return "Pebble"
    return host


@attrs.frozen
class ProviderWords:
    """How sentences name who issues (``issuer``) and who serves (``server``) the certificates."""

    kind: str
    "``cloudflare``, ``sandbox`` or ``acme``."
    issuer: str
    "Who validates and issues, in a sentence's middle: ``the edge provider``, ``Let's Encrypt``."
    server: str
    "Who serves the certificate to browsers, in a sentence's middle."

    @property
    def acme(self) -> bool:
        return self.kind == "acme"

    @property
    def Issuer(self) -> str:
        return self.issuer[:1].upper() + self.issuer[1:]

    @property
    def issuers(self) -> str:
        """The issuer's possessive: ``the edge provider's``, ``Let's Encrypt's``."""
        return self.issuer + ("'" if self.issuer.endswith("s") and self.issuer[:1].isupper() else "'s")

    @property
    def Issuers(self) -> str:
        return self.issuers[:1].upper() + self.issuers[1:]

    def deletion(self) -> str:
        """What deleting a domain does to its certificate (core/domains/operations.py ``delete``),
        for the delete page and the DNS page: with ACME the service stops serving it at once and
        revokes it (core/acme/upkeep.py); an edge provider is not called (the spec)."""
        if self.acme:
            return (f"its certificate is no longer served by {self.server} from that moment, and is revoked at "
                    f"{self.issuer} within a minute")
        if self.kind == "sandbox":
            return "its certificate was simulated (the sandbox issues nothing real): nothing is revoked anywhere"
        return ("nothing changes at the edge provider: the certificate is not revoked, and the custom hostname stays "
                "there until it is removed in the provider's dashboard")


#: Cloudflare's and the sandbox's words: the edge provider does everything.
EDGE = ProviderWords(kind="cloudflare", issuer="the edge provider", server="the edge provider")


def provider_words(provider: ProviderConfig) -> ProviderWords:
    """The words for the configured provider; with fallback CAs, "the certificate authority"
    unless a certificate says which one (its ``issuer``)."""
    if provider.kind != "acme":
        return attrs.evolve(EDGE, kind=provider.kind)
    acme = provider.acme
    others = [url for url in acme.fallback_directory_urls if url != acme.directory_url]
    issuer = ca_name(acme.directory_url) if not others else "the certificate authority"
    return ProviderWords(kind="acme", issuer=issuer, server="this service's TLS terminator")


#: The provider's hostname ``status`` and ``ssl.status`` values in words (core/certificates/states.py
#: decides what they mean for our states; these only say them).
_HOSTNAME_WORDS = {
    "pending": "not yet confirmed",
    "active": "confirmed: the provider serves it",
    "active_redeploying": "confirmed, its settings being redeployed",
    "moved": "no longer pointing at the provider",
    "deleted": "deleted",
    "pending_deletion": "being deleted",
    "blocked": "blocked",
    "test_blocked": "blocked",
    "test_failed": "having failed the provider's checks",
}
_SSL_WORDS = {
    "initializing": "being set up",
    "pending_validation": "waiting for validation",
    "pending_issuance": "validated, being issued by the certificate authority",
    "pending_deployment": "issued, being deployed to the provider's servers",
    "active": "issued and served",
    "validation_timed_out": "timed out: the validation records were not found in time",
    "issuance_timed_out": "timed out: the certificate authority did not issue it in time",
    "deployment_timed_out": "timed out: it could not be deployed in time",
    "invalid": "refused: the certificate authority could not validate it",
    "expired": "expired",
    "deleted": "deleted",
    "pending_deletion": "being deleted",
    "deactivating": "being deactivated",
    "inactive": "inactive",
}
UNKNOWN = "in a state the service does not know"


def hostname_words(status: str | None) -> str:
    return _HOSTNAME_WORDS.get(status, UNKNOWN) if status else "not started"


def ssl_words(status: str | None) -> str:
    return _SSL_WORDS.get(status, UNKNOWN) if status else "not started"
