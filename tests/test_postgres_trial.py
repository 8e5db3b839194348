"""The documented trial of "More than one machine" (docs/operating/postgresql.md) on one machine
works as written, without sudo: PostgreSQL run by the user in a folder of their own, the two-minute
walk's database copied into it, two service processes on it with the built-in development identity
provider, and a sign-in that works on both.

``TRIAL`` and ``BOTH`` are the page's first two shell blocks, run by bash in an empty folder.
PostgreSQL refuses to run as root and the tests may run as root: then step 1 (PostgreSQL's own
commands) runs as ``nobody``, as tests/servers/postgres.py runs its server, and the rest as the
test's user. Only the ports change (free ones), the PostgreSQL programs' folder (the installed
version's), and ``python app.py`` (this checkout's, with this interpreter).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.patience import PATIENCE_SECONDS
from tests.servers.postgres import UNPRIVILEGED, PostgresServer, _binaries
from tests.servers.service import call, free_port
from tests.test_readme import browserless_sign_in, shell_blocks, walk

ROOT = Path(__file__).resolve().parent.parent

DOCUMENTED = (ROOT / "docs" / "operating" / "postgresql.md").read_text().split("\n## Trying it on one machine\n", 1)[1]
TRIAL, BOTH, STOP = shell_blocks(DOCUMENTED)
"The page's three blocks: PostgreSQL and two processes on it; a sign-in used on both; PostgreSQL stopped."

[WALK_CONFIG] = [line for line in walk().splitlines() if line.endswith("> demo.toml")]

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or PostgresServer.available() is not None,
                                reason="needs curl and PostgreSQL")



class Shell:
    """Bash in the trial's folder, as the user PostgreSQL runs as (``as_postgres``) or as us."""

    def __init__(self, folder: Path, ports: dict[str, str]) -> None:
        self.folder = folder
        self.ports = ports
        self.postgres_user = pwd.getpwnam(UNPRIVILEGED) if os.geteuid() == 0 else None
        self.background: list[subprocess.Popen[bytes]] = []

    def script(self, text: str) -> str:
        text = text.replace("/usr/lib/postgresql/15/bin", str(_binaries()))
        text = text.replace("python app.py", f'"{sys.executable}" "{ROOT / "app.py"}"')
        for documented, port in self.ports.items():
            text = text.replace(documented, port)
        return "set -euo pipefail\n" + text

    def run(self, text: str, *, as_postgres: bool = False) -> str:
        """Run to its end; its output (failing the test, with it, on a non-zero exit)."""
        account = self.postgres_user if as_postgres else None
        env = {"PATH": os.environ["PATH"]} if account else {**os.environ}
        ran = subprocess.run(["bash", "-c", self.script(text)], check=False, cwd=self.folder, env=env, capture_output=True,
                             text=True, timeout=120, user=account.pw_uid if account else None,
                             group=account.pw_gid if account else None, extra_groups=[] if account else None)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        return ran.stdout

    def start(self, text: str) -> None:
        """Run in a session of its own, its background jobs with it (stopped by ``stop``)."""
        with open(self.folder / "processes.log", "ab") as log:
            self.background.append(subprocess.Popen(["bash", "-c", self.script(text) + "wait\n"], cwd=self.folder,
                                                    stdout=log, stderr=log, start_new_session=True))

    def stop(self) -> None:
        for shell in self.background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)
            shell.wait(30)


def listening(url: str, shell: Shell) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        try:
            urllib.request.urlopen(url + "/v1/openapi.json", timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError((shell.folder / "processes.log").read_text()) from None
            time.sleep(0.1)


def walk_database(folder: Path) -> None:
    """What the two-minute walk leaves in its folder: demo.toml, and data/ with one sign-up (me@example.com)."""
    subprocess.run(["bash", "-c", WALK_CONFIG], cwd=folder, check=True)
    port = free_port()
    (folder / "first-steps.toml").write_text((folder / "demo.toml").read_text() + f"[server]\nport = {port}\n")
    service = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--config", "first-steps.toml"], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        listening(base, Shell(folder, {}))
        status, body = call(base, "POST", "/v1/public/signup", {"email": "me@example.com", "domain": "shop.example.com"})
        assert status == 201, body
    finally:
        service.terminate()
        service.wait(30)


@pytest.fixture(scope="module")
def trial():
    """The trial run to the end of its first block, its two processes listening; stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="cps-trial-"))  # not under pytest's folder, which only root may enter
    ports = {"8080": str(free_port()), "8081": str(free_port()), "5433": str(free_port())}
    shell = Shell(folder, ports)
    if shell.postgres_user is not None:  # initdb must create pgdata here
        os.chown(folder, shell.postgres_user.pw_uid, shell.postgres_user.pw_gid)
    walk_database(folder)
    postgres, service = TRIAL.split("# 2. ", 1)
    shell.run(postgres, as_postgres=True)
    try:
        shell.start("# 2. " + service)
        for port in ("8080", "8081"):
            listening(f"http://127.0.0.1:{ports[port]}", shell)
        yield shell
    finally:
        shell.stop()
        shell.run(postgres.split("\ninitdb", 1)[0] + "\n" + STOP, as_postgres=True)
        shutil.rmtree(folder, ignore_errors=True)


def answers(out: str) -> list[object]:
    """The JSON documents curl printed one after the other (no newline between them)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(out.rstrip()):
        document, at = decoder.raw_decode(out, at)
        found.append(document)
        while at < len(out) and out[at].isspace():
            at += 1
    return found


def test_a_sign_in_at_the_built_in_provider_works_on_both_processes_on_one_postgresql(trial):
    session, created, listed = answers(trial.run("B=http://127.0.0.1:8080\n" + browserless_sign_in() + BOTH))
    assert session["userEmail"] == "me@example.com", session
    assert created["apex"] == "two.example.com", created
    assert {d["apex"] for d in listed["items"]} == {"shop.example.com", "two.example.com"}, listed


def test_the_rows_of_the_walk_were_copied(trial):
    log = (trial.folder / "processes.log").read_text()
    assert "  domains: 1" in log and "  workspaces: 1" in log, log
