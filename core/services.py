"""The one typed dependency object, built once in app.py and handed to every handler."""

from __future__ import annotations

import ipaddress
import logging

import attrs

from core.api_keys import KeyCache
from core.clock import Clock, SystemClock
from core.config import Config
from core.crypto import Keyring, load_or_create_master_key
from core.dns import DnsChecker
from core.edge import EdgeProvider, make_provider
from core.oidc import OidcVerifier
from core.ratelimit import RateLimiter
from store import Store

log = logging.getLogger(__name__)


@attrs.define
class Services:
    config: Config
    store: Store
    clock: Clock
    keyring: Keyring
    limiter: RateLimiter
    oidc: OidcVerifier | None
    "Verifies session ID tokens; ``None`` while no identity provider is configured."
    provider: EdgeProvider
    dns: DnsChecker
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    key_cache: KeyCache = attrs.Factory(KeyCache)

    def close(self) -> None:
        self.store.close()


def build_services(config: Config, *, clock: Clock | None = None) -> Services:
    """Open the store, load the master key and wire the integrations the config selects."""
    clock = clock or SystemClock()
    keyring = Keyring(load_or_create_master_key(config.storage.secret_key_file))
    store = Store(config.storage.path)
    oidc = None
    if config.oidc.issuer:
        oidc = OidcVerifier(issuer=config.oidc.issuer, client_id=config.oidc.client_id, clock=clock)
    else:
        log.warning("no [oidc] issuer configured: session sign-in is unavailable, API keys still work")
    return Services(
        config=config,
        store=store,
        clock=clock,
        keyring=keyring,
        limiter=RateLimiter(config.rate_limits, clock),
        oidc=oidc,
        provider=make_provider(config, keyring),
        dns=DnsChecker(config.dns),
        trusted_proxies=[ipaddress.ip_network(p, strict=False) for p in config.server.trusted_proxies],
    )
