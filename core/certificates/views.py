"""Reading certificates: one by id, a domain's list newest first, and the bundle answer.

Saved state only: nothing here contacts the provider (spec: GET shows the saved Certificate).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, NoReturn

import attrs

from core import cursors
from core.certificates.issuance import load_certificate
from core.domains import operations
from core.domains.query import LIMIT_MAX, Page
from core.edge.words import provider_words
from core.errors import Conflict, ValidationError
from store.records import Certificate, Workspace

if TYPE_CHECKING:
    from core.services import Services


@attrs.frozen
class QueryCertificates:
    page: Page | None = None


@attrs.frozen
class CertificatePage:
    items: list[Certificate]
    total: int
    next_cursor: str | None = None


def get(services: Services, *, workspace: Workspace, certificate_id: uuid.UUID) -> Certificate:
    return load_certificate(services, workspace, certificate_id)


def query(services: Services, *, workspace: Workspace, domain_id: uuid.UUID, request: QueryCertificates) -> CertificatePage:
    """A domain's certificates, newest first, by keyset pages like the domain query."""
    page = request.page or Page()
    if not 1 <= page.limit <= LIMIT_MAX:
        raise ValidationError.field("page", f"limit: must be 1 to {LIMIT_MAX} (got {page.limit})")
    operations.load(services, workspace, domain_id)  # unknown or foreign domain: 404
    bound_to = cursors.binding(str(workspace.id), "certificates", str(domain_id))
    after = cursors.decode(services.keyring, page.cursor, bound_to) if page.cursor is not None else None
    repo = services.store.certificates
    rows = repo.page(workspace.id, domain_id, after=after, limit=page.limit + 1)
    next_cursor = None
    if len(rows) > page.limit:
        rows = rows[: page.limit]
        next_cursor = cursors.encode(services.keyring, bound_to, repo.page_key(rows[-1]))
    return CertificatePage(items=rows, total=repo.count(workspace.id, domain_id), next_cursor=next_cursor)


def bundle(services: Services, *, workspace: Workspace, certificate_id: uuid.UUID) -> NoReturn:
    """Never any key material: the provider keeps it (spec, bundle rule 6); the code says why."""
    certificate = load_certificate(services, workspace, certificate_id)
    if certificate.status != "active":
        raise Conflict("cert_not_yet_issued", "The certificate is not issued yet (it is pending or failed).")
    if certificate.provider_hostname_id is not None:
        raise Conflict(
            "managed_certificate_bundle_unavailable",
            "The service keeps this certificate's private key for its TLS terminator; no bundle can be exported."
            if provider_words(services.config.provider).acme else
            "The edge provider manages this certificate and its private key; no bundle can be exported.",
        )
    raise Conflict("certificate_bundle_unavailable", "This certificate record holds no exportable material.")
