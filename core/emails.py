"""E-mail addresses as the service compares and accepts them: one rule for sign-up, sign-in,
team invitations, a domain's contact and a verification link's recipient."""

from __future__ import annotations

import re

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively here (providers differ on the local part)."""
    return email.strip().lower()


def valid_email(email: str) -> bool:
    """A deliberately loose check: one @, a dot in the domain, no spaces, at most 254 characters."""
    return len(email) <= 254 and bool(_EMAIL.match(email))
