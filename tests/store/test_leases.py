"""Claims: webhook deliveries, background checks and Idempotency-Keys are each taken by one process
at a time (two Stores on one database, in threads, stand for two service processes, on each
backend), and both backends hand out the same claims in the same order.

A claim is a unit of work (``store.run``) in a transaction ordered by its row locks
(``row_locked=True``), as the repositories ask: on PostgreSQL, SERIALIZABLE claims made at once
abort each other (one claim in two, measured), more often than a unit of work is run again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import uuid
from collections.abc import Callable

from store import Store
from store.records import DomainRow, IdempotencyRecord, WebhookDelivery, WebhookEndpoint, Workspace
from tests.store.conftest import agree, drain_from_two_processes, write

NOW = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
LEASE = NOW + dt.timedelta(minutes=5)


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def workspace() -> Workspace:
    return Workspace(id=uuid.uuid4(), name="w", created_at=NOW, ownership_token="t")


def endpoint(ws: Workspace, status: str = "active") -> WebhookEndpoint:
    return WebhookEndpoint(id=uuid.uuid4(), url="https://hooks.example/in", events=[], created_at=NOW, status=status,
                           workspace_id=ws.id, secret_ciphertext="c", updated_at=NOW)


def delivery(e: WebhookEndpoint, due: dt.datetime, status: str = "pending") -> WebhookDelivery:
    return WebhookDelivery(id=uuid.uuid4(), event_id=uuid.uuid4(), type="cert.issued", status=status, attempt_count=0,
                           created_at=NOW, data={"n": 1}, endpoint_id=e.id, workspace_id=e.workspace_id,
                           next_attempt_at=due)


def run(store: Store, fn: Callable[[], list[uuid.UUID]]) -> list[uuid.UUID]:
    """``fn`` as a unit of work in a claim's transaction, from a thread that has no event loop."""
    def unit() -> list[uuid.UUID]:
        with store.transaction(row_locked=True):
            return fn()

    return asyncio.run(store.run(unit))


def claim_deliveries(store: Store, now: dt.datetime, limit: int) -> list[uuid.UUID]:
    return run(store, lambda: [d.id for d in store.webhooks.claim_due(now=now, lease_until=LEASE, limit=limit)])


def test_two_processes_never_claim_the_same_delivery(open_store):
    first = open_store()
    ws = workspace()
    e = endpoint(ws)
    deliveries = [delivery(e, at(n % 5)) for n in range(400)]
    write([first], lambda s: (s.accounts.insert_workspace(ws), s.webhooks.insert_endpoint(e),
                              [s.webhooks.insert_delivery(d) for d in deliveries]))
    claimed = drain_from_two_processes([first, open_store()], lambda s: claim_deliveries(s, at(10), 10))
    assert len(claimed) == len(set(claimed)) == 400


def test_one_of_two_processes_claiming_a_key_at_once_wins(open_store):
    stores = [open_store(), open_store()]
    ws = workspace()
    write(stores[:1], lambda s: s.accounts.insert_workspace(ws))
    for n in range(20):
        record = IdempotencyRecord(workspace_id=ws.id, method="POST", path="/v1/domains", key=f"k{n}", fingerprint="f",
                                   state="in_progress", created_at=NOW, locked_until=LEASE)
        together = threading.Barrier(2)
        won: list[bool] = []

        def claim(store: Store, record: IdempotencyRecord = record, together: threading.Barrier = together,
                  won: list[bool] = won) -> None:
            together.wait()
            won.append(store.idempotency.claim(record))

        threads = [threading.Thread(target=claim, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(won) == [False, True], record.key


def test_due_deliveries_are_claimed_alike_soonest_first(both):
    ws = workspace()
    active, disabled = endpoint(ws), endpoint(ws, "disabled")
    deliveries = [delivery(active, at(n // 2)) for n in range(9)]
    deliveries += [delivery(active, at(1), "delivered"), delivery(disabled, at(1)), delivery(active, at(60))]
    write(both, lambda s: (s.accounts.insert_workspace(ws), s.webhooks.insert_endpoint(active),
                           s.webhooks.insert_endpoint(disabled), [s.webhooks.insert_delivery(d) for d in deliveries]))
    batches = agree(both, lambda s: [claim_deliveries(s, at(30), 4) for _ in range(4)])
    due = sorted(deliveries[:9], key=lambda d: (d.next_attempt_at, str(d.id)))
    assert batches == [[d.id for d in due[:4]], [d.id for d in due[4:8]], [due[8].id], []]
    leased = agree(both, lambda s: [s.webhooks.get_delivery(active.id, d.id) for d in due])
    assert {d.next_attempt_at for d in leased} == {LEASE}
    again = sorted(d.id for d in [*due, deliveries[-1]])  # and the one due in a minute
    assert agree(both, lambda s: sorted(claim_deliveries(s, LEASE, 100))) == again


def test_due_checks_are_claimed_alike_soonest_first(both):
    ws = workspace()
    rows = [DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"h{n}.example.com", tags=[], created_at=NOW,
                      updated_at=NOW, delegation_target="t", validation_status="pending", cert_status="none",
                      ops_status="pending", ownership_token="t", next_check_at=at((n * 7) % 11), checks_since=NOW)
            for n in range(11)]
    write(both, lambda s: (s.accounts.insert_workspace(ws), s.domains.insert_many(rows)))
    assert agree(both, lambda s: s.lifecycle.due(at(5))) == (6, NOW)

    def claim(s: Store, now: dt.datetime, limit: int) -> set[uuid.UUID]:
        """The domains claimed (a claim takes the soonest due, and returns them in no particular order)."""
        return set(run(s, lambda: [d for _, d in s.lifecycle.claim(now, LEASE, limit)]))

    batches = agree(both, lambda s: [claim(s, at(5), 4), claim(s, at(5), 4), claim(s, at(20), 100)])
    soonest = [r.id for r in sorted(rows, key=lambda r: r.next_check_at or NOW)]
    assert batches == [set(soonest[:4]), set(soonest[4:6]), set(soonest[6:])]
    write(both, lambda s: s.lifecycle.release(soonest[0], LEASE, at(3)))
    assert agree(both, lambda s: (s.lifecycle.due(at(5)), claim(s, at(5), 100))) == ((1, at(3)), {soonest[0]})
