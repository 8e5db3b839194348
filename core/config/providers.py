"""The edge provider's tables: which provider issues (``[provider] kind``) and each one's settings."""

from __future__ import annotations

import base64
import binascii
import ipaddress

import attrs

from core import hostnames
from core.config.rules import (
    ConfigError,
    _all,
    _check,
    _is_dc_id,
    _is_glob_list,
    _is_http_url,
    _is_listen_address,
    _is_nameserver,
    _positive,
)


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


def _is_http_urls(values: list[str]) -> bool:
    return all(isinstance(v, str) and _is_http_url(v) for v in values)


def _is_profile(value: object) -> bool:
    """A profile name as a directory's ``meta.profiles`` keys it: printable, no spaces (or empty)."""
    return isinstance(value, str) and len(value) <= 64 and all(33 <= ord(c) < 127 for c in value)


@attrs.frozen
class AcmeConfig:
    """The service as the ACME client of a certificate authority (docs/acme.md)."""

    directory_url: str = attrs.field(default="", validator=_check("provider.acme.directory_url", lambda v: v == "" or _is_http_url(v), "must be empty or an http(s) URL"))
    "The CA's ACME directory; required with ``kind = \"acme\"``."
    fallback_directory_urls: list[str] = attrs.field(factory=list, validator=_check("provider.acme.fallback_directory_urls", _is_http_urls, "must list http(s) URLs"))
    "CAs tried in order when the first cannot issue (outage, rate limit, server error), for hostnames whose CAA allows them."
    profile: str = attrs.field(default="", validator=_check("provider.acme.profile", _is_profile, "must be empty or a profile name the CA's directory lists (e.g. \"shortlived\", \"tlsserver\", \"classic\")"))
    "The certificate profile asked of ``directory_url`` (ACME profiles: its directory's ``meta.profiles``); empty asks for the CA's default."
    fallback_profiles: list[str] = attrs.field(factory=list, validator=_check("provider.acme.fallback_profiles", lambda v: all(_is_profile(p) for p in v), "must list profile names (or \"\" for a CA's default)"))
    "The profile asked of each fallback CA, in the order of ``fallback_directory_urls``; empty asks each for ``profile``."
    profile_required: bool = False
    "False: a CA that does not offer the profile issues its default (said in the log); true: it is not ordered from."
    contact_email: str = ""
    "The account's contact (expiry and incident mail from the CA); empty registers none."
    ca_bundle: str = ""
    "PEM file trusted for the CA's HTTPS, for a test CA (Pebble); empty trusts the system's CAs."
    eab_kid: str = ""
    "External Account Binding key id, for CAs that require one (ZeroSSL, Google Trust Services...)."
    eab_hmac_key: str = ""
    "External Account Binding HMAC key (base64url), given with ``eab_kid``."
    orders_per_window: int = attrs.field(default=300, validator=_check("provider.acme.orders_per_window", _positive, "must be positive"))
    "New orders per account in any ``window_seconds`` (Let's Encrypt: 300 per 3 hours), paced like a provider's budget."
    window_seconds: float = attrs.field(default=10800.0, validator=_check("provider.acme.window_seconds", _positive, "must be positive"))
    timeout_seconds: float = attrs.field(default=10.0, validator=_check("provider.acme.timeout_seconds", _positive, "must be positive"))
    "Each request to the CA."
    wait_seconds: float = attrs.field(default=10.0, validator=_check("provider.acme.wait_seconds", lambda v: v >= 0, "must be zero or more"))
    "How long a request waits for the CA to validate and issue before answering ``pending`` (a refresh finishes it)."
    failed_validations_per_hour: int = attrs.field(default=5, validator=_check("provider.acme.failed_validations_per_hour", _positive, "must be positive"))
    "The CA's limit of failed validations per hostname and hour (Let's Encrypt: 5): orders stay within it, at every CA."
    stop_after_failed_validations: int = attrs.field(default=8, validator=_check("provider.acme.stop_after_failed_validations", _positive, "must be positive"))
    "Failed validations in a row after which the background checks order no more for the hostname, until its records change or a person asks."
    preferred_chain: str = ""
    """Of the chains a CA offers for a certificate (its default, and its ``Link: rel="alternate"``
    ones, RFC 8555 section 7.4.2), the one whose top certificate was issued by this common name
    (certbot's ``--preferred-chain``); empty, or offered by none: the CA's default chain."""

    def profiles(self) -> list[tuple[str, str]]:
        """Each configured CA's directory URL with the profile asked of it ("" for its default), the
        first CA first; a URL listed twice keeps its first place."""
        fallbacks = self.fallback_profiles or [self.profile] * len(self.fallback_directory_urls)
        pairs = [(self.directory_url, self.profile), *zip(self.fallback_directory_urls, fallbacks, strict=True)]
        first: dict[str, str] = {}
        for url, profile in pairs:
            first.setdefault(url, profile)
        return list(first.items())


