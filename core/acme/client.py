"""One certificate authority's ACME endpoint (RFC 8555), spoken through the ``acme`` package (certbot's).

The package is synchronous (it sends with ``requests``): every method here blocks, and the provider
calls them in worker threads of its own (core/acme/provider.py), never on the event loop. Each
method is one or two requests: the provider does the waiting between them, so polling never
sleeps in a thread. What the package lacks is added here: an order naming the certificate it
replaces (RFC 9773 ``replaces``), and the renewal information of a certificate (ARI) read with the
window's ``Retry-After``.

The CA is the operator's configuration, reached directly (no outbound address guard), with its own
CA bundle for a test CA.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
from acme import challenges, messages
from acme import client as acme_client
from acme import errors as acme_errors
from cryptography import x509
from josepy.json_util import field
from josepy.jwa import ES256
from josepy.jwk import JWK

from core.acme import keys

USER_AGENT = "certificate-provisioning-service"


class NewOrder(messages.NewOrder):
    """A new order that may name the certificate it replaces (RFC 9773 section 5)."""

    replaces: str = field("replaces", omitempty=True)


@attrs.frozen
class Order:
    url: str
    status: str
    "``pending``, ``ready``, ``processing``, ``valid`` or ``invalid``."
    authorizations: tuple[str, ...]
    finalize: str
    certificate: str | None
    error: str | None
    "The CA's problem, in its words, for an invalid order."


@attrs.frozen
class Challenge:
    """What an authorization needs of us: a DNS-01 TXT value at ``_acme-challenge.<identifier>``."""

    authorization_url: str
    status: str
    "The authorization's: ``pending``, ``valid``, ``invalid`` ..."
    identifier: str
    challenge_url: str | None
    challenge_status: str | None
    "The DNS-01 challenge's: ``pending`` until answered, then ``processing``, ``valid``, ``invalid``."
    validation: str | None
    "The TXT value the CA looks for."
    error: str | None


@attrs.frozen
class RenewalWindow:
    start: dt.datetime
    end: dt.datetime
    retry_after: dt.timedelta


def problem(exc: BaseException) -> str:
    """A CA's error as a sentence: its problem document's detail and type, or the exception."""
    if isinstance(exc, messages.Error):
        kind = (exc.typ or "").rsplit(":", 1)[-1]
        return f"{exc.detail or exc.description or 'error'} ({kind})" if kind else str(exc.detail or exc)
    return str(exc) or type(exc).__name__


def problem_type(exc: BaseException) -> str | None:
    """``rateLimited``, ``serverInternal``, ``caa`` ... for a CA's problem document; else None."""
    return (exc.typ or "").rsplit(":", 1)[-1] if isinstance(exc, messages.Error) else None


