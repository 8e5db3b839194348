"""GET /healthz and GET /readyz: what a load balancer asks (handlers/health.py)."""

from __future__ import annotations

import logging

import pytest

from store.migrations import latest_version


@pytest.mark.gen_test
async def test_healthz_says_the_process_answers(api):
    r = await api.get("/healthz")
    assert (r.status, r.body) == (200, {"status": "ok"})


@pytest.mark.gen_test
async def test_readyz_is_ready_with_the_schema_this_code_writes(api):
    r = await api.get("/readyz")
    assert (r.status, r.body) == (200, {"status": "ready", "schemaVersion": latest_version()})


@pytest.mark.gen_test
async def test_readyz_is_503_when_the_schema_is_another_version(api, services):
    services.store.db.execute("DELETE FROM schema_migrations WHERE version = ?", [latest_version()])
    r = await api.get("/readyz")
    assert (r.status, r.body["code"]) == (503, "not_ready")
    assert f"this code needs {latest_version()}" in r.body["message"]


@pytest.mark.gen_test
async def test_readyz_is_503_when_the_database_does_not_answer(api, services):
    services.store.db.conn.close()
    r = await api.get("/readyz")
    assert (r.status, r.body["code"]) == (503, "not_ready")


@pytest.mark.gen_test
async def test_health_checks_are_outside_the_rate_limits(api, services):
    for _ in range(services.config.rate_limits.api + 5):
        assert (await api.get("/healthz")).status == 200


@pytest.mark.gen_test
async def test_a_passing_check_writes_no_access_log_line(api, caplog):
    with caplog.at_level(logging.INFO, logger="access"):
        await api.get("/healthz")
        await api.get("/readyz")
        await api.get("/v1/openapi.json")
    lines = [r.getMessage() for r in caplog.records if r.name == "access"]
    assert len(lines) == 1 and "/v1/openapi.json" in lines[0]
