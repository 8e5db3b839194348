"""Typed configuration: one frozen attrs class per TOML table.

The key names are a contract with deployments and outside tests (architecture.md), so an
unknown key, a wrong type or a value out of range stops start-up with one line naming the key.
Every default here is repeated in ``config.example.toml``; a test keeps the two in step.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from core import config_checks
from core.config_checks import (
    _all,
    _check,
    _is_dc_id,
    _is_glob_list,
    _is_http_url,
    _is_listen_address,
    _is_nameserver,
    _is_network,
    _positive,
    is_loopback,
)
from core.wire import describe, iter_errors, register_strict_primitives

ConfigError = config_checks.ConfigError  # where the rules raise it; imported from here everywhere else


@attrs.frozen
class ServerConfig:
    host: str = "127.0.0.1"
    "Address to listen on."
    port: int = attrs.field(default=8080, validator=_check("server.port", lambda p: 0 <= p < 65536, "must be 0 to 65535"))
    "TCP port; 0 picks a free one (the addresses derived from it then name the port picked)."
    base_url: str = attrs.field(default="", validator=_check("server.base_url", lambda v: v == "" or _is_http_url(v), "must be empty or an http(s) URL"))
    "Public address of the API, ``{base_url}``; empty means ``http://{host}:{port}``."
    portal_url: str = attrs.field(default="", validator=_check("server.portal_url", lambda v: v == "" or _is_http_url(v), "must be empty or an http(s) URL"))
    "Public address of the portal, ``{portal_url}``; empty means ``base_url``."
    trusted_proxies: list[str] = attrs.field(factory=list, validator=_check("server.trusted_proxies", _all(_is_network), "must list IP addresses or CIDRs"))
    "Peers whose X-Forwarded-For is believed when finding the client IP."

    def __attrs_post_init__(self) -> None:
        # Set only the port and everything follows it: sign-in must not redirect to another port.
        if not self.base_url:
            host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
            host = f"[{host}]" if ":" in host else host
            object.__setattr__(self, "base_url", f"http://{host}:{self.port}")
        if not self.portal_url:
            object.__setattr__(self, "portal_url", self.base_url)

    @property
    def secure_cookies(self) -> bool:
        """Whether the portal's cookies are ``Secure``: when it is served over https, so they never
        travel in clear (over plain http a browser would refuse to send them back)."""
        return urlsplit(self.portal_url).scheme == "https"


@attrs.frozen
class StorageConfig:
    path: str = "data/service.sqlite3"
    "SQLite database file; its folder is created when missing."
    url: str = attrs.field(default="", validator=_check(
        "storage.url", lambda v: v == "" or v.startswith(("postgresql://", "postgres://")),
        'must be empty (the SQLite file at path) or a "postgresql://" URL', echo=False))
    "A PostgreSQL database instead of the file at ``path``: what several processes share."
    secret_key_file: str = "data/secret.key"
    "Master secret, created with mode 0600 on first start."


@attrs.frozen
class OidcConfig:
    issuer: str = attrs.field(default="", validator=_check("oidc.issuer", lambda v: v == "" or _is_http_url(v), "must be empty or an http(s) URL"))
    "``{auth_url}``; empty means the built-in development provider."
    client_id: str = ""
    client_secret: str = ""
    redirect_uri: str = ""
    "Empty means ``{portal_url}/auth/callback``."


@attrs.frozen
class DnsConfig:
    nameservers: list[str] = attrs.field(factory=list, validator=_check("dns.nameservers", _all(_is_nameserver), 'must list "ip" or "ip:port" entries'))
    "Empty means the system resolvers."
    timeout_seconds: float = attrs.field(default=3.0, validator=_check("dns.timeout_seconds", _positive, "must be positive"))


@attrs.frozen
class CloudflareConfig:
    api_base: str = attrs.field(default="https://api.cloudflare.com/client/v4", validator=_check("provider.cloudflare.api_base", _is_http_url, "must be an http(s) URL"))
    zone_id: str = ""
    api_token: str = ""
    timeout_seconds: float = attrs.field(default=10.0, validator=_check("provider.cloudflare.timeout_seconds", _positive, "must be positive"))
    "Connect and request timeout of each call."
    retry_seconds: float = attrs.field(default=20.0, validator=_check("provider.cloudflare.retry_seconds", lambda v: v >= 0, "must be zero or more"))
    "Total time one operation may spend waiting to retry 429s, 5xx answers and timeouts."
    requests_per_window: int = attrs.field(default=1200, validator=_check("provider.cloudflare.requests_per_window", _positive, "must be positive"))
    "Budget shared by every call to the API: at most this many requests in any ``window_seconds``."
    window_seconds: float = attrs.field(default=300.0, validator=_check("provider.cloudflare.window_seconds", _positive, "must be positive"))


@attrs.frozen
class SandboxConfig:
    activation_delay_seconds: float = attrs.field(default=10.0, validator=_check("provider.sandbox.activation_delay_seconds", lambda v: v >= 0, "must be zero or more"))
    "A sandbox certificate is pending until a refresh this long after issuance."
    fail_patterns: list[str] = attrs.field(factory=lambda: ["fail.*", "*.fail.*"], validator=_check("provider.sandbox.fail_patterns", _is_glob_list, "must list non-empty glob patterns"))
    "Hostnames matching one of these globs fail validation (certificate ``error``)."
    block_patterns: list[str] = attrs.field(factory=lambda: ["blocked.*", "*.blocked.*"], validator=_check("provider.sandbox.block_patterns", _is_glob_list, "must list non-empty glob patterns"))
    "Hostnames matching one of these globs are blocked by the provider (certificate ``blocked``)."
    simulate_dns: bool = False
    "DEVELOPMENT ONLY: every domain's two records count as published once it is a little old."
    simulate_dns_delay_seconds: float = attrs.field(default=5.0, validator=_check("provider.sandbox.simulate_dns_delay_seconds", lambda v: v >= 0, "must be zero or more"))
    "How long after its creation a domain's records appear in the simulated DNS."


#: CAA ``issue`` domains of the CAs Cloudflare for SaaS issues from (RFC 8659 issuer domain names).
CLOUDFLARE_CAA_ISSUERS = ["letsencrypt.org", "pki.goog", "ssl.com"]


@attrs.frozen
class ProviderConfig:
    kind: str = attrs.field(default="sandbox", validator=_check("provider.kind", lambda v: v in ("sandbox", "cloudflare"), 'must be "sandbox" or "cloudflare"'))
    caa_issuers: list[str] = attrs.field(factory=lambda: list(CLOUDFLARE_CAA_ISSUERS), validator=_check("provider.caa_issuers", lambda v: bool(v) and _is_glob_list(v), "must list at least one CA domain"))
    "CAA issuer domains the provider's CAs answer to; the pre-flight asks that one is allowed."
    workspace_share: float = attrs.field(default=0.25, validator=_check("provider.workspace_share", lambda v: 0 < v <= 1, "must be above 0 and at most 1"))
    """The most of the provider's request budget one workspace's calls may take in any window: of the
    whole window for the calls someone waits on, of ``[lifecycle] provider_share`` for background
    ones; 1 sets no limit (core/edge/pacing.py)."""
    cloudflare: CloudflareConfig = attrs.Factory(CloudflareConfig)
    sandbox: SandboxConfig = attrs.Factory(SandboxConfig)


@attrs.frozen
class WebhooksConfig:
    poll_interval_seconds: float = attrs.field(default=30, validator=_check("webhooks.poll_interval_seconds", _positive, "must be positive"))
    max_attempts: int = attrs.field(default=6, validator=_check("webhooks.max_attempts", _positive, "must be positive"))
    request_timeout_seconds: float = attrs.field(default=10, validator=_check("webhooks.request_timeout_seconds", _positive, "must be positive"))


@attrs.frozen
class LifecycleConfig:
    """The background checks of core/lifecycle/ (README, "Lifecycle")."""

    enabled: bool = True
    interval_seconds: float = attrs.field(default=60, validator=_check("lifecycle.interval_seconds", _positive, "must be positive"))
    max_interval_seconds: float = attrs.field(default=3600, validator=_check("lifecycle.max_interval_seconds", _positive, "must be positive"))
    pending_days: float = attrs.field(default=14, validator=_check("lifecycle.pending_days", _positive, "must be positive"))
    active_check_seconds: float = attrs.field(default=86400, validator=_check("lifecycle.active_check_seconds", _positive, "must be positive"))
    provider_share: float = attrs.field(default=0.5, validator=_check("lifecycle.provider_share", lambda v: 0 < v <= 1, "must be above 0 and at most 1"))
    events: str = attrs.field(default="spec", validator=_check("lifecycle.events", lambda v: v in ("spec", "transitions"), 'must be "spec" or "transitions"'))
    checks_per_workspace: int = attrs.field(default=8, validator=_check("lifecycle.checks_per_workspace", _positive, "must be positive"))
    "The most background checks of one workspace that run at once in a process: the rest wait their turn."


@attrs.frozen
class NetworkConfig:
    allow_private_ranges: list[str] = attrs.field(factory=list, validator=_check("network.allow_private_ranges", _all(_is_network), "must list CIDRs"))
    "Non-public ranges that user-supplied destinations may reach anyway (development and tests)."
    ca_bundle: str = ""
    "Extra CA certificates (PEM file) trusted for outbound TLS."


@attrs.frozen
class SiteScanConfig:
    port: int = attrs.field(default=443, validator=_check("site_scan.port", lambda p: 0 < p < 65536, "must be 1 to 65535"))
    timeout_seconds: float = attrs.field(default=10, validator=_check("site_scan.timeout_seconds", _positive, "must be positive"))


@attrs.frozen
class RateLimitsConfig:
    """Requests per client IP per fixed window, one number per bucket."""

    window_seconds: int = attrs.field(default=900, validator=_check("rate_limits.window_seconds", _positive, "must be positive"))
    api: int = attrs.field(default=600, validator=_check("rate_limits.api", _positive, "must be positive"))
    auth: int = attrs.field(default=20, validator=_check("rate_limits.auth", _positive, "must be positive"))
    signup: int = attrs.field(default=20, validator=_check("rate_limits.signup", _positive, "must be positive"))
    public_verification_links: int = attrs.field(default=60, validator=_check("rate_limits.public_verification_links", _positive, "must be positive"))
    verification_links: int = attrs.field(default=60, validator=_check("rate_limits.verification_links", _positive, "must be positive"))
    site_scan: int = attrs.field(default=120, validator=_check("rate_limits.site_scan", _positive, "must be positive"))


@attrs.frozen
class SmtpConfig:
    """Outgoing e-mail (verification-link reminders), sent with the standard library's smtplib."""

    host: str = ""
    "SMTP server; empty means e-mail is not configured (reminders answer 409 ``smtp_not_configured``)."
    port: int = attrs.field(default=587, validator=_check("smtp.port", lambda p: 0 < p < 65536, "must be 1 to 65535"))
    "Submission port; STARTTLS upgrades the connection when ``starttls`` is true."
    username: str = ""
    "Login name; empty means no login."
    password: str = ""
    "Password of ``username``."
    from_address: str = attrs.field(default="certificates@localhost", validator=_check("smtp.from_address", lambda v: "@" in v and v.isprintable() and " " not in v, "must be an e-mail address"))
    "The From: address of every message."
    starttls: bool = True
    "Upgrade with STARTTLS before anything else (certificate verified; ``[network] ca_bundle`` trusted too)."
    timeout_seconds: float = attrs.field(default=10.0, validator=_check("smtp.timeout_seconds", _positive, "must be positive"))
    "Connect timeout, and the limit on each SMTP command."

    def __attrs_post_init__(self) -> None:
        if self.username and not self.starttls and self.host and not is_loopback(self.host):
            # smtplib would send the password in clear across the network.
            raise ConfigError("smtp.starttls: must be true when smtp.username is set, unless smtp.host is a loopback address")


