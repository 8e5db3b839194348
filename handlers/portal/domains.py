"""The domains page: the workspace's domains (search, filters and paging: the domain query
underneath) and adding them. While a listed domain waits on a background check, the page's
script refreshes its rows from ``/domains/status``, as a domain's page does (handlers/portal/live.py).

One hostname leads to its DNS page. Several, one per line or separated by commas, are
added as ``POST /v1/domains/bulk`` adds them, each on its own, and answered line by line on a page
of their own, ``/domains/added/<id>``: that answer is too long for a cookie, so it is kept with
the form records (24 hours), for the person who sent the form.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any
from urllib.parse import urlencode

from tornado.web import HTTPError, authenticated

from core.certificates import idempotency
from core.domains import operations
from core.domains import query as domain_query
from core.errors import ApiError
from core.identity.scopes import WRITERS
from handlers.portal.base import PortalHandler, awaited_check
from handlers.portal.forms import Outcome
from handlers.portal.pages import TEMPLATES, refusal_text

PAGE_SIZE = 50
FILTERS = ("q", "status", "validationStatus", "certStatus", "tag")
#: What separates the hostnames of the add form: line breaks, commas, semicolons. Not spaces: a
#: line such as ``not a hostname`` is one entry, refused as one, so the answer has a row per line
#: typed (spaces around a hostname are trimmed).
SEPARATORS = re.compile(r"[\r\n,;]+")
ADDED = "/domains/added"
ANSWER_ID = re.compile(r"[0-9a-f]{32}")


def hostnames_in(text: str) -> list[str]:
    return [name for name in (part.strip() for part in SEPARATORS.split(text)) if name]


def _answer_key(user_id: str, answer_id: str) -> idempotency.IdempotencyKey:
    """Where a bulk add's answer is kept: only the person who sent the form reads it back."""
    return idempotency.IdempotencyKey(method="FORM", path=ADDED, key=answer_id, fingerprint=user_id)


def _line(line: operations.BulkLine) -> dict[str, str | bool | None]:
    row = line.row
    return {"given": line.given, "reason": line.reason, "apex": row.apex if row else None,
            "id": str(row.id) if row else None, "known": line.known}


def _summary(lines: list[dict[str, str | bool | None]]) -> str:
    new = sum(1 for line in lines if line["id"] and not line["known"])
    known = sum(1 for line in lines if line["known"])
    refused = sum(1 for line in lines if not line["id"])
    said = [f"{new} added", *([f"{known} already here"] if known else []), *([f"{refused} not added"] if refused else [])]
    return f"Of {len(lines)} hostnames: {', '.join(said)}."


class DomainsListing(PortalHandler):
    """The domains the page's search, filters and cursor select, and what its script polls."""

    async def listing(self) -> tuple[dict[str, str], domain_query.DomainPage, str | None, dict[str, Any] | None]:
        """The page's arguments, its domains or why the query was refused (a 400 page), and while one
        of them waits on a background check, the address that refreshes their rows, with the seconds
        until the first such check."""
        principal = self.member()
        args = {name: self.typed(name, query=True) for name in FILTERS}
        cursor = self.typed("cursor", query=True) or None
        request = domain_query.QueryDomains(
            q=args["q"] or None,
            status=args["status"] or None,
            validation_status=args["validationStatus"] or None,
            cert_status=args["certStatus"] or None,
            tags=[args["tag"]] if args["tag"] else None,
            page=domain_query.Page(limit=PAGE_SIZE, cursor=cursor),
        )
        try:
            page = await self.services.store.run(domain_query.query, self.services, workspace=principal.workspace,
                                                 request=request)
        except ApiError as exc:
            self.set_status(400)
            return args, domain_query.DomainPage(items=[], total=0), exc.message, None
        query = urlencode({k: v for k, v in {**args, "cursor": cursor or ""}.items() if v})
        url = f"/domains/status?{query}" if query else "/domains/status"
        waits = [poll["after"] for poll in (awaited_check(self.services, d, url) for d in page.items) if poll]
        return args, page, None, {"url": url, "after": min(waits)} if waits else None


class DomainsPage(DomainsListing):
    @authenticated
    async def get(self) -> None:
        principal = self.member()
        args, page, error, poll = await self.listing()
        next_link = None
        if page.next_cursor:
            next_link = "/domains?" + urlencode({**{k: v for k, v in args.items() if v}, "cursor": page.next_cursor})
        add_error, typed = self.refused()
        # ``?add=``: hostnames to fill in, from a sign-up with an e-mail that had an account already,
        # or those a bulk add refused.
        hostnames = typed.get("hostnames", self.typed("add", query=True))
        self.render_page("domains.html", page=page, args=args, next_link=next_link, error=error, poll=poll,
                         can_write=principal.role in WRITERS, add_error=add_error, hostnames=hostnames)

    @authenticated
    async def post(self) -> None:
        """Add one domain, then show its DNS page; or several, then what became of each."""
        await self.hit_rate_limit("/v1/domains")
        principal = self.member(WRITERS)
        assert self.user is not None
        user_id, text = str(self.user.id), self.typed("hostnames")
        names = hostnames_in(text)

        async def add() -> Outcome:
            if len(names) == 1:
                domain = await operations.create(self.services, workspace=principal.workspace,
                                                 request=operations.CreateDomain(apex=names[0]))
                return Outcome(f"/site/{domain.id}/dns")
            request = operations.BulkCreate(apex_list=names)
            result = await operations.bulk_create(self.services, workspace=principal.workspace, request=request)
            lines = [_line(line) for line in operations.bulk_lines(request, result)]
            answer_id = uuid.uuid4().hex
            await self.services.store.run(idempotency.keep, self.services, workspace_id=principal.workspace_id,
                                          key=_answer_key(user_id, answer_id), body=json.dumps(lines))
            return Outcome(f"{ADDED}/{answer_id}", _summary(lines))

        if not names:
            self.refuse("/domains", "Type a hostname, or several: one per line.")
            return
        try:
            await self.act(add)
        except ApiError as exc:
            self.refuse("/domains", refusal_text(exc), {"hostnames": text})


class AddedPage(PortalHandler):
    """``/domains/added/<id>``: a bulk add, line by line (each hostname's DNS page, or why not)."""

    @authenticated
    async def get(self, answer_id: str) -> None:
        principal = self.member()
        assert self.user is not None
        kept = None
        if ANSWER_ID.fullmatch(answer_id):
            kept = await self.services.store.run(idempotency.kept, self.services, workspace_id=principal.workspace_id,
                                                 key=_answer_key(str(self.user.id), answer_id))
        if kept is None:  # another person's, another workspace's, older than a day, or no answer's id at all
            raise HTTPError(404)
        lines = json.loads(kept)
        refused = [line["given"] for line in lines if not line["id"]]
        self.render_page("domains_added.html", lines=lines, again="/domains?" + urlencode({"add": "\n".join(refused)})
                         if refused and principal.role in WRITERS else None)


class DomainsStatus(DomainsListing):
    """``/domains/status``: the domains page's rows, which its script puts in place of the page's own
    (handlers/portal/live.py does the same for a domain's page); in the API's rate-limit bucket."""

    @authenticated
    async def get(self) -> None:
        await self.hit_rate_limit("/v1/domains")
        _, page, _, poll = await self.listing()
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(TEMPLATES.get_template("domain_rows.html").render(page=page, poll=poll))


routes = [
    (r"/domains", DomainsPage),
    (r"/domains/status", DomainsStatus),
    (rf"{ADDED}/([^/]+)", AddedPage),
]
