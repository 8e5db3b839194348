"""The delivery worker: outbox events become deliveries, due deliveries are sent and retried.

``tick()`` is one plain async pass, run by a ``PeriodicCallback`` every
``[webhooks] poll_interval_seconds`` and also right after a transaction that queued events commits
(so a new event is not held back by the poll interval). A pass:

1. **Fan-out**: each undispatched outbox event becomes one delivery per active endpoint of its
   workspace subscribed to its type, each with its own id (the envelope ``id``, stable across
   retries); the event is marked dispatched in the same transaction.
2. **Claim**: due deliveries of active endpoints are leased (``next_attempt_at`` pushed past the
   request timeout) before sending, so a process killed mid-send sends them again once, later.
3. **Send**, at most ``CONCURRENCY`` at a time, each attempt signed with the endpoint's current
   secret and a fresh ``createdAt`` and timestamp; the outcome and the attempt are stored together.

Each step's reads and writes are one unit of work (``store.run``): the fan-out, the claim, the
endpoint read when a send's slot is free, each attempt's outcome; no unit is held across a send.

Any 2xx is success. Anything else (another status, a timeout, a connection or TLS error, a URL the
outbound guard refuses now) is retried: the first retry about 30 s after the failure, then
doubling, capped at 30 minutes, plus up to 20 % jitter, until ``[webhooks] max_attempts``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import random
import time
import uuid
from typing import TYPE_CHECKING

import attrs
from tornado.ioloop import IOLoop

from core.clock import truncate_ms
from core.outbound.guard import OutboundFailure
from core.webhooks import signing
from core.webhooks.endpoints import secret_of, subscribed
from core.wire import format_timestamp
from store.records import WebhookAttempt, WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 30
MAX_RETRY_SECONDS = 30 * 60
JITTER = 0.2
BATCH = 100
#: Sends in flight at once. Each is mostly waiting on a receiver, and more in flight amortise the
#: event loop's work per send (bench/webhooks.py: 32 gave about 460/s, 64 about 510/s).
CONCURRENCY = 64
#: A claimed delivery stays leased to its sender for twice the request timeout (a wait for a free
#: connection, then the request, each bounded by it) plus this margin.
LEASE_MARGIN_SECONDS = 5


def _running_loop() -> IOLoop | None:
    """The IOLoop of the running event loop; None outside one (another thread, or not started)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return None
    return IOLoop.current()


def retry_delay(retry: int, rng: random.Random) -> float:
    """Seconds before retry number ``retry`` (1 is the first retry): 30 s doubling to a 30-minute
    cap, then up to 20 % added so that receivers coming back are not hit all at once."""
    base: float = min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (retry - 1))
    return base * (1 + rng.uniform(0, JITTER))


