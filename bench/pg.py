"""PostgreSQL for the benchmarks: one cluster kept between runs, seeded databases in it, and a
fresh copy of one for each measurement. Not part of the test run.

The cluster is tests/servers/postgres.py's server with a data folder that outlives the run (under
``/var/tmp`` when running as root: the server then runs as ``nobody``, who cannot enter root's
home), started on a free port and stopped at the end. Its settings are the test server's
(``fsync=off``, ``full_page_writes=off``: nothing waits for the disk) plus ``SETTINGS`` here.
Everything else is PostgreSQL's default.

A seeded database is grown once as the API grows one (``grow_domains``: the bulk path's insert,
500 domains a transaction, triggers on), and never vacuumed or analysed by hand: its statistics
are what autovacuum and the service left (issue 49). It is kept as a template: each measurement
runs on a copy, as the SQLite benchmarks run on a copy of their cached file, so bulk creates never
accumulate. ``copy_domains`` writes the same rows with ``COPY`` instead (minutes, not a quarter
of an hour, at 1M), then vacuums and analyses, as ``copy-to-postgres`` leaves a database.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import psycopg
from psycopg import sql

from store import Store
from store.domain_rows import to_columns
from store.domains import _TAG_COLUMNS
from store.records import DomainRow
from tests.servers import postgres as test_server
from tests.servers.postgres import PostgresServer

#: Where the benchmarks keep what they seed (bench/scale.py).
CACHE = Path.home() / ".cache" / "cps-bench"
#: Added to the test server's settings, in the cluster's postgresql.conf (defaults otherwise).
SETTINGS = {"shared_buffers": "256MB"}
BATCH = 50_000
#: Domains per transaction when a database is grown as bulk creates grow it (the API's largest bulk).
GROW_BATCH = 500
#: A service on PostgreSQL needs a real identity provider; API keys never ask it anything.
OIDC = {"issuer": "https://idp.bench.invalid", "client_id": "bench"}


def describe() -> str:
    """The settings the numbers were taken with, for the table's footnote."""
    shown = {**test_server.SETTINGS, **SETTINGS}
    shown.pop("listen_addresses", None)
    return ", ".join(f"{name}={value}" for name, value in shown.items())


def cluster_folder() -> Path:
    """Under ``CACHE``, unless the server runs as ``nobody``, who cannot enter root's home."""
    if os.geteuid() == 0:
        return Path("/var/tmp/cps-bench-postgres")
    return CACHE / "postgres"


def server_cpu(server: PostgresServer) -> float:
    """CPU seconds the server's processes have used: the postmaster's own and its ended
    children's, and each running child's (each backend is a child of the postmaster)."""
    assert server.process is not None
    postmaster, total = server.process.pid, 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # fields[0] is field 3, the state
        except OSError:
            continue  # ended meanwhile
        pid = int(stat.parent.name)
        if pid != postmaster and int(fields[1]) != postmaster:  # field 4: the parent
            continue
        ticks = sum(int(f) for f in fields[11:13])  # utime, stime
        if pid == postmaster:
            ticks += sum(int(f) for f in fields[13:15])  # cutime, cstime: backends that ended
        total += ticks / os.sysconf("SC_CLK_TCK")
    return total


