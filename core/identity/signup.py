"""Passwordless sign-up: an e-mail address and a first hostname make a workspace.

No password is ever accepted: the owner proves the e-mail address at the first OpenID Connect
sign-in (``email_verified``), which binds the identity to the user created here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from core import hostnames
from core.domains import operations, shape
from core.errors import ValidationError
from core.identity import accounts
from core.text import EMAIL_MESSAGE, email_address, normalise_email

if TYPE_CHECKING:
    from core.services import Services

_NOT_SENT = object()


@attrs.frozen
class SignupRequest:
    email: str
    domain: str
    password: Any = _NOT_SENT
    "Only so that a request carrying one can be refused by name."


@attrs.frozen
class AuthProvider:
    type: str
    passwordless: bool
    login_url: str


@attrs.frozen
class SignedUp:
    """201: the new workspace's first domain and where to go next."""

    user_email: str
    domain: shape.Domain
    portal_url: str
    auth_provider: AuthProvider


@attrs.frozen
class SignInRequired:
    """202: the e-mail address is known; nothing was created."""

    user_email: str
    status: str
    message: str
    portal_url: str
    auth_provider: AuthProvider


def _auth_provider(services: Services) -> AuthProvider:
    return AuthProvider(type="oidc", passwordless=True, login_url=_portal(services) + "/login")


def _portal(services: Services) -> str:
    return services.config.server.portal_url.rstrip("/")


def _validate(request: SignupRequest) -> str:
    errors: dict[str, list[str]] = {}
    email = email_address(request.email)
    if email is None:
        errors["email"] = [EMAIL_MESSAGE]
    if request.password is not _NOT_SENT:
        errors["password"] = ["Sign-up is passwordless: do not send a password; sign in with OpenID Connect"]
    try:
        hostnames.normalise(request.domain)
    except hostnames.HostnameError as exc:
        errors["domain"] = [str(exc)]
    if errors or email is None:
        raise ValidationError(field_errors=errors)
    return normalise_email(email)


def _known(services: Services, email: str) -> bool:
    """Someone who already belongs to a workspace signs in instead of signing up.

    A pending invitation does not count (it is the inviter's offer, not the invitee's account),
    nor does a user who left or was removed from every workspace: both may sign up.
    """
    store = services.store
    user = store.accounts.user_by_email(email)
    return user is not None and bool(store.accounts.memberships_of_user(user.id))


def _sign_in_required(services: Services, email: str) -> SignInRequired:
    return SignInRequired(
        user_email=email,
        status="sign_in_required",
        message="This e-mail address already has an account: sign in, then add domains with POST /v1/domains.",
        portal_url=_portal(services) + "/login",
        auth_provider=_auth_provider(services),
    )


def _create(services: Services, email: str, new: operations.NewDomain) -> SignedUp | SignInRequired:
    """A unit of work: the workspace, its owner and its first domain, unless the e-mail address
    signed up meanwhile, while the provider was asked."""
    with services.store.transaction():
        if _known(services, email):
            return _sign_in_required(services, email)
        workspace, _ = accounts.create_workspace(services, name=new.apex, owner_email=email)
        row = operations.save_create(services, workspace=workspace, new=new)
    return SignedUp(
        user_email=email,
        domain=shape.present(row),
        portal_url=f"{_portal(services)}/site/{row.id}/dns",
        auth_provider=_auth_provider(services),
    )


async def signup(services: Services, request: SignupRequest) -> SignedUp | SignInRequired:
    email = _validate(request)
    if await services.store.run(_known, services, email):
        return _sign_in_required(services, email)
    # The Domain goes through the same rules and provider call as POST /v1/domains.
    new = await operations.prepare_create(
        services, workspace=None, request=operations.CreateDomain(apex=request.domain), apex_field="domain"
    )
    return await services.store.run(_create, services, email, new)