def _is_base64(value: str) -> bool:
    try:
        return bool(base64.b64decode(value, validate=True))
    except binascii.Error:
        return False


#: Modes of publishing the DNS-01 challenge records.
DELEGATION_MODES = ("builtin", "rfc2136")
TSIG_ALGORITHMS = ("hmac-sha256", "hmac-sha384", "hmac-sha512")


@attrs.frozen
class DelegationDnsConfig:
    """The zone the delegation CNAMEs point into, and who answers for it (``kind = "acme"``)."""

    zone: str = attrs.field(default="", validator=_check("delegation_dns.zone", lambda v: v == "" or _is_dc_id(v), "must be a DNS name"))
    "E.g. ``acme.saas.example``: each domain's ``_acme-challenge`` CNAME points to a name of its own under it."
    listen: str = attrs.field(default="127.0.0.1:5353", validator=_check("delegation_dns.listen", lambda v: v != "" and _is_listen_address(v), 'must be "ip:port" (or "[ipv6]:port")'))
    "Where the built-in authoritative server answers, UDP and TCP."
    nameservers: list[str] = attrs.field(factory=list, validator=_check("delegation_dns.nameservers", _all(_is_dc_id), "must list DNS names"))
    "The NS names it serves for the zone (the names the parent zone delegates it to)."
    mode: str = attrs.field(default="builtin", validator=_check("delegation_dns.mode", lambda v: v in DELEGATION_MODES, 'must be "builtin" or "rfc2136"'))
    "``builtin``: the service answers for the zone; ``rfc2136``: challenge records are written to ``server`` by dynamic update."
    server: str = attrs.field(default="", validator=_check("delegation_dns.server", lambda v: v == "" or _is_nameserver(v), 'must be "ip" or "ip:port"'))
    "The primary nameserver that takes RFC 2136 updates (``mode = \"rfc2136\"``)."
    tsig_key_name: str = attrs.field(default="", validator=_check("delegation_dns.tsig_key_name", lambda v: v == "" or _is_dc_id(v), "must be a DNS name"))
    "The TSIG key's name, as the nameserver knows it."
    tsig_secret: str = attrs.field(default="", validator=_check("delegation_dns.tsig_secret", lambda v: v == "" or _is_base64(v), "must be the key's secret in base64, as keymgr or tsig-keygen prints it"))
    "The TSIG key's secret (base64)."
    tsig_algorithm: str = attrs.field(default="hmac-sha256", validator=_check("delegation_dns.tsig_algorithm", lambda v: v in TSIG_ALGORITHMS, "must be hmac-sha256, hmac-sha384 or hmac-sha512"))
    secondaries: list[str] = attrs.field(factory=list, validator=_check("delegation_dns.secondaries", _all(_is_nameserver), 'must list "ip" or "ip:port" addresses'))
    """The zone's secondary nameservers (NSD, Knot), ``"ip"`` or ``"ip:port"``: with ``mode = "builtin"`` the
    service is their hidden primary (zone transfers to these addresses alone, NOTIFY to each after every
    change, both signed with the TSIG key); with ``mode = "rfc2136"``, the operator's primary's secondaries,
    which a new value must reach before the CA is asked."""
    confirm_timeout_seconds: float = attrs.field(default=60.0, validator=_check("delegation_dns.confirm_timeout_seconds", lambda v: v > 0, "must be positive"))
    """How long an order waits for every server of the zone to answer a new value before it says
    which do not (the CA is not asked meanwhile; the next step of the order tries again)."""
    rrl_responses_per_second: int = attrs.field(default=200, validator=_check("delegation_dns.rrl_responses_per_second", lambda v: v >= 0, "must be zero (no limit) or more"))
    "UDP answers per second to one source prefix (/24, /56), beyond which they are slipped or dropped; 0: no limit."
    rrl_slip: int = attrs.field(default=2, validator=_check("delegation_dns.rrl_slip", lambda v: v >= 0, "must be zero (drop every one) or more"))
    "Of the answers over the rate, every ``rrl_slip``-th is sent truncated (the resolver asks over TCP), the rest dropped."
    tcp_max_connections: int = attrs.field(default=256, validator=_check("delegation_dns.tcp_max_connections", _positive, "must be positive"))
    "TCP connections the server holds at once, per process; new ones past it are closed."
    tcp_max_per_source: int = attrs.field(default=16, validator=_check("delegation_dns.tcp_max_per_source", _positive, "must be positive"))
    "TCP connections one source address holds at once, per process."
    tcp_idle_seconds: float = attrs.field(default=10.0, validator=_check("delegation_dns.tcp_idle_seconds", _positive, "must be positive"))
    "A TCP connection with no complete query for this long is closed."


