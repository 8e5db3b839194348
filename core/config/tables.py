"""The configuration's tables, one frozen attrs class each, but the edge provider's
(core/config/providers.py): each field's default, its rule, and a line on what it is for."""

from __future__ import annotations

from urllib.parse import urlsplit

import attrs

from core.config.rules import (
    ConfigError,
    _all,
    _check,
    _is_dc_id,
    _is_http_url,
    _is_listen_address,
    _is_nameserver,
    _is_network,
    _positive,
    is_loopback,
)


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
class WebhooksConfig:
    poll_interval_seconds: float = attrs.field(default=30, validator=_check("webhooks.poll_interval_seconds", _positive, "must be positive"))
    max_attempts: int = attrs.field(default=6, validator=_check("webhooks.max_attempts", _positive, "must be positive"))
    request_timeout_seconds: float = attrs.field(default=10, validator=_check("webhooks.request_timeout_seconds", _positive, "must be positive"))


@attrs.frozen
class LifecycleConfig:
    """The background checks of core/lifecycle/ (docs/concepts.md, "Lifecycle")."""

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
    """One-click DNS set-up at the customer's DNS host (docs/one-click.md)."""

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
    simulate: bool = False
    """DEVELOPMENT ONLY: one-click set-up through a stand-in DNS host the service serves itself, which
    applies the records to the simulated DNS (``[provider.sandbox] simulate_dns``, required)."""

    @property
    def enabled(self) -> bool:
        return bool(self.provider_id)
