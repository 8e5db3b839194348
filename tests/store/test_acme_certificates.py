"""store.acme on both backends (issue 46): which certificate is served for a hostname, and the
deletion mark a domain's deletion sets, which nothing written afterwards clears."""

from __future__ import annotations

import datetime as dt
import uuid

import attrs
import pytest

from store import Store
from store.acme import AcmeCertificate
from tests.servers.terminators import owned

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def certificate(handle: str, apex: str = "shop.example.com", *, days: int = 90) -> AcmeCertificate:
    return AcmeCertificate(handle=handle, apex=apex, directory_url="https://acme.test/directory", status="valid",
                           created_at=NOW, updated_at=NOW, chain_pem=f"chain of {handle}", key_ciphertext="k",
                           not_before=NOW, not_after=NOW + dt.timedelta(days=days))


def stored(store: Store, kept: AcmeCertificate, *, verified_at: dt.datetime | None = None, verified: bool = True):
    """``kept``, named by the Certificate record of a domain of a workspace of its own; its domain's id."""
    with store.transaction():
        store.acme.put(kept)
        record = owned(store, kept.apex, kept.handle, verified_at=verified_at)
        if not verified:
            row = store.domains.get(record.workspace_id, record.domain_id)
            store.domains.update(attrs.evolve(row, validation_status="error", ops_status="action_needed"))
    return record


def handles(store: Store) -> list[str]:
    return sorted(c.handle for c in store.acme.all_served())


class TestServed:
    def test_a_certificate_no_record_names_is_not_served(self, store):
        with store.transaction():
            store.acme.put(certificate("orphan"))
        assert handles(store) == [] and store.acme.served("shop.example.com") is None

    def test_a_certificate_of_a_domain_not_verified_is_not_served(self, store):
        stored(store, certificate("moved"), verified=False)
        assert handles(store) == []

    def test_of_two_workspaces_verified_for_a_hostname_the_one_verified_last_is_served(self, store):
        stored(store, certificate("old", days=90), verified_at=NOW)
        stored(store, certificate("new", days=30), verified_at=NOW + dt.timedelta(minutes=1))
        assert handles(store) == ["new"] and store.acme.served("shop.example.com").handle == "new"

    def test_of_one_workspaces_certificates_the_one_expiring_last_is_served(self, store):
        stored(store, certificate("first", days=30))
        stored(store, certificate("renewed", days=90))
        assert handles(store) == ["renewed"]

    def test_a_certificate_marked_deleted_is_not_served(self, store):
        record = stored(store, certificate("gone"))
        with store.transaction():
            store.acme.mark_deleted(record.workspace_id, record.domain_id, NOW)
        assert handles(store) == []


class TestDeletionMark:
    def test_marking_moves_last_change_even_when_the_clock_stood_still(self, store):
        record = stored(store, certificate("gone"))
        before = store.acme.last_change()
        with store.transaction():
            assert store.acme.mark_deleted(record.workspace_id, record.domain_id, NOW) == 1
        assert store.acme.last_change() != before

    def test_another_workspaces_domain_id_marks_nothing(self, store):
        record = stored(store, certificate("kept"))
        with store.transaction():
            assert store.acme.mark_deleted(uuid.uuid4(), record.domain_id, NOW) == 0

    def test_put_keeps_the_mark(self, store):
        record = stored(store, certificate("gone"))
        with store.transaction():
            store.acme.mark_deleted(record.workspace_id, record.domain_id, NOW)
            store.acme.put(certificate("gone", days=180))  # an order finished after the deletion
        assert store.acme.certificate("gone").deleted_at == NOW
        assert [c.handle for c in store.acme.deleted()] == ["gone"]

    def test_a_certificate_saved_after_it_was_forgotten_is_kept_marked(self, store):
        with store.transaction():
            assert store.acme.replace(certificate("forgotten"), NOW) is False
        assert store.acme.certificate("forgotten").deleted_at == NOW

    def test_a_marked_certificate_is_revoked_without_the_grace_of_an_unnamed_one(self, store):
        record = stored(store, certificate("gone"))
        with store.transaction():
            store.acme.put(certificate("unnamed"))  # an order whose record is stored just after
            store.acme.mark_deleted(record.workspace_id, record.domain_id, NOW)
        assert [c.handle for c in store.acme.deleted()] == ["gone"]
        assert store.acme.unreferenced(NOW) == []


@pytest.mark.parametrize("verified", [True, False])
def test_only_a_verified_domains_certificate_may_be_renewed(store, verified):
    stored(store, certificate("c"), verified=verified)
    assert store.acme.renewable("c") is verified
