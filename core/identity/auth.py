"""Who is calling and what they may do: bearer -> Principal, the scope table, role checks."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import attrs

from core.errors import Forbidden, InsufficientScope, NotFound, Unauthorized
from core.identity import accounts, api_keys
from core.identity.scopes import SCOPES
from store.records import ApiKey, Membership, User, Workspace

if TYPE_CHECKING:
    from core.services import Services


@attrs.frozen
class Principal:
    """An authenticated caller acting in one workspace."""

    workspace: Workspace
    user: User | None = None
    "Set for a human session."
    role: str | None = None
    "The session's membership role."
    api_key: ApiKey | None = None
    "Set for an API key."
    label: str = attrs.field(init=False, eq=False, repr=False)
    "A short, secret-free name for logs (``user:<id>``, ``key:<id>``)."
    workspace_text: str = attrs.field(init=False, eq=False, repr=False)
    "The workspace's id as text, as every log line of the request carries it."

    def __attrs_post_init__(self) -> None:
        # Made once: a cached key's principal serves every request of its client, and formatting
        # a UUID is Python code (two of them were a measurable part of a GET by key).
        if self.user is not None:
            label = f"user:{self.user.id}"
        else:
            assert self.api_key is not None
            label = f"key:{self.api_key.id}"
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "workspace_text", str(self.workspace.id))

    @property
    def workspace_id(self) -> uuid.UUID:
        return self.workspace.id


def check_scope_names(scopes: Collection[str]) -> None:
    """Fail at import time when a handler names a scope the table does not have."""
    unknown = set(scopes) - SCOPES.keys()
    if unknown:
        raise ValueError(f"unknown scopes {sorted(unknown)}")


def authorize(principal: Principal | None, *, scopes: Collection[str] | None, roles: Collection[str]) -> Principal:
    """Allow a session whose role is in ``roles``, or an API key holding every scope in ``scopes``.

    ``scopes=None`` marks owner/admin management that no API key may do, ``*`` included.
    """
    if principal is None:
        raise Unauthorized()
    if principal.api_key is not None:
        if scopes is None:
            raise Forbidden("This action needs an owner or admin session; API keys cannot perform it.")
        if not permits(principal, scopes=scopes, roles=roles):
            missing = ", ".join(sorted(set(scopes) - set(principal.api_key.scopes)))
            raise InsufficientScope(f"The API key lacks the required scope(s): {missing}.")
        return principal
    if not permits(principal, scopes=(), roles=roles):
        raise Forbidden(f"The role '{principal.role}' may not do this; it needs one of: {', '.join(roles)}.")
    return principal


def permits(principal: Principal, *, scopes: Collection[str], roles: Collection[str]) -> bool:
    """Whether ``principal`` holds ``scopes`` (an API key) or one of ``roles`` (a session): for
    what an answer may include, where ``authorize`` decides whether there is an answer at all."""
    if principal.api_key is not None:
        granted = principal.api_key.scopes
        return "*" in granted or set(scopes) <= set(granted)
    return principal.role in roles


@attrs.frozen
class Caller:
    """Who a bearer credential names, before a workspace is chosen: a person or an API key.

    A person comes with their memberships and workspaces, read in the same unit of work as the
    person, so choosing the workspace a request acts in (``act_in``) needs no database.
    """

    user: User | None = None
    api_key: ApiKey | None = None
    key_workspace: Workspace | None = None
    memberships: tuple[tuple[Membership, Workspace], ...] = ()
    "A person's memberships with their workspaces, the one joined first first."
    invited: bool = False
    "Whether a person in no workspace has an invitation waiting."


def _person(services: Services, claims: dict[str, Any]) -> Caller:
    """A unit of work: the person behind verified claims, with their workspaces."""
    user = accounts.person(services, claims)
    memberships = tuple(accounts.joined(services, user))
    invited = not memberships and bool(services.store.team.invitations_for_email(user.email))
    return Caller(user=user, memberships=memberships, invited=invited)


def cached_key(services: Services, bearer: str) -> api_keys.CachedKey | None:
    """``identify`` for an API key the cache answers alone (no unit of work is due), as a plain
    call: its entry, with the key's caller and its principal in its own workspace, made once and
    reused while the entry lives. None when ``identify`` must be awaited."""
    if not bearer.startswith(api_keys.KEY_PREFIX):
        return None
    entry = api_keys.cached(services, bearer)
    if entry is not None and entry.principal is None:
        if entry.caller is None:
            entry.caller = Caller(api_key=entry.key, key_workspace=entry.workspace)
        entry.principal = Principal(workspace=entry.workspace, api_key=entry.key)
    return entry


async def identify(services: Services, bearer: str) -> Caller:
    """The person or key behind a bearer credential, or the matching 401/403.

    A cached API key needs no unit of work; another key, or a person, one (read and written whole).
    """
    if bearer.startswith(api_keys.KEY_PREFIX):
        entry = await api_keys.authenticate(services, bearer)
        if entry.caller is None:  # the same key and workspace while cached: the same caller
            entry.caller = Caller(api_key=entry.key, key_workspace=entry.workspace)
        caller: Caller = entry.caller
        return caller
    claims = await services.oidc.verify(bearer)
    return await services.store.run(_person, services, claims)


def act_in(services: Services, caller: Caller, workspace_id: uuid.UUID | None) -> Principal:
    """The caller acting in the workspace the request names (``X-Workspace-Id``), or its default.

    A key acts in its own workspace only; a person in any workspace they belong to, by default
    the one they joined first. Any other workspace is 404, like every resource of another tenant.
    No database: ``identify`` read what this chooses from.
    """
    if caller.api_key is not None:
        assert caller.key_workspace is not None
        if workspace_id is not None and workspace_id != caller.key_workspace.id:
            raise NotFound("Workspace not found.")
        return Principal(workspace=caller.key_workspace, api_key=caller.api_key)
    assert caller.user is not None
    membership, workspace = accounts.membership_in(caller.memberships, workspace_id, invited=caller.invited)
    return Principal(workspace=workspace, user=caller.user, role=membership.role)


async def authenticate(services: Services, bearer: str, workspace_id: uuid.UUID | None = None) -> Principal:
    """Turn a bearer credential into a Principal, or raise the matching 401/403/404."""
    return act_in(services, await identify(services, bearer), workspace_id)
