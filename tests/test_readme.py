"""What the README tells a new user to do matches what the service does."""

from __future__ import annotations

import re
from pathlib import Path

from core.domains import dns_hosts

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def first_steps() -> str:
    return README.split("## First steps on a fresh machine", 1)[1].split("\n## ", 1)[0]


def test_first_steps_send_people_to_the_page_that_shows_the_session_token():
    """Sign-in lands on /domains; the token is on /account (tests/pages: the account page shows it)."""
    [step] = re.findall(r"# 2\. Sign in:.*?(?=\nTOKEN=)", first_steps(), flags=re.DOTALL)
    assert "/account" in step and "the session token the page shows" not in step


def test_the_dns_host_table_lists_every_host_with_its_nameservers():
    section = README.split("## DNS hosts", 1)[1].split("\n## ", 1)[0]
    for host in dns_hosts.HOSTS:
        [row] = [line for line in section.splitlines() if line.startswith(f"| {host.name} | `{host.key}` |")]
        assert all(f"`{pattern.replace('|', chr(92) + '|')}`" in row for pattern in host.ns_patterns), row
