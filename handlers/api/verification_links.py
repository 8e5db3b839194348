"""``/v1/verification-links`` (the workspace's side) and ``/v1/public/verification-links`` (the
link holder's side, no bearer: the token in the path is the credential)."""

from __future__ import annotations

from core.errors import NotFound, ValidationError
from core.identity.scopes import WRITERS
from core.verification import links as verification_links
from core.wire import parse_uuid
from handlers.base import ApiHandler, parse_id, require

#: Creating and reminding need both write scopes (spec, Authentication rule 2) ...
LINK_SCOPES = ("domains:write", "certificates:write")
#: ... and listing needs domains:read too, since the listed URLs grant verification and issuance.
LIST_SCOPES = ("domains:write", "certificates:write", "domains:read")


class LinkListHandler(ApiHandler):
    @require(scopes=LIST_SCOPES, roles=WRITERS)
    async def get(self) -> None:
        raw = self.get_query_argument("domainId", None)
        domain_id = None
        if raw is not None:
            try:
                domain_id = parse_uuid(raw)
            except ValueError:
                raise ValidationError.field("domainId", "Invalid uuid") from None
        page = await self.services.store.run(
            verification_links.list_links, self.services, workspace=self.authorized.workspace, domain_id=domain_id,
            status=self.get_query_argument("status", None), limit=self.get_query_argument("limit", None),
            cursor=self.get_query_argument("cursor", None),
        )
        self.send_json(page)

    @require(scopes=LINK_SCOPES, roles=WRITERS)
    async def post(self) -> None:
        request = self.body(verification_links.CreateLink)
        link = await self.services.store.run(verification_links.create, self.services, workspace=self.authorized.workspace,
                                             request=request)
        self.send_json(link, status=201)


class LinkRemindHandler(ApiHandler):
    @require(scopes=LINK_SCOPES, roles=WRITERS)
    async def post(self, link_id: str) -> None:
        link = await verification_links.remind(
            self.services, workspace=self.authorized.workspace, link_id=parse_id(link_id, "Verification link")
        )
        self.send_json(link)


class LinkRevokeHandler(ApiHandler):
    @require(scopes=LINK_SCOPES, roles=WRITERS)
    async def post(self, link_id: str) -> None:
        await self.services.store.run(
            verification_links.revoke, self.services, workspace=self.authorized.workspace,
            link_id=parse_id(link_id, "Verification link"),
        )
        self.send_empty()


class _PublicHandler(ApiHandler):
    """No bearer: the token in the path is the credential (kept out of the access log there)."""


class PublicLinkHandler(_PublicHandler):
    async def get(self, token: str) -> None:
        self.send_json(await verification_links.show(self.services, token))


class PublicLinkVerifyHandler(_PublicHandler):
    async def post(self, token: str) -> None:
        self.send_json(await verification_links.verify(self.services, token))


class PublicLinkNotFoundHandler(_PublicHandler):
    """Any other path under a token: the JSON 404, with the token kept out of the log here too."""

    async def prepare(self) -> None:
        await super().prepare()
        raise NotFound("No such endpoint under a verification link.")  # the path holds the token


routes = [
    (r"/v1/verification-links", LinkListHandler),
    (r"/v1/verification-links/([^/]+)/remind", LinkRemindHandler),
    (r"/v1/verification-links/([^/]+)/revoke", LinkRevokeHandler),
    (r"/v1/public/verification-links/([^/]+)", PublicLinkHandler),
    (r"/v1/public/verification-links/([^/]+)/verify", PublicLinkVerifyHandler),
    (r"/v1/public/verification-links/.+", PublicLinkNotFoundHandler),
]
