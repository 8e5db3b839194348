"""HEAD and 405 outside the API: every page (the built-in identity provider's included) and
``/metrics`` answer HEAD wherever they answer GET, as the API does, and every 405 says in ``Allow``
which methods there are."""

from __future__ import annotations

import re

import attrs
import pytest
from tornado.httpclient import HTTPRequest
from tornado.web import RequestHandler

import handlers
from core.config import MetricsConfig, OidcConfig, ServerConfig
from handlers.portal import idp

SOME_ID = "4e98e74f-ef5d-4b91-8426-9bb542abaeba"
"Fixed: it is in test ids, which every pytest-xdist worker must collect alike."


@pytest.fixture
def config(config, http_port):
    here = f"http://127.0.0.1:{http_port}"  # no issuer: the built-in identity provider is routed
    return attrs.evolve(config, oidc=OidcConfig(), server=ServerConfig(base_url=here, portal_url=here),
                        metrics=MetricsConfig(bearer_token="t" * 32))


def concrete(pattern: str) -> str:
    """A path the route matches: a group of alternatives takes the first, any other an id."""
    path = re.sub(r"\(([a-z]+)(\|[a-z|]+)?\)", r"\1", pattern)
    return path.replace("([^/]+)", SOME_ID).replace("\\.", ".")


OUTSIDE_THE_API = [(concrete(p), h) for p, h in [*handlers.routes, *idp.routes] if not p.startswith("/v1/")]
#: GET there redeems a one-time state (a sign-in, a one-click set-up): HEAD must not, so it is a 405
#: (saying which methods there are).
NOT_SAFE_TO_REPEAT = {"/auth/callback": "GET", "/connect/done": "GET, POST"}
WITH_GET = [path for path, h in OUTSIDE_THE_API if h.get is not RequestHandler.get and path not in NOT_SAFE_TO_REPEAT]
WITHOUT_GET = [(path, h) for path, h in OUTSIDE_THE_API if h.get is RequestHandler.get]


async def fetch(http_client, base_url, method, path, **kw):
    return await http_client.fetch(HTTPRequest(base_url + path, method=method, follow_redirects=False,
                                               allow_nonstandard_methods=True, **kw), raise_error=False)


def test_the_routes_walked_include_the_pages_the_provider_and_metrics():
    assert {"/", "/login", "/idp/jwks", "/metrics", f"/site/{SOME_ID}/dns"} <= set(WITH_GET)
    assert "/logout" in dict(WITHOUT_GET)


@pytest.mark.gen_test
@pytest.mark.parametrize("path", sorted(NOT_SAFE_TO_REPEAT))
async def test_head_where_get_redeems_a_one_time_state_is_refused_and_spends_nothing(http_client, base_url, path):
    head = await fetch(http_client, base_url, "HEAD", path + "?state=s&code=c")
    assert head.code == 405 and head.headers.get("Allow") == NOT_SAFE_TO_REPEAT[path]


@pytest.mark.gen_test
@pytest.mark.parametrize("path", WITH_GET)
async def test_head_answers_as_get_does_without_a_body(http_client, base_url, path):
    got = await fetch(http_client, base_url, "GET", path)
    head = await fetch(http_client, base_url, "HEAD", path)
    assert head.code == got.code != 405, path
    assert head.body == b"" and head.headers.get("X-Request-Id"), path
    assert head.headers.get("Content-Type") == got.headers.get("Content-Type"), path


@pytest.mark.gen_test
@pytest.mark.parametrize(("path", "handler"), WITHOUT_GET)
async def test_head_where_there_is_no_get_is_405_naming_the_methods_there_are(http_client, base_url, path, handler):
    r = await fetch(http_client, base_url, "HEAD", path)
    assert r.code == 405, path
    assert r.headers["Allow"] == ", ".join(m for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
                                         if getattr(handler, m.lower()) is not getattr(RequestHandler, m.lower()))


@pytest.mark.gen_test
@pytest.mark.parametrize(("path", "allow"), [("/", "GET"), ("/signup", "GET, POST"), ("/idp/authorize", "GET, POST"),
                                             ("/metrics", "GET")])
async def test_a_method_a_page_lacks_is_405_with_allow(http_client, base_url, path, allow):
    for method in ("PUT", "DELETE", "OPTIONS"):
        r = await fetch(http_client, base_url, method, path, body=b"" if method == "PUT" else None)
        assert (r.code, r.headers.get("Allow")) == (405, allow), (method, path)
        assert r.body and r.headers.get("X-Request-Id"), (method, path)
