"""The portal's signed-in handler, and a domain's pages: the DNS instructions page with "Check now"
and "Share", and the public page a verification link opens for a DNS administrator (no account).

Roles apply as in the API: every member sees; owner, admin and operator check and add domains;
owners and admins manage API keys. Another workspace's domain is a 404 page. Actions are POST
forms (XSRF-protected) that redirect back to a page, so a reload never repeats them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from tornado.web import HTTPError, authenticated

from core.domains import clients as domain_clients
from core.domains import instructions, operations, shape
from core.errors import ApiError, NotFound
from core.identity.auth import Principal, permits
from core.identity.scopes import READERS, WRITERS
from core.outbound import mail, site_scan
from core.verification import checks as verification
from core.verification import diagnosis, dns_host, one_click
from core.verification import links as verification_links
from core.wire import parse_uuid
from handlers.portal.forms import Outcome
from handlers.portal.pages import PageHandler, in_button_words, needs_role, refusal_text
from store.records import Client, DomainRow, Workspace

if TYPE_CHECKING:
    from core.domains.shape import Domain
    from core.services import Services

SHOWN_LINKS = 20  # the newest active links on a DNS page; the API lists them all


def awaited_check(services: Services, shown: Domain | verification_links.PublicView, url: str) -> dict[str, Any] | None:
    """What a page's script polls (``url``) while the domain waits on a background check, and the
    seconds until that check; None when nothing waits on one: a certificate serving or failed,
    checks stopped or switched off. The page then stays as it is."""
    lifecycle = services.config.lifecycle
    waiting = shown.validation.status != "verified" or shown.cert.status in ("none", "pending", "renewing")
    if not lifecycle.enabled or shown.next_check_at is None or not waiting:
        return None
    return {"url": url, "after": max(0, math.ceil((shown.next_check_at - services.clock.now()).total_seconds()))}


def path_id(raw: str) -> uuid.UUID:
    """An id from a page's path; a malformed one names nothing: the same 404 page as another
    workspace's id."""
    try:
        return parse_uuid(raw)
    except ValueError:
        raise HTTPError(404) from None


def _find_domain(services: Services, candidates: list[Workspace], wanted: uuid.UUID) -> tuple[DomainRow, Workspace] | None:
    """A unit of work: the domain in the first of these workspaces that holds it."""
    for workspace in candidates:
        try:
            return operations.load(services, workspace, wanted), workspace
        except NotFound:
            continue
    return None


class PortalHandler(PageHandler):
    _site: tuple[str, tuple[DomainRow, Workspace] | None] | None = None
    "The domain of a ``/site/<domain id>/`` page (and the workspace holding it), read by ``prepare``."

    async def prepare(self) -> None:
        """A page under ``/site/<domain id>/`` is about that domain: it is read here, in a unit of
        work of its own, for ``domain_row`` (kept a plain method for the pages that call it)."""
        await super().prepare()
        if self.principal is None or not self.request.path.startswith("/site/") or not self.path_args:
            return
        raw = self.path_args[0]
        try:
            wanted = parse_uuid(raw)
        except ValueError:
            self._site = (raw, None)
            return
        # The workspace shown first, then the person's others (their order when signed in).
        shown = self.principal.workspace
        others = [w for _, w in self.caller.memberships if w.id != shown.id] if self.caller is not None else []
        self._site = (raw, await self.services.store.run(_find_domain, self.services, [shown, *others], wanted))

    def member(self, roles: Collection[str] | None = None) -> Principal:
        """The signed-in member; 403 when their role may not do this."""
        assert self.principal is not None  # @authenticated ran first
        if roles is not None and self.principal.role not in roles:
            raise needs_role(self.principal, roles)
        return self.principal

    def domain_row(self, domain_id: str) -> DomainRow:
        """The domain in the workspace shown, or in another of the person's workspaces, which is
        then shown (a link to a DNS page works whichever workspace the portal was showing)."""
        path_id(domain_id)  # a malformed id: the same 404 page as another workspace's id
        current = self.member()
        assert self._site is not None and self._site[0] == domain_id, "only the domain of a /site/<id>/ page"
        found = self._site[1]
        if found is None:
            raise HTTPError(404)
        row, workspace = found
        if workspace.id != current.workspace_id:
            self.principal = self.act_in(workspace.id)
            self.choose_workspace(workspace.id)
        return row


def _dns_page_reads(
    services: Services, workspace: Workspace, domain_id: uuid.UUID, *, links: bool
) -> tuple[verification_links.LinkPage | None, list[Client]]:
    """A unit of work: the DNS page's active links (none for read_only, who may not retrieve link
    capabilities: spec, Authentication rule 4) and the workspace's clients."""
    shown = None
    if links:
        shown = verification_links.list_links(services, workspace=workspace, domain_id=domain_id, status="active",
                                              limit=str(SHOWN_LINKS))
    return shown, domain_clients.list_clients(services, workspace=workspace)