@attrs.frozen
class MetricsConfig:
    """``GET /metrics`` (Prometheus text format). Off unless one of the two is set."""

    bearer_token: str = ""
    "Serve it on the main port to requests bearing this token."
    listen: str = attrs.field(default="", validator=_check("metrics.listen", _is_listen_address, 'must be "ip:port" (or "[ipv6]:port")'))
    "Serve it, with no token, on this separate address: bind it where only the scraper can reach."


@attrs.frozen
class LoggingConfig:
    format: str = attrs.field(default="text", validator=_check("logging.format", lambda v: v in ("text", "json"), 'must be "text" or "json"'))
    "``text``: one readable line per event; ``json``: one JSON object per line."
    level: str = attrs.field(default="info", validator=_check("logging.level", lambda v: v in ("debug", "info", "warning", "error"), 'must be "debug", "info", "warning" or "error"'))


@attrs.frozen
class DomainConnectConfig:
    """One-click DNS set-up at the customer's DNS host (README, "One-click DNS set-up")."""

    provider_id: str = attrs.field(default="", validator=_check("domain_connect.provider_id", lambda v: v == "" or _is_dc_id(v), "must be 1-63 of A-Z a-z 0-9 _ . - (a domain you own)"))
    "Empty: one-click set-up off. Else the template's providerId, registered with Domain Connect."
    service_id: str = attrs.field(default="", validator=_check("domain_connect.service_id", lambda v: v == "" or _is_dc_id(v), "must be 1-63 of A-Z a-z 0-9 _ . -"))
    private_key_file: str = ""
    "PEM RSA private key (2048 bits or more) that signs apply URLs; keep it owner-readable only."
    key_host: str = attrs.field(default="", validator=_check("domain_connect.key_host", lambda v: v == "" or _is_dc_id(v), "must be a DNS name"))
    "The template's syncPubKeyDomain: the public key is published at ``<key_label>.<key_host>``."
    redirect_domain: str = ""
    "The template's syncRedirectDomain; empty = the host of ``server.portal_url``."
    key_label: str = attrs.field(default="_dck1", validator=_check("domain_connect.key_label", lambda v: _is_dc_id(v) and "." not in v, "must be one DNS label"))
    provider_name: str = ""
    "Shown on the DNS host's consent screen; empty = ``provider_id``."
    service_name: str = "TLS certificate for your hostname"
    logo_url: str = attrs.field(default="", validator=_check("domain_connect.logo_url", lambda v: v == "" or (_is_http_url(v) and v.startswith("https://")), "must be empty or an https URL"))
    timeout_seconds: float = attrs.field(default=5, validator=_check("domain_connect.timeout_seconds", _positive, "must be positive"))
    "Each request to a DNS host (settings, template check)."
    cache_seconds: float = attrs.field(default=600, validator=_check("domain_connect.cache_seconds", _positive, "must be positive"))
    "How long what a zone's DNS host supports is remembered."

    @property
    def enabled(self) -> bool:
        return bool(self.provider_id)


