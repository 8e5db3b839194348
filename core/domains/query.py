"""POST /v1/domains/query: filters, sort and keyset pagination with signed cursors.

A cursor carries the (sort value, id) of the last row shown, so the next page starts strictly
after it: rows inserted while a caller walks the pages can never make a row appear twice. It is
signed and bound to the workspace, the resource, the filters and the sort, so a cursor that was
tampered with or reused with other filters is refused.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import attrs
import idna

from core import cursors
from core.domains.operations import clean_tags
from core.domains.records import CERT_STATUSES, OPS_STATUSES, VALIDATION_STATUSES
from core.domains.shape import Domain, present, render_stored
from core.errors import ValidationError
from core.text import printable, shown
from store.domain_rows import StoredDomain, fold, from_columns
from store.domains import SORT_COLUMNS, DomainFilter
from store.records import Workspace

if TYPE_CHECKING:
    from core.services import Services

LIMIT_DEFAULT = 100
LIMIT_MAX = 250
Q_MAX = 200
#: A filter matching fewer than 1 in this many of a workspace's domains is "sparse": its page is
#: found from the tag index rather than by walking the sort order.
SPARSE_RATIO = 50


@attrs.frozen
class Sort:
    by: str = "createdAt"
    dir: str = "desc"


@attrs.frozen
class Page:
    limit: int = LIMIT_DEFAULT
    cursor: str | None = None


@attrs.frozen
class QueryDomains:
    q: str | None = None
    status: str | None = None
    validation_status: str | None = None
    cert_status: str | None = None
    client_id: uuid.UUID | None = None
    tags: list[str] | None = None
    sort: Sort | None = None
    page: Page | None = None


@attrs.frozen
class DomainPage:
    items: list[Domain]
    total: int
    next_cursor: str | None = None


def _one_of(name: str, value: str | None, allowed: tuple[str, ...], errors: dict[str, list[str]]) -> None:
    if value is not None and value not in allowed:
        errors.setdefault(name, []).append(f"Must be one of: {', '.join(allowed)} (got '{shown(value)}')")


def _validate(request: QueryDomains) -> tuple[DomainFilter, Sort, Page]:
    errors: dict[str, list[str]] = {}
    _one_of("status", request.status, OPS_STATUSES, errors)
    _one_of("validationStatus", request.validation_status, VALIDATION_STATUSES, errors)
    _one_of("certStatus", request.cert_status, CERT_STATUSES, errors)
    q = printable(request.q or "")
    if q is None:  # the rule tags follow; a NUL would also cut SQLite's LIKE pattern short
        errors.setdefault("q", []).append("Must be printable: no control, format, private-use or noncharacter "
                                          "code points, and no space but U+0020")
        q = ""
    elif len(q) > Q_MAX:
        errors.setdefault("q", []).append(f"Must be at most {Q_MAX} characters")
    tags = clean_tags(request.tags, errors) or []
    sort = request.sort or Sort()
    if sort.by not in SORT_COLUMNS:
        errors.setdefault("sort", []).append(f"by: must be one of: {', '.join(SORT_COLUMNS)} (got '{shown(sort.by)}')")
    if sort.dir not in ("asc", "desc"):
        errors.setdefault("sort", []).append(f"dir: must be asc or desc (got '{shown(sort.dir)}')")
    page = request.page or Page()
    if not 1 <= page.limit <= LIMIT_MAX:
        errors.setdefault("page", []).append(f"limit: must be 1 to {LIMIT_MAX} (got {page.limit})")
    if errors:
        raise ValidationError(field_errors=errors)
    domain_filter = DomainFilter(
        q=fold(q) or None,
        q_hostname=_as_hostname(q.lower()),
        ops_status=request.status,
        validation_status=request.validation_status,
        cert_status=request.cert_status,
        client_id=request.client_id,
        tags=tuple(sorted(tags)),
    )
    return domain_filter, sort, page


def _as_hostname(text: str) -> str | None:
    """``bücher`` -> ``xn--bcher-kva``: the form a Unicode name is stored in, when it has one."""
    if text.isascii():
        return None
    try:
        return idna.encode(text, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None


def _binding(workspace: Workspace, domain_filter: DomainFilter, sort: Sort) -> str:
    """What a cursor is bound to; any change of workspace, filters or sort changes it."""
    return cursors.binding(str(workspace.id), "domains", attrs.asdict(domain_filter, value_serializer=_plain), attrs.asdict(sort))


def _plain(_: Any, __: Any, value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else list(value) if isinstance(value, tuple) else value


@attrs.frozen
class RowPage:
    rows: list[StoredDomain]
    total: int
    next_cursor: str | None = None


def query_rows(services: Services, *, workspace: Workspace, request: QueryDomains) -> RowPage:
    domain_filter, sort, page = _validate(request)
    binding = _binding(workspace, domain_filter, sort)
    after = cursors.decode(services.keyring, page.cursor, binding) if page.cursor is not None else None
    repo = services.store.domains
    total = repo.count(workspace.id, domain_filter)
    # Unfiltered, the total is the workspace's size: not asked again (a round trip on PostgreSQL).
    size = total if domain_filter == DomainFilter() else repo.workspace_size(workspace.id)
    sparse = total * SPARSE_RATIO < size
    rows = repo.page(
        workspace.id,
        domain_filter,
        sort_by=sort.by,
        descending=sort.dir == "desc",
        after=after,
        limit=page.limit + 1,
        sparse=sparse,
    )
    next_cursor = None
    if len(rows) > page.limit:
        rows = rows[: page.limit]
        last = rows[-1]
        next_cursor = cursors.encode(services.keyring, binding, (repo.sort_value(last, sort.by), last["id"]))
    return RowPage(rows=rows, total=total, next_cursor=next_cursor)


def query(services: Services, *, workspace: Workspace, request: QueryDomains) -> DomainPage:
    page = query_rows(services, workspace=workspace, request=request)
    return DomainPage(items=[present(from_columns(r)) for r in page.rows], total=page.total, next_cursor=page.next_cursor)


def page_json(page: RowPage) -> bytes:
    """The page as ``dumps(query(...))`` would write it, built from each domain's rendered JSON,
    which is kept while its stored row is unchanged: a polled page costs no re-serialisation."""
    tail = f',"total":{page.total}' + (f',"nextCursor":{json.dumps(page.next_cursor)}' if page.next_cursor else "")
    return b'{"items":[' + b",".join(render_stored(row) for row in page.rows) + b"]" + tail.encode() + b"}"
