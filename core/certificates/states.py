"""What the provider's two status fields mean for our states: decided here and nowhere else.

Cloudflare reports a hostname ``status`` (ownership and routing) and an ``ssl.status`` (the
certificate) that move independently; unknown values count as in progress, never as a crash. The
ACME provider (core/acme/) speaks the same words: ``invalid`` is an order its CA refused.

| provider reports                                              | Certificate | Domain cert |
|---------------------------------------------------------------|-------------|-------------|
| hostname ``blocked`` or ``test_blocked``                      | error       | blocked     |
| hostname ``moved``/``deleted``/``pending_deletion``/``test_failed``, or ssl ``*_timed_out``/``invalid``/``expired``/``deleted``/``pending_deletion``/``deactivating``/``inactive`` | error | error |
| hostname ``active``/``active_redeploying`` and ssl ``active`` | active      | active      |
| anything else, for a certificate that was active before       | pending     | renewing    |
| anything else (``pending_validation``, unknown values, ...)    | pending     | pending     |

``opsStatus`` then follows from the Domain's statuses through ``core.domains.ops_status``.
"""

from __future__ import annotations

import attrs

from core.edge import ProviderState
from core.edge.words import EDGE, ProviderWords, hostname_words, ssl_words
from store.records import Certificate

BLOCKED_HOSTNAME = frozenset({"blocked", "test_blocked"})
FAILED_HOSTNAME = frozenset({"moved", "deleted", "pending_deletion", "test_failed"})
FAILED_SSL = frozenset({"expired", "deleted", "pending_deletion", "deactivating", "inactive"})
ACTIVE_HOSTNAME = frozenset({"active", "active_redeploying"})
#: Failures that a re-validation request (Cloudflare: a PATCH repeating the ssl method) can fix.
RETRIGGERABLE_HOSTNAME = frozenset({"moved"})
#: What ``describe`` tells an API client to do, in the API's verbs; the portal says its button's
#: words instead ("Check now"), so they are named here once.
VERIFY_AGAIN = "verify them again (verify-delegation or recheck; a refresh only reads the provider's state)"
CHECK_AGAIN = "refresh to check again"
#: A validation the CA refused (ACME: an ``invalid`` order), which a new order can fix.
FAILED_VALIDATION = frozenset({"invalid"})


@attrs.frozen
class Classified:
    certificate: str
    "The Certificate's status: ``pending``, ``active`` or ``error``."
    domain: str
    "The Domain's ``cert.status``: also ``renewing`` and ``blocked``."


def ssl_timed_out(ssl_status: str | None) -> bool:
    """A validation that failed in a way validating again can fix: timed out (Cloudflare), refused (ACME)."""
    return ssl_status is not None and (ssl_status.endswith("_timed_out") or ssl_status in FAILED_VALIDATION)


def retriggerable(state: ProviderState) -> bool:
    """A failure the provider fixes by validating again, once DNS is right."""
    return ssl_timed_out(state.ssl_status) or state.hostname_status in RETRIGGERABLE_HOSTNAME


def revalidation_can_fix(certificate: Certificate) -> bool:
    """A certificate stored as failed, in a state of its provider hostname that validating again
    can fix (``retriggerable`` of the provider's last report, as stored on it)."""
    return (
        certificate.status == "error"
        and certificate.provider_hostname_id is not None
        and (ssl_timed_out(certificate.provider_status) or certificate.provider_hostname_status in RETRIGGERABLE_HOSTNAME)
    )


def stopped_before_provider(certificate: Certificate) -> bool:
    """A certificate stored as failed that the provider never answered about: the service's own
    checks stopped its request before anything was asked (the CAA pre-flight, DNSSEC failing, ACME:
    the CNAME not leading to the target). Each named the fix; a background check that finds those
    checks passing requests it again (core/lifecycle/watcher.py). A refusal the provider made has
    ``last_checked_at`` (core/certificates/results.py) and is not requested again unasked."""
    return certificate.status == "error" and certificate.provider_hostname_id is None and certificate.last_checked_at is None


def classify(state: ProviderState, *, was_active: bool) -> Classified:
    """Our statuses for a provider report; ``was_active``: the certificate was active before."""
    if state.hostname_status in BLOCKED_HOSTNAME:
        return Classified("error", "blocked")
    if state.hostname_status in FAILED_HOSTNAME or ssl_timed_out(state.ssl_status) or state.ssl_status in FAILED_SSL:
        return Classified("error", "error")
    if state.hostname_status in ACTIVE_HOSTNAME and state.ssl_status == "active":
        return Classified("active", "active")
    if was_active and state.ssl_status != "active":
        return Classified("pending", "renewing")
    return Classified("pending", "pending")


def describe(state: ProviderState, classified: Classified, words: ProviderWords = EDGE) -> str:
    """One sentence (or two) for ``message`` and ``cert.lastError``, in a customer's words: the
    provider's states said in words (the raw values are the Certificate's fields), and ``words``
    naming who issues (the edge provider, or with ACME the CA)."""
    seen = f"certificate {ssl_words(state.ssl_status)}"
    if not words.acme:  # the ACME provider's hostname status only repeats whether it issued
        seen = f"hostname {hostname_words(state.hostname_status)}, {seen}"
    said = f" {words.Issuer} says: {' '.join(_sentence(e) for e in state.errors)}" if state.errors else ""
    noted = f" {state.notice}" if state.notice else ""
    said += noted
    if classified.domain == "blocked":
        return f"{words.Issuer} blocked this hostname ({seen}); contact the provider's support.{said}"
    if classified.certificate == "error":
        return (
            f"{words.Issuer} could not issue the certificate ({seen}). Check that both DNS records are "
            f"in place, then {VERIFY_AGAIN} to have it validate again.{said}"
        )
    if classified.certificate == "active":
        if words.acme:
            return f"The certificate is active: issued by {words.issuer}, served by {words.server}.{noted}"
        return f"The certificate is active at the edge provider.{noted}"
    if classified.domain == "renewing":
        return f"The certificate is being renewed by {words.issuer} ({seen}); the current one keeps serving.{said}"
    return (
        f"{words.Issuer} is issuing the certificate ({seen}); keep both DNS records in place and "
        f"{CHECK_AGAIN}.{said}"
    )


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."
