"""The browser the browser tests drive: Debian's Chromium through Playwright (no browser is
downloaded).

Its headless shell (``apt-get install chromium-headless-shell``) first, as Playwright itself uses
for headless runs: the same Blink and V8 without the full browser's interface, whose processes
took a third more CPU over the portal's pages (124 against 92 core-seconds for
test_portal_pages.py, the browser's processes included). The full ``chromium`` where only it is
installed.
"""

from __future__ import annotations

import shutil

import pytest

CHROMIUM = (shutil.which("chromium-headless-shell") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
#: Flags for a root user in a closed network (see the environment notes: no sandbox as root,
#: no background connections that the network would refuse).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium-headless-shell)")
