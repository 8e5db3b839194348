"""A real PostgreSQL server on loopback: Debian's binaries (``apt-get install postgresql``) running a
throwaway cluster in a temporary folder, on a free port.

One cluster serves a whole test session (tests/postgres_fixtures.py); each test gets a database of
its own, which costs milliseconds where a cluster costs a second. Nothing is flushed to disk
(``fsync=off``, ``full_page_writes=off``): that only matters if the machine itself crashes. A crash
of PostgreSQL (``kill``) keeps every committed transaction, as it does in production, because
commits stay synchronous: with fsync off a commit only hands its WAL to the kernel, which survives
the server, whereas ``synchronous_commit=off`` would leave the last commits in the server's own
memory and lose them with it.

PostgreSQL refuses to run as root, and CI runs as root: then initdb and postgres run as ``nobody``,
which owns the cluster's folder. That folder sits in a root-owned one anyone may traverse, which
holds the server's log too, so root reads the log and removes everything afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
START_SECONDS = PATIENCE_SECONDS
STOP_SECONDS = PATIENCE_SECONDS
UNPRIVILEGED = "nobody"
"Who runs the server when the tests run as root."


def _binaries() -> Path | None:
    """The folder of the newest installed PostgreSQL's initdb and postgres (Debian's layout first)."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: [int(n) for n in re.findall(r"\d+", Path(p).parts[4])])
        return Path(newest).parent
    initdb = shutil.which("initdb")
    if initdb and (Path(initdb).parent / "postgres").exists():
        return Path(initdb).parent
    return None


class PostgresServer:
    def __init__(self) -> None:
        self.bin = _binaries()
        self.folder: Path | None = None
        self.data: Path | None = None
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @staticmethod
    def available() -> str | None:
        """None when a server can be started here, else why not (for ``pytest.skip``)."""
        if _binaries() is None:
            return "PostgreSQL is not installed: apt-get install postgresql"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(UNPRIVILEGED)
            except KeyError:
                return f"PostgreSQL will not run as root, and there is no user {UNPRIVILEGED!r} to run it as"
        return None

    def start(self) -> PostgresServer:
        reason = self.available()
        if reason:
            raise RuntimeError(reason)
        self.folder = Path(tempfile.mkdtemp(prefix="cps-postgres-"))
        self.folder.chmod(0o755)  # traversable by the server's user when that is not us
        self.data = self.folder / "data"
        self.data.mkdir(mode=0o700)
        self._log = self.folder / "postgres.log"
        if os.geteuid() == 0:
            account = pwd.getpwnam(UNPRIVILEGED)
            os.chown(self.data, account.pw_uid, account.pw_gid)
        self._run_initdb()
        try:
            return self.listen()
        except RuntimeError:
            self.stop()
            raise

    def listen(self) -> PostgresServer:
        """Start the server on the data folder, on a free port."""
        for attempt in range(3):  # the free port may be taken before postgres binds it
            self.port = free_port()
            try:
                self._launch()
                return self
            except RuntimeError:
                if attempt == 2 or "could not bind" not in self.log_text():
                    raise
        return self

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        """Run a program as the server's user, in a process group of its own (``kill`` reaches the
        backends too), its output appended to the log."""
        assert self.folder is not None and self._log is not None
        account = pwd.getpwnam(UNPRIVILEGED) if os.geteuid() == 0 else None
        with self._log.open("ab") as log:  # the child keeps its own copy
            return subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"},
                user=account.pw_uid if account else None, group=account.pw_gid if account else None,
                extra_groups=[] if account else None,
            )

    def _run_initdb(self) -> None:
        assert self.bin is not None and self.data is not None
        initdb = self._spawn([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                              "--encoding=UTF8", "--no-locale", "--no-sync"])
        if initdb.wait(START_SECONDS) != 0:
            text = self.log_text()
            self.stop()
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{text}")

    def _launch(self) -> None:
        """Start postgres on ``self.port`` and wait until it answers a query."""
        assert self.bin is not None and self.data is not None
        command = [str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.data), "-p", str(self.port)]
        for name, value in SETTINGS.items():
            command += ["-c", f"{name}={value}"]
        self.process = self._spawn(command)
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2, autocommit=True) as connection:
                    connection.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                exited = self.process.poll()
                if exited is not None or time.monotonic() > deadline:
                    if exited is None:
                        self._signal(signal.SIGKILL)
                        self.process.wait(STOP_SECONDS)
                    why = f"exited with {exited}" if exited is not None else f"is not up after {START_SECONDS} s"
                    raise RuntimeError(f"postgres {why}:\n{self.log_text()}") from None
                time.sleep(0.02)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (named uniquely unless ``name`` is given); returns its URL."""
        name = name or f"test_{uuid.uuid4().hex[:12]}"
        self._admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop it even while clients (a pool left open) are still connected to it."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(statement)

    def restart(self) -> None:
        """Stop the server (unless ``kill`` already did) and start it again: same port, same data."""
        if self.process is not None and self.process.poll() is None:
            self._shut_down()
        self._launch()

    def kill(self) -> None:
        """SIGKILL the server and its backends at once, as a crash of PostgreSQL (or the OOM killer) would.

        Committed data survives (``restart`` recovers it from the WAL); open connections break.
        """
        if self.process is not None and self.process.poll() is None:
            self._signal(signal.SIGKILL)
            self.process.wait(STOP_SECONDS)

    def stop(self) -> None:
        """Fast shutdown (clients are disconnected, nothing is waited for), then remove the folder."""
        if self.process is not None and self.process.poll() is None:
            self._shut_down()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _shut_down(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)  # PostgreSQL's "fast" shutdown
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(STOP_SECONDS)

    def _signal(self, signum: int) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def log_text(self) -> str:
        """What initdb and postgres have written so far."""
        if self._log is None or not self._log.exists():
            return ""
        return self._log.read_text(errors="replace")
