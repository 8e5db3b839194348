"""What the README tells a new user to do matches what the service does: its two-minute walk is run
as written, against ``python app.py`` with simulated DNS, and the documentation's pages say what the
code does."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.domains import dns_hosts
from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
WALK_HEADING = "## Try the whole flow in two minutes"
TRIES = int(PATIENCE_SECONDS * 10)
"Of a shell loop that tries every 0.1 s."
WAIT_FOR_SERVICE = f"""
for i in $(seq {TRIES}); do curl -s -o /dev/null $B/v1/openapi.json && break; sleep 0.1; done
"""


def walk() -> str:
    """The README's two-minute walk, from its heading to the next section."""
    return WALK_HEADING + README.split(WALK_HEADING, 1)[1].split("\n## ", 1)[0]


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


def browserless_sign_in() -> str:
    """The walk's sign-in without a browser, which sets $TOKEN (the webhook recipe uses it too)."""
    [block] = [b for b in shell_blocks(walk()) if "oidc/exchange" in b]
    return block


def test_the_walk_sends_people_to_the_page_that_shows_the_session_token():
    """Sign-in lands on /domains; the token is on /account (tests/pages: the account page shows it)."""
    [sign_in] = re.findall(r"\nSign in \(2\):.*?(?=```)", walk(), flags=re.DOTALL)
    assert "/account" in sign_in and "/login" in sign_in


def test_the_getting_started_page_shows_the_readmes_walk_as_it_is():
    """One walk, run below: the site's copy is the README's, word for word."""
    assert walk().strip() in (ROOT / "docs" / "getting-started.md").read_text()


def test_the_dns_host_table_lists_every_host_with_its_nameservers():
    section = (ROOT / "docs" / "dns-hosts.md").read_text()
    for host in dns_hosts.HOSTS:
        [row] = [line for line in section.splitlines() if line.startswith(f"| {host.name} | `{host.key}` |")]
        assert all(f"`{pattern.replace('|', chr(92) + '|')}`" in row for pattern in host.ns_patterns), row


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_what_the_walk_writes_in_the_checkout_git_ignores():
    """Issue 48: the walk left ``demo.toml`` untracked in the checkout (``git status`` no longer
    clean). What its blocks write there (``> file``), and the database and key the service makes
    on its defaults, are ignored."""
    written = {path for path in re.findall(r">>? *([\w./-]+)", "\n".join(shell_blocks(walk())))
               if not path.startswith("/")}
    written |= {"data/service.sqlite3", "data/secret.key"}
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *sorted(written)], cwd=ROOT,
                             capture_output=True, text=True, check=False).stdout.split()
    assert "demo.toml" in written and sorted(written - set(ignored)) == []


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_walk_with_curl_turns_a_certificate_active(tmp_path):
    """The walk's shell blocks, in order, by bash in an empty folder: the service started as the walk
    starts it (in the background, on a free port), then every curl block. About 20 s: the walk waits
    for the simulated records (5 s) and the sandbox's activation (10 s), as a newcomer does."""
    start, *calls = shell_blocks(walk())
    port = str(free_port())
    assert "python app.py --config demo.toml" in start
    script = "\n".join([
        "set -euo pipefail",
        "trap 'kill $(jobs -p) 2>/dev/null' EXIT",  # the service
        start.replace("python app.py --config demo.toml",
                      'printf \'[server]\\nport = 8080\\n\' >> demo.toml\n'
                      'python "$REPO/app.py" --config demo.toml > service.log 2>&1 &'),
        "B=http://127.0.0.1:8080",
        WAIT_FOR_SERVICE,
        *calls,
    ]).replace("8080", port)
    env = {**os.environ, "REPO": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with open(tmp_path / "walk.out", "wb") as out:  # a file, not a pipe: nothing waits for the service
        # A session of its own: should the script hang, the service goes with it.
        shell = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = shell.wait(timeout=3 * PATIENCE_SECONDS)  # a start and several waits
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
    said = (tmp_path / "walk.out").read_text()
    assert returncode == 0, said + (tmp_path / "service.log").read_text()
    assert '"status":"active"' in said and '"certStatus":"active"' in said, said
    assert '"issuer":"Sandbox CA","status":"active"' in said, said  # the certificate query
    assert '"apex":"a.example.com"' in said and '"apex":"not a hostname"' in said, said  # bulk: created, rejected
