"""The documentation site (mkdocs.yml, docs/) builds in strict mode, so a broken link, a missing anchor
or a page left out of the navigation fails here; the API reference it renders covers every operation
of the OpenAPI document; and the README's links lead to pages that exist."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def hook_module(name: str):
    """A module of docs/hooks/, which MkDocs loads by path (it is no package of the service)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # as MkDocs does: its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


config_reference = hook_module("config_reference")


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


def keys_of(table: dict, prefix: str = "") -> list[tuple[str, str]]:
    """(section, key) of each value of a parsed TOML file."""
    found = []
    for name, value in table.items():
        found += keys_of(value, f"{prefix}{name}.") if isinstance(value, dict) else [(prefix.rstrip("."), name)]
    return found


def test_the_configuration_reference_has_every_key_of_config_example_toml_in_its_sections_table(site):
    page = (site / "operating" / "configuration.html").read_text()
    sections = {}
    for section, key in keys_of(tomllib.loads((ROOT / "config.example.toml").read_text())):
        if section not in sections:
            sections[section] = page.split(f'id="{section.replace(".", "-")}"', 1)[1].split("<h2", 1)[0]
        assert f"<td><code>{key}</code></td>" in sections[section], f"[{section}] {key}"


def test_the_configuration_reference_shows_each_keys_default_and_meaning(site):
    page = (site / "operating" / "configuration.html").read_text()
    acme = page.split('id="provider-acme"', 1)[1].split("<h2", 1)[0]
    assert "<td><code>failed_validations_per_hour</code></td>\n<td><code>5</code></td>" in acme
    assert "(Let's Encrypt: 5): after a refusal the next order also waits out the resolvers' negative cache" in (
        acme.replace("&#39;", "'"))


def test_the_site_publishes_config_example_toml_as_it_is_and_links_it(site):
    assert (site / "config.example.toml").read_bytes() == (ROOT / "config.example.toml").read_bytes()
    assert 'href="../config.example.toml"' in (site / "operating" / "configuration.html").read_text()


def test_a_comment_continued_on_indented_lines_is_one_meaning():
    [section] = config_reference.parse('[s]\nkey = 1   # the first part,\n          #   and the rest\n')
    assert section.rows[0].meaning == ["the first part,", "and the rest"]
    assert "| `key` | `1` | the first part, and the rest |" in config_reference.render([section])


def test_a_hash_inside_a_string_is_part_of_the_default():
    [section] = config_reference.parse('[s]\nkey = "a#b"   # what it is\n')
    assert (section.rows[0].default, section.rows[0].meaning) == ('"a#b"', ["what it is"])


def test_a_key_without_a_comment_stops_the_build_naming_it():
    with pytest.raises(config_reference.ConfigReferenceError, match=r"line 3: \[s\] bare has no comment"):
        config_reference.parse("[s]\nkey = 1   # said\nbare = 2\n")


def test_a_value_over_several_lines_stops_the_build():
    """It is TOML, but no row of a table: the reference would lack the key."""
    with pytest.raises(config_reference.ConfigReferenceError, match="one line of TOML"):
        config_reference.parse('[s]\nlist = [   # said\n  "a",\n]\n')


def test_a_comment_is_text_not_markup():
    said = config_reference.words("a_b <host> *glob* [v6]:port | see docs/acme.md and [s]", lambda p: "../" + p, {"s"})
    assert said == r"a\_b &lt;host&gt; \*glob\* \[v6\]:port \| see [docs/acme.md](../acme.md) and [\[s\]](#s)"


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


def test_the_docs_give_one_size_for_a_secret_made_with_openssl():
    """Issue 48: docs/acme.md said ``openssl rand -hex 24`` in one place and ``-hex 32`` in another."""
    sizes = {size for page in [*DOCS.rglob("*.md"), ROOT / "README.md"]
             for size in re.findall(r"openssl rand -hex (\d+)", page.read_text())}
    assert sizes == {"32"}


def test_the_acme_page_names_lets_encrypts_other_limits_and_the_negative_cache_trap():
    page = " ".join((DOCS / "acme.md").read_text().split())
    for said in ("failed validations per hostname", "duplicate certificates", "certificates per registered domain",
                 "(STAGING) Pretend Pear X1", "never a resolver the CA also uses", "negative TTL"):
        assert said in page, said
