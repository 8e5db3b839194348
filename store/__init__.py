"""Storage: the only code in the service that knows SQL.

SQLite by default: one connection, used from the event loop's thread. WAL journal with
``synchronous=NORMAL``: a crash of the process never loses a committed transaction and never
leaves a half-written one; only a power cut may roll back the last commits, and the database
stays consistent. With ``[storage] url`` naming PostgreSQL, the same repositories run on a pool of
connections (store/postgres/pool.py), which several service processes share.

Callers do their reads and writes in a unit of work, ``await store.run(fn, ...)``: a plain
function that runs whole, inline on SQLite and in a worker thread on PostgreSQL.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from store.accounts import AccountRepo
from store.acme import AcmeRepo
from store.acme_validations import AcmeValidationRepo
from store.api_keys import ApiKeyRepo
from store.certificates import CertificateRepo
from store.clients import ClientRepo
from store.delegation_zone import DelegationZoneRepo
from store.domain_rows import register_functions
from store.domains import DOMAINS_CHANNEL, DomainRepo
from store.idempotency import IdempotencyRepo
from store.lifecycle import LifecycleRepo
from store.metrics import MetricsRepo
from store.migrations import SchemaTooNew, apply_migrations
from store.one_click import OneClickRepo
from store.outbox import OutboxRepo
from store.shared import SharedRepo
from store.sqlite.checkpoints import CEILING_PAGES, Checkpointer
from store.stand_ins import StandInRepo
from store.team import TeamRepo
from store.verification_links import VerificationLinkRepo
from store.webhooks import WebhookRepo
from store.zone_check import ZoneCheckRepo

if TYPE_CHECKING:
    from store.postgres.pool import PgDb
    from store.sqlite.connection import Database

T = TypeVar("T")

#: Notified when a transaction wrote outbox events: every process's webhook worker looks.
OUTBOX_CHANNEL = "cps_outbox"
#: Rows of each index an ANALYZE on SQLite reads (``analysis_limit``), the bound ``PRAGMA optimize``
#: sets itself from SQLite 3.46 on: at 1M domains the statistics take 0.1 s instead of 6, and the
#: plans they lead to are those of a full ANALYZE (measured, issue 41). Limits of a few hundred
#: were not: 100 rows made a 1M-domain workspace look like 101 rows and the first page take 0.9 s.
ANALYSIS_LIMIT = 2000
#: SQLite's page cache for the connection, in KiB. Larger than the 2 MiB default, which the hot
#: indexes of a 100k-domain workspace outgrow; not the 64 MiB it was, which a mixed run at 1M domains
#: filled to most of the service's memory for no measurable gain: with 16 MiB the first page, the
#: walk, ``q`` and bulk create were as fast (medians of three interleaved runs, issue 49), the pages
#: past it being read from the operating system's cache; the RSS after the run 128 MB against 137 with
#: 64 MiB, which a longer run fills (the issue measured 190 MB).
PAGE_CACHE_KIB = 16384
#: Domains written since SQLite's statistics were last looked at, at least, before a bulk write has
#: them looked at again (``Store.optimize_if_grown``).
GROWTH_FLOOR = 1000
#: The tables a bulk write grows: the domains, their tags, and the text index's shadow tables, which
#: its trigger writes (left with the statistics of a nearly empty index, the planner takes them for a
#: few rows, and every insert into them slows as they grow: 1 s for 500 domains at 1M, issue 49).
GROWING_TABLES = ("domains", "domain_tags", "domain_text_data", "domain_text_idx", "domain_text_content")
#: The tables a bulk write grows on PostgreSQL, where trigram indexes on ``domains`` answer ``q``.
GROWING_TABLES_PG = ("domains", "domain_tags")


def _create_private(path: Path) -> None:
    """The database holds e-mails, notes and ownership tokens: its folder, when created here, is
    0700 and the file 0600. SQLite gives its -wal and -shm files the database file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)


def unavailable_reason(exc: BaseException | None) -> str | None:
    """Why the database cannot be used right now, for the errors that are the machine's, not a bug."""
    if not isinstance(exc, sqlite3.OperationalError):
        postgres = sys.modules.get("store.postgres.pool")  # imported only when a url names PostgreSQL
        return None if postgres is None else postgres.unavailable_reason(exc)
    text = str(exc).lower()
    for marker, reason in (
        ("readonly", "the database is read-only"),
        ("read-only", "the database is read-only"),
        ("disk is full", "the disk is full"),
        ("disk i/o error", "a disk I/O error"),
        ("locked", "the database is busy"),
        ("busy", "the database is busy"),
    ):
        if marker in text:
            return reason
    return None