@attrs.frozen
class TlsTerminatorConfig:
    """How certificates reach the TLS terminator (docs/acme.md)."""

    listen: str = attrs.field(default="127.0.0.1:8444", validator=_check("tls_terminator.listen", _is_listen_address, 'must be empty or "ip:port" (or "[ipv6]:port")'))
    "The endpoints Caddy asks (``get_certificate http``, ``ask``): they hand out private keys, so loopback."
    secret: str = ""
    "The endpoints' own secret (the ``secret`` query parameter, or a bearer token); empty keeps them off."
    files_dir: str = ""
    "nginx and HAProxy: a PEM file per hostname is written here; empty writes none."
    files_format: str = attrs.field(default="nginx", validator=_check("tls_terminator.files_format", lambda v: v in ("nginx", "haproxy"), 'must be "nginx" or "haproxy"'))
    "``nginx``: ``<host>.crt`` (the chain) and ``<host>.key``; ``haproxy``: ``<host>.pem`` (chain, then key)."
    reload_command: list[str] = attrs.field(factory=list, validator=_check("tls_terminator.reload_command", _all(lambda v: isinstance(v, str) and v != ""), "must list the command's words"))
    "Run after files change, e.g. ``[\"nginx\", \"-s\", \"reload\"]``."
    haproxy_runtime: str = ""
    "HAProxy's runtime API (a unix socket path, or ``ip:port``): certificates are replaced in place."
    traffic_cname: str = attrs.field(default="", validator=lambda _, __, v: _check_traffic_cname(v))
    """Where customers point the hostname itself (a CNAME to this name), so that its visitors reach the
    terminator that serves its certificate: shown as a third record beside the two validation records,
    and checked by the HTTPS scan (core/dns/traffic.py). Any provider kind; empty: nothing is said."""
    traffic_addresses: list[str] = attrs.field(factory=list, validator=lambda _, __, v: _check_traffic_addresses(v))
    """The terminator's IPv4 and IPv6 addresses, for names that cannot hold a CNAME (a zone's apex), or
    for every name when ``traffic_cname`` is empty."""


def _check_traffic_cname(value: str) -> None:
    if not value:
        return
    try:
        hostnames.canonical(value)
    except hostnames.HostnameError as exc:
        raise ConfigError(f"tls_terminator.traffic_cname: must be a hostname such as \"edge.saas.example\" ({exc})") from None


def _check_traffic_addresses(values: list[str]) -> None:
    for value in values:
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            raise ConfigError(f"tls_terminator.traffic_addresses: {value!r} is not an IPv4 or IPv6 address") from None
        if ip.is_unspecified or ip.is_multicast:
            raise ConfigError(f"tls_terminator.traffic_addresses: {value} cannot receive visitors' traffic "
                              "(unspecified or multicast)")


#: CAA ``issue`` domains of the CAs Cloudflare for SaaS issues from (RFC 8659 issuer domain names).
CLOUDFLARE_CAA_ISSUERS = ["letsencrypt.org", "pki.goog", "ssl.com"]


