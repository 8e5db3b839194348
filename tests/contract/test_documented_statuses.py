"""Every status code the document lists for an operation is one that some test of ours received.

``Api`` (tests/helpers.py) records the (method, path template, status) of every answer it checks
against the document; this module runs last in a run (tests/conftest.py orders it) and compares.
Under pytest-xdist (the default run) each worker holds only the answers of its own tests, so there
the controller compares, with every worker's, after they have all finished (tests/conftest.py).
A code no test reaches is either a test still to write or a code the server never answers, which
then leaves the document. Only a whole run can tell: a partial one skips the comparison.
"""

from __future__ import annotations

import pytest

from tests.helpers import OBSERVED, openapi

#: Responses any operation may give for reasons of the whole service (limits, faults): reaching
#: each once, on any operation, is enough.
SHARED_RESPONSES = {"RateLimited", "InternalError", "UpstreamError", "StorageUnavailable", "ProviderBusy"}


def documented_statuses() -> list[tuple[str, str, int, str]]:
    """(method, path template, status, name of the shared response or "") of every documented answer."""
    found = []
    for template, item in openapi()["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                for status, response in operation["responses"].items():
                    found.append((method.upper(), template, int(status), response.get("$ref", "").rsplit("/", 1)[-1]))
    return found


def unreached_statuses(observed: set[tuple[str, str, int]]) -> list[str]:
    """Documented (operation, status) pairs missing from ``observed``; a shared response once for all."""
    missing, shared, reached_shared = [], set(), set()
    for method, template, status, name in documented_statuses():
        reached = (method, template, status) in observed
        if name in SHARED_RESPONSES:
            shared.add(name)
            if reached:
                reached_shared.add(name)
        elif not reached:
            missing.append(f"{method} {template} {status}")
    return missing + [f"any operation: {name}" for name in sorted(shared - reached_shared)]


def whole_run(config: pytest.Config) -> bool:
    """Every test of tests/ was selected: no paths, -k, -m, --lf or --deselect narrowed the run."""
    option = config.option
    return (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not option.keyword
            and not option.markexpr and not getattr(option, "lf", False) and not option.deselect)


def compare(config: pytest.Config, tests_failed: int, observed: set[tuple[str, str, int]]) -> None:
    """The check, skipped where it cannot tell. Run by the test below, or under pytest-xdist by the
    controller once every worker is done, on what they all observed (tests/conftest.py)."""
    if not whole_run(config):
        pytest.skip("only a whole run of the suite reaches every status code")
    if tests_failed:
        pytest.skip("tests failed before this one, so their answers may be missing")
    missing = unreached_statuses(observed)
    assert not missing, "Documented status codes no test reached:\n  " + "\n  ".join(missing)


def test_every_documented_status_code_is_reached_by_a_test(request):
    compare(request.config, request.session.testsfailed, OBSERVED)


def test_the_comparison_finds_a_status_no_test_reached():
    """The check itself: one operation's documented code left out of what was observed is named."""
    observed = {(method, template, status) for method, template, status, _ in documented_statuses()}
    observed.discard(("DELETE", "/v1/domains/{domainId}", 204))
    assert unreached_statuses(observed) == ["DELETE /v1/domains/{domainId} 204"]