class DnsPage(PortalHandler):
    """``{portal_url}/site/<domain_id>/dns``: what to publish, and where things stand."""

    @authenticated
    async def get(self, domain_id: str) -> None:
        row = self.domain_row(domain_id)  # may switch to the workspace holding it: before member()
        principal = self.member()
        row = await dns_host.freshened(self.services, row)
        domain = shape.present(row)
        can_write = principal.role in WRITERS
        links, clients = await self.services.store.run(_dns_page_reads, self.services, principal.workspace, row.id,
                                                       links=can_write)
        report = None
        if can_write and self.get_query_argument("diagnose", "") == "1":  # the same roles as "Check now"
            await self.hit_rate_limit("/v1/domains")
            report = await diagnosis.diagnose(self.services, workspace=principal.workspace, domain_id=row.id)
        scan, scan_error = None, None
        if self.get_query_argument("scan", "") == "1":  # any member, as the API lets anyone scan
            await self.hit_rate_limit("/v1/site-scan/https")
            # Compared with our certificate for those who may read it, as in the API (every role).
            reads = permits(principal, scopes=("certificates:read",), roles=READERS)
            try:
                scan = await site_scan.scan_https(self.services, site_scan.ScanRequest(url_or_domain=row.apex),
                                                  principal.workspace if reads else None)
            except ApiError as exc:
                scan_error = refusal_text(exc)
        if can_write and row.dns_host is not None and row.dns_host.offer is not None:
            self.allow_form_redirect_to(row.dns_host.offer.url_sync_ux)
        self.render_page(
            "dns.html", domain=domain, dns=instructions.dns_instructions(domain, self.services.config.tls_terminator),
            one_click_action=f"/site/{row.id}/one-click" if can_write else None,
            can_write=can_write, links=links, report=report, lifecycle=self.services.config.lifecycle,
            scan=scan, scan_error=scan_error, clients=clients, mail=mail.configured(self.services.config.smtp),
            poll=awaited_check(self.services, domain, f"/site/{row.id}/status"),
            anchors={f"link-{link.id}" for link in links.items} if links else (),
        )


class CheckNow(PortalHandler):
    """The "Check now" button: verify-delegation, which also starts or checks issuance."""

    @authenticated
    async def post(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/domains")
        row = self.domain_row(domain_id)
        principal = self.member(WRITERS)

        async def check() -> Outcome:
            result = await verification.verify(self.services, workspace=principal.workspace, domain_id=row.id)
            return Outcome(f"/site/{row.id}/dns", in_button_words(result.message))

        await self.act(check)


class ShareLink(PortalHandler):
    """"Share with your DNS administrator": a verification link (optionally for an e-mail)."""

    @authenticated
    async def post(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/verification-links")
        row = self.domain_row(domain_id)
        principal = self.member(WRITERS)
        typed = self.typed("recipientEmail")
        recipient = typed if typed.strip(" ") else None  # an empty field: no recipient

        async def share() -> Outcome:
            try:
                await self.services.store.run(
                    verification_links.create, self.services, workspace=principal.workspace,
                    request=verification_links.CreateLink(domain_id=row.id, recipient_email=recipient),
                )
            except ApiError as exc:
                return Outcome(f"/site/{row.id}/dns", f"No link was created: {refusal_text(exc)}")
            return Outcome(f"/site/{row.id}/dns", "A verification link was created: send it to your DNS administrator.")

        await self.act(share)


class LinkHolder(PageHandler):
    """A page for a verification link's holder, who has no account: the token is the only credential."""

    async def view_or_explain(self, token: str) -> verification_links.PublicView | None:
        await self.hit_rate_limit("/v1/public/verification-links/")
        try:
            return await verification_links.show(self.services, token)
        except ApiError as exc:  # unknown (404), expired or revoked (410): say which, plainly
            self.gone(exc)
            return None

    def gone(self, exc: ApiError) -> None:
        self.set_status(exc.status)
        self.render_page("link_gone.html", message=exc.message)


class PublicLinkPage(LinkHolder):
    """``/verify/<token>``: what a verification link opens."""

    async def get(self, token: str) -> None:
        view = await self.view_or_explain(token)
        if view is None:
            return
        try:
            row = await one_click.link_domain(self.services, token)
        except ApiError as exc:  # the link ended (or its domain went) a moment ago
            self.gone(exc)
            return
        if row.dns_host is not None and row.dns_host.offer is not None:
            self.allow_form_redirect_to(row.dns_host.offer.url_sync_ux)
        report = None
        if self.get_query_argument("diagnose", "") == "1":
            await self.hit_rate_limit("/v1/public/verification-links/")
            report = await verification_links.diagnose(self.services, token)
        dns = instructions.dns_instructions(shape.present(row), self.services.config.tls_terminator)
        self.render_page("verify.html", view=view, dns=dns, token=token,
                         one_click_action=f"/verify/{token}/one-click", report=report,
                         lifecycle=self.services.config.lifecycle,
                         poll=awaited_check(self.services, view, f"/verify/{token}/status"))

    async def post(self, token: str) -> None:
        """The page's "Check now"."""
        if await self.view_or_explain(token) is None:
            return
        result = await verification_links.verify(self.services, token)
        self.flash(in_button_words(result.message) or "")
        self.redirect(f"/verify/{token}", status=303)


routes = [
    (r"/site/([^/]+)/dns", DnsPage),
    (r"/site/([^/]+)/dns/check", CheckNow),
    (r"/site/([^/]+)/dns/share", ShareLink),
    (r"/verify/([^/]+)", PublicLinkPage),
]
