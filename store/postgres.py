"""PostgreSQL: the same repositories and SQL as on SQLite, on a pool of connections.

The repositories write SQLite's SQL (``?`` placeholders); ``PgDb`` translates each statement once
and keeps the translation. A unit of work (``Store.run``) runs whole in a worker thread on one
pooled connection, so the event loop never waits on the network for the database; the
connection is the thread's while it runs, and every repository call in it uses that connection.

Transactions are SERIALIZABLE: SQLite's ``BEGIN IMMEDIATE`` lets one writer at a time read and
write, and the rules were written for that; PostgreSQL gives the same answers by aborting one of
two transactions that would have seen each other's writes out of order. Such an abort undid
everything, so a unit of work that had committed nothing yet is simply run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

T = TypeVar("T")

#: Times a unit of work is run again after a serialization failure or a deadlock.
RETRIES = 8
#: Seconds a unit of work waits for a free connection before the database counts as unavailable.
POOL_WAIT = 5.0


class OutsideUnitOfWork(RuntimeError):
    """A store call on the event loop's thread outside ``Store.run`` would block the loop on the
    network: a bug, caught by the tests that run on PostgreSQL."""


def translate(sql: str) -> str:
    """SQLite's ``?`` placeholders as psycopg's ``%s``; a literal ``%`` doubled. Question marks
    inside quoted strings are text, not placeholders."""
    out = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        if ch == "%":
            out.append("%%")
            continue
        out.append(ch)
    return "".join(out)


class _Local(threading.local):
    conn: psycopg.Connection[Any] | None = None
    depth: int = 0
    commits: int = 0


class PgDb:
    """What the repositories call ``db``: ``execute`` on the current thread's connection."""

    dialect = "postgresql"

    def __init__(self, url: str, *, max_size: int = 16) -> None:
        self.url = url
        self._local = _Local()
        self._sql: dict[str, str] = {}
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=2,
            max_size=max_size,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,  # a connection lost in a restart is replaced, not used
            timeout=POOL_WAIT,
            open=False,
            name="cps",
        )
        self.pool.open(wait=True, timeout=POOL_WAIT)
        self._threads = concurrent.futures.ThreadPoolExecutor(max_size, thread_name_prefix="cps-db")

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> psycopg.Cursor[Any]:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = translate(sql)
        conn = self._local.conn
        if conn is None:
            with self.connection() as conn:
                return conn.execute(text, parameters)  # type: ignore[arg-type]  # autocommit: ends here
        return conn.execute(text, parameters)  # type: ignore[arg-type]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        text = self._sql.get(sql) or translate(sql)
        conn = self._local.conn
        assert conn is not None, "executemany runs in a transaction"
        with conn.cursor() as cursor:
            cursor.executemany(text, rows)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's connection, checked out for this block when it has none. On the event
        loop's thread that would block the loop: refused."""
        if self._local.conn is not None:
            yield self._local.conn
            return
        if _on_the_loop():
            raise OutsideUnitOfWork("a store call on the event loop's thread outside Store.run()")
        with self.pool.connection() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def transaction(self, ended: Callable[[bool], None]) -> Iterator[None]:
        """One SERIALIZABLE transaction; nested blocks join the outer one. ``ended(kept)`` is
        called when it ends, as the SQLite store does."""
        local = self._local
        if local.depth:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self.connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            local.depth = 1
            kept = False
            try:
                try:
                    yield
                except BaseException:
                    if not conn.closed:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                kept = True
                local.commits += 1
            finally:
                local.depth = 0
                ended(kept)

    def run_here(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a unit of work on this thread with a connection of its own, again after a
        serialization failure if nothing of it had been committed."""
        local = self._local
        with self.connection():
            for attempt in range(RETRIES + 1):
                local.commits = 0
                try:
                    return fn(*args, **kwargs)
                except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                    if local.commits or attempt == RETRIES:
                        raise
            raise AssertionError("unreachable")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, lambda: self.run_here(fn, *args, **kwargs))

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self.pool.close()


def _on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def unavailable_reason(exc: BaseException | None) -> str | None:
    """Why PostgreSQL cannot be used right now: unreachable, restarting, out of connections."""
    if isinstance(exc, PoolTimeout):
        return "the database is unreachable"
    if isinstance(exc, psycopg.OperationalError):
        return "the database is unreachable"
    if isinstance(exc, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)):
        return "the database is busy"
    return None
