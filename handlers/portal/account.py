"""The account page: who is signed in, their workspaces and invitations, the session token for
the API; and the workspace switcher in every page's header."""

from __future__ import annotations

from urllib.parse import urlencode

from tornado.web import HTTPError

from core.errors import ApiError
from core.identity import portal_signin, workspaces
from core.identity.scopes import MANAGERS
from core.wire import parse_uuid
from handlers.portal import forms
from handlers.portal.pages import ROLE_WORDS, SESSION_COOKIE, NotAllowed, PageHandler, refusal_text


class _AccountPage(PageHandler):
    def joined(self) -> list[workspaces.Joined]:
        """The person's workspaces, as read with the person when the request began (prepare)."""
        assert self.caller is not None
        return workspaces.listed(self.caller.memberships)


class AccountHandler(_AccountPage):
    """Who is signed in, their workspaces and invitations, and the session token for the API."""

    async def get(self) -> None:
        if self.user is None:
            self.redirect(self.get_login_url() + "?" + urlencode({"next": "/account"}))
            return
        token = self.get_signed_cookie(SESSION_COOKIE, max_age_days=1)
        joined = self.joined()
        self.render_page(
            "account.html", user=self.user, principal=self.principal, joined=joined,
            only_owner=await self.services.store.run(workspaces.only_owner_of, self.services, joined),
            offers=await self.services.store.run(workspaces.offers_for, self.services, self.user),
            token=token.decode() if token else "", base_url=self.services.config.server.base_url,
        )


class AccountAction(_AccountPage):
    """The account page's buttons: switch workspace, leave one, accept or decline an invitation."""

    async def post(self, action: str, target: str) -> None:
        if self.user is None:
            raise NotAllowed("Sign in first: this acts on your account.")
        try:
            target_id = parse_uuid(target)
        except ValueError:
            raise HTTPError(404) from None
        api_path = {"switch": "/v1/workspaces", "leave": "/v1/workspaces", "accept": "/v1/invitations",
                    "decline": "/v1/invitations"}[action]
        await self.hit_rate_limit(api_path)
        user = self.user

        if action == "switch":  # changes only what this browser shows: no form record needed
            if target_id in {j.org.id for j in self.joined()}:
                self.choose_workspace(target_id)
                self.flash("Switched workspace.")
            else:
                self.flash("Workspace not found.")
            self.redirect(portal_signin.safe_next(self.get_body_argument("next", None), default="/account"), status=303)
            return

        async def answer() -> forms.Outcome:
            try:
                if action == "leave":
                    await self.services.store.run(workspaces.leave, self.services, user, target_id)
                    return forms.Outcome("/account", "You left the workspace.")
                if action == "accept":
                    joined = await self.services.store.run(workspaces.accept, self.services, user, target_id)
                    self.choose_workspace(joined.org.id)
                    return forms.Outcome("/account", f"You joined {joined.org.name} as {ROLE_WORDS.get(joined.role or '', joined.role)}.")
                await self.services.store.run(workspaces.decline, self.services, user, target_id)
                return forms.Outcome("/account", "Invitation declined.")
            except ApiError as exc:
                return forms.Outcome("/account", refusal_text(exc))

        await self.act(answer, in_workspace=False)


class SwitchWorkspace(_AccountPage):
    """The header's workspace switcher: show another of one's workspaces, on the same page."""

    async def post(self) -> None:
        if self.user is None:
            raise NotAllowed("Sign in first: this acts on your account.")
        try:
            wanted = parse_uuid(self.get_body_argument("workspace", ""))
        except ValueError:
            wanted = None
        roles = {j.org.id: j.role for j in self.joined()}
        if wanted is not None and wanted in roles:
            self.choose_workspace(wanted)
            self.flash("Switched workspace.")
        else:
            self.flash("Workspace not found.")
        here = portal_signin.safe_next(self.get_body_argument("next", None), default="/domains")
        # A page of one workspace's domain or key makes no sense in another, nor a page the role
        # there may not open: start at its domains.
        open_to_all = ("/domains", "/account", "/webhooks")
        managers_only = ("/account/keys", "/team")
        may_stay = here in open_to_all or (here in managers_only and wanted is not None and roles.get(wanted) in MANAGERS)
        self.redirect(here if may_stay else "/domains", status=303)


routes = [
    (r"/account", AccountHandler),
    (r"/account/switch", SwitchWorkspace),
    (r"/account/(switch|leave|accept|decline)/([^/]+)", AccountAction),
]
