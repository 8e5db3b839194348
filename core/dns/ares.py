"""c-ares (pycares, through aiodns), driven by the event loop: what core/dns/lookups.py imports when
its first lookup is made, not at start-up, where importing aiodns and pycares took 0.02 s before
the first answer, which makes no lookup (issue 49)."""

from __future__ import annotations

import weakref
from typing import Any

import aiodns
import pycares
from aiodns.error import DNSError

__all__ = ["ERRORS", "SERVFAIL", "DNSError", "LoopResolver", "pycares"]

ERRORS = {
    aiodns.error.ARES_ENOTFOUND: "nxdomain",
    aiodns.error.ARES_ENODATA: "nodata",
    aiodns.error.ARES_ETIMEOUT: "timeout",
}

#: The words c-ares uses for a SERVFAIL, kept as an ``error`` lookup's detail by both paths (core/dns/probe.py),
#: so a SERVFAIL is recognised the same way whichever asked.
SERVFAIL = str(pycares.errno.strerror(aiodns.error.ARES_ESERVFAIL))


class LoopResolver(aiodns.DNSResolver):
    """aiodns with c-ares driven by the event loop through its socket-state callback (aiodns's own
    fallback), not by a thread per channel: answers then arrive without a thread switch and a
    wake-up of the loop each."""

    def _make_channel(self, **kwargs: Any) -> tuple[bool, pycares.Channel]:
        this = weakref.ref(self)

        def sock_state(fd: int, readable: bool, writable: bool) -> None:
            resolver = this()
            if resolver is not None:
                resolver._sock_state_cb(fd, readable, writable)

        return False, pycares.Channel(sock_state_cb=sock_state, timeout=self._timeout, **kwargs)
