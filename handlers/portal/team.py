"""The team page: who belongs to the workspace and in which role, and, for owners and admins,
inviting, changing roles, removing members and revoking invitations.

Owners and admins see it, as only they may list the team in the API (``GET /v1/team``): the
members' e-mails are not shown to a role the API would refuse them to. Each action calls the same core function as its API endpoint,
so the core's rules (only an owner touches the owner role, a workspace keeps an owner) hold
here too, and a refusal is shown in words on the team page (after a redirect, as every answer to a
form). Removing someone is a page of its own naming their e-mail, the confirmation a browser
without JavaScript can show.
"""

from __future__ import annotations

from tornado.web import HTTPError, authenticated

from core.errors import ApiError, NotFound
from core.identity import team
from core.identity.auth import Principal
from core.identity.scopes import MANAGERS, ROLES
from handlers.portal.base import PortalHandler, path_id
from handlers.portal.forms import Outcome
from handlers.portal.pages import ROLE_WORDS, refusal_text
from store.records import Invitation, Member

#: What each role may do (the spec's Authentication rules).
ROLE_MEANINGS = {
    "owner": "everything, including making and removing owners",
    "admin": "manages the team (except owners), API keys and webhooks, and changes domains and certificates",
    "operator": "adds and changes domains, clients and certificates",
    "read_only": "sees domains, clients and certificates, and changes nothing",
}
#: Least access until someone decides otherwise.
DEFAULT_INVITE_ROLE = "read_only"
TEAM = "/team"


def grantable_roles(principal: Principal) -> list[str]:
    """Only an owner grants the owner role, so an admin is not offered it."""
    return [role for role in ROLES if principal.role == "owner" or role != "owner"]


class TeamPortalHandler(PortalHandler):
    async def render_team(self, principal: Principal) -> None:
        """The team page; after a refused form, with the refusal in words and what was typed."""
        error, typed = self.refused()
        email, role = typed.get("email", ""), typed.get("role", DEFAULT_INVITE_ROLE)
        current = await self.current_team(principal)
        self.render_page(
            "team.html", members=current.members, invitations=current.invitations,
            owners=sum(1 for m in current.members if m.role == "owner"),
            can_manage=principal.role in MANAGERS, grantable=grantable_roles(principal),
            role_meanings=ROLE_MEANINGS, error=error, email=email, invite_role=role if role in ROLES else DEFAULT_INVITE_ROLE,
            portal_url=self.services.config.server.portal_url,
        )

    async def current_team(self, principal: Principal) -> team.Team:
        return await self.services.store.run(team.team, self.services, principal=principal)

    async def team_member(self, principal: Principal, user_id: str) -> Member:
        """A member of the workspace shown; anyone else, a 404 page."""
        wanted = path_id(user_id)
        for member in (await self.current_team(principal)).members:
            if member.user_id == wanted:
                return member
        raise HTTPError(404)

    async def team_invitation(self, principal: Principal, invitation_id: str) -> Invitation:
        """A pending invitation of the workspace shown; anyone else's, a 404 page."""
        wanted = path_id(invitation_id)
        for invitation in (await self.current_team(principal)).invitations:
            if invitation.id == wanted:
                return invitation
        raise HTTPError(404)

    def said_no(self, exc: ApiError) -> None:
        """A rule of the core said no: back to the team page, which says why; a vanished target is a 404 page."""
        if isinstance(exc, NotFound):
            raise HTTPError(404) from None
        self.refuse(TEAM, refusal_text(exc))


class TeamPage(TeamPortalHandler):
    @authenticated
    async def get(self) -> None:
        await self.render_team(self.member(MANAGERS))


class InvitePage(TeamPortalHandler):
    """"Invite": an invitation for an e-mail; it waits on that person's account page."""

    @authenticated
    async def post(self) -> None:
        await self.hit_rate_limit("/v1/team/invitations")
        principal = self.member(MANAGERS)
        email, role = self.typed("email"), self.typed("role")

        async def invite() -> Outcome:
            made = await self.services.store.run(team.invite, self.services, principal=principal,
                                                 request=team.Invite(email=email, role=role))
            return Outcome(TEAM, f"{made.email} was invited as {ROLE_WORDS[made.role]}. The invitation waits on "
                                 "their account page once they sign in with that address.")

        try:
            await self.act(invite)
        except ApiError as exc:
            self.refuse(TEAM, refusal_text(exc), {"email": email, "role": role})


class RevokeInvitation(TeamPortalHandler):
    @authenticated
    async def post(self, invitation_id: str) -> None:
        await self.hit_rate_limit("/v1/team/invitations")
        principal = self.member(MANAGERS)

        async def revoke() -> Outcome:
            # Looked up here: the same form sent again finds it revoked and answers as the first did.
            invitation = await self.team_invitation(principal, invitation_id)
            await self.services.store.run(team.revoke_invitation, self.services, principal=principal,
                                          invitation_id=invitation.id)
            return Outcome(TEAM, f"The invitation for {invitation.email} was revoked.")

        try:
            await self.act(revoke)
        except ApiError as exc:
            self.said_no(exc)


class ChangeRole(TeamPortalHandler):
    @authenticated
    async def post(self, user_id: str) -> None:
        await self.hit_rate_limit("/v1/team/members")
        principal = self.member(MANAGERS)
        member = await self.team_member(principal, user_id)
        role = self.typed("role")

        async def change() -> Outcome:
            changed = await self.services.store.run(team.change_role, self.services, principal=principal,
                                                    user_id=member.user_id, request=team.RoleChange(role=role))
            return Outcome(TEAM, f"{changed.email} is now {ROLE_WORDS[changed.role]}.")

        try:
            await self.act(change)
        except ApiError as exc:
            self.said_no(exc)


class RemoveMember(TeamPortalHandler):
    """GET: the confirmation, naming the member; POST (from that page only): the removal."""

    @authenticated
    async def get(self, user_id: str) -> None:
        principal = self.member(MANAGERS)
        member = await self.team_member(principal, user_id)
        self.render_page("team_remove.html", member=member)

    @authenticated
    async def post(self, user_id: str) -> None:
        await self.hit_rate_limit("/v1/team/members")
        principal = self.member(MANAGERS)
        try:
            member: Member | None = await self.team_member(principal, user_id)
        except HTTPError:
            member = None  # removed already: the same form sent again answers as the first did
        if member is not None and self.typed("email") != member.email:
            # Not sent from the confirmation page: nothing is removed until it is confirmed there.
            self.redirect(f"/team/members/{member.user_id}/remove", status=303)
            return

        async def remove() -> Outcome:
            if member is None:
                raise HTTPError(404)
            await self.services.store.run(team.remove_member, self.services, principal=principal, user_id=member.user_id)
            return Outcome(TEAM, f"{member.email} was removed from the team.")

        try:
            await self.act(remove)
        except ApiError as exc:
            self.said_no(exc)


routes = [
    (r"/team", TeamPage),
    (r"/team/invitations", InvitePage),
    (r"/team/invitations/([^/]+)/revoke", RevokeInvitation),
    (r"/team/members/([^/]+)/role", ChangeRole),
    (r"/team/members/([^/]+)/remove", RemoveMember),
]
