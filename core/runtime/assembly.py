"""Building the services container from the configuration: which integrations run (the real
provider or the sandbox, real DNS or its simulation, a configured or the built-in identity
provider), each made once and shared by every request and job."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING

from core.clock import Clock, SystemClock
from core.config import Config
from core.crypto import Keyring, load_or_create_master_key
from core.delegation_dns import ChallengeRecords
from core.dns.authority import Authority
from core.dns.lookups import DnsChecker, Resolver
from core.edge import EdgeProvider
from core.edge.counted import CountedProvider
from core.edge.sandbox import SandboxProvider
from core.edge.simulated_dns import SimulatedDns
from core.identity.api_keys import KeyCache
from core.identity.dev_idp import DEFAULT_CLIENT_ID, DevIdentityProvider, create_key
from core.identity.oidc import OidcVerifier
from core.identity.portal_signin import UsedStates
from core.identity.signin import OidcClient
from core.metrics import Metrics
from core.outbound.guard import OutboundClient
from core.ratelimit import RateLimiter
from core.services import Services
from store import Store

if TYPE_CHECKING:
    from core.domain_connect.discovery import Discoverer
    from core.tls_terminator.index import CertificateIndex


def build_services(config: Config, *, clock: Clock | None = None) -> Services:
    """Open the store, load the master key and wire the integrations the config selects."""
    clock = clock or SystemClock()
    keyring = Keyring(load_or_create_master_key(config.storage.secret_key_file))
    store = Store(config.storage.path, url=config.storage.url)
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
        key_file = Path(config.storage.path).parent / "dev-idp-key.json"
        create_key(key_file)  # made now when missing; read when first used (DevIdentityProvider)
        dev_idp = DevIdentityProvider(
            issuer=issuer,
            client_id=client.client_id,
            client_secret=client.client_secret,
            redirect_uri=client.redirect_uri,
            key=key_file,
            clock=clock,
            store=store,
        )
    oidc = OidcVerifier(issuer=issuer, client_id=client.client_id, clock=clock)
    sandbox = config.provider.sandbox
    metrics = Metrics(store, clock)
    count = metrics.count_lookup
    dns: Resolver = DnsChecker(config.dns, observe=count)
    simulated_host = config.domain_connect.simulate  # config allows it with simulate_dns only
    if config.provider.kind == "sandbox" and sandbox.simulate_dns:  # config refuses it with any other provider
        dns = SimulatedDns(store, clock, delay_seconds=sandbox.simulate_dns_delay_seconds, host_applies=simulated_host)
    outbound = OutboundClient(network=config.network, dns=config.dns, observe=count)
    discoverer: Discoverer | None = None
    signing_key = None
    if config.domain_connect.enabled or simulated_host:
        # Here, not above: one-click set-up's modules (the signing key's cryptography among them)
        # were imported by every start-up, before the first answer, with it off (issue 49).
        from cryptography.hazmat.primitives.asymmetric import rsa

        from core.domain_connect.discovery import SETTINGS_MAX_BYTES, Discoverer
        from core.domain_connect.signing import MIN_KEY_BITS, load_private_key
        from core.domain_connect.simulated import SimulatedDiscoverer

        # A pool of its own, small: DNS hosts' servers (chosen by whoever holds a zone) never hold up webhooks.
        own = OutboundClient(network=config.network, dns=config.dns, max_clients=8,
                             max_body_bytes=SETTINGS_MAX_BYTES, observe=count)
        if simulated_host:
            signing_key = rsa.generate_private_key(public_exponent=65537, key_size=MIN_KEY_BITS)
            discoverer = SimulatedDiscoverer(config.domain_connect, dns, own, clock, portal_url=config.server.portal_url)
        else:
            signing_key = load_private_key(config.domain_connect.private_key_file)
            discoverer = Discoverer(config.domain_connect, dns, own, clock)
    else:
        store.one_click.forget_offers()  # offers found while it was on are not offered any more
    terminator = config.tls_terminator
    index: CertificateIndex | None = None
    if terminator.secret or terminator.files_dir:
        from core.tls_terminator.index import CertificateIndex  # here, not above: only where it is on

        index = CertificateIndex(store, keyring, clock)
    challenges = None
    if config.provider.kind == "acme":
        # Here, not above, as the provider's modules are: the delegation zone's and dnspython's.
        from core.delegation_dns.records import make_challenge_records

        challenges = make_challenge_records(config, store, clock, metrics)
    return Services(
        config=config,
        store=store,
        clock=clock,
        keyring=keyring,
        limiter=RateLimiter(config.rate_limits, clock, store),
        oidc=oidc,
        oidc_client=client,
        dev_idp=dev_idp,
        provider=CountedProvider(make_provider(config, keyring, clock, store, dns, challenges), metrics),
        dns=dns,
        trusted_proxies=[ipaddress.ip_network(p, strict=False) for p in config.server.trusted_proxies],
        outbound=outbound,
        authority=Authority(config.dns, allowed=outbound.policy.allows,
                            simulated=None if isinstance(dns, DnsChecker) else dns, simulated_host=simulated_host,
                            observe=count),
        metrics=metrics,
        key_cache=KeyCache(),
        used_signin_states=UsedStates(store),
        domain_connect=discoverer,
        domain_connect_key=signing_key,
        tls_terminator=index,
        challenge_records=challenges,
    )


def make_provider(config: Config, keyring: Keyring, clock: Clock, store: Store, dns: Resolver,
                  challenges: ChallengeRecords | None) -> EdgeProvider:
    """The provider ``[provider] kind`` selects; ``store`` shares its request budget between
    processes on PostgreSQL (and keeps an ACME client's accounts, certificates and challenges,
    published through ``challenges``)."""
    kind, issuers = config.provider.kind, config.provider.caa_issuers
    if kind == "cloudflare":
        from core.edge.cloudflare import CloudflareProvider  # here, not above: only with this provider

        return CloudflareProvider(config.provider.cloudflare, caa_issuers=issuers,
                                  background_share=config.lifecycle.provider_share,
                                  workspace_share=config.provider.workspace_share,
                                  new_workspace_share=config.provider.new_workspace_share,
                                  calls_per_active_hostname=config.provider.calls_per_active_hostname, store=store)
    if kind == "acme":
        # Here, not above: the ACME client and the libraries under it (certbot's acme, requests,
        # pyOpenSSL) were a sixth of every start-up, with any provider (issue 49).
        from core.acme.provider import AcmeProvider

        assert challenges is not None
        return AcmeProvider(config, keyring=keyring, clock=clock, store=store, dns=dns, records=challenges)
    return SandboxProvider(keyring, config.provider.sandbox, clock, caa_issuers=issuers)
