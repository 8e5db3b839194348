"""Shared by the browser tests: where the documentation's screenshots go (docs/screenshots links to
them), and axe-core.

axe-core (the accessibility rules a reviewer runs) comes from npm's registry, installed once into a
cache folder outside the checkout and injected by the test: the page never loads it itself, and
its strict Content-Security-Policy is bypassed only in the browser contexts that run it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

KEPT_SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
AXE_VERSION = "4"
AXE_CACHE = Path(os.environ.get("CPS_AXE_CACHE", Path.home() / ".cache" / "cps-axe"))


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """The path of axe.min.js, installed with ``npm install`` the first time: by one pytest-xdist
    worker (or one test run) at a time, under a lock, as another may be installing it too."""
    script = AXE_CACHE / "node_modules" / "axe-core" / "axe.min.js"
    AXE_CACHE.mkdir(parents=True, exist_ok=True)
    with (AXE_CACHE / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed; waits while another installs
        if not script.exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip("npm is not installed (.ci/run installs Debian's nodejs and npm); axe-core is npm's")
            subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(AXE_CACHE),
                            f"axe-core@{AXE_VERSION}"], check=True, capture_output=True, timeout=300)
    return script


@pytest.fixture(scope="module")
def kept_screenshots(tmp_path_factory) -> Path:
    """tests/browser/screenshots/ with ``UPDATE_SCREENSHOTS=1``; otherwise a temporary folder, so
    a test run leaves the checkout unchanged."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        KEPT_SCREENSHOTS.mkdir(exist_ok=True)
        return KEPT_SCREENSHOTS
    return tmp_path_factory.mktemp("screenshots")
