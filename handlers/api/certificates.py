"""Certificates: issue (and its alias), query, get, refresh, bundle."""

from __future__ import annotations

from core.certificates import idempotency, issuance, views
from core.identity.scopes import READERS, WRITERS
from core.wire import dump
from handlers.base import ApiHandler, parse_id, require


class IssueHandler(ApiHandler):
    @require(scopes=("certificates:write",), roles=WRITERS)
    async def post(self, domain_id: str) -> None:
        request = self.body(issuance.IssueRequest)
        key = idempotency.key_from_header(
            self.request.headers.get(idempotency.HEADER),
            method=self.request.method,
            path=idempotency.canonical_path(self.request.path, id_segment=3, raw_id=domain_id),
            body=dump(request),  # the fields it knows: unknown ones are ignored here too
        )
        outcome = await issuance.issue(
            self.services,
            workspace=self.authorized.workspace,
            domain_id=parse_id(domain_id, "Domain"),
            request=request,
            idempotency=key,
        )
        if outcome.replayed:
            self.set_header("Idempotent-Replayed", "true")
        self.finish(outcome.body)


class CertificateQueryHandler(ApiHandler):
    @require(scopes=("certificates:read",), roles=READERS)
    async def post(self, domain_id: str) -> None:
        request = self.body(views.QueryCertificates)
        page = await self.services.store.run(
            views.query, self.services, workspace=self.authorized.workspace, domain_id=parse_id(domain_id, "Domain"),
            request=request,
        )
        self.send_json(page)


class CertificateHandler(ApiHandler):
    @require(scopes=("certificates:read",), roles=READERS)
    async def get(self, certificate_id: str) -> None:
        certificate = await self.services.store.run(
            views.get, self.services, workspace=self.authorized.workspace, certificate_id=parse_id(certificate_id, "Certificate")
        )
        self.send_json(certificate)


class RefreshHandler(ApiHandler):
    @require(scopes=("certificates:write",), roles=WRITERS)
    async def post(self, certificate_id: str) -> None:
        summary = await issuance.refresh(
            self.services, workspace=self.authorized.workspace, certificate_id=parse_id(certificate_id, "Certificate")
        )
        self.send_json(summary)


class BundleHandler(ApiHandler):
    @require(scopes=("certificates:read",), roles=READERS)
    async def get(self, certificate_id: str) -> None:
        await self.services.store.run(views.bundle, self.services, workspace=self.authorized.workspace,
                                      certificate_id=parse_id(certificate_id, "Certificate"))


routes = [
    (r"/v1/domains/([^/]+)/certificates/issue", IssueHandler),
    (r"/v1/domains/([^/]+)/issue", IssueHandler),
    (r"/v1/domains/([^/]+)/certificates/query", CertificateQueryHandler),
    (r"/v1/certificates/([^/]+)", CertificateHandler),
    (r"/v1/certificates/([^/]+)/refresh", RefreshHandler),
    (r"/v1/certificates/([^/]+)/bundle", BundleHandler),
]