@attrs.frozen
class Config:
    server: ServerConfig = attrs.Factory(ServerConfig)
    storage: StorageConfig = attrs.Factory(StorageConfig)
    oidc: OidcConfig = attrs.Factory(OidcConfig)
    dns: DnsConfig = attrs.Factory(DnsConfig)
    provider: ProviderConfig = attrs.Factory(ProviderConfig)
    webhooks: WebhooksConfig = attrs.Factory(WebhooksConfig)
    lifecycle: LifecycleConfig = attrs.Factory(LifecycleConfig)
    network: NetworkConfig = attrs.Factory(NetworkConfig)
    site_scan: SiteScanConfig = attrs.Factory(SiteScanConfig)
    rate_limits: RateLimitsConfig = attrs.Factory(RateLimitsConfig)
    smtp: SmtpConfig = attrs.Factory(SmtpConfig)
    metrics: MetricsConfig = attrs.Factory(MetricsConfig)
    logging: LoggingConfig = attrs.Factory(LoggingConfig)
    domain_connect: DomainConnectConfig = attrs.Factory(DomainConnectConfig)

    def __attrs_post_init__(self) -> None:
        if self.oidc.issuer and not self.oidc.client_id:
            raise ConfigError("oidc.client_id: required when oidc.issuer is set")
        if not self.oidc.issuer and not (
            is_loopback(self.server.host) and is_loopback(urlsplit(self.server.base_url).hostname or "")
        ):
            raise ConfigError(
                "oidc.issuer: required unless server.host and server.base_url are loopback addresses "
                "(the built-in development identity provider serves loopback only)"
            )
        if not self.oidc.issuer and not is_loopback(urlsplit(self.server.portal_url).hostname or ""):
            raise ConfigError(
                "oidc.issuer: required unless server.portal_url is a loopback address "
                "(the built-in development identity provider serves loopback only)"
            )
        if not self.oidc.issuer and self.storage.url:
            raise ConfigError(
                "oidc.issuer: required when storage.url is set (the built-in development identity provider "
                "keeps its sign-ins in one process; several processes need a real one)"
            )
        if not self.oidc.issuer and self.server.trusted_proxies:
            raise ConfigError(
                "oidc.issuer: required when server.trusted_proxies is set "
                "(the built-in development identity provider serves loopback only, never behind a proxy)"
            )
        if self.provider.kind == "cloudflare":
            if self.provider.sandbox.simulate_dns:
                # Simulated DNS must never verify a real customer's hostname.
                raise ConfigError('provider.sandbox.simulate_dns: only allowed when provider.kind is "sandbox"')
            for key in ("zone_id", "api_token"):
                if not getattr(self.provider.cloudflare, key):
                    raise ConfigError(f"provider.cloudflare.{key}: required when provider.kind is \"cloudflare\"")
        dc = self.domain_connect
        if dc.enabled:
            for key in ("service_id", "private_key_file", "key_host"):
                if not getattr(dc, key):
                    raise ConfigError(f"domain_connect.{key}: required when domain_connect.provider_id is set")
            portal_host = (urlsplit(self.server.portal_url).hostname or "").lower()
            if dc.redirect_domain and portal_host != dc.redirect_domain.lower():
                raise ConfigError(f"domain_connect.redirect_domain: must be the host of server.portal_url ({portal_host}), "
                                  "where DNS hosts send the customer back")

    def bound_to(self, port: int) -> Config:
        """The configuration as served on ``port``, the one actually bound. With ``server.port = 0``
        the OS picks it after the configuration was read: a ``base_url`` or ``portal_url`` derived
        from host and port would name port 0, and sign-in (issuer, redirect URI) would point at it.
        Addresses set in the file are kept as they are."""
        server = self.server
        if server.port != 0 or port == 0:
            return self
        placeholder = ServerConfig(host=server.host, port=0)
        bound = attrs.evolve(
            server, port=port,
            base_url="" if server.base_url == placeholder.base_url else server.base_url,
            portal_url="" if server.portal_url == placeholder.portal_url else server.portal_url,
        )
        return attrs.evolve(self, server=bound)

    @property
    def redirect_uri(self) -> str:
        """The OIDC redirect URI in force (the configured one or the portal's callback)."""
        return self.oidc.redirect_uri or self.server.portal_url.rstrip("/") + "/auth/callback"


