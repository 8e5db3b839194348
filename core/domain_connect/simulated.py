"""DEVELOPMENT ONLY: one-click set-up tried on one machine (``[domain_connect] simulate = true``).

Domain Connect is a protocol between the service and the customer's DNS host, so trying it needs a
DNS host. This is a stand-in, served by the service itself under ``/simulated-dns-host``
(handlers/portal/simulated_dns_host.py) and labelled SIMULATED on every page: discovery says every
zone is hosted there and offers the template, and the stand-in then does what a strict DNS host
does with the signed apply URL the real flow makes (core/verification/one_click.py): it checks the
signature over the query exactly as received, the key label, the template and ``redirect_uri``,
shows the consent screen, applies the template's records to the simulated DNS
(core/edge/simulated_dns.py, through store/stand_ins.py) and sends the browser back to
``redirect_uri`` with ``state``, where the real return path checks DNS as it always does.

Only with the sandbox provider's simulated DNS (the configuration refuses it otherwise): the
records it applies exist nowhere but there. Its signing key is made at each start and kept in
memory: a link made before a restart is refused, as a DNS host refuses a rotated key's links.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from typing import Any
from urllib.parse import unquote_plus, urlencode, urlsplit

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from core.clock import Clock
from core.config import DomainConnectConfig
from core.dns.lookups import Resolver
from core.domain_connect.discovery import Discoverer, Discovery, Offer
from core.domain_connect.template import template
from core.outbound.guard import OutboundClient
from store import Store

#: Where the stand-in DNS host is served, under ``server.portal_url``: its ``urlSyncUX``.
PATH = "/simulated-dns-host"
#: The stand-in's own name, as a DNS host's settings give it (the button reads "Set up automatically at ...").
HOST_NAME = "Simulated DNS host"
HOST_ID = "simulated-dns-host.invalid"
#: The template's ids in the simulation, in place of an operator's registration.
PROVIDER_ID = "localhost"
SERVICE_ID = "tls-hostname"
_VARIABLE = re.compile(r"%([A-Za-z0-9_-]+)%")


class SimulatedDiscoverer(Discoverer):
    """Discovery as the real one caches and limits it, every zone's answer being the stand-in."""

    def __init__(self, config: DomainConnectConfig, dns: Resolver, outbound: OutboundClient, clock: Clock, *,
                 portal_url: str) -> None:
        super().__init__(attrs.evolve(config, provider_id=PROVIDER_ID, service_id=SERVICE_ID), dns, outbound, clock)
        self.url_sync_ux = portal_url.rstrip("/") + PATH

    async def _discover(self, zone: str) -> Discovery:
        return Discovery(zone, "supported", offer=Offer(provider_id=HOST_ID, provider_name=HOST_NAME,
                                                        url_sync_ux=self.url_sync_ux))


class Refused(Exception):
    """An apply request a strict DNS host turns down; the argument says why, for the page."""


@attrs.frozen
class Record:
    type: str
    name: str
    "Absolute, lowercase, no trailing dot."
    value: str
    ttl: int


@attrs.frozen
class Apply:
    """A checked apply request: what the consent screen shows, and where the customer goes back to."""

    domain: str
    host: str
    records: tuple[Record, ...]
    redirect_uri: str
    state: str | None
    service_name: str

    def back(self, *, error: str | None = None) -> str:
        """``redirect_uri`` with ``state`` (and the protocol's ``error`` when the customer declined)."""
        query = urlencode([(name, value) for name, value in (("error", error), ("state", self.state)) if value])
        if not query:
            return self.redirect_uri
        return self.redirect_uri + ("&" if "?" in self.redirect_uri else "?") + query


def checked(raw_query: str, provider_id: str, service_id: str, *, config: DomainConnectConfig,
            key: RSAPublicKey, redirect_host: str) -> Apply:
    """The apply request in ``raw_query`` (as received, nothing decoded) checked as a strict DNS host
    checks it; ``Refused`` says what is wrong."""
    if (provider_id.lower(), service_id.lower()) != (config.provider_id.lower(), config.service_id.lower()):
        raise Refused(f"The template {provider_id}/{service_id} is not installed at this DNS host.")
    parts = [part for part in raw_query.split("&") if part]
    params: dict[str, str] = {}
    for name, _, value in (part.partition("=") for part in parts):
        if unquote_plus(name) in params:
            raise Refused(f"The parameter {unquote_plus(name)} appears twice.")
        params[unquote_plus(name)] = unquote_plus(value)
    if "sig" not in params or params.get("key") != config.key_label:
        raise Refused(f"The request is not signed with this service's key ({config.key_label}).")
    # What was signed: the query as received minus sig and key, nothing re-encoded or re-ordered.
    signed = "&".join(part for part in parts if part.partition("=")[0] not in ("sig", "key"))
    try:
        key.verify(base64.b64decode(params["sig"], validate=True), signed.encode(), padding.PKCS1v15(),
                   hashes.SHA256())
    except (binascii.Error, InvalidSignature):
        raise Refused("The signature does not verify: the link was changed, or signed with another key.") from None
    redirect_uri = params.get("redirect_uri", "")
    if (urlsplit(redirect_uri).hostname or "") != redirect_host:
        raise Refused(f"The host of redirect_uri is not the template's syncRedirectDomain ({redirect_host}).")
    domain, host = (params.get(name, "").rstrip(".").lower() for name in ("domain", "host"))
    if not domain:
        raise Refused("The parameter domain is missing.")
    records = tuple(_record(record, domain, host, params)
                    for record in template(config, redirect_domain=redirect_host)["records"])
    return Apply(domain=domain, host=host, records=records, redirect_uri=redirect_uri, state=params.get("state"),
                 service_name=config.service_name)


def _record(record: dict[str, Any], domain: str, host: str, params: dict[str, str]) -> Record:
    """One template record with its variables filled in, at its name below ``host`` in ``domain``."""

    def value_of(variable: re.Match[str]) -> str:
        if variable.group(1) not in params:
            raise Refused(f"The template's variable {variable.group(1)} is missing.")
        return params[variable.group(1)]

    value = _VARIABLE.sub(value_of, record.get("pointsTo") or record.get("data") or "")
    name = ".".join(label for label in (record["host"], host, domain) if label).lower()
    return Record(type=record["type"], name=name, value=value, ttl=record["ttl"])


def apply(store: Store, applying: Apply, now: dt.datetime) -> None:
    """Write the records into the simulated DNS, each replacing the one of its type at its name. A unit of work."""
    with store.transaction():
        for record in applying.records:
            store.stand_ins.apply_record(record.name, record.type, record.value, now)
