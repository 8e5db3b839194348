"""``/v1/domains``: create, bulk, query, item, delegation record, verify-delegation, recheck, diagnosis,
one-click set-up."""

from __future__ import annotations

from core.domains import operations, shape
from core.domains import query as domain_query
from core.identity.scopes import READERS, WRITERS
from core.verification import checks as verification
from core.verification import diagnosis, one_click
from handlers.base import ApiHandler, parse_id, require

VERIFY_SCOPES = ("domains:write", "certificates:write")


class DomainCreateHandler(ApiHandler):
    @require(scopes=("domains:write",), roles=WRITERS)
    async def post(self) -> None:
        request = self.body(operations.CreateDomain)
        domain = await operations.create(self.services, workspace=self.authorized.workspace, request=request)
        self.send_json(domain, status=201)


class DomainBulkHandler(ApiHandler):
    @require(scopes=("domains:write",), roles=WRITERS)
    async def post(self) -> None:
        request = self.body(operations.BulkCreate)
        self.finish(operations.bulk_json(await operations.bulk_create(self.services, workspace=self.authorized.workspace, request=request)))


class DomainQueryHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=READERS)
    async def post(self) -> None:
        request = self.body(domain_query.QueryDomains)
        page = await self.services.store.run(domain_query.query_rows, self.services, workspace=self.authorized.workspace,
                                             request=request)
        self.finish(domain_query.page_json(page))


class DomainHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=READERS)
    async def get(self, domain_id: str) -> None:
        row = await operations.fetch(self.services, self.authorized.workspace, parse_id(domain_id, "Domain"))
        self.finish(shape.render(row))

    @require(scopes=("domains:write",), roles=WRITERS)
    async def patch(self, domain_id: str) -> None:
        request = self.body(operations.PatchDomain)
        domain = await self.services.store.run(
            operations.patch, self.services, workspace=self.authorized.workspace, domain_id=parse_id(domain_id, "Domain"),
            request=request,
        )
        self.send_json(domain)

    @require(scopes=("domains:write",), roles=WRITERS)
    async def delete(self, domain_id: str) -> None:
        await self.services.store.run(operations.delete, self.services, workspace=self.authorized.workspace,
                                      domain_id=parse_id(domain_id, "Domain"))
        self.send_empty()


class DelegationRecordHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=READERS)
    async def get(self, domain_id: str) -> None:
        record = await self.services.store.run(operations.delegation, self.services, workspace=self.authorized.workspace,
                                               domain_id=parse_id(domain_id, "Domain"))
        self.send_json(record)


class VerifyDelegationHandler(ApiHandler):
    @require(scopes=VERIFY_SCOPES, roles=WRITERS)
    async def post(self, domain_id: str) -> None:
        result = await verification.verify(
            self.services, workspace=self.authorized.workspace, domain_id=parse_id(domain_id, "Domain")
        )
        self.send_json(result)


class RecheckHandler(ApiHandler):
    @require(scopes=VERIFY_SCOPES, roles=WRITERS)
    async def post(self, domain_id: str) -> None:
        result = await verification.recheck(
            self.services, workspace=self.authorized.workspace, domain_id=parse_id(domain_id, "Domain")
        )
        self.send_json(result)


class DiagnosisHandler(ApiHandler):
    @require(scopes=VERIFY_SCOPES, roles=WRITERS)
    async def get(self, domain_id: str) -> None:
        report = await diagnosis.diagnose(
            self.services, workspace=self.authorized.workspace, domain_id=parse_id(domain_id, "Domain")
        )
        self.send_json(report)


class OneClickHandler(ApiHandler):
    @require(scopes=VERIFY_SCOPES, roles=WRITERS)
    async def post(self, domain_id: str) -> None:
        started = await one_click.start(self.services, workspace=self.authorized.workspace,
                                        domain_id=parse_id(domain_id, "Domain"), started_by=self.authorized.label)
        self.send_json(started)


routes = [
    (r"/v1/domains", DomainCreateHandler),
    (r"/v1/domains/bulk", DomainBulkHandler),
    (r"/v1/domains/query", DomainQueryHandler),
    (r"/v1/domains/([^/]+)", DomainHandler),
    (r"/v1/domains/([^/]+)/delegation-record", DelegationRecordHandler),
    (r"/v1/domains/([^/]+)/verify-delegation", VerifyDelegationHandler),
    (r"/v1/domains/([^/]+)/recheck", RecheckHandler),
    (r"/v1/domains/([^/]+)/diagnosis", DiagnosisHandler),
    (r"/v1/domains/([^/]+)/one-click", OneClickHandler),
]
