"""The same rows written to a SQLite store and to a PostgreSQL store give the same answers: where the
repositories spell a statement differently for PostgreSQL (store._rows.postgres), and where the
databases themselves differ (collation, LIKE, JSON, row ids), the API must not be able to tell.

Each test writes through the repositories to both stores (``both``) and asks both the same question
(``agree``); where the answer can also be worked out in Python, it is checked against that too.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from core.domains.query import _as_hostname
from core.domains.records import CERT_STATUSES, OPS_STATUSES, VALIDATION_STATUSES, ops_status
from store import Store
from store.domain_rows import fold, to_columns
from store.domains import SORT_COLUMNS, DomainFilter, DomainRepo
from store.records import (
    Client,
    DnsHostSeen,
    DomainRow,
    IdempotencyRecord,
    Membership,
    OneClickOffer,
    User,
    VerificationLinkRow,
    Workspace,
)
from tests.store.conftest import agree, write

NOW = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def both_read(tmp_path_factory, pg_databases) -> Iterator[list[Store]]:
    """A SQLite store and a PostgreSQL store for the tests that only read: written once."""
    url = pg_databases.create()
    stores = [Store(tmp_path_factory.mktemp("agree") / "db.sqlite3"), Store(url=url)]
    yield stores
    for store in stores:
        store.close()
    pg_databases.drop(url)


def new_workspace(stores: list[Store], name: str = "w", created_at: dt.datetime = NOW) -> Workspace:
    ws = Workspace(id=uuid.uuid4(), name=name, created_at=created_at, ownership_token=f"token-{name}")
    write(stores, lambda s: s.accounts.insert_workspace(ws))
    return ws


def domain(ws: Workspace, apex: str, **fields: Any) -> DomainRow:
    fields = {"tags": [], "created_at": NOW, "updated_at": NOW, **fields}
    return DomainRow(id=uuid.uuid4(), workspace_id=ws.id, apex=apex, delegation_target="t", validation_status="pending",
                     cert_status="none", ops_status="pending", ownership_token=ws.ownership_token, **fields)


def random_domains(ws: Workspace, count: int, seed: int) -> list[DomainRow]:
    """Few distinct timestamps and statuses, so that sort values tie and the id decides."""
    rng = random.Random(seed)
    apexes = ["a.example", "a-b.example", "a0.example", "1.example", "zz.example", "xn--bcher-kva.example", "z.test"]
    rows = []
    for n in range(count):
        validation, cert = rng.choice(VALIDATION_STATUSES), rng.choice(CERT_STATUSES)
        apex = apexes[n] if n < len(apexes) else f"{rng.choice(['shop', 'www', 'api'])}{n}.{rng.choice(['com', 'net'])}"
        rows.append(attrs.evolve(
            domain(ws, apex), tags=rng.sample(["a", "b", "c"], rng.randint(0, 3)), created_at=at(rng.randint(0, 4)),
            updated_at=at(rng.randint(0, 2) * 60), validation_status=validation, cert_status=cert,
            ops_status=ops_status(validation, cert),
        ))
    return rows


def walk(store: Store, ws: Workspace, f: DomainFilter, sort_by: str, descending: bool, *, sparse: bool = False,
         limit: int = 4) -> list[uuid.UUID]:
    """Every page in turn, each starting after the last row of the one before (as the API's cursor does)."""
    seen: list[uuid.UUID] = []
    after = None
    while True:
        rows = store.domains.page(ws.id, f, sort_by=sort_by, descending=descending, after=after, limit=limit,
                                  sparse=sparse)
        seen += [uuid.UUID(row["id"]) for row in rows]
        if len(rows) < limit:
            return seen
        after = (DomainRepo.sort_value(rows[-1], sort_by), rows[-1]["id"])


@pytest.fixture(scope="module")
def domains(both_read) -> tuple[Workspace, list[DomainRow]]:
    """40 domains, a third of them changed and five deleted afterwards, and another workspace's."""
    both = both_read
    ws, other = new_workspace(both), new_workspace(both, "other")
    rows = random_domains(ws, 40, seed=1)
    write(both, lambda s: s.domains.insert_many([*rows, *random_domains(other, 10, seed=2)]))
    changed = random_domains(ws, 15, seed=3)  # new statuses and tags: the counts follow by trigger
    for n, new in enumerate(changed):
        rows[n] = attrs.evolve(rows[n], validation_status=new.validation_status, cert_status=new.cert_status,
                               ops_status=new.ops_status, tags=new.tags if n % 2 else rows[n].tags)
        write(both, lambda s, row=rows[n], n=n: s.domains.update(row, tags_changed=bool(n % 2)))
    for row in rows[-5:]:
        write(both, lambda s, row=row: s.domains.delete(ws.id, row.id))
    return ws, rows[:-5]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("sort_by", list(SORT_COLUMNS))
def test_every_sort_order_pages_alike(both_read, domains, sort_by, descending):
    ws, rows = domains
    expected = [r.id for r in sorted(rows, key=lambda r: (to_columns(r)[SORT_COLUMNS[sort_by]], str(r.id)),
                                     reverse=descending)]
    assert agree(both_read, lambda s: walk(s, ws, DomainFilter(), sort_by, descending)) == expected


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_filtered_pages_page_alike(both_read, domains, sparse):
    ws, _ = domains
    for f in (DomainFilter(tags=("a",)), DomainFilter(tags=("a", "b"), validation_status="pending"),
              DomainFilter(cert_status="none"), DomainFilter(q="shop", tags=("c",))):
        for sort_by, descending in itertools.product(("apex", "createdAt"), (False, True)):
            agree(both_read, lambda s, f=f, sort_by=sort_by, descending=descending:
                  walk(s, ws, f, sort_by, descending, sparse=sparse, limit=3))


def matches(row: DomainRow, f: DomainFilter) -> bool:
    return ((f.ops_status in (None, row.ops_status)) and (f.validation_status in (None, row.validation_status))
            and (f.cert_status in (None, row.cert_status)) and all(t in row.tags for t in f.tags))


def test_status_and_tag_counts_agree(both_read, domains):
    ws, rows = domains
    filters = [DomainFilter()]
    filters += [DomainFilter(ops_status=o) for o in OPS_STATUSES]
    filters += [DomainFilter(validation_status=v, cert_status=c) for v, c in itertools.product(VALIDATION_STATUSES, CERT_STATUSES)]
    filters += [DomainFilter(tags=(t,)) for t in "abcd"]
    filters += [DomainFilter(tags=tags) for tags in (("a", "b"), ("a", "c"), ("a", "b", "c"))]
    filters += [DomainFilter(tags=(t,), cert_status=c) for t, c in itertools.product("ab", CERT_STATUSES)]
    filters += [DomainFilter(tags=("b", "c"), ops_status=o) for o in OPS_STATUSES]
    for f in filters:
        assert agree(both_read, lambda s, f=f: s.domains.count(ws.id, f)) == sum(matches(r, f) for r in rows), f


TEXTS = [("ecole.example", "École Normale", ["ÉCOLE"]), ("rue.example", "Straße 5", []), ("big.example", None, ["STRASSE"]),
         ("xn--bcher-kva.example", None, ["über"]), ("notes.example", "see xn--bcher-kva", []),
         ("pct.example", "100% done", ["a_b"]), ("path.example", "C:\\back\\slash", []), ("shop.example", "SHOP", []),
         ("plain.example", "abc axb a%b", ["x_y"])]


@pytest.fixture(scope="module")
def texts(both_read) -> Workspace:
    """A workspace of domains whose notes and tags ``q`` searches."""
    ws = new_workspace(both_read, "texts")
    write(both_read, lambda s: s.domains.insert_many([domain(ws, a, notes=n, tags=t) for a, n, t in TEXTS]))
    return ws


def found(stores: list[Store], ws: Workspace, q: str) -> list[str]:
    """The apexes ``q`` finds on both (in either strategy of the page), which its count counts."""
    f = DomainFilter(q=fold(q), q_hostname=_as_hostname(q.lower()))
    pages = [agree(stores, lambda s, sparse=sparse: [r["apex"] for r in s.domains.page(
        ws.id, f, sort_by="apex", descending=False, after=None, limit=100, sparse=sparse)]) for sparse in (False, True)]
    assert pages[0] == pages[1]
    assert agree(stores, lambda s: s.domains.count(ws.id, f)) == len(pages[0])
    return pages[0]


@pytest.mark.parametrize("q, expected", [
    ("shop", ["shop.example"]), ("SHOP", ["shop.example"]), ("example", [a for a, _, _ in sorted(TEXTS)]), ("zzz", []),
    ("École", ["ecole.example"]), ("école", ["ecole.example"]), ("ÉCOLE", ["ecole.example"]),
    ("Straße", ["big.example", "rue.example"]), ("STRASSE", ["big.example", "rue.example"]),
    ("strasse", ["big.example", "rue.example"]), ("über", ["xn--bcher-kva.example"]),
    # An IDN by its U-label or its A-label; the A-label in a note is found as text, not by the U-label.
    ("bücher", ["xn--bcher-kva.example"]), ("BÜCHER", ["xn--bcher-kva.example"]),
    ("xn--bcher-kva", ["notes.example", "xn--bcher-kva.example"]),
    # LIKE's wildcards and its escape character are text in ``q``.
    ("%", ["pct.example", "plain.example"]), ("_", ["pct.example", "plain.example"]), ("\\", ["path.example"]),
    ("100%", ["pct.example"]), ("%done", []), ("a_b", ["pct.example"]), ("a%b", ["plain.example"]), ("a_c", []),
    ("x_y", ["plain.example"]), ("\\b", ["path.example"]), ("\\%", []),
])
def test_q_finds_the_same_domains(both_read, texts, q, expected):
    assert found(both_read, texts, q) == expected


def test_clients_are_listed_by_name_ignoring_ascii_case(both):
    ws = new_workspace(both)
    names = ["beta", "Alpha", "alpha", "Éclair", "eclair", "zeta", "Zeta", "_under", "ábc", "Beta", "10", "2"]
    clients = [Client(id=uuid.uuid4(), name=name, created_at=NOW, updated_at=NOW, workspace_id=ws.id) for name in names]
    write(both, lambda s: [s.clients.insert(c) for c in clients])
    listed = agree(both, lambda s: [c.id for c in s.clients.list(ws.id)])
    ascii_lower = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
    assert listed == [c.id for c in sorted(clients, key=lambda c: (c.name.translate(ascii_lower), str(c.id)))]


def idempotency(ws: Workspace, key: str, *, method: str = "POST", created_at: dt.datetime = NOW,
                fingerprint: str = "f") -> IdempotencyRecord:
    return IdempotencyRecord(workspace_id=ws.id, method=method, path="/v1/domains", key=key, fingerprint=fingerprint,
                             state="in_progress", created_at=created_at, locked_until=created_at + dt.timedelta(minutes=1))


def test_an_idempotency_key_is_claimed_once_and_reclaimed_after_its_lease(both):
    ws = new_workspace(both)
    first = idempotency(ws, "k1")

    lease = first.locked_until or NOW

    def story(s: Store) -> list[Any]:
        told: list[Any] = [
            s.idempotency.claim(first),
            s.idempotency.claim(attrs.evolve(first, fingerprint="other")),  # a second request with the key
            s.idempotency.reclaim(first, now=lease - dt.timedelta(seconds=1), locked_until=at(300)),  # lease not over
            s.idempotency.reclaim(first, now=lease, locked_until=at(300)),  # over: taken over
            s.idempotency.reclaim(first, now=lease, locked_until=at(400)),  # taken over already
            s.idempotency.get(ws.id, first.method, first.path, first.key),
        ]
        s.idempotency.complete(first, status_code=201, response='{"id": 1}')
        return [*told, s.idempotency.reclaim(first, now=at(10_000), locked_until=at(10_060)),
                s.idempotency.get(ws.id, first.method, first.path, first.key)]

    answers = agree(both, story)
    assert answers[:5] == [True, False, False, True, False]
    assert answers[5].locked_until == at(300) and answers[5].fingerprint == "f"
    assert answers[6] is False and answers[7].state == "completed" and answers[7].response == '{"id": 1}'


def test_form_secrets_are_forgotten_alike(both):
    ws = new_workspace(both)
    old, new = NOW - dt.timedelta(days=2), NOW
    records = {
        "form-old-secret": (idempotency(ws, "1", method="FORM", created_at=old), {"secret": "s", "keep": [1, "ü"], "until": 1795000000.125}),
        "form-old-plain": (idempotency(ws, "2", method="FORM", created_at=old), {"keep": True}),
        "form-old-null": (idempotency(ws, "3", method="FORM", created_at=old), {"secret": None}),
        "form-new-secret": (idempotency(ws, "4", method="FORM", created_at=new), {"secret": "s"}),
        "post-old-secret": (idempotency(ws, "5", created_at=old), {"secret": "s"}),
    }

    def store_them(s: Store) -> None:
        for record, response in records.values():
            s.idempotency.claim(record)
            s.idempotency.complete(record, status_code=200, response=json.dumps(response))

    write(both, store_them)
    assert agree(both, lambda s: s.idempotency.forget_form_secrets(created_before=NOW - dt.timedelta(days=1))) == 1
    after = agree(both, lambda s: {name: json.loads(s.idempotency.get(ws.id, r.method, r.path, r.key).response)
                                   for name, (r, _) in records.items()})
    assert after == {**{name: response for name, (_, response) in records.items()},
                     "form-old-secret": {"keep": [1, "ü"], "until": 1795000000.125}}


def test_one_click_offers_are_forgotten_alike(both):
    ws = new_workspace(both)
    offer = OneClickOffer(provider_id="p", provider_name="P", url_sync_ux="https://p.example/sync")
    seen = [DnsHostSeen(zone="a.example", host="p", checked_at=NOW, offer=offer),
            DnsHostSeen(zone="b.example", host="p", checked_at=NOW, offer=None, problem="no template"),
            DnsHostSeen(zone="c.example", host="", checked_at=NOW, offer=attrs.evolve(offer, width=500)), None]
    rows = [domain(ws, f"{'abcd'[n]}.example", dns_host=dns_host) for n, dns_host in enumerate(seen)]
    write(both, lambda s: s.domains.insert_many(rows))
    assert agree(both, lambda s: s.one_click.forget_offers()) == 2
    for s in both:
        s.domains.cache.forget_all()
    after = agree(both, lambda s: [s.domains.get(ws.id, r.id).dns_host for r in rows])
    assert after == [attrs.evolve(d, offer=None) if d else None for d in seen]


def test_workspaces_are_listed_alike_with_their_owners(both):
    users = [User(id=uuid.uuid4(), email=f"{name}@example.com", created_at=NOW) for name in ("zoe", "amy", "bob", "cy")]
    w1, w2, w3 = (new_workspace(both, name, created_at=at(n)) for n, name in enumerate(("one", "two", "three")))
    members = [(w1, users[0], "owner", at(5)), (w1, users[1], "owner", at(5)), (w1, users[2], "admin", at(1)),
               (w2, users[2], "owner", at(9)), (w2, users[0], "read_only", at(2)), (w2, users[1], "owner", at(3))]

    def add(s: Store) -> None:
        for user in users:
            s.accounts.insert_user(user)
        for ws, user, role, when in members:
            s.accounts.insert_membership(Membership(workspace_id=ws.id, user_id=user.id, role=role, created_at=when))

    write(both, add)
    listed = agree(both, lambda s: s.accounts.workspaces_with_owners())
    assert listed == [(w1, ["amy@example.com", "zoe@example.com"]), (w2, ["amy@example.com", "bob@example.com"]), (w3, [])]
    assert agree(both, lambda s: s.accounts.workspaces_with_owners(member_email="zoe@example.com")) == listed[:2]
    assert agree(both, lambda s: s.accounts.workspaces_with_owners(member_email="cy@example.com")) == []


def walk_links(s: Store, ws: Workspace, domain_id: uuid.UUID | None, status: str | None,
               now: dt.datetime) -> list[uuid.UUID]:
    seen: list[uuid.UUID] = []
    after = None
    while page := s.verification_links.page(ws.id, domain_id=domain_id, status=status, now=now, after=after, limit=4):
        seen += [link.id for link, _ in page]
        after = page[-1][1]
    return seen


def test_verification_links_page_alike(both):
    ws = new_workspace(both)
    domains = [domain(ws, f"{n}.example") for n in range(3)]
    links = [VerificationLinkRow(id=uuid.uuid4(), workspace_id=ws.id, domain_id=domains[n % 3].id, apex="",
                                 token_hash=f"h{n}", token_ciphertext="c", created_at=at(n // 4),
                                 expires_at=at(100 * (n % 5)), recipient_email=None) for n in range(23)]

    def add(s: Store) -> None:
        s.domains.insert_many(domains)
        for link in links:
            s.verification_links.insert(link)
        for link in links[::6]:
            s.verification_links.revoke(link.id, at(50))

    write(both, add)
    now = at(250)
    for domain_id, status in itertools.product((None, domains[1].id), (None, "active", "expired", "revoked")):
        listed = agree(both, lambda s, d=domain_id, st=status: walk_links(s, ws, d, st, now))
        assert agree(both, lambda s, d=domain_id, st=status: s.verification_links.count(
            ws.id, domain_id=d, status=st, now=now)) == len(listed) == len(set(listed))
    everything = agree(both, lambda s: [link.id for link, _ in s.verification_links.page(
        ws.id, domain_id=None, status=None, now=now, after=None, limit=100)])
    assert everything == [link.id for link in reversed(links)]  # newest first; one millisecond: the last inserted first


def test_reminders_are_numbered_and_taken_back_alike(both):
    def story(s: Store) -> list[Any]:
        day = dt.timedelta(days=1)
        ids = [s.verification_links.record_reminder(who, at(hour * 3600), forget_before=at(hour * 3600) - day)
               for hour, who in [(0, "a@x"), (1, "b@x"), (3, "a@x"), (4, "a@x")]]
        s.verification_links.forget_reminder(ids[2])  # not sent after all
        ids.append(s.verification_links.record_reminder("a@x", at(27 * 3600), forget_before=at(3 * 3600)))
        return [ids, s.verification_links.reminders_since("a@x", NOW - day),
                s.verification_links.reminders_since("b@x", NOW - day)]

    ids, to_a, to_b = agree(both, story)
    assert ids == [1, 2, 3, 4, 5]
    assert to_a == [at(4 * 3600), at(27 * 3600)] and to_b == []
