"""The edge provider with its calls counted for ``GET /metrics``, by operation and outcome."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from core.edge import EdgeProvider, HostnameGone, ProviderBusy, ProviderError, ProviderRejected, ProviderState

if TYPE_CHECKING:
    from core.dns.caa import CaaIssuer
    from core.metrics import Metrics

T = TypeVar("T")


class CountedProvider:
    """The edge provider, its calls counted by outcome (it is called only through this)."""

    def __init__(self, provider: EdgeProvider, metrics: Metrics) -> None:
        self.provider = provider
        self.metrics = metrics
        self.name = provider.name

    async def delegation_target(self, apex: str) -> str:
        return await self._counted("delegation_target", self.provider.delegation_target(apex))

    async def delegation_targets(self, apexes: list[str]) -> dict[str, str]:
        """Each hostname's target, counted as a call each, with one update of the count: a bulk
        create of 500 spent 3 ms in 500 updates and the coroutines around them (issue 49)."""
        return await self._counted("delegation_target", self._targets(apexes), calls=len(apexes))

    async def _targets(self, apexes: list[str]) -> dict[str, str]:
        return {apex: await self.provider.delegation_target(apex) for apex in apexes}

    async def caa_issuers(self) -> list[CaaIssuer]:
        return await self.provider.caa_issuers()

    async def issue(self, apex: str, *, trace_id: uuid.UUID) -> ProviderState:
        return await self._counted("issue", self.provider.issue(apex, trace_id=trace_id))

    async def refresh(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        return await self._counted("refresh", self.provider.refresh(hostname_id, apex=apex, trace_id=trace_id))

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        return await self._counted("revalidate", self.provider.revalidate(hostname_id, apex=apex, trace_id=trace_id))

    def close(self) -> None:
        self.provider.close()

    async def _counted(self, operation: str, call: Awaitable[T], *, calls: int = 1) -> T:
        outcome = "ok"
        try:
            return await call
        except HostnameGone:
            outcome = "gone"
            raise
        except ProviderRejected:
            outcome = "rejected"
            raise
        except ProviderBusy:
            outcome = "busy"
            raise
        except ProviderError:
            outcome = "unavailable"
            raise
        finally:
            self.metrics.provider_calls.labels(operation, outcome).inc(calls)
