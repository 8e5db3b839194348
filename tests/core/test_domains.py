"""core.domains.ops_status: the one table of opsStatus."""

from __future__ import annotations

import pytest

from core.domains import ops_status


@pytest.mark.parametrize(
    ("validation", "cert", "expected"),
    [
        ("pending", "none", "action_needed"),
        ("error", "none", "action_needed"),
        ("verified", "none", "pending"),
        ("verified", "pending", "pending"),
        ("verified", "error", "action_needed"),
        ("verified", "active", "active"),
        ("verified", "renewing", "active"),
        ("error", "active", "active"),
        ("verified", "blocked", "blocked"),
        ("pending", "blocked", "blocked"),
    ],
)
def test_ops_status_table(validation, cert, expected):
    assert ops_status(validation, cert) == expected
