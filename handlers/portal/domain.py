"""The portal's actions on one domain: edit its notes, tags and client, delete it (after a page that
says what that does), revoke or e-mail again a verification link listed on its DNS page. The HTTPS
scan is a read-only ``?scan=1`` of the DNS page itself (handlers/portal/base.py).

Each goes through the core function of the API call it stands for, with that call's roles and
rate-limit bucket, so the portal can do nothing the API would refuse: owners, admins and operators
change domains and links, ``read_only`` gets a 403 page. Another workspace's domain or link is a
404 page. Every POST is one action per submitted form and answers 303 (handlers/portal/forms.py).
"""

from __future__ import annotations

from tornado.web import HTTPError, authenticated

from core.domains import clients as domain_clients
from core.domains import operations
from core.errors import ApiError, NotFound
from core.identity.scopes import WRITERS
from core.verification import links as verification_links
from handlers.portal.base import PortalHandler, path_id
from handlers.portal.forms import Outcome
from handlers.portal.pages import refusal_text
from store.records import DomainRow


def split_tags(text: str) -> list[str]:
    """Tags typed as one comma-separated line; empty entries (``a,,b``, a trailing comma) are
    dropped, so clearing the field clears the tags as an empty list does in the API."""
    return [tag for tag in text.split(",") if tag.strip(" ")]


class EditDomain(PortalHandler):
    """A domain's notes, tags and client (``PATCH /v1/domains/:id``). The form is on the DNS page;
    this page shows it again with what was wrong when the input is refused."""

    @authenticated
    async def get(self, domain_id: str) -> None:
        row = self.domain_row(domain_id)
        self.member(WRITERS)
        error, typed = self.refused()
        client_id = str(row.client_id) if row.client_id else ""
        await self.render_edit(row, notes=typed.get("notes", row.notes or ""), tags=typed.get("tags", ", ".join(row.tags)),
                               client_id=typed.get("clientId", client_id), error=error)

    @authenticated
    async def post(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/domains")
        row = self.domain_row(domain_id)
        principal = self.member(WRITERS)
        # Browsers send a textarea's line breaks as CRLF; the API's notes use LF.
        notes = self.typed("notes").replace("\r\n", "\n")
        tags_text = self.typed("tags")
        client_id = self.typed("clientId")  # "": no client

        async def save() -> Outcome:
            request = operations.PatchDomain(tags=split_tags(tags_text), notes=notes, client_id=client_id)
            await self.services.store.run(operations.patch, self.services, workspace=principal.workspace, domain_id=row.id,
                                          request=request)
            return Outcome(f"/site/{row.id}/dns", f"Saved the notes, tags and client of {row.apex}.")

        try:
            await self.act(save)
        except ApiError as exc:
            self.refuse(f"/site/{row.id}/edit", refusal_text(exc), {"notes": notes, "tags": tags_text, "clientId": client_id})

    async def render_edit(self, row: DomainRow, *, notes: str, tags: str, client_id: str, error: str | None) -> None:
        clients = await self.services.store.run(domain_clients.list_clients, self.services, workspace=self.member().workspace)
        self.render_page("domain_edit.html", domain=row, notes=notes, tags=tags, client_id=client_id, clients=clients,
                         error=error)


class DeleteDomain(PortalHandler):
    """``DELETE /v1/domains/:id``, after a page that names the hostname and says what stops."""

    @authenticated
    async def get(self, domain_id: str) -> None:
        row = self.domain_row(domain_id)
        self.member(WRITERS)
        self.render_page("domain_delete.html", domain=row)

    @authenticated
    async def post(self, domain_id: str) -> None:
        await self.hit_rate_limit("/v1/domains")
        try:
            row: DomainRow | None = self.domain_row(domain_id)
        except HTTPError:
            # Gone already: the same form sent again answers as the first did (the action is not
            # run for it); any other form for it is a 404 page.
            row = None
        principal = self.member(WRITERS)

        async def delete() -> Outcome:
            if row is None:
                raise HTTPError(404)
            try:
                await self.services.store.run(operations.delete, self.services, workspace=principal.workspace, domain_id=row.id)
            except NotFound:  # deleted meanwhile through another form or the API
                raise HTTPError(404) from None
            return Outcome("/domains", f"{row.apex} was deleted: its records are no longer checked and its "
                                       "verification links no longer work.")

        await self.act(delete)


class LinkAction(PortalHandler):
    """A verification link's "Revoke" and "Remind" on its domain's DNS page
    (``POST /v1/verification-links/:id/revoke`` and ``.../remind``)."""

    @authenticated
    async def post(self, domain_id: str, link_id: str, action: str) -> None:
        await self.hit_rate_limit("/v1/verification-links")
        row = self.domain_row(domain_id)
        principal = self.member(WRITERS)
        wanted = path_id(link_id)
        dns_page = f"/site/{row.id}/dns"

        async def revoke() -> Outcome:
            await self.services.store.run(verification_links.revoke, self.services, workspace=principal.workspace,
                                          link_id=wanted)
            return Outcome(dns_page, "The link was revoked: it no longer works, and opening it says it was revoked.")

        async def remind() -> Outcome:
            link = await verification_links.remind(self.services, workspace=principal.workspace, link_id=wanted)
            return Outcome(dns_page, f"The link was e-mailed again to {link.recipient_email}.")

        try:
            await self.act(revoke if action == "revoke" else remind)
        except NotFound:
            raise HTTPError(404) from None
        except ApiError as exc:  # no e-mail set up, sent too recently or too often, the mail server said no
            done = "No reminder was sent" if action == "remind" else "The link was not revoked"
            self.flash(f"{done}: {refusal_text(exc)}", near=f"link-{wanted}")  # by the link, not atop the page
            self.redirect(f"{dns_page}#link-{wanted}", status=303)


routes = [
    (r"/site/([^/]+)/edit", EditDomain),
    (r"/site/([^/]+)/delete", DeleteDomain),
    (r"/site/([^/]+)/links/([^/]+)/(revoke|remind)", LinkAction),
]