class BenchPostgres(PostgresServer):
    """The test server on a data folder kept between runs; ``stop`` shuts it down and keeps it."""

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = home

    def start(self) -> BenchPostgres:
        reason = self.available()
        if reason:
            raise RuntimeError(reason)
        self.folder, self.data, self._log = self.home, self.home / "data", self.home / "postgres.log"
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o755)  # traversable by the server's user when that is not us
        self._stop_leftover()
        if not (self.data / "PG_VERSION").exists():
            shutil.rmtree(self.data, ignore_errors=True)
            self.data.mkdir(mode=0o700)
            if os.geteuid() == 0:
                account = pwd.getpwnam(test_server.UNPRIVILEGED)
                os.chown(self.data, account.pw_uid, account.pw_gid)
            self._run_initdb()
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.writelines(f"{name} = '{value}'\n" for name, value in SETTINGS.items())
        self._log.write_text("")
        self.listen()
        return self

    def _stop_leftover(self) -> None:
        """A server an interrupted run left behind holds the folder: shut it down first."""
        pid_file = self.home / "data" / "postmaster.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().split()[0])
        try:
            os.kill(pid, signal.SIGINT)  # its "fast" shutdown
        except ProcessLookupError:
            return  # a stale file: postgres removes it itself
        for _ in range(300):
            if not pid_file.exists():
                return
            time.sleep(0.1)
        raise RuntimeError(f"the PostgreSQL server left in {self.data} (pid {pid}) does not stop")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self._shut_down()

    def exists(self, name: str) -> bool:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None

    def copy_of(self, template: str, name: str) -> str:
        """A new database ``name`` with ``template``'s contents (a file copy); returns its URL."""
        self.drop_database(name)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template)))
        return self.url(name)

    def drop_stale(self, current: str) -> None:
        """Databases seeded for another schema version (``scale_v...`` not starting with
        ``current``), and the copies an interrupted run left (``work_...``)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            names = [row[0] for row in conn.execute(
                r"SELECT datname FROM pg_database WHERE (datname LIKE 'scale\_v%%' AND datname NOT LIKE %s)"
                r" OR datname LIKE 'work\_%%'", [current.replace("_", "\\_") + "%"])]
        for name in names:
            self.drop_database(name)


def grow_domains(store: Store, domains: Iterable[DomainRow], batch: int = GROW_BATCH) -> None:
    """Write ``domains`` as a bulk create of ``batch`` writes them (``core.domains.operations``'s
    ``_save_bulk``): ``store.domains.insert_new`` in one transaction per batch, the count triggers
    on, then ``store.optimize_if_grown()``. Nothing is vacuumed or analysed here: the statistics
    the planner then has are those the service and autovacuum keep, as on a database grown by use."""
    rows = iter(domains)
    while True:
        chunk = list(itertools.islice(rows, batch))
        if not chunk:
            break
        with store.pg.connection() if store.pg is not None else contextlib.nullcontext():
            with store.transaction():
                store.domains.insert_new(chunk)
            store.optimize_if_grown()


def copy_domains(store: Store, domains: Iterable[DomainRow]) -> None:
    """Write ``domains`` as ``store.domains.insert`` would (rows, tags, search text), with COPY in
    transactions of ``BATCH`` domains, then their counters as the count triggers would have kept
    them. The triggers are off meanwhile (``session_replication_role``): one counter row updated
    once per domain in a transaction keeps every version of it, each read walks them all, and 1M
    domains would take most of an hour."""
    assert store.pg is not None
    batch: list[DomainRow] = []
    for domain in domains:
        batch.append(domain)
        if len(batch) == BATCH:
            _copy(store, batch)
            batch = []
    if batch:
        _copy(store, batch)
    with store.pg.connection(), store.transaction():
        for counts, source, key in (("domain_counts", "domains", "workspace_id"),
                                    ("tag_counts", "domain_tags", "workspace_id, tag")):
            store.sql.execute(f"DELETE FROM {counts}")  # the first domain's, which bulk create counted
            store.sql.execute(f"INSERT INTO {counts} SELECT {key}, ops_status, validation_status, cert_status,"
                              f" count(*) FROM {source} GROUP BY {key}, ops_status, validation_status, cert_status")
        store.sql.execute("DELETE FROM text_counts")
        store.sql.execute("INSERT INTO text_counts SELECT workspace_id, md5(search_text), 0, search_text, count(*)"
                          " FROM domains GROUP BY workspace_id, search_text")
    store.sql.execute("VACUUM ANALYZE")  # as autovacuum would leave it; SQLite's seed runs ANALYZE
    store.sql.execute("CHECKPOINT")


def _copy(store: Store, batch: list[DomainRow]) -> None:
    assert store.pg is not None
    rows = [to_columns(d) for d in batch]
    with store.pg.connection() as conn, store.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")  # no triggers: counted after
        with conn.cursor().copy(f"COPY domains ({', '.join(rows[0])}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(list(row.values()))
        with conn.cursor().copy(f"COPY domain_tags ({', '.join(_TAG_COLUMNS)}) FROM STDIN") as copy:
            for d, row in zip(batch, rows):
                for tag in d.tags:
                    copy.write_row([row["id"], row["workspace_id"], tag, d.ops_status, d.validation_status, d.cert_status])


def text_index_mb(url: str) -> float:
    """The size of the trigram indexes that answer ``q`` (schema_pg.py, migration 11)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_relation_size('domains_apex_text') + pg_relation_size('domains_search_text')"
                           ).fetchone()
    assert row is not None
    return float(row[0]) / 1e6
