"""One certificate authority's ACME endpoint (RFC 8555), spoken through the ``acme`` package (certbot's).

The package is synchronous (it sends with ``requests``): every method here blocks, and the provider
calls them in worker threads of its own (core/acme/provider.py), never on the event loop. Each
method is one or two requests: the provider does the waiting between them, so polling never
sleeps in a thread. What the package lacks is added here: an order naming the certificate it
replaces (RFC 9773 ``replaces``), the profiles the CA offers (ACME profiles, draft-ietf-acme-profiles:
the directory's ``meta.profiles``), the renewal information of a certificate (ARI) read with the
window's ``Retry-After`` and ``explanationURL``, and a 409 answer read as the problem it carries
(the package drops its body: a refused ``replaces`` is ``alreadyReplaced``, a 409).

The CA is the operator's configuration, reached directly (no outbound address guard), with its own
CA bundle for a test CA.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
from collections.abc import Mapping
from typing import Any

import attrs
from acme import challenges, messages
from acme import client as acme_client
from acme import errors as acme_errors
from acme import jws as acme_jws
from cryptography import x509
from josepy.json_util import field
from josepy.jwa import ES256
from josepy.jwk import JWK

from core.acme import keys
from core.acme.problems import Problem, clean

USER_AGENT = "certificate-provisioning-service"


class _Network(acme_client.ClientNetwork):
    """The package's network, but a 409 with a problem document raises that problem: the package
    raises a bare ``ConflictError`` for any 409 (an ACME v1 account conflict), and RFC 9773's
    ``alreadyReplaced`` would lose its words."""

    @classmethod
    def _check_response(cls, response: Any, content_type: str | None = None) -> Any:
        if response.status_code == 409:
            try:
                body = response.json()
            except ValueError:
                body = None
            if isinstance(body, dict) and "type" in body:
                raise messages.Error.from_json(body)
        return super()._check_response(response, content_type=content_type)


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
    error: Problem | None
    "The CA's problem, for an invalid order."
    profile: str | None = None
    "The profile the CA issues it under, as the order says (ACME profiles); None when it names none."


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
    errors: tuple[Problem, ...]
    "The problems of its challenges that failed."


@attrs.frozen
class RenewalWindow:
    start: dt.datetime
    end: dt.datetime
    retry_after: dt.timedelta
    "When to read it again: the CA's ``Retry-After``."
    explanation_url: str | None = None
    "Where the CA explains the window (RFC 9773 ``explanationURL``): say, why it moved it earlier."


def unoffered(directory_url: str, profile: str, offered: dict[str, str]) -> str:
    """Why a CA's order cannot name ``profile``: the CA, and the profiles it does offer."""
    names = ", ".join(f'"{name}"' for name in offered)
    offers = f"it offers {names}" if offered else "its directory lists no profiles"
    return f'The certificate authority {directory_url} does not offer the profile "{profile}" ({offers}).'


def problem_of(error: messages.Error) -> Problem:
    """A problem document as the service reads it: its type's last part, its detail cleaned."""
    detail = clean(str(error.detail or error.description or error.title or ""))
    return Problem(type=(error.typ or "").rsplit(":", 1)[-1], detail=detail or "no detail given")


def problem(exc: BaseException) -> str:
    """A CA's error as a sentence: its problem document's detail and type, or the exception."""
    if isinstance(exc, messages.Error):
        found = problem_of(exc)
        return f"{found.detail} ({found.type})" if found.type else found.detail
    return clean(str(exc)) or type(exc).__name__


