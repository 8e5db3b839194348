"""SQLite storage: the only code in the service that knows SQL.

One connection, used from the event loop's thread. WAL journal with ``synchronous=NORMAL``: a
crash of the process never loses a committed transaction and never leaves a half-written one;
only a power cut may roll back the last commits, and the database stays consistent.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlite_utils

from store.accounts import AccountRepo
from store.api_keys import ApiKeyRepo
from store.certificates import CertificateRepo
from store.checkpoints import CEILING_PAGES, Checkpointer
from store.clients import ClientRepo
from store.domains import DomainRepo, register_functions
from store.idempotency import IdempotencyRepo
from store.lifecycle import LifecycleRepo
from store.metrics import MetricsRepo
from store.migrations import SchemaTooNew, apply_migrations
from store.one_click import OneClickRepo
from store.outbox import OutboxRepo
from store.team import TeamRepo
from store.verification_links import VerificationLinkRepo
from store.webhooks import WebhookRepo


def _create_private(path: Path) -> None:
    """The database holds e-mails, notes and ownership tokens: its folder, when created here, is
    0700 and the file 0600. SQLite gives its -wal and -shm files the database file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)


def unavailable_reason(exc: BaseException | None) -> str | None:
    """Why the database cannot be used right now, for the errors that are the machine's, not a bug."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
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
    def __init__(self, path: str | Path) -> None:
        if str(path) != ":memory:":
            _create_private(Path(path))
        # isolation_level=None: transactions are begun and ended here, explicitly, not by
        # sqlite3's implicit rules.
        self.path = str(path)
        self._checkpointer: Checkpointer | None = None
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        # A larger page cache than the 2 MiB default keeps the hot indexes of a 100k-domain
        # workspace in memory.
        conn.execute("PRAGMA cache_size = -65536")
        register_functions(conn)
        self.db = sqlite_utils.Database(conn)
        self._depth = 0
        self.accounts = AccountRepo(self.db)
        self.api_keys = ApiKeyRepo(self.db)
        self.certificates = CertificateRepo(self.db)
        self.clients = ClientRepo(self.db)
        self.domains = DomainRepo(self.db)
        self.idempotency = IdempotencyRepo(self.db)
        self.lifecycle = LifecycleRepo(self.db, self.domains)
        self.one_click = OneClickRepo(self.db)
        self.outbox = OutboxRepo(self.db)
        self.team = TeamRepo(self.db)
        self.verification_links = VerificationLinkRepo(self.db)
        self.webhooks = WebhookRepo(self.db)
        self.metrics = MetricsRepo(self.db)
        try:
            apply_migrations(self)
        except SchemaTooNew:
            conn.close()
            raise

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all; nested blocks join the outer one."""
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
                self.domains.forget_all()  # it may hold rows of the transaction just undone
                raise
            self.db.execute("COMMIT")
            kept = True
        finally:
            self._depth = 0
            self.outbox.committed(kept=kept)

    def checkpoint_elsewhere(self) -> Checkpointer | None:
        """A checkpointer for a background thread, commits no longer checkpointing below the
        ceiling (store/checkpoints.py); none for an in-memory database, which has no WAL."""
        if self.path == ":memory:":
            return None
        if self._checkpointer is None:
            self._checkpointer = Checkpointer(self.path)
            self.db.execute(f"PRAGMA wal_autocheckpoint = {CEILING_PAGES}")
        return self._checkpointer

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self.db.conn.close()
