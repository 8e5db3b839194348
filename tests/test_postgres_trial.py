"""The documented trial of "More than one machine" on one machine works as written, without sudo:
PostgreSQL run by the user in a folder of their own, the First steps database copied into it, two
service processes on it with the built-in development identity provider, and a sign-in that works
on both.

``TRIAL`` and ``BOTH`` are the documentation's two shell blocks, run by bash in an empty folder.
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
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.servers.postgres import UNPRIVILEGED, PostgresServer, _binaries
from tests.servers.service import call, free_port
from tests.test_readme import first_steps

ROOT = Path(__file__).resolve().parent.parent

TRIAL = r"""# 1. PostgreSQL, run by you (no sudo) in ./pgdata: its superuser is the role cps, and it trusts
#    every connection from this machine, so keep it for trials; its text is UTF-8 whatever your
#    locale. Debian and Ubuntu keep its programs off PATH, in /usr/lib/postgresql/<version>/bin
#    (15 on Debian 12).
export PATH=/usr/lib/postgresql/15/bin:$PATH
initdb -D pgdata --auth=trust -U cps --encoding=UTF8 --no-locale
#    On port 5433 (a system PostgreSQL may hold 5432), its socket in /tmp (the system's socket
#    folder, /var/run/postgresql, is not yours to write).
pg_ctl -D pgdata -l pgdata/server.log -o "-p 5433 -k /tmp" start
createdb -h 127.0.0.1 -p 5433 -U cps cps
# 2. The SQLite database of First steps, copied into it (stop that service first: Ctrl-C).
python app.py copy-to-postgres postgresql://cps@127.0.0.1:5433/cps --config demo.toml
# 3. Two processes on it, started from this folder (so both read data/secret.key): A on 8080, B
#    on 8081. B names A's address as its public one, as both would name a load balancer's: the
#    development identity provider (allowed, every address being loopback) signs in there, and
#    its sessions work on both.
printf '[storage]\nurl = "postgresql://cps@127.0.0.1:5433/cps"\n[provider.sandbox]\nsimulate_dns = true\n' > both.toml
printf '[server]\nport = 8080\n' | cat both.toml - > a.toml
printf '[server]\nport = 8081\nbase_url = "http://127.0.0.1:8080"\n' | cat both.toml - > b.toml
python app.py --config a.toml &
python app.py --config b.toml &
"""

BOTH = r"""# 4. Sign in at A: the browserless block of First steps (B=http://127.0.0.1:8080), or
#    http://127.0.0.1:8081/login in a browser. The session works on both processes, and what
#    one writes, the other reads.
curl -s http://127.0.0.1:8081/v1/auth/session -H "Authorization: Bearer $TOKEN"
curl -s -X POST http://127.0.0.1:8081/v1/domains -H "Authorization: Bearer $TOKEN" \
     -H 'Content-Type: application/json' -d '{"apex": "two.example.com"}'
curl -s -X POST http://127.0.0.1:8080/v1/domains/query -H "Authorization: Bearer $TOKEN" -d '{}'
"""

STOP = "pg_ctl -D pgdata stop"
"The documentation's last line, in the first terminal: PostgreSQL stopped once the processes are."

FIRST_STEPS_CONFIG = r"printf '[provider.sandbox]\nsimulate_dns = true\n' > demo.toml"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or PostgresServer.available() is not None,
                                reason="needs curl and PostgreSQL")


def browserless_sign_in() -> str:
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", first_steps(), flags=re.DOTALL) if "oidc/exchange" in b]
    return block


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
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/v1/openapi.json", timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError((shell.folder / "processes.log").read_text()) from None
            time.sleep(0.1)


def first_steps_database(folder: Path) -> None:
    """What First steps leaves in its folder: demo.toml, and data/ with one sign-up (me@example.com)."""
    subprocess.run(["bash", "-c", FIRST_STEPS_CONFIG], cwd=folder, check=True)
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
    first_steps_database(folder)
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


def test_the_rows_of_first_steps_were_copied(trial):
    log = (trial.folder / "processes.log").read_text()
    assert "  domains: 1" in log and "  workspaces: 1" in log, log
