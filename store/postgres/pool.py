"""PostgreSQL: the same repositories and SQL as on SQLite, on a pool of connections.

The repositories write SQLite's SQL (``?`` placeholders); ``PgDb`` translates each statement once
and keeps the translation. A unit of work (``Store.run``) runs whole in a worker thread on one
pooled connection, so the event loop never waits on the network for the database; the
connection is the thread's while it runs, and every repository call in it uses that connection.

Transactions are SERIALIZABLE: SQLite's ``BEGIN IMMEDIATE`` lets one writer at a time read and
write, and the rules were written for that; PostgreSQL gives the same answers by aborting one of
two transactions that would have seen each other's writes out of order. Such an abort undid
everything, so a unit of work that had committed nothing yet is simply run again, after a short
random pause.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Seconds a unit of work is run again for after serialization failures or deadlocks: as long
#: as SQLite waits for its write lock (``busy_timeout``), where the same requests would queue.
RETRY_SECONDS = 5.0
#: Seconds: the longest pause before the first retry, doubling for each further one up to the cap.
#: Each pause is drawn at random below its bound (full jitter). The cap bounds a unit that keeps
#: conflicting to about 20 attempts in ``RETRY_SECONDS``: at 0.1 s it made 100, and a storm of
#: them kept both cores busy re-running work bound to conflict again (issue 41).
RETRY_PAUSE = 0.002
RETRY_PAUSE_CAP = 0.5
#: Seconds a unit of work waits for a free connection before the database counts as unavailable.
POOL_WAIT = 5.0
#: A connection lent after this many idle seconds is checked first (a round trip): one lost in a
#: restart is replaced, not used; one used a moment ago is not worth the round trip.
CHECK_IDLE = 2.0
#: libpq settings of every connection: a database that stops answering without closing the
#: connection (a fail-over, a partition) is noticed within seconds, not the kernel's 15 minutes.
NETWORK = {"connect_timeout": int(POOL_WAIT), "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2,
           "keepalives_count": 3, "tcp_user_timeout": 10_000}
#: A connection of the pool's.
POOLED = {"autocommit": True, **NETWORK}


#: Seconds since the listener's connection last answered after which its notices may be lost
#: (store/row_cache.py stops serving rows); it answers every half second when all is well.
HEARD_SECONDS = 2.0


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
        # One connection first: an unreachable database is refused with PostgreSQL's reason, where
        # the pool would only say that it gave up waiting. It is then the listener's first: each
        # new connection starts a server process (9 ms of the server's CPU). The pool opens with
        # one more and grows as units of work wait: an idle process holds two connections.
        first = psycopg.connect(url, **POOLED)  # type: ignore[arg-type]
        self._returned: dict[int, float] = {}  # when each connection last went back to the pool
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs=POOLED,
            check=self._check,
            timeout=POOL_WAIT,
            open=False,
            name="cps",
        )
        try:
            self.pool.open(wait=True, timeout=POOL_WAIT)
        except BaseException:
            first.close()
            raise
        self._threads = concurrent.futures.ThreadPoolExecutor(max_size, thread_name_prefix="cps-db")
        self.listener = Listener(url, first)
        self.exempt: Callable[[], bool] = lambda: False
        "Calls allowed on the loop's thread anyway: the tests' own (Store.watch_loop_calls)."

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> psycopg.Cursor[Any]:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = translate(sql)
        conn = self._local.conn
        if conn is None:
            with self.connection() as conn:
                return conn.execute(text, parameters)  # autocommit: ends here
        return conn.execute(text, parameters)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's connection, checked out for this block when it has none. On the event
        loop's thread that would block the loop: refused."""
        if self._local.conn is not None:
            yield self._local.conn
            return
        if on_the_loop() and not self.exempt():
            raise OutsideUnitOfWork("a store call on the event loop's thread outside Store.run()")
        with self.pool.connection() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None
                self._returned[id(conn)] = time.monotonic()

    def _notify_now(self, channel: str) -> None:
        with self.pool.connection(timeout=0.5) as conn:
            conn.execute("SELECT pg_notify(%s, '')", [channel])

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._returned.get(id(conn), 0.0) > CHECK_IDLE:
            ConnectionPool.check_connection(conn)

    @contextmanager
    def transaction(self, ended: Callable[[bool], None], before_commit: Callable[[], None],
                    isolation: str = "SERIALIZABLE") -> Iterator[None]:
        """One SERIALIZABLE transaction; nested blocks join the outer one. ``ended(kept)`` is
        called when it ends, as the SQLite store does. ``READ COMMITTED`` is for the few
        transactions that order themselves with a row lock (store/shared.py)."""
        local = self._local
        if local.depth:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self.connection() as conn:
            conn.execute(f"BEGIN ISOLATION LEVEL {isolation}")
            local.depth = 1
            kept = False
            try:
                try:
                    yield
                    before_commit()
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

    def in_transaction(self) -> bool:
        return self._local.depth > 0

    def run_here(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a unit of work on this thread with a connection of its own, again after a
        serialization failure if nothing of it had been committed."""
        local = self._local
        give_up = time.monotonic() + RETRY_SECONDS
        with self.connection():
            attempt = 0
            while True:
                local.commits = 0
                try:
                    return fn(*args, **kwargs)
                except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                    if local.commits or time.monotonic() >= give_up:
                        raise
                # Apart, at random: run again at once, the same transactions collide again (every
                # write to a workspace's domains updates its counts row; four clients creating
                # domains in one workspace used up eight immediate retries).
                time.sleep(random.uniform(0, min(RETRY_PAUSE_CAP, RETRY_PAUSE * 2**attempt)))
                attempt += 1

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``run_here`` in a worker thread, in a copy of the caller's context: log lines of the
        unit name the request, and a context variable the unit sets stays with the unit."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._threads, lambda: context.run(self.run_here, fn, *args, **kwargs))

    def close(self) -> None:
        self.listener.close(wake=self._notify_now)
        self._threads.shutdown(wait=True)
        self.pool.close()


class Listener:
    """LISTEN on its own connection in a daemon thread: what other processes tell this one
    (``NOTIFY``). Callbacks run on the listener's thread. After a lost connection it connects
    again and calls every callback with ``None``: notices sent meanwhile are lost, so each
    subscriber assumes the worst (forget every cached key, look for new events). A channel
    subscribed once the thread is connected is listened to within half a second, its callbacks
    then called with ``None`` likewise. ``hears`` says whether a channel's notices arrive now."""

    def __init__(self, url: str, first: psycopg.Connection[Any] | None = None) -> None:
        """``first``: an autocommit connection for the thread to use before it makes its own."""
        self.url = url
        self._first = first
        self.callbacks: dict[str, list[Callable[[str | None], None]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listening: frozenset[str] = frozenset()
        self._answered_at = 0.0
        self._wake = f"cps_wake_{secrets.token_hex(8)}"
        "A channel of this listener's own: ``close`` notifies it, so the thread stops at once."

    def subscribe(self, channel: str, callback: Callable[[str | None], None]) -> None:
        self.callbacks.setdefault(channel, []).append(callback)
        if self._thread is None:
            self._thread = threading.Thread(target=self._listen, name="cps-listen", daemon=True)
            self._thread.start()

    def hears(self, channel: str) -> bool:
        """Whether notices on ``channel`` reach this process now: it listens, and its connection
        answered within ``HEARD_SECONDS`` (one that stopped answering may have lost some)."""
        return channel in self._listening and time.monotonic() - self._answered_at < HEARD_SECONDS

    def _listen(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                given, self._first = self._first, None
                with given or psycopg.connect(self.url, **POOLED) as conn:  # type: ignore[arg-type]
                    conn.execute("SET application_name = 'cps-listener'")
                    conn.execute(f'LISTEN "{self._wake}"')
                    listening: set[str] = set()
                    # When the last ``SELECT 1`` went: every notice committed before it came with its answer.
                    sent: float | None = None
                    while not self._stop.is_set():
                        # Every channel on a new connection; then those subscribed since the last
                        # look, which the thread, started by the first subscription, may have
                        # connected before. Notices sent before a LISTEN were missed.
                        new = [channel for channel in list(self.callbacks) if channel not in listening]
                        for channel in new:
                            conn.execute(f'LISTEN "{channel}"')
                            listening.add(channel)
                        if new and not first:
                            self._tell(new, None)
                        first = False
                        self._listening = frozenset(listening)
                        if sent is None:
                            self._answered_at = time.monotonic()  # listening from now: nothing missed
                        for notice in conn.notifies(timeout=0.5):
                            if notice.channel == self._wake:
                                break
                            self._tell([notice.channel], notice.payload)
                        if sent is not None:
                            self._answered_at = sent  # what was sent before it has been told now
                        if not self._stop.is_set():
                            sent = time.monotonic()
                            conn.execute("SELECT 1")  # a dead connection raises here, and is made again
            except psycopg.Error:
                self._listening = frozenset()
                first = False
                self._stop.wait(0.5)
        self._listening = frozenset()

    def _tell(self, channels: list[str], payload: str | None) -> None:
        for channel in channels:
            for callback in list(self.callbacks.get(channel, ())):
                try:
                    callback(payload)
                except Exception:  # one subscriber's bug must not stop the notices of the others
                    log.exception("a notice on %s was not handled", channel)

    def close(self, wake: Callable[[str], None] | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            if wake is not None and self._listening:
                try:
                    wake(self._wake)
                except psycopg.Error:
                    pass  # the database is away or busy: the thread sees the stop within half a second
            self._thread.join(timeout=5)
        if self._first is not None:  # never used: nothing was subscribed, or the thread stopped first
            self._first.close()


def on_the_loop() -> bool:
    """Whether this thread is running an event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def unavailable_reason(exc: BaseException | None) -> str | None:
    """Why PostgreSQL cannot be used right now: unreachable, restarting, out of connections."""
    # Before OperationalError, of which these two are kinds.
    if isinstance(exc, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)):
        return "the database is busy"
    if isinstance(exc, (PoolTimeout, psycopg.OperationalError)):
        return "the database is unreachable"
    return None
