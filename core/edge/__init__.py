"""The edge provider that issues and installs certificates, behind one small interface.

``[provider] kind`` picks the implementation: ``cloudflare`` (Cloudflare for SaaS custom
hostnames) or ``sandbox`` (in-process, for development and tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.config import Config
    from core.crypto import Keyring


class EdgeProvider(Protocol):
    name: str
    "Identifier shown as the Certificate's ``provider``."

    async def delegation_target(self, apex: str) -> str:
        """The CNAME target of ``_acme-challenge.<apex>`` that delegates DCV to the provider."""


def make_provider(config: Config, keyring: Keyring) -> EdgeProvider:
    """The provider the configuration selects."""
    if config.provider.kind == "cloudflare":
        from core.edge.cloudflare import CloudflareProvider

        return CloudflareProvider(config.provider.cloudflare)
    from core.edge.sandbox import SandboxProvider

    return SandboxProvider(keyring)
