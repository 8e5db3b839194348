"""Typed configuration: one frozen attrs class per TOML table (``tables``, ``providers``), the
rules values are checked against (``rules``), and the whole file read here.

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

from core.config.providers import (
    CLOUDFLARE_CAA_ISSUERS,
    AcmeConfig,
    CloudflareConfig,
    DelegationDnsConfig,
    ProviderConfig,
    SandboxConfig,
    TlsTerminatorConfig,
    check_provider,
)
from core.config.rules import ConfigError, is_loopback
from core.config.tables import (
    DnsConfig,
    DomainConnectConfig,
    LifecycleConfig,
    LoggingConfig,
    MetricsConfig,
    NetworkConfig,
    OidcConfig,
    RateLimitsConfig,
    ServerConfig,
    SiteScanConfig,
    SmtpConfig,
    StorageConfig,
    WebhooksConfig,
)
from core.wire import describe, iter_errors, register_strict_primitives

__all__ = [
    "CLOUDFLARE_CAA_ISSUERS", "AcmeConfig", "CloudflareConfig", "Config", "ConfigError", "DelegationDnsConfig",
    "DnsConfig", "DomainConnectConfig", "LifecycleConfig", "LoggingConfig", "MetricsConfig", "NetworkConfig",
    "OidcConfig", "ProviderConfig", "RateLimitsConfig", "SandboxConfig", "ServerConfig", "SiteScanConfig",
    "SmtpConfig", "StorageConfig", "TlsTerminatorConfig", "WebhooksConfig", "config_from_dict", "load_config",
]


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
    delegation_dns: DelegationDnsConfig = attrs.Factory(DelegationDnsConfig)
    tls_terminator: TlsTerminatorConfig = attrs.Factory(TlsTerminatorConfig)

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
        if not self.oidc.issuer and self.server.trusted_proxies:
            raise ConfigError(
                "oidc.issuer: required when server.trusted_proxies is set "
                "(the built-in development identity provider serves loopback only, never behind a proxy)"
            )
        check_provider(self.provider, self.delegation_dns)
        dc = self.domain_connect
        if dc.simulate and not (self.provider.kind == "sandbox" and self.provider.sandbox.simulate_dns):
            # The stand-in applies records to the simulated DNS: with real DNS it would verify nothing real.
            raise ConfigError("domain_connect.simulate: only allowed with [provider.sandbox] simulate_dns = true "
                              "(the sandbox provider's simulated DNS)")
        if dc.simulate and dc.enabled:
            raise ConfigError("domain_connect.simulate: not with domain_connect.provider_id (one-click set-up is "
                              "either simulated or registered with Domain Connect)")
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
