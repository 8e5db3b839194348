"""Two processes writing one workspace's domains at once on PostgreSQL both commit, with no retry
(issue 41): a create reads nothing before it writes, and the counters every write of a workspace
changes are apart for concurrent transactions (store/schema_19.py). Under SERIALIZABLE either
used to abort one of any two such writers, and a first import followed by several clients made
the retries a storm.

Each test holds the first transaction open until the second has written (or has waited three
seconds on a lock of the first's), then commits both: the order in which two writers conflict,
if they can."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable

import attrs
import pytest

from core.config import Config, OidcConfig, StorageConfig
from core.domains import operations
from core.identity import accounts
from core.runtime.assembly import build_services
from core.services import Services
from store import Store
from store.domains import DomainFilter
from store.records import DomainRow, Workspace
from tests.servers.oidc import CLIENT_ID

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def side_by_side(first: Store, second: Store, write_first: Callable[[], None],
                 write_second: Callable[[], None]) -> list[BaseException | None]:
    """What each transaction raised: the first writes, the second writes while the first is open,
    then both commit."""
    wrote = threading.Event(), threading.Event()
    raised: list[BaseException | None] = [None, None]

    def run(i: int, store: Store, write: Callable[[], None]) -> None:
        try:
            if i:
                wrote[0].wait()
            with store.transaction():
                write()
                wrote[i].set()
                if not i:
                    wrote[1].wait(timeout=3)  # the second may be waiting on a lock of this one's
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            raised[i] = exc
        finally:
            wrote[i].set()

    threads = [threading.Thread(target=run, args=(i, store, write))
               for i, (store, write) in enumerate([(first, write_first), (second, write_second)])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return raised


@pytest.fixture
def two_processes(postgres_url, oidc_issuer, tmp_path):
    """Two services on one PostgreSQL database, and a workspace."""
    config = Config(storage=StorageConfig(path=str(tmp_path / "unused.sqlite3"), url=postgres_url,
                                          secret_key_file=str(tmp_path / "secret.key")),
                    oidc=OidcConfig(issuer=oidc_issuer.issuer, client_id=CLIENT_ID))
    both = [build_services(config), build_services(config)]
    workspace, _ = accounts.create_workspace(both[0], name="w", owner_email="owner@example.com")
    yield both, workspace
    for services in both:
        services.close()


def create(services: Services, workspace: Workspace, apex: str) -> Callable[[], None]:
    new = operations.NewDomain(apex=apex, target="t.example.net", tags=None, notes=None, contact_email=None, client_id=None)
    return lambda: operations.save_create(services, workspace=workspace, new=new)


def bulk(services: Services, workspace: Workspace, prefix: str) -> Callable[[], None]:
    """A bulk create of 50 new hostnames."""
    targets = {f"{prefix}{n}.example.com": "t.example.net" for n in range(50)}
    return lambda: operations._save_bulk(services, workspace, targets, client_id=None, tags=["imported"])


def test_two_creates_in_one_workspace_at_once_both_commit(two_processes):
    (first, second), ws = two_processes
    raised = side_by_side(first.store, second.store, create(first, ws, "a.example.com"), create(second, ws, "b.example.com"))
    assert raised == [None, None]
    assert first.store.domains.count(ws.id, DomainFilter()) == 2


def test_two_bulk_creates_in_one_workspace_right_after_an_import_into_a_new_database_both_commit(two_processes):
    """A new database's tables have no statistics and no visibility map until autovacuum looks: a
    read of the hostnames there was planned over the whole workspace's index, and locked it all."""
    (first, second), ws = two_processes
    for part in range(10):
        first.store.pg.run_here(bulk(first, ws, f"imported{part}-"))
    raised = side_by_side(first.store, second.store, bulk(first, ws, "a"), bulk(second, ws, "b"))
    assert raised == [None, None]
    assert first.store.domains.count(ws.id, DomainFilter()) == 600
    assert first.store.domains.count(ws.id, DomainFilter(tags=("imported",))) == 600


def test_two_status_changes_in_one_workspace_at_once_both_commit(two_processes):
    (first, second), ws = two_processes
    rows = [DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=f"h{n}.example.com", tags=["t"], created_at=NOW,
                      updated_at=NOW, delegation_target="t", validation_status="pending", cert_status="none",
                      ops_status="pending", ownership_token="t") for n in range(2)]
    with first.store.transaction():
        first.store.domains.insert_many(rows)

    def verify(store: Store, row: DomainRow) -> Callable[[], None]:
        return lambda: store.domains.update(attrs.evolve(row, validation_status="verified", ops_status="action_needed"))

    raised = side_by_side(first.store, second.store, verify(first.store, rows[0]), verify(second.store, rows[1]))
    assert raised == [None, None]
    counted = [first.store.domains.count(ws.id, DomainFilter(validation_status=s, tags=tags))
               for s in ("verified", "pending") for tags in ((), ("t",))]
    assert counted == [2, 2, 0, 0]
