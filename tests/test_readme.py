"""What the README tells a new user to do matches what the service does."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def first_steps() -> str:
    return README.split("## First steps on a fresh machine", 1)[1].split("\n## ", 1)[0]


def test_first_steps_send_people_to_the_page_that_shows_the_session_token():
    """Sign-in lands on /domains; the token is on /account (tests/pages: the account page shows it)."""
    [step] = re.findall(r"# 2\. Sign in:.*?(?=\nTOKEN=)", first_steps(), flags=re.DOTALL)
    assert "/account" in step and "the session token the page shows" not in step
