"""A browser without JavaScript, for the portal tests: cookies kept, forms posted as the page
rendered them (their XSRF token and one-time ``intent`` included), redirects not followed."""

from __future__ import annotations

import html
import re
from http.cookies import SimpleCookie
from urllib.parse import urlencode

from tornado.httpclient import HTTPRequest
from tornado.web import create_signed_value

SESSION = "cps_session"
_FORM = re.compile(r"<form\b[^>]*\baction=\"([^\"]+)\"[^>]*>(.*?)</form>", re.DOTALL)
_HIDDEN = re.compile(r"<input type=\"hidden\" name=\"([^\"]+)\" value=\"([^\"]*)\"")


class Browser:
    def __init__(self, http_client, base_url: str) -> None:
        self.client = http_client
        self.base = base_url
        self.cookies: dict[str, str] = {}

    async def request(self, method: str, path: str, form: dict | None = None):
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        body = None
        if method == "POST":
            fields = dict(form or {})
            fields.setdefault("_xsrf", self.cookies.get("_xsrf", ""))
            body = urlencode(fields, doseq=True)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        url = path if path.startswith("http") else self.base + path
        response = await self.client.fetch(
            HTTPRequest(url, method=method, body=body, headers=headers, follow_redirects=False), raise_error=False
        )
        for header in response.headers.get_list("Set-Cookie"):
            for name, morsel in SimpleCookie(header).items():
                if morsel.value and "expires=Thu, 01 Jan 1970" not in header.replace("expires=thu", "expires=Thu"):
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        return response

    async def get(self, path: str):
        return await self.request("GET", path)

    async def post(self, path: str, form: dict | None = None):
        if "_xsrf" not in self.cookies:
            await self.get("/")  # any page sets the XSRF cookie
        return await self.request("POST", path, form)

    async def form_on(self, page: str, action: str) -> dict[str, str]:
        """The hidden fields of the form posting to ``action`` on ``page``, as rendered."""
        body = (await self.get(page)).body.decode()
        return hidden_fields(body, action)

    async def tokens(self, page: str = "/account") -> dict[str, str]:
        """The XSRF token and one-time ``intent`` of a form on ``page``: what a person sends to an
        action no page of theirs offers (another workspace's, say)."""
        body = (await self.get(page)).body.decode()
        [(_, inner), *_] = _FORM.findall(body)
        return {name: html.unescape(value) for name, value in _HIDDEN.findall(inner) if name in ("_xsrf", "intent")}

    async def submit(self, page: str, action: str, fields: dict | None = None):
        """Fill in the form for ``action`` rendered on ``page`` and post it (one form, one intent)."""
        return await self.post(action, {**await self.form_on(page, action), **(fields or {})})

    async def follow(self, response):
        """The page a redirect answer leads to."""
        assert response.code in (302, 303), response.code
        return await self.get(response.headers["Location"])


def hidden_fields(page_html: str, action: str) -> dict[str, str]:
    for found_action, inner in _FORM.findall(page_html):
        if html.unescape(found_action) == action:
            return {name: html.unescape(value) for name, value in _HIDDEN.findall(inner)}
    raise AssertionError(f"no form posting to {action}")


def sign_in(browser: Browser, services, actor) -> None:
    """A session cookie holding the actor's ID token, signed as the portal signs it."""
    secret = services.keyring.subkey("cookie").hex()
    browser.cookies[SESSION] = create_signed_value(secret, SESSION, actor.token).decode()


async def new_domain(api, actor, apex="shop.example.com"):
    return (await api.post("/v1/domains", {"apex": apex}, token=actor.token)).body