class Store:
    def __init__(self, path: str | Path = "", *, url: str = "") -> None:
        """The SQLite file at ``path``, or the PostgreSQL database ``url`` names when it is set."""
        self.path = str(path)
        self.url = url
        self._checkpointer: Checkpointer | None = None
        self._depth = 0
        self._units = 0
        self._loop_trace: Callable[[str], None] | None = None  # watch_loop_calls', off inside a unit
        self._domains_seen = 0
        "Domains in the database when SQLite's statistics were last looked at (``optimize``)."
        self.pg: PgDb | None = None
        if url:
            from store.postgres.pool import PgDb  # psycopg is loaded only for PostgreSQL

            self.pg = PgDb(url)
            db: Any = self.pg
        else:
            db = self.db = self._open_sqlite(path)
        self.sql = db
        "The connection the repositories use: SQLite's, or the PostgreSQL pool's for this thread."
        self.accounts = AccountRepo(db)
        self.acme = AcmeRepo(db)
        self.acme_validations = AcmeValidationRepo(db)
        self.api_keys = ApiKeyRepo(db)
        self.certificates = CertificateRepo(db)
        self.clients = ClientRepo(db)
        self.delegation_zone = DelegationZoneRepo(db)
        self.domains = DomainRepo(db)
        self.idempotency = IdempotencyRepo(db)
        self.lifecycle = LifecycleRepo(db, self.domains)
        self.one_click = OneClickRepo(db)
        self.outbox = OutboxRepo(db)
        self.team = TeamRepo(db)
        self.verification_links = VerificationLinkRepo(db)
        self.webhooks = WebhookRepo(db)
        self.metrics = MetricsRepo(db)
        self.shared = SharedRepo(db)
        self.stand_ins = StandInRepo(db)
        self.zone_check = ZoneCheckRepo(db)
        if self.pg is not None:
            listener = self.pg.listener
            self.domains.cache.live = lambda: listener.hears(DOMAINS_CHANNEL)
        try:
            apply_migrations(self)
        except SchemaTooNew:
            self.close()
            raise

    @property
    def backend(self) -> str:
        return "postgresql" if self.pg is not None else "sqlite"

    @staticmethod
    def _open_sqlite(path: str | Path) -> Database:
        if str(path) != ":memory:":
            _create_private(Path(path))
        # isolation_level=None: transactions are begun and ended here, explicitly, not by
        # sqlite3's implicit rules.
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        conn.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
        register_functions(conn)
        # Here, not above: a store on PostgreSQL never imports sqlite-utils (0.06 s of its start-up).
        from store.sqlite.connection import Database

        return Database(conn)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A unit of work: ``fn(*args, **kwargs)`` run whole, with no await inside. Inline on
        SQLite (no thread hop); on PostgreSQL in a worker thread on a pooled connection."""
        if self.pg is None:
            self._units += 1
            watched = self._units == 1 and self._loop_trace is not None
            if watched:  # SQLite expands every parameter for the trace, again for each trigger it runs
                self.db.conn.set_trace_callback(None)
            try:
                return fn(*args, **kwargs)
            finally:
                self._units -= 1
                if watched:
                    self.db.conn.set_trace_callback(self._loop_trace)
        return await self.pg.run(fn, *args, **kwargs)

    def watch_loop_calls(self, report: Callable[[str], None], *, exempt: Callable[[], bool]) -> None:
        """Report where a statement runs on the event loop outside ``run`` (for the tests): on
        PostgreSQL it would block the loop, and is refused (OutsideUnitOfWork) unless ``exempt()``
        says the tests themselves are calling; on SQLite it is reported, so the tests find such
        calls on either backend."""
        from store.postgres.pool import on_the_loop  # for the tests only, which have psycopg anyway

        if self.pg is not None:
            self.pg.exempt = exempt
            return

        def trace(sql: str) -> None:
            if self._units or not on_the_loop() or exempt():
                return
            frame = sys._getframe(1)
            while frame is not None and ("site-packages" in frame.f_code.co_filename
                                         or f"{os.sep}store{os.sep}" in frame.f_code.co_filename
                                         or frame.f_code.co_filename.endswith("contextlib.py")):
                frame = frame.f_back  # type: ignore[assignment]
            report("?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")

        self._loop_trace = trace
        self.db.conn.set_trace_callback(trace)

    @contextmanager
    def transaction(self, *, row_locked: bool = False) -> Iterator[None]:
        """All writes inside commit together or not at all; nested blocks join the outer one.
        ``row_locked``: the transaction orders itself by locking a row first (store/shared.py),
        so PostgreSQL runs it READ COMMITTED rather than retrying it after a conflict."""
        if self.pg is not None:
            isolation = "READ COMMITTED" if row_locked else "SERIALIZABLE"
            with self.pg.transaction(self._ended, self._before_commit, isolation):
                yield
            return
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        kept = False
        try:
            try:
                yield
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            kept = True
        finally:
            self._depth = 0
            self._ended(kept)

    def _before_commit(self) -> None:
        if self.outbox.written:
            self.notify(OUTBOX_CHANNEL)

    def notify(self, channel: str, payload: str = "") -> None:
        """Tell the other processes on this database (PostgreSQL), when the transaction commits;
        nothing to tell on SQLite, where this process is the only one."""
        if self.pg is not None:
            self.sql.execute("SELECT pg_notify(?, ?)", [channel, payload])

    def on_notice(self, channel: str, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(payload)`` when any process notifies ``channel`` (with ``None`` after
        notices may have been missed); never on SQLite. It runs on the listener's thread: work
        for the event loop is handed to it (``IOLoop.add_callback``)."""
        if self.pg is not None:
            self.pg.listener.subscribe(channel, callback)

    def keep_domains(self) -> None:
        """Keep domain rows read by id on PostgreSQL too, dropping those another process changes
        (``DOMAINS_CHANNEL``): a GET of a kept domain then needs no unit of work. A Store that
        does not serve requests has no use for the listener's connection."""
        self.on_notice(DOMAINS_CHANNEL, self.domains.heard)

    def _ended(self, kept: bool) -> None:
        self.domains.ended(kept)
        self.outbox.committed(kept=kept)

    def optimize(self, *, opening: bool = False) -> None:
        """Fresh planner statistics on SQLite, which never gathers them by itself: without them a
        workspace's 1M domains look like 10 rows, and plans walk them all. ``PRAGMA optimize``, as
        SQLite's documentation recommends for a long-lived connection: when it opens
        (``opening``), and periodically. It analyses the tables whose statistics are missing or
        that grew 25-fold (10-fold from 3.46), among those this connection's queries used;
        ``opening`` looks at every table (the ``0x10000`` of 3.46: older versions ignore it, so
        the tables never analysed are analysed here). After big bulk writes: ``optimize_if_grown``.
        On PostgreSQL autovacuum analyses, and so do migrations and the copy."""
        if self.pg is not None:
            return
        if opening:
            self._analyse(self._never_analysed())
            self.db.execute("PRAGMA optimize = 0x10002")
        else:
            self.db.execute("PRAGMA optimize")
        self._saw_domains()

    def optimize_if_grown(self) -> None:
        """After a bulk write: the tables it grows analysed again once the domains inserted since the last look
        are as many as the database then held. ``PRAGMA optimize`` would wait for 25 times as many,
        and is not asked after every write: on SQLite 3.40 it analyses the domains each time (10
        ms at 1M), since a partial index without rows never has statistics.

        On PostgreSQL autovacuum analyses a table once a tenth of it changed, but only when it
        runs, and it may be off or behind (a deployment's settings, a busy server): a table grown
        through bulk creates is analysed here too, once this process has inserted as many domains
        as the statistics say the table holds (``reltuples``, whoever analysed last)."""
        if self.domains.inserted < GROWTH_FLOOR:
            return
        if self.pg is not None:
            held = self.sql.execute("SELECT reltuples FROM pg_class WHERE oid = 'domains'::regclass").fetchone()[0]
            if self.domains.inserted >= held:  # -1 when never analysed
                self._analyse(list(GROWING_TABLES_PG))
                self.domains.inserted = 0
            return
        if self.domains.inserted >= self._domains_seen:
            self._analyse(list(GROWING_TABLES))
            self._saw_domains()

    def _analyse(self, tables: list[str]) -> None:
        for table in tables:
            self.sql.execute(f'ANALYZE "{table}"')

    def _saw_domains(self) -> None:
        self._domains_seen = int(self.db.execute("SELECT coalesce(sum(n), 0) FROM domain_counts").fetchone()[0])
        self.domains.inserted = 0

    def _never_analysed(self) -> list[str]:
        tables = [row[0] for row in self.db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND sql NOT LIKE 'CREATE VIRTUAL%'")]
        if not self.db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat1'").fetchone():
            return tables
        analysed = {row[0] for row in self.db.execute("SELECT DISTINCT tbl FROM sqlite_stat1")}
        return [table for table in tables if table not in analysed]

    def checkpoint_elsewhere(self) -> Checkpointer | None:
        """A checkpointer for a background thread, commits no longer checkpointing below the
        ceiling (store/sqlite/checkpoints.py); none for an in-memory database, which has no WAL."""
        if self.pg is not None or self.path == ":memory:":
            return None
        if self._checkpointer is None:
            self._checkpointer = Checkpointer(self.path)
            self.db.execute(f"PRAGMA wal_autocheckpoint = {CEILING_PAGES}")
        return self._checkpointer

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self.pg is not None:
            self.pg.close()
        else:
            self.db.conn.close()