class CaClient:
    """One CA's directory, and an account of ours there."""

    def __init__(self, directory_url: str, *, ca_bundle: str, timeout: float) -> None:
        self.directory_url = directory_url
        self._net = _Network(key=None, alg=ES256, user_agent=USER_AGENT, timeout=int(max(1, timeout)))
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

    def profiles(self) -> dict[str, str]:
        """The profiles the CA offers (``meta.profiles``: name -> description); empty when it offers none."""
        meta = getattr(self.client.directory, "meta", None)
        offered = getattr(meta, "profiles", None)
        # josepy gives a frozendict (a Mapping, not a dict).
        return {str(name): str(said) for name, said in offered.items()} if isinstance(offered, Mapping) else {}

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

    def change_key(self, new_key: JWK) -> None:
        """Roll the account's key over to ``new_key`` (RFC 8555 section 7.3.5), signing with the key
        in ``use``. The package has no helper: the inner JWS, signed by the new key with it as
        ``jwk``, the same ``url`` and no nonce, carries the account and the old public key; the
        outer one is the package's usual request (the old key, ``kid`` the account URL). From
        then on the client signs with ``new_key``."""
        assert self._net.key is not None and self._net.account is not None
        url = self.client.directory["keyChange"]
        payload = {"account": self._net.account.uri, "oldKey": self._net.key.public_key().to_json()}
        # acme's JWS protects alg, jwk (no kid given) and url; a nonce of None is left out.
        inner = acme_jws.JWS.sign(json.dumps(payload).encode(), key=new_key, alg=ES256, nonce=None, url=url)
        self.client._post(url, inner)
        self._net.key = new_key

    def account_of(self, key: JWK) -> str | None:
        """The URL of the account ``key`` is the key of at the CA, or None: asked with
        ``onlyReturnExisting`` (RFC 8555 section 7.3.1), which creates nothing. What a rollover
        left half-way asks of its new key. The client signs with ``key`` afterwards, unbound."""
        self._net.key, self._net.account = key, None
        try:
            response = self.client._post(self.client.directory["newAccount"],
                                         messages.Registration(only_return_existing=True))
        except messages.Error as exc:
            if exc.code == "accountDoesNotExist":
                return None
            raise
        except acme_errors.ConflictError as exists:
            return str(exists.location)
        return str(response.headers.get("Location") or "") or None

    # -- orders --------------------------------------------------------------------------------

    def new_order(self, hostname: str, *, replaces: str | None, profile: str | None = None) -> Order:
        """``profile``: one the CA offers (``profiles``), or None for its default; sent only when given."""
        fields: dict[str, Any] = {"identifiers": [messages.Identifier(typ=messages.IDENTIFIER_FQDN, value=hostname)]}
        if replaces:
            fields["replaces"] = replaces
        if profile:
            fields["profile"] = profile
        order = NewOrder(**fields)
        response = self.client._post(self.client.directory["newOrder"], order)
        return _order(response.headers["Location"], response.json())

    def order(self, url: str) -> Order:
        return _order(url, self._get(url).json())

    def challenge(self, authorization_url: str) -> Challenge:
        """The authorization at ``authorization_url`` and its DNS-01 challenge."""
        body = messages.Authorization.from_json(self._get(authorization_url).json())
        dns01 = [c for c in body.challenges if isinstance(c.chall, challenges.DNS01)]
        chall = dns01[0] if dns01 else None
        return Challenge(
            authorization_url=authorization_url, status=body.status.name, identifier=body.identifier.value,
            challenge_url=chall.uri if chall else None, challenge_status=chall.status.name if chall else None,
            validation=chall.chall.validation(self._net.key) if chall else None,
            errors=tuple(problem_of(c.error) for c in body.challenges if c.error is not None),
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

    def download_chains(self, certificate_url: str) -> tuple[str, tuple[str, ...]]:
        """The issued certificate with the CA's default chain, and the URLs of the alternate chains
        it offers (RFC 8555 section 7.4.2: ``Link: rel="alternate"`` on the download)."""
        response = self._get(certificate_url)
        return str(response.text), tuple(self.client._get_links(response, "alternate"))

    def revoke(self, chain_pem: str, *, reason: int) -> None:
        self.client.revoke(x509.load_pem_x509_certificate(chain_pem.encode()), reason)

    def renewal_window(self, chain_pem: str) -> RenewalWindow | None:
        """The CA's suggested renewal window for the certificate (RFC 9773); None without ARI."""
        try:
            base = self.client.directory["renewalInfo"]
        except KeyError:
            return None
        response = self._net.get(f"{str(base).rstrip('/')}/{keys.ari_id(chain_pem)}", content_type="application/json")
        body = response.json()
        window = messages.RenewalInfo.from_json(body).suggested_window
        retry = _retry_after(response.headers.get("Retry-After"))
        explained = body.get("explanationURL") if isinstance(body, dict) else None
        return RenewalWindow(start=_utc(window.start), end=_utc(window.end), retry_after=retry,
                             explanation_url=explained if isinstance(explained, str) and explained else None)

    def _get(self, url: str) -> Any:
        """POST-as-GET, as RFC 8555 asks for every resource but the directory and ARI."""
        return self.client._post_as_get(url)


def _order(url: str, data: dict[str, Any]) -> Order:
    body = messages.Order.from_json(data)
    return Order(url=url, status=body.status.name, authorizations=tuple(body.authorizations or ()),
                 finalize=body.finalize, certificate=body.certificate,
                 error=problem_of(body.error) if body.error is not None else None,
                 profile=body.profile or None)


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


#: Without the CA's ``Retry-After``, when its renewal window is read again.
ARI_EVERY = dt.timedelta(hours=6)
#: The bounds put on a CA's ``Retry-After`` (RFC 9773 section 4.3 asks clients for limits of their
#: own): not more often than every minute, at least once a day.
RETRY_AFTER_BOUNDS = (dt.timedelta(minutes=1), dt.timedelta(days=1))


def _retry_after(header: str | None) -> dt.timedelta:
    """When to ask for the window again: the CA's ``Retry-After`` (seconds, or an HTTP date; RFC 9110
    section 10.2.3) within ``RETRY_AFTER_BOUNDS``, else ``ARI_EVERY``."""
    value = (header or "").strip()
    if value.isdigit():
        wait = dt.timedelta(seconds=int(value))
    else:
        try:
            wait = email.utils.parsedate_to_datetime(value) - dt.datetime.now(dt.UTC)
        except (TypeError, ValueError):
            return ARI_EVERY
    low, high = RETRY_AFTER_BOUNDS
    return min(max(wait, low), high)
