"""The documentation site (mkdocs.yml, docs/) builds in strict mode, so a broken link, a missing anchor
or a page left out of the navigation fails here; the API reference it renders covers every operation
of the OpenAPI document; and the README's links lead to pages that exist."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory, record_testsuite_property) -> Path:
    """The site, built once for the module, as CI builds it: strict, every warning an error."""
    folder = tmp_path_factory.mktemp("site")
    # Material's notice about its successor is no warning of the build's; it only adds noise.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                           check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - started
    # Measured, never asserted: printed (pytest -rA or -s shows it) and in a JUnit report (--junitxml).
    print(f"\ndocs build: {seconds:.2f} s")
    record_testsuite_property("docs_build_seconds", f"{seconds:.2f}")
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stdout + built.stderr, built.stdout + built.stderr
    return folder


def test_the_site_builds_in_strict_mode(site):
    assert (site / "index.html").is_file()


def test_every_page_in_docs_is_built(site):
    """strict mode fails on a page missing from the navigation; this says that each one came out."""
    pages = [p.relative_to(DOCS).with_suffix(".html") for p in DOCS.rglob("*.md")]
    assert [str(p) for p in pages if not (site / p).is_file()] == []


def test_the_api_reference_has_every_operation_of_the_openapi_document(site):
    document = json.loads((ROOT / "static" / "openapi.json").read_text())
    page = (site / "api.html").read_text()
    operations = [op for item in document["paths"].values() for op in item.values() if isinstance(op, dict)
                  and "operationId" in op]
    assert [op["operationId"] for op in operations if f'id="{op["operationId"]}"' not in page] == []
    assert [name for name in document["components"]["schemas"] if f'id="schema-{name}"' not in page] == []


def test_the_api_reference_shows_the_bulk_endpoint_with_its_body(site):
    page = (site / "api.html").read_text()
    bulk = page.split('id="bulkCreateDomains"', 1)[1].split("<h3", 1)[0]
    assert "POST /v1/domains/bulk" in bulk and 'href="#schema-BulkCreate"' in bulk
    assert "apexList" in page.split('id="schema-BulkCreate"', 1)[1].split("<h3", 1)[0]


def test_the_site_publishes_the_openapi_document_as_it_is(site):
    assert (site / "openapi.json").read_bytes() == (ROOT / "static" / "openapi.json").read_bytes()


def test_the_configuration_page_shows_config_example_toml(site):
    page = (site / "operating" / "configuration.html").read_text()
    assert "simulate_dns_delay_seconds" in page and "activation_delay_seconds" in page


def test_a_pipe_in_a_tables_code_is_shown_without_githubs_escape(site):
    """docs/dns-hosts.md writes ``\\|`` in code spans of table cells, as GitHub needs; the site shows ``|``."""
    page = (site / "dns-hosts.html").read_text()
    assert r"awsdns-\d+\.(com|net|org|co\.uk)" in page and r"(com\|net" not in page


def test_the_site_loads_nothing_from_elsewhere(site):
    """No web fonts, no scripts or styles from a CDN: the site works offline, as this machine is."""
    found = set()
    for page in site.rglob("*.html"):
        found |= set(re.findall(r'<(?:link|script|img)[^>]+(?:href|src)="((?:https?:)?//[^"]+)"', page.read_text()))
    assert found == set()


def test_the_readmes_links_lead_to_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local and [t for t in local if not (ROOT / t).exists()] == []


def test_the_readme_links_every_page_of_the_site():
    readme = (ROOT / "README.md").read_text()
    pages = sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"]({p})" not in readme] == []
