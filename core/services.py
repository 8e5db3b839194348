"""The one typed dependency object, built once in app.py and handed to every handler."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

import attrs

from core.api_keys import KeyCache
from core.authority import Authority
from core.clock import Clock, SystemClock
from core.config import Config
from core.crypto import Keyring, load_or_create_master_key
from core.dev_idp import DEFAULT_CLIENT_ID, DevIdentityProvider, load_key
from core.dns import DnsChecker, Resolver
from core.edge import EdgeProvider, make_provider
from core.edge.simulated_dns import SimulatedDns
from core.metrics import CountedProvider, Metrics
from core.net import OutboundClient
from core.oidc import OidcVerifier
from core.portal import UsedStates
from core.ratelimit import RateLimiter
from core.signin import OidcClient
from store import Store

log = logging.getLogger(__name__)


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
    provider: EdgeProvider
    dns: Resolver
    "Real lookups, or the development-only simulation (``[provider.sandbox] simulate_dns``)."
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    outbound: OutboundClient
    "The only client for user-supplied destinations (webhook URLs, scans): see core/net.py."
    authority: Authority
    "The zone's own nameservers and each resolver apart, for the diagnosis."
    metrics: Metrics
    key_cache: KeyCache = attrs.Factory(KeyCache)
    used_signin_states: UsedStates = attrs.Factory(UsedStates)
    "States of finished portal sign-ins: each works once."

    def close(self) -> None:
        self.provider.close()
        self.outbound.close()
        self.oidc.close()
        self.store.close()


def build_services(config: Config, *, clock: Clock | None = None) -> Services:
    """Open the store, load the master key and wire the integrations the config selects."""
    clock = clock or SystemClock()
    keyring = Keyring(load_or_create_master_key(config.storage.secret_key_file))
    store = Store(config.storage.path)
    dev_idp = None
    if config.oidc.issuer:
        client = OidcClient(config.oidc.client_id, config.oidc.client_secret, config.redirect_uri)
        issuer = config.oidc.issuer
    else:
        client = OidcClient(
            config.oidc.client_id or DEFAULT_CLIENT_ID,
            config.oidc.client_secret or keyring.mac("dev-idp-client-secret", "secret")[:32],
            config.redirect_uri,
        )
        issuer = config.server.base_url.rstrip("/") + "/idp"
        dev_idp = DevIdentityProvider(
            issuer=issuer,
            client_id=client.client_id,
            client_secret=client.client_secret,
            redirect_uri=client.redirect_uri,
            key=load_key(Path(config.storage.path).parent / "dev-idp-key.json"),
            clock=clock,
        )
    oidc = OidcVerifier(issuer=issuer, client_id=client.client_id, clock=clock)
    sandbox = config.provider.sandbox
    metrics = Metrics(store, clock)
    count = metrics.count_lookup
    dns: Resolver = DnsChecker(config.dns, observe=count)
    if config.provider.kind == "sandbox" and sandbox.simulate_dns:  # config refuses it with any other provider
        dns = SimulatedDns(store, clock, delay_seconds=sandbox.simulate_dns_delay_seconds)
    return Services(
        config=config,
        store=store,
        clock=clock,
        keyring=keyring,
        limiter=RateLimiter(config.rate_limits, clock),
        oidc=oidc,
        oidc_client=client,
        dev_idp=dev_idp,
        provider=CountedProvider(make_provider(config, keyring, clock), metrics),
        dns=dns,
        trusted_proxies=[ipaddress.ip_network(p, strict=False) for p in config.server.trusted_proxies],
        outbound=OutboundClient(network=config.network, dns=config.dns, observe=count),
        authority=Authority(config.dns, simulated=None if isinstance(dns, DnsChecker) else dns, observe=count),
        metrics=metrics,
    )