class WebhookWorker:
    def __init__(self, services: Services, *, rng: random.Random | None = None, concurrency: int = CONCURRENCY) -> None:
        self.services = services
        self.rng = rng or random.Random()
        self.concurrency = concurrency
        self._running = False
        self._again = False
        self._loop: IOLoop | None = _running_loop()

    @property
    def busy(self) -> bool:
        """A pass is running (sending, perhaps): a shutdown waits for it."""
        return self._running

    def listen(self) -> None:
        """Be woken when a transaction that queued events commits, whichever thread commits it.
        Called on the event loop the passes run on, which is so known to a wake-up from another
        thread."""
        self._loop = IOLoop.current()
        self.services.store.outbox.listen(self.wake)

    def wake(self) -> None:
        """Run a pass soon (called when events or redeliveries are queued). From any thread: on
        PostgreSQL the store calls it from the worker thread whose unit of work committed them."""
        loop = _running_loop() or self._loop
        if loop is None:
            return  # no pass has run and no loop is known: the first pass finds the events
        self._loop = loop
        loop.add_callback(self.tick)  # thread-safe; a closed loop (shutting down) drops it

    async def tick(self) -> None:
        """One pass; a pass asked for while one runs is folded into it."""
        self._loop = IOLoop.current()
        if self._running:
            self._again = True
            return
        self._running = True
        store = self.services.store
        try:
            while True:
                self._again = False
                await store.run(self.fan_out)
                due = await store.run(self._claim)
                await self._send_all(due)
                if not self._again and len(due) < BATCH:
                    break
        finally:
            self._running = False

    def fan_out(self) -> int:
        """Turn undispatched outbox events into deliveries; returns how many were queued. A unit of
        work (``store.run``)."""
        store = self.services.store
        now = self.services.clock.now()
        queued = 0
        with store.transaction(row_locked=True):  # store/outbox.py: undispatched
            endpoints: dict[uuid.UUID, list[WebhookEndpoint]] = {}
            for event in store.outbox.undispatched(limit=500):
                if event.workspace_id not in endpoints:
                    endpoints[event.workspace_id] = store.webhooks.endpoints(event.workspace_id)
                for endpoint in endpoints[event.workspace_id]:
                    # A disabled endpoint gets no new deliveries (spec).
                    if endpoint.status == "active" and subscribed(endpoint, event.type):
                        store.webhooks.insert_delivery(
                            WebhookDelivery(
                                id=uuid.uuid4(), event_id=event.id, type=event.type, data=event.data,
                                status="pending", attempt_count=0, created_at=now, next_attempt_at=now,
                                endpoint_id=endpoint.id, workspace_id=event.workspace_id,
                            )
                        )
                        queued += 1
                store.outbox.mark_dispatched(event.id, now)
        return queued

    def _claim(self) -> list[WebhookDelivery]:
        now = self.services.clock.now()
        lease = dt.timedelta(seconds=2 * self.services.config.webhooks.request_timeout_seconds + LEASE_MARGIN_SECONDS)
        with self.services.store.transaction(row_locked=True):  # store/webhooks.py: claim_due
            return self.services.store.webhooks.claim_due(now=now, lease_until=truncate_ms(now + lease), limit=BATCH)

    async def _send_all(self, deliveries: list[WebhookDelivery]) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        secrets: dict[str, str] = {}  # ciphertext -> secret: decrypted once per batch and secret

        async def one(delivery: WebhookDelivery) -> None:
            async with gate:
                # Read when the slot is ours, not when the batch began: an endpoint disabled,
                # deleted, moved or rotated meanwhile must not get this attempt the old way.
                endpoint = await self.services.store.run(
                    self.services.store.webhooks.get_endpoint, delivery.workspace_id, delivery.endpoint_id)
                if endpoint is None or endpoint.status != "active":
                    return  # deleted (its deliveries with it), or disabled: the delivery waits
                if endpoint.secret_ciphertext not in secrets:
                    secrets[endpoint.secret_ciphertext] = secret_of(self.services, endpoint)
                await self.send(delivery, endpoint, secrets[endpoint.secret_ciphertext])

        await asyncio.gather(*(one(d) for d in deliveries))

    async def send(self, delivery: WebhookDelivery, endpoint: WebhookEndpoint, secret: str) -> None:
        """One signed attempt, and its outcome stored."""
        services = self.services
        started_at = services.clock.now()
        body = json.dumps(
            {"id": str(delivery.id), "type": delivery.type, "createdAt": format_timestamp(started_at), "data": delivery.data},
            separators=(",", ":"),
        ).encode()
        headers = signing.headers(
            secret=secret, event_type=delivery.type, timestamp=int(started_at.timestamp()), body=body
        )
        started = time.monotonic()
        status_code: int | None = None
        try:
            response = await services.outbound.post(
                endpoint.url, body=body, headers=headers, timeout=services.config.webhooks.request_timeout_seconds
            )
        except OutboundFailure as exc:
            error: str | None = exc.reason
        else:
            status_code = response.status_code
            error = None if 200 <= status_code < 300 else f"The receiver answered HTTP {status_code}."
        attempt = WebhookAttempt(
            number=0, started_at=started_at, duration_ms=round((time.monotonic() - started) * 1000),
            status_code=status_code, error=error,
        )
        ended = await services.store.run(self._record, delivery, attempt)
        services.metrics.webhook_attempts.labels("delivered" if error is None else "failed").inc()
        if ended is not None:
            services.metrics.webhook_deliveries.labels(ended).inc()

    def _record(self, delivery: WebhookDelivery, attempt: WebhookAttempt) -> str | None:
        """Store the attempt and the delivery's new state; the outcome if the delivery ended
        (``delivered``, or ``failed`` after the last attempt), None while it is retried."""
        store = self.services.store
        now = self.services.clock.now()
        # Row-locked: the delivery's row first, so deliveries finishing at once on PostgreSQL wait
        # for each other's endpoint update instead of aborting each other.
        with store.transaction(row_locked=True):
            current = store.webhooks.get_delivery(delivery.endpoint_id, delivery.id, lock=True)
            if current is None:
                return None
            store.webhooks.insert_attempt(delivery.id, attempt)
            store.webhooks.record_outcome(delivery.endpoint_id, at=attempt.started_at, status_code=attempt.status_code)
            if current.next_attempt_at != delivery.next_attempt_at:
                # Not our lease any more: it was redelivered while this attempt ran, and that new
                # round (due now, counting from zero) stands.
                return None
            attempts = current.attempt_count + 1
            if attempt.error is None:
                status, next_at = "delivered", None
            elif attempts >= self.services.config.webhooks.max_attempts:
                status, next_at = "failed", None
            else:
                status, next_at = "pending", now + dt.timedelta(seconds=retry_delay(attempts, self.rng))
            store.webhooks.update_delivery(
                attrs.evolve(
                    current, status=status, attempt_count=attempts, next_attempt_at=next_at, last_attempt_at=attempt.started_at,
                    last_status_code=attempt.status_code, last_error=attempt.error,
                )
            )
        if attempt.error is not None:
            log.info("webhook delivery %s attempt %d failed: %s", delivery.id, attempts, attempt.error)
        return status if status != "pending" else None
