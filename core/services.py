"""The one typed dependency object, built once (core/runtime/assembly.py) and handed to every handler.

It names the types it holds only for type checking: the features import this module for its type,
and nothing here imports a feature at run time, so the container adds no import cycle.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    from core.clock import Clock
    from core.config import Config
    from core.crypto import Keyring
    from core.delegation_dns import ChallengeRecords
    from core.dns.authority import Authority
    from core.dns.lookups import Resolver
    from core.domain_connect.discovery import Discoverer
    from core.edge.counted import CountedProvider
    from core.identity.api_keys import KeyCache
    from core.identity.dev_idp import DevIdentityProvider
    from core.identity.oidc import OidcVerifier
    from core.identity.portal_signin import UsedStates
    from core.identity.signin import OidcClient
    from core.metrics import Metrics
    from core.outbound.guard import OutboundClient
    from core.ratelimit import RateLimiter
    from core.tls_terminator.index import CertificateIndex
    from store import Store


@attrs.define
class Services:
    config: Config
    store: Store
    clock: Clock
    keyring: Keyring
    limiter: RateLimiter
    oidc: OidcVerifier
    "Verifies session ID tokens of the configured (or the built-in development) provider."
    oidc_client: OidcClient
    dev_idp: DevIdentityProvider | None
    "The built-in development identity provider, while ``[oidc] issuer`` is empty."
    provider: CountedProvider
    "The configured edge provider, each call counted for ``GET /metrics``."
    dns: Resolver
    "Real lookups, or the development-only simulation (``[provider.sandbox] simulate_dns``)."
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    outbound: OutboundClient
    "The only client for user-supplied destinations (webhook URLs, scans): see core/outbound/guard.py."
    authority: Authority
    "The zone's own nameservers and each resolver apart, for the diagnosis."
    metrics: Metrics
    key_cache: KeyCache
    used_signin_states: UsedStates
    "States of finished portal sign-ins: each works once."
    domain_connect: Discoverer | None = None
    "What zones' DNS hosts offer for one-click set-up, while ``[domain_connect]`` is configured."
    domain_connect_key: RSAPrivateKey | None = None
    "The key that signs one-click apply URLs."
    tls_terminator: CertificateIndex | None = None
    "The certificates handed to the TLS terminator, while ``[tls_terminator]`` has a secret or a files folder."
    challenge_records: ChallengeRecords | None = None
    "Where the ACME client publishes its DNS-01 values, with ``[provider] kind = \"acme\"``."

    def close(self) -> None:
        self.provider.close()
        self.outbound.close()
        if self.domain_connect is not None:
            self.domain_connect.outbound.close()
        self.oidc.close()
        self.store.close()