_converter = cattrs.Converter(forbid_extra_keys=True)
register_strict_primitives(_converter)


def _unknown(shown: str, name: str, known: list[str]) -> str:
    """An unknown key, with the key it most likely stands for when one is close (a typo)."""
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
    return f"{shown} (did you mean {shown[: len(shown) - len(name)]}{near[0]}?)" if near else shown


def _first_problem(exc: BaseException) -> str:
    for path, leaf in iter_errors(exc):
        if isinstance(leaf, ConfigError):
            return str(leaf)
        key = ".".join(str(p) for p in path)
        if isinstance(leaf, ForbiddenExtraKeysError):
            known = [field.name for field in attrs.fields(leaf.cl)]
            return "unknown key " + ", ".join(_unknown(f"{key}.{k}" if key else k, k, known) for k in sorted(leaf.extra_fields))
        if isinstance(leaf, AttributeError):
            return f"{key}: expected a table"
        return f"{key}: {describe(leaf)}"
    return str(exc)


def config_from_dict(data: dict[str, Any]) -> Config:
    """Structure decoded TOML, raising ``ConfigError`` with the offending key."""
    try:
        return _converter.structure(data, Config)
    except ConfigError:
        raise
    except ClassValidationError as exc:
        raise ConfigError(_first_problem(exc)) from None


def load_config(path: str | Path | None) -> Config:
    """Read a TOML file; ``None`` gives the embedded defaults."""
    if path is None:
        return Config()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config path is a directory: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return config_from_dict(data)
