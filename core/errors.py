"""Errors that users may see.

Each carries the spec's HTTP status and ``code``; the handlers' base class is the only place that
turns one into a response. Anything that is not an ``ApiError`` is a bug and becomes a 500 with a
generic message, so internal detail never reaches a client.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error whose message is safe to show to the caller."""

    status = 400
    code = "bad_request"
    default_message = "Bad request."

    def __init__(
        self,
        message: str | None = None,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.details = details
        self.headers = dict(headers or {})
        super().__init__(self.message)


class ValidationError(ApiError):
    """400 with ``details = {formErrors, fieldErrors}`` (the spec's validation shape)."""

    code = "validation_error"
    default_message = "The request is not valid."

    def __init__(
        self,
        message: str | None = None,
        *,
        form_errors: list[str] | None = None,
        field_errors: dict[str, list[str]] | None = None,
    ) -> None:
        self.form_errors = list(form_errors or [])
        self.field_errors = {k: list(v) for k, v in (field_errors or {}).items()}
        super().__init__(
            message or _summary(self.form_errors, self.field_errors),
            details={"formErrors": self.form_errors, "fieldErrors": self.field_errors},
        )

    @classmethod
    def field(cls, name: str, problem: str) -> ValidationError:
        """One problem with one field."""
        return cls(field_errors={name: [problem]})


def _summary(form_errors: list[str], field_errors: dict[str, list[str]]) -> str:
    if form_errors:
        return form_errors[0]
    for name, problems in field_errors.items():
        return f"{name}: {problems[0]}"
    return ValidationError.default_message


class InvalidCursor(ApiError):
    code = "invalid_cursor"
    default_message = "The pagination cursor is not valid for this query."


class InvalidGrant(ApiError):
    """The identity provider rejected an authorization code or its PKCE verifier."""

    code = "invalid_grant"
    default_message = "The authorization code or PKCE verifier was rejected."


class Unauthorized(ApiError):
    """No credential where one is required (the spec leaves this code to us)."""

    status = 401
    code = "unauthorized"
    default_message = "Authentication required: send 'Authorization: Bearer <token>'."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="api"'})


class InvalidApiKey(ApiError):
    status = 401
    code = "invalid_api_key"
    default_message = "The API key is invalid, revoked or expired."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message, headers={"WWW-Authenticate": 'Bearer realm="api", error="invalid_token"'}
        )


class InvalidToken(ApiError):
    """A session bearer that is not a valid ID token of the configured identity provider."""

    status = 401
    code = "invalid_token"
    default_message = "The session token is not valid."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message, headers={"WWW-Authenticate": 'Bearer realm="api", error="invalid_token"'}
        )


class InsufficientScope(ApiError):
    status = 403
    code = "insufficient_scope"
    default_message = "The API key lacks a scope this operation requires."


class Forbidden(ApiError):
    status = 403
    code = "forbidden"
    default_message = "You are not allowed to do this."


class NotFound(ApiError):
    status = 404
    code = "not_found"
    default_message = "Not found."


class MethodNotAllowed(ApiError):
    status = 405
    code = "method_not_allowed"
    default_message = "This method is not allowed on this path."


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload_too_large"
    default_message = "The request body is too large."


class HeaderFieldsTooLarge(ApiError):
    status = 431
    code = "header_fields_too_large"
    default_message = "The request headers are too large."


class StorageUnavailable(ApiError):
    """503: the database cannot be written (read-only, full, failing); nothing was changed."""

    status = 503
    code = "storage_unavailable"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The service cannot use its database right now ({reason}); nothing was changed. Retry shortly.",
            headers={"Retry-After": str(STORAGE_RETRY_SECONDS)},
        )


STORAGE_RETRY_SECONDS = 30


class Conflict(ApiError):
    """409 with a code chosen by the caller (idempotency, bundles, unverified delegation)."""

    status = 409
    code = "conflict"
    default_message = "The request conflicts with the current state."

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class RateLimited(ApiError):
    status = 429
    code = "rate_limited"
    default_message = "Too many requests."

    def __init__(self, retry_after: int, bucket: str) -> None:
        super().__init__(
            f"Rate limit '{bucket}' exceeded; retry after {retry_after} seconds.",
            headers={"Retry-After": str(retry_after)},
        )


class UpstreamError(ApiError):
    """An operator-configured service (identity provider, edge provider) failed or timed out."""

    status = 502
    code = "upstream_error"
    default_message = "An upstream service did not answer."


class WildcardNotSupported(ApiError):
    code = "wildcard_not_supported_in_minimal_edge_provider_mode"
    default_message = (
        "Wildcard certificates are not supported: one certificate is issued per exact hostname. "
        "Send wildcard false (or leave it out)."
    )
