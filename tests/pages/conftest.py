"""What every portal page test uses: a browser without JavaScript (tests/pages/portal_client.py)."""

from __future__ import annotations

import pytest

from tests.pages.portal_client import Browser


@pytest.fixture
def browser(http_client, base_url):
    return Browser(http_client, base_url)
