"""An in-process edge provider for development and tests: no account, no network."""

from __future__ import annotations

import logging

from core.crypto import Keyring

log = logging.getLogger(__name__)

#: ``.invalid`` is reserved (RFC 2606): a sandbox target can never collide with a real zone.
SANDBOX_DCV_ZONE = "dcv.sandbox.invalid"


class SandboxProvider:
    name = "edge_provider_for_saas"

    def __init__(self, keyring: Keyring) -> None:
        # Stable across restarts of one installation, different between installations,
        # like Cloudflare's per-zone delegation id.
        self.delegation_id = keyring.mac("sandbox-dcv", "delegation")[:16]
        log.warning("edge provider: SANDBOX; no real certificate will be issued ([provider] kind)")

    async def delegation_target(self, apex: str) -> str:
        return f"{apex}.{self.delegation_id}.{SANDBOX_DCV_ZONE}"