class CaClient:
    """One CA's directory, and an account of ours there."""

    def __init__(self, directory_url: str, *, ca_bundle: str, timeout: float) -> None:
        self.directory_url = directory_url
        self._net = acme_client.ClientNetwork(key=None, alg=ES256, user_agent=USER_AGENT, timeout=int(max(1, timeout)))
        # requests verifies against a CA bundle file when given its path (a test CA such as Pebble's).
        self._net.verify_ssl = ca_bundle or True  # type: ignore[assignment]
        self._client: acme_client.ClientV2 | None = None

    def close(self) -> None:
        self._net.session.close()

    @property
    def client(self) -> acme_client.ClientV2:
        if self._client is None:
            self._client = acme_client.ClientV2(acme_client.ClientV2.get_directory(self.directory_url, self._net),
                                                self._net)
        return self._client

    def caa_identities(self) -> tuple[str, ...]:
        """The issuer domains the CA recognises in CAA records (``meta.caaIdentities``), when it says."""
        meta = getattr(self.client.directory, "meta", None)
        return tuple(getattr(meta, "caa_identities", None) or ())

    def external_account_required(self) -> bool:
        return bool(self.client.external_account_required())

    # -- the account ---------------------------------------------------------------------------

    def register(self, key: JWK, *, email: str, eab_kid: str, eab_hmac_key: str) -> str:
        """A new account for ``key`` (or the existing one of that key): its URL."""
        self._net.key, self._net.account = key, None
        eab = None
        if eab_kid:
            eab = messages.ExternalAccountBinding.from_data(
                account_public_key=key.public_key(), kid=eab_kid, hmac_key=eab_hmac_key,
                directory=self.client.directory)
        registration = messages.NewRegistration.from_data(email=email or None, terms_of_service_agreed=True,
                                                          external_account_binding=eab)
        try:
            regr = self.client.new_account(registration)
        except acme_errors.ConflictError as exists:  # this key has an account already
            return str(exists.location)
        return str(regr.uri)

    def use(self, key: JWK, account_url: str) -> None:
        self._net.key = key
        self._net.account = messages.RegistrationResource(uri=account_url, body=messages.Registration())

    # -- orders --------------------------------------------------------------------------------

    def new_order(self, hostname: str, *, replaces: str | None) -> Order:
        identifiers = [messages.Identifier(typ=messages.IDENTIFIER_FQDN, value=hostname)]
        order = NewOrder(identifiers=identifiers, replaces=replaces) if replaces else NewOrder(identifiers=identifiers)
        response = self.client._post(self.client.directory["newOrder"], order)
        return _order(response.headers["Location"], response.json())

    def order(self, url: str) -> Order:
        return _order(url, self._get(url).json())

    def challenge(self, authorization_url: str) -> Challenge:
        """The authorization at ``authorization_url`` and its DNS-01 challenge."""
        body = messages.Authorization.from_json(self._get(authorization_url).json())
        dns01 = [c for c in body.challenges if isinstance(c.chall, challenges.DNS01)]
        chall = dns01[0] if dns01 else None
        errors = [problem(c.error) for c in body.challenges if c.error is not None]
        return Challenge(
            authorization_url=authorization_url, status=body.status.name, identifier=body.identifier.value,
            challenge_url=chall.uri if chall else None, challenge_status=chall.status.name if chall else None,
            validation=chall.chall.validation(self._net.key) if chall else None,
            error="; ".join(errors) or None,
        )

    def answer(self, challenge: Challenge) -> None:
        """Tell the CA the TXT record is in place: validate now."""
        assert challenge.challenge_url is not None
        self.client._post(challenge.challenge_url, challenges.DNS01Response())

    def finalize(self, order: Order, csr_pem: bytes) -> Order:
        csr = x509.load_pem_x509_csr(csr_pem)
        response = self.client._post(order.finalize, messages.CertificateRequest(csr=csr))
        return _order(order.url, response.json())

    def download(self, certificate_url: str) -> str:
        """The issued certificate with its chain (PEM, leaf first)."""
        return str(self._get(certificate_url).text)

    def revoke(self, chain_pem: str, *, reason: int) -> None:
        self.client.revoke(x509.load_pem_x509_certificate(chain_pem.encode()), reason)

    def renewal_window(self, chain_pem: str) -> RenewalWindow | None:
        """The CA's suggested renewal window for the certificate (RFC 9773); None without ARI."""
        try:
            base = self.client.directory["renewalInfo"]
        except KeyError:
            return None
        response = self._net.get(f"{str(base).rstrip('/')}/{keys.ari_id(chain_pem)}", content_type="application/json")
        window = messages.RenewalInfo.from_json(response.json()).suggested_window
        retry = _retry_after(response.headers.get("Retry-After"))
        return RenewalWindow(start=_utc(window.start), end=_utc(window.end), retry_after=retry)

    def _get(self, url: str) -> Any:
        """POST-as-GET, as RFC 8555 asks for every resource but the directory and ARI."""
        return self.client._post_as_get(url)


def _order(url: str, data: dict[str, Any]) -> Order:
    body = messages.Order.from_json(data)
    return Order(url=url, status=body.status.name, authorizations=tuple(body.authorizations or ()),
                 finalize=body.finalize, certificate=body.certificate,
                 error=problem(body.error) if body.error is not None else None)


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _retry_after(header: str | None) -> dt.timedelta:
    """When to ask for the window again: the CA's ``Retry-After``, within six hours to a day."""
    try:
        seconds = int(header or "")
    except ValueError:
        seconds = 6 * 3600
    return dt.timedelta(seconds=min(max(seconds, 3600), 86400))
