"""The service itself as a separate process, started the way an operator starts it
(``python app.py --config FILE``), for tests that kill it, restart it, or drive it from a browser.

Its configuration is written here: a free port, storage in the test's folder, the test DNS server
as its resolver, and whatever tables the test adds.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from core.identity.dev_idp import DEFAULT_CLIENT_ID
from tests.patience import PATIENCE_SECONDS
from tests.servers.pkce import authorize_params, code_from

ROOT = Path(__file__).resolve().parent.parent.parent


def run_app(config: Path | str, *args: str,
            timeout: float = PATIENCE_SECONDS) -> subprocess.CompletedProcess[str]:
    """``python app.py ARGS --config CONFIG`` (an operator command), its output captured."""
    return subprocess.run([sys.executable, str(ROOT / "app.py"), *args, "--config", str(config)],
                          check=False, capture_output=True, text=True, timeout=timeout)


def run_app_here(config: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    """``run_app`` in this process: ``app.main`` with the same arguments, its output and exit code
    captured as ``run_app`` captures them, the logging it configured undone. For the many variants
    of one command (the 48 malformed URLs of tests/test_postgres_commands.py): a new interpreter
    costs each about 0.9 core-seconds, mostly imports, where ``run_app`` still runs each command
    once as the operator does."""
    import app  # here: the tests that import this module need not load the whole service

    argv = [*args, "--config", str(config)]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = app.main(argv)
            except SystemExit as exit_:  # argparse's refusals
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
    return subprocess.CompletedProcess(["app.py", *argv], code, out.getvalue(), err.getvalue())


def free_port() -> int:
    """A port of 127.0.0.1 free for TCP and for UDP. The OS picks a free TCP port, but the DNS servers
    the tests start (NSD, Unbound, Knot, the delegation zone's) take it for UDP as well, where
    another program's socket may hold it (seen in a run: a DNS lab's Unbound port answered by another server)."""
    for _ in range(20):
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no port of 127.0.0.1 was free for both TCP and UDP in 20 tries")


class ServiceProcess:
    def __init__(self, folder: Path, *, dns_address: str, extra: str = "", storage_url: str = "",
                 dns_timeout: float = 0.5) -> None:
        """``dns_timeout``: the service's ``[dns] timeout_seconds``; a test whose lookups must all be
        answered gives a bound a busy machine does not miss."""
        self.folder = folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.database = folder / "service.sqlite3"
        self.log = folder / "service.log"
        self.config = folder / "service.toml"
        self.config.write_text(
            f"[server]\nport = {self.port}\n"
            f'[storage]\npath = "{self.database}"\nsecret_key_file = "{folder / "secret.key"}"\nurl = "{storage_url}"\n'
            f'[dns]\nnameservers = ["{dns_address}"]\ntimeout_seconds = {dns_timeout}\n' + extra
        )
        self.process: subprocess.Popen | None = None
        self._listened = False

    def start(self, *, wait: bool = True) -> ServiceProcess:
        """The service started; with ``wait``, until it answers. Its port was free when chosen, but
        another test's process may take it before the service binds it (with two workers or more per core,
        seen in CI): then, on a first start only, it starts again on another port."""
        for _ in range(3):
            started_at = self.log.stat().st_size if self.log.exists() else 0
            with self.log.open("ab") as out:  # the child keeps its own copy of the descriptor
                self.process = subprocess.Popen(
                    [sys.executable, str(ROOT / "app.py"), "--config", str(self.config)],
                    cwd=self.folder, stdout=out, stderr=subprocess.STDOUT,
                )
            if not wait:
                return self
            said = self._wait_until_listening(started_at)
            if said is None:
                return self
            if "is already in use" not in said or self._listened:
                raise RuntimeError("the service did not start:\n" + said)
            self._choose_port()
        raise RuntimeError("the service did not start: every port chosen was taken")

    def _choose_port(self) -> None:
        old = f"[server]\nport = {self.port}\n"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.config.write_text(self.config.read_text().replace(old, f"[server]\nport = {self.port}\n", 1))

    def _wait_until_listening(self, started_at: int) -> str | None:
        """None once this process says it listens on its port and the port answers (another
        process answering there is not this service); else what its log said."""
        listening = f"listening on http://127.0.0.1:{self.port} "
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            said = self.log.read_bytes()[started_at:].decode(errors="replace")
            if listening in said:
                try:
                    urllib.request.urlopen(self.base_url + "/", timeout=PATIENCE_SECONDS).close()
                    self._listened = True
                    return None
                except OSError:
                    pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.process.kill()
                self.process.wait()  # else a later test fails on the ResourceWarning of its Popen
                return said or "(nothing logged)"
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind, as when the machine dies."""
        self.process.kill()
        self.process.wait(PATIENCE_SECONDS)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(PATIENCE_SECONDS)


def call(base_url: str, method: str, path: str, body: object = None, token: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, object]:
    """(status, decoded JSON) of one request to a running service; an error status is an answer here."""
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base_url + path, data=data, headers=all_headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE_SECONDS) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, json.loads(refused.read() or b"null")


def identity_provider_code(base_url: str, flow: dict[str, str], email: str) -> str:
    """The browser's part of a sign-in at the built-in development provider: its form, then its
    redirect back with a code (not followed)."""
    params = authorize_params(flow, client_id=DEFAULT_CLIENT_ID, redirect_uri=base_url + "/auth/callback")

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    form = urllib.request.Request(base_url + "/idp/authorize", method="POST",
                                  data=urllib.parse.urlencode({**params, "email": email}).encode())
    try:
        urllib.request.build_opener(Stay).open(form, timeout=PATIENCE_SECONDS)
    except urllib.error.HTTPError as redirected:
        with redirected:
            return code_from(redirected.headers["Location"])
    raise AssertionError("the identity provider did not redirect back")


def signed_up(folder: Path) -> tuple[ServiceProcess, str]:
    """A running service with one signed-up workspace and its domain (no DNS answer is needed):
    the service, and the workspace's id."""
    service = ServiceProcess(folder, dns_address="127.0.0.1:9").start()
    status, body = call(service.base_url, "POST", "/v1/public/signup", {"email": "ops@example.com", "domain": "shop.example.com"})
    assert status == 201, body
    return service, body["domain"]["orgId"]