@attrs.frozen
class ProviderConfig:
    kind: str = attrs.field(default="sandbox", validator=_check("provider.kind", lambda v: v in ("sandbox", "cloudflare", "acme"), 'must be "sandbox", "cloudflare" or "acme"'))
    caa_issuers: list[str] = attrs.field(factory=lambda: list(CLOUDFLARE_CAA_ISSUERS), validator=_check("provider.caa_issuers", lambda v: bool(v) and _is_glob_list(v), "must list at least one CA domain"))
    "CAA issuer domains the provider's CAs answer to; the pre-flight asks that one is allowed."
    workspace_share: float = attrs.field(default=0.25, validator=_check("provider.workspace_share", lambda v: 0 < v <= 1, "must be above 0 and at most 1"))
    """The most of the provider's request window one workspace's calls someone waits on may take; also
    the part all workspaces' calls beyond what their hostnames earn take together; 1 sets no limit
    at all (core/edge/pacing.py). Background calls share ``[lifecycle] provider_share`` by turns."""
    new_workspace_share: float = attrs.field(default=0.02, validator=_check("provider.new_workspace_share", lambda v: 0 < v <= 1, "must be above 0 and at most 1"))
    """The most of the window a workspace's calls beyond what its hostnames earn may take (all a new
    workspace has), out of the part every workspace shares; at most ``workspace_share``."""
    calls_per_active_hostname: int = attrs.field(default=1, validator=_check("provider.calls_per_active_hostname", lambda v: v >= 0, "must be zero or more"))
    """Calls in each window that each of a workspace's hostnames earns it, once verified and serving a
    certificate (opsStatus ``active``), up to ``workspace_share``."""
    cloudflare: CloudflareConfig = attrs.Factory(CloudflareConfig)
    sandbox: SandboxConfig = attrs.Factory(SandboxConfig)
    acme: AcmeConfig = attrs.Factory(AcmeConfig)


def check_provider(provider: ProviderConfig, delegation: DelegationDnsConfig) -> None:
    """What each provider needs from the other tables."""
    if provider.kind != "sandbox" and provider.sandbox.simulate_dns:
        # Simulated DNS must never verify a real customer's hostname.
        raise ConfigError('provider.sandbox.simulate_dns: only allowed when provider.kind is "sandbox"')
    if provider.kind == "cloudflare":
        for key in ("zone_id", "api_token"):
            if not getattr(provider.cloudflare, key):
                raise ConfigError(f"provider.cloudflare.{key}: required when provider.kind is \"cloudflare\"")
    if provider.kind != "acme":
        return
    if not provider.acme.directory_url:
        raise ConfigError('provider.acme.directory_url: required when provider.kind is "acme"')
    if bool(provider.acme.eab_kid) != bool(provider.acme.eab_hmac_key):
        raise ConfigError("provider.acme.eab_hmac_key: eab_kid and eab_hmac_key go together")
    fallbacks, profiles = provider.acme.fallback_directory_urls, provider.acme.fallback_profiles
    if profiles and len(profiles) != len(fallbacks):
        raise ConfigError(f"provider.acme.fallback_profiles: one profile per fallback_directory_urls entry, in its order "
                          f"({len(fallbacks)}), or none to ask each for provider.acme.profile (got {len(profiles)})")
    if not delegation.zone:
        raise ConfigError('delegation_dns.zone: required when provider.kind is "acme"')
    if delegation.mode == "builtin" and not delegation.nameservers:
        raise ConfigError('delegation_dns.nameservers: required when delegation_dns.mode is "builtin" (the NS names '
                          "the parent zone delegates the zone to)")
    inside = [ns for ns in delegation.nameservers if f".{ns}".lower().endswith(f".{delegation.zone}".lower())]
    if delegation.mode == "builtin" and inside:
        raise ConfigError(f"delegation_dns.nameservers: {inside[0]} is inside the zone {delegation.zone}, which "
                          "answers no address records: name nameservers outside it (e.g. in its parent zone)")
    if delegation.mode == "rfc2136":
        for key in ("server", "tsig_key_name", "tsig_secret"):
            if not getattr(delegation, key):
                raise ConfigError(f'delegation_dns.{key}: required when delegation_dns.mode is "rfc2136"')
    if delegation.mode == "builtin" and delegation.secondaries:
        for key in ("tsig_key_name", "tsig_secret"):
            if not getattr(delegation, key):
                raise ConfigError(f"delegation_dns.{key}: required when delegation_dns.secondaries is set (the TSIG key "
                                  "that signs the zone transfers and NOTIFY messages, as the secondaries know it)")
