"""The webhooks page's "Seeing deliveries on one machine" (docs/webhooks.md) works as written: its shell
blocks are run, in order, by bash in an empty folder, with the browserless sign-in block of the README's
walk (the same in Getting started) where the recipe says so. Only the ports change (free ones, so a busy
port on the machine cannot fail it)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port
from tests.test_readme import browserless_sign_in

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("curl") is None,
                                reason="needs openssl and curl")
TRIES = int(PATIENCE_SECONDS * 10)
"Of a shell loop that tries every 0.1 s."
WAIT_FOR_SERVICE = f"""
for i in $(seq {TRIES}); do curl -s -o /dev/null $B/v1/openapi.json && break; sleep 0.1; done
"""
WAIT_FOR_DELIVERIES = f"""
for i in $(seq {TRIES}); do [ "$(grep -c 'signature ok' hook.out)" -ge 2 ] && break; sleep 0.1; done
"""


def recipe() -> list[str]:
    page = (ROOT / "docs" / "webhooks.md").read_text()
    section = page.split("## Seeing deliveries on one machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The folder the recipe ran in (run once for the module), once it ran to its end."""
    tmp_path = tmp_path_factory.mktemp("recipe")
    start, calls = recipe()
    ports = {"8080": str(free_port()), "5353": str(free_port()), "8443": str(free_port())}
    sign_in_at = "# (here: the browserless sign-in block of Getting started, which sets $TOKEN)\n"
    assert sign_in_at in calls
    calls = calls.replace(sign_in_at, browserless_sign_in())
    script = "\n".join([
        "set -euo pipefail",
        "trap 'kill $(jobs -p) 2>/dev/null' EXIT",  # the receiver, the DNS server and the service
        start.replace("python3 hook.py &", "python3 hook.py > hook.out 2>&1 &"),
        "B=http://127.0.0.1:8080",
        WAIT_FOR_SERVICE,
        calls,
        WAIT_FOR_DELIVERIES,
    ])
    script = script.replace("cat > hook.toml <<'TOML'\n", "cat > hook.toml <<'TOML'\n[server]\nport = 8080\n"
                            "base_url = \"http://127.0.0.1:8080\"\nportal_url = \"http://127.0.0.1:8080\"\n\n")
    for default, port in ports.items():
        script = script.replace(default, port)
    env = {**os.environ, "REPO": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with open(tmp_path / "script.log", "wb") as log:  # a file, not a pipe: nothing waits for the background jobs
        # A session of its own: should the script hang, its background jobs go with it.
        shell = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=log, stderr=log,
                                 start_new_session=True)
        try:
            returncode = shell.wait(timeout=3 * PATIENCE_SECONDS)  # a start and several waits
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
    assert returncode == 0, (tmp_path / "script.log").read_text() + (tmp_path / "hook.out").read_text()
    return tmp_path


def test_the_recipe_shows_signed_deliveries_on_one_machine(ran):
    out = (ran / "hook.out").read_text()
    lines = [line for line in out.splitlines() if "signature" in line]
    assert [line.split()[:3] for line in lines] == [["cert.issue_pending", "signature", "ok"],
                                                     ["cert.issue_failed", "signature", "ok"]], out


def test_the_signing_secret_it_writes_is_readable_by_its_owner_only(ran):
    assert stat.S_IMODE((ran / "hook.secret").stat().st_mode) == 0o600
