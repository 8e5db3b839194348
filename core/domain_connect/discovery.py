"""Whether a zone's DNS host offers our Domain Connect template, and where its consent screen is.

Discovery reads the TXT record ``_domainconnect.<zone>``, fetches the DNS host's settings from
``https://<value>/v2/<zone>/settings``, and asks the ``urlAPI`` named there whether our template
(``providerId``/``serviceId``) is deployed.

Everything involved is remote text chosen by whoever controls the zone's DNS, and a customer may be
an attacker who registered a hostname in a zone they run for the purpose:

- SSRF: the ``_domainconnect`` value and every URL in the settings could name the operator's
  network or cloud metadata. Both requests go through the outbound guard only
  (core/outbound/guard.py: public addresses only, TLS verified, redirects never followed, one
  deadline), and the value must be a DNS name with an optional port and path: no scheme, query,
  fragment, user name or IP literal. ``urlAPI`` and ``urlSyncUX`` pass the guard's URL rules,
  https with no query or fragment; ``urlSyncUX`` is later handed to browsers.
- Bounds: settings over 64 KiB, not JSON or not an object are ignored; names are printable and at
  most 100 characters; popup sizes are clamped. Answers are cached per zone, and callers asking
  about one zone at once share one discovery, so a bulk import of a zone's hostnames costs one.
- Fairness: each workspace's discoveries, and the requests to each destination, are limited
  (core/domain_connect/limits.py), so one workspace can neither hold the pool nor aim the service
  at a host of its choosing.
- Trust: ``providerId`` is self-declared; it identifies nothing. Sentences in ``problem`` echo at
  most 80 characters of any remote text and 300 in all.

Several TXT records at ``_domainconnect.<zone>`` are refused (outcome ``ignored``): DNS answers
come in any order, so "the first" would switch between DNS hosts from one lookup to the next,
and two different values mean the zone's owner left a stale one that only they can tell apart.
A DNS lookup that times out or fails is ``unknown``, not ``no_record``: it says nothing of the zone.
So is a request that got no answer (a timeout, a refused connection, a slot in the pool not free
in time) and a discovery a limit did not let start: none of them says the DNS host does not offer
the template, and an ``unknown`` answer is kept a minute at most (one a limit refused, not at all).

Remote trouble never raises: it is an outcome, and the customer publishes the records by hand.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs

from core.clock import Clock
from core.config import DomainConnectConfig
from core.dns.lookups import Resolver
from core.domain_connect import limits
from core.outbound.guard import (
    DestinationRefused,
    OutboundClient,
    OutboundFailure,
    OutboundResponse,
    check_url,
)

log = logging.getLogger(__name__)

Outcome = Literal["supported", "not_supported", "no_record", "ignored", "unknown"]

#: The largest settings document read (§9 of the protocol's security considerations: bounds): the
#: cap of the outbound client discovery is given (core/runtime/assembly.py).
SETTINGS_MAX_BYTES = 64 * 1024
#: An ``unknown`` answer (a DNS host's server failing for now) is asked again this soon at the latest.
UNKNOWN_CACHE_SECONDS = 60.0
#: Zones remembered at most; the oldest answer is forgotten first.
CACHE_ZONES = 10_000
MAX_NAME_CHARS = 100
MAX_REMOTE_CHARS = 80
MAX_PROBLEM_CHARS = 300
DEFAULT_SIZE, MIN_SIZE, MAX_SIZE = 750, 200, 2000
_DIGITS = re.compile(r"^\s*[0-9]{1,6}\s*$")


@attrs.frozen
class Offer:
    provider_id: str
    "The DNS host's ``providerId`` from its settings (self-declared)."
    provider_name: str
    "``providerDisplayName``, else ``providerName``: trimmed, printable, at most 100 characters."
    url_sync_ux: str
    "The https prefix of the DNS host's consent screen, normalised, with no trailing slash."
    width: int = DEFAULT_SIZE
    "Of the consent popup, in pixels (200 to 2000)."
    height: int = DEFAULT_SIZE


@attrs.frozen
class Discovery:
    zone: str
    outcome: Outcome
    offer: Offer | None = None
    "Only when ``outcome`` is ``supported``."
    problem: str | None = None
    "One sentence for the diagnosis: why, for ``ignored`` and ``unknown`` (and ``not_supported``, as a hint)."


class _Ignored(Exception):
    """The zone's Domain Connect data is unusable; the argument is the sentence saying why."""


class _NotHosted(Exception):
    """The DNS host answered that it does not serve the zone."""


class _Unanswered(Exception):
    """A request got no answer; the argument is the sentence saying why (``unknown``, kept a minute)."""


class _Limited(Exception):
    """A request was not made, its destination being at its limit (``unknown``, not kept)."""


class Discoverer:
    """Finds, caches and shares what a zone's DNS host offers."""

    def __init__(self, config: DomainConnectConfig, dns: Resolver, outbound: OutboundClient, clock: Clock) -> None:
        self.config = config
        self.dns = dns
        self.outbound = outbound
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, Discovery]] = OrderedDict()
        self._in_flight: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Future[Discovery]] = {}
        self.workspaces = limits.Limit(clock, at_once=limits.WORKSPACE_AT_ONCE, per_window=limits.WORKSPACE_PER_MINUTE)
        self.destinations = limits.Limit(clock, at_once=limits.DESTINATION_AT_ONCE,
                                         per_window=limits.DESTINATION_PER_MINUTE)

    async def discover(self, zone: str, *, workspace: Hashable) -> Discovery:
        """What the DNS host of ``zone`` (a zone apex, A-labels) offers, asked for ``workspace`` (whose
        limits a new discovery counts in); never raises for remote trouble."""
        zone = zone.lower().rstrip(".")
        cached = self._cached(zone)
        if cached is not None:
            return cached
        key = (asyncio.get_running_loop(), zone)
        shared = self._in_flight.get(key)
        if shared is None:
            if not self.workspaces.take(workspace):
                log.info("Domain Connect discovery of %s not started: workspace %s at its limit", zone, workspace)
                return Discovery(zone, "unknown", problem=_sentence(
                    f"Domain Connect discovery of {zone} was not started now: this workspace has "
                    f"{limits.WORKSPACE_AT_ONCE} under way or started {limits.WORKSPACE_PER_MINUTE} in the last "
                    "minute."))
            shared = self._in_flight[key] = asyncio.ensure_future(self._discover_and_keep(zone))

            def done(_: object) -> None:
                self._in_flight.pop(key, None)
                self.workspaces.release(workspace)

            shared.add_done_callback(done)
        return await asyncio.shield(shared)  # one caller giving up does not end it for the others

    def _cached(self, zone: str) -> Discovery | None:
        entry = self._cache.get(zone)
        if entry is None:
            return None
        if self.clock.timestamp() >= entry[0]:
            del self._cache[zone]
            return None
        return entry[1]

    async def _discover_and_keep(self, zone: str) -> Discovery:
        try:
            found = await self._discover(zone)
        except _Limited as exc:  # the destination's limit, not the zone's answer: not kept
            log.info("Domain Connect discovery of %s: %s", zone, exc)
            return Discovery(zone, "unknown", problem=_sentence(str(exc)))
        except Exception:  # a bug must not break the pages that ask; it is logged and retried soon
            log.exception("Domain Connect discovery of %s failed", zone)
            found = Discovery(zone, "unknown", problem=f"Domain Connect discovery of {zone} failed unexpectedly.")
        if found.problem is not None:
            log.info("Domain Connect discovery of %s: %s: %s", zone, found.outcome, found.problem)
        seconds = self.config.cache_seconds
        if found.outcome == "unknown":
            seconds = min(UNKNOWN_CACHE_SECONDS, seconds)
        self._cache.pop(zone, None)
        self._cache[zone] = (self.clock.timestamp() + seconds, found)
        while len(self._cache) > CACHE_ZONES:
            self._cache.popitem(last=False)
        return found

    async def _discover(self, zone: str) -> Discovery:
        name = f"_domainconnect.{zone}"
        lookup = await self.dns.lookup(name, "TXT")
        if lookup.outcome in ("nxdomain", "nodata"):
            return Discovery(zone, "no_record")
        if lookup.outcome != "found":
            why = "timed out" if lookup.outcome == "timeout" else f"failed ({_shown(lookup.detail or 'no answer')})"
            return Discovery(zone, "unknown", problem=_sentence(f"The DNS lookup of {name} (TXT) {why}."))
        values = list(dict.fromkeys(value.strip() for value in lookup.values))
        try:
            if len(values) > 1:
                raise _Ignored(f"{name} has {len(values)} different TXT records; Domain Connect needs one, "
                               "so they were ignored.")
            settings_url = _settings_url(name, values[0], zone)
            settings = await self._settings(settings_url)
            if settings.url_sync_ux is None:
                return Discovery(zone, "not_supported", problem=_sentence(
                    f"The zone's DNS host ({_shown(settings.provider_name)}) offers no synchronous Domain Connect "
                    f"flow for {zone}."))
            offer = Offer(provider_id=settings.provider_id, provider_name=settings.provider_name,
                          url_sync_ux=settings.url_sync_ux, width=settings.width, height=settings.height)
            return await self._template_check(zone, settings.url_api, offer)
        except _Ignored as exc:
            return Discovery(zone, "ignored", problem=_sentence(str(exc)))
        except _NotHosted as exc:
            return Discovery(zone, "not_supported", problem=_sentence(str(exc)))
        except _Unanswered as exc:
            return Discovery(zone, "unknown", problem=_sentence(str(exc)))

    async def _get(self, url: str) -> OutboundResponse:
        """GET ``url`` (already checked), counted in its destination's limits."""
        parts = urlsplit(url)
        destination = (parts.hostname, parts.port or 443)
        if not self.destinations.take(destination):
            raise _Limited(f"{_shown(parts.netloc)} was not asked now: it has {limits.DESTINATION_AT_ONCE} requests "
                           f"under way or had {limits.DESTINATION_PER_MINUTE} in the last minute.")
        try:
            return await self.outbound.get(url, headers={"Accept": "application/json"},
                                           timeout=self.config.timeout_seconds)
        finally:
            self.destinations.release(destination)

    async def _settings(self, url: str) -> _Settings:
        where = f"The Domain Connect settings at {_shown(url)}"
        try:
            response = await self._get(url)
        except DestinationRefused as exc:  # a place never reachable: no use retrying
            raise _Ignored(f"{where} could not be fetched, so they were ignored: {_clause(exc.reason, url)}") from None
        except OutboundFailure as exc:  # no answer (timeout, refused, TLS): it says nothing of the template
            raise _Unanswered(f"{where} could not be fetched: {_clause(exc.reason, url)}") from None
        status = response.status_code
        if status == 404:
            raise _NotHosted(f"The DNS host that _domainconnect names does not host this zone: its settings at "
                             f"{_shown(url)} answered 404.")
        if 300 <= status < 400:
            raise _Ignored(f"{where} answered with a redirect (HTTP {status}), which is not followed; "
                           "they were ignored.")
        if not 200 <= status < 300:
            raise _Ignored(f"{where} answered HTTP {status}; they were ignored.")
        if response.truncated:
            raise _Ignored(f"{where} are larger than {SETTINGS_MAX_BYTES // 1024} KiB; they were ignored.")
        try:
            document = json.loads(response.body)
        except (ValueError, RecursionError):  # RecursionError: 64 KiB of nested brackets
            raise _Ignored(f"{where} are not JSON; they were ignored.") from None
        if not isinstance(document, dict):
            raise _Ignored(f"{where} are not a JSON object; they were ignored.")
        return _Settings.read(document, where, self.outbound)

    async def _template_check(self, zone: str, url_api: str, offer: Offer) -> Discovery:
        url = (f"{url_api}/v2/domainTemplates/providers/{self.config.provider_id}"
               f"/services/{self.config.service_id}")
        where = f"The check for our template at {_shown(url_api)}"
        try:
            response = await self._get(url)
        except DestinationRefused as exc:  # the settings point at a place never reachable: no use retrying
            raise _Ignored(f"The urlAPI of the Domain Connect settings of {zone} was refused: "
                           f"{_clause(exc.reason, url)}") from None
        except OutboundFailure as exc:
            return Discovery(zone, "unknown", problem=_sentence(f"{where} failed: {_clause(exc.reason, url)}"))
        if response.status_code == 200:  # whatever the body: empty, a version, or the template itself
            return Discovery(zone, "supported", offer=offer)
        if response.status_code == 404:
            return Discovery(zone, "not_supported", problem=_sentence(
                f"The zone's DNS host ({_shown(offer.provider_name)}) does not offer the template "
                f"{self.config.provider_id}/{self.config.service_id}."))
        return Discovery(zone, "unknown", problem=_sentence(f"{where} answered HTTP {response.status_code}."))


@attrs.frozen
class _Settings:
    provider_id: str
    provider_name: str
    url_api: str
    url_sync_ux: str | None
    width: int
    height: int

    @classmethod
    def read(cls, doc: dict[str, Any], where: str, outbound: OutboundClient) -> _Settings:
        """The fields used, checked; unknown keys are ignored, as the protocol requires."""
        provider_id = _name(doc, "providerId", where, required=True)
        provider_name = _name(doc, "providerName", where, required=True)
        try:
            display_name = _name(doc, "providerDisplayName", where, required=False)
        except _Ignored:
            display_name = None  # optional, and only for show: the provider's name will do
        url_api = _url(doc, "urlAPI", where, outbound, required=True)
        assert provider_id is not None and provider_name is not None and url_api is not None
        return cls(provider_id=provider_id, provider_name=display_name or provider_name, url_api=url_api,
                   url_sync_ux=_url(doc, "urlSyncUX", where, outbound, required=False),
                   width=_size(doc.get("width")), height=_size(doc.get("height")))


def _settings_url(name: str, value: str, zone: str) -> str:
    """``https://<value>/v2/<zone>/settings`` if ``value`` is a host with an optional port and path."""
    record = f"The {name} record ('{_shown(value)}')"
    if not value:
        raise _Ignored(f"{record} is empty; it was ignored.")
    if "://" in value:
        raise _Ignored(f"{record} starts with a scheme; it must be a host name with an optional path, "
                       "so it was ignored.")
    for char, part in (("?", "a query"), ("#", "a fragment"), ("@", "a user name")):
        if char in value:
            raise _Ignored(f"{record} contains {part} ({char}); it was ignored.")
    url = f"https://{value.rstrip('/')}/v2/{zone}/settings"
    try:
        return check_url(url).url
    except DestinationRefused as exc:
        raise _Ignored(f"{record} was ignored: {_clause(exc.reason, value)}") from None


def _name(doc: dict[str, Any], key: str, where: str, *, required: bool) -> str | None:
    value = doc.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _Ignored(f"{where} lack {key}; they were ignored.")
        return None
    if not isinstance(value, str):
        raise _Ignored(f"{where} have a {key} that is not a string; they were ignored.")
    text = " ".join(value.split())
    if len(text) > MAX_NAME_CHARS or not text.isprintable():
        raise _Ignored(f"{where} have a {key} that is not printable text of at most {MAX_NAME_CHARS} "
                       "characters; they were ignored.")
    return text


def _url(doc: dict[str, Any], key: str, where: str, outbound: OutboundClient, *, required: bool) -> str | None:
    """The https prefix in ``key``, normalised, without a trailing slash."""
    value = doc.get(key)
    if value is None or value == "":
        if required:
            raise _Ignored(f"{where} lack {key}; they were ignored.")
        return None
    if not isinstance(value, str):
        raise _Ignored(f"{where} have a {key} that is not a string; they were ignored.")
    refused = f"{where} have a {key} ('{_shown(value)}')"
    if "?" in value:
        raise _Ignored(f"{refused} with a query (?); they were ignored.")
    try:
        target = check_url(value, policy=outbound.policy)
    except DestinationRefused as exc:
        raise _Ignored(f"{refused} that was refused: {_clause(exc.reason, value)}") from None
    return target.url.rstrip("/")


def _size(value: object) -> int:
    """A popup dimension: an integer or a string of digits ("800"), clamped; else the default."""
    if isinstance(value, bool):
        return DEFAULT_SIZE
    if isinstance(value, float) and math.isfinite(value):
        number = round(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and _DIGITS.match(value):
        number = int(value)
    else:
        return DEFAULT_SIZE
    return min(MAX_SIZE, max(MIN_SIZE, number))


def _shown(text: str) -> str:
    """Remote text as echoed in a sentence: printable characters only (it reaches logs too), at most 80."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= MAX_REMOTE_CHARS else text[:MAX_REMOTE_CHARS - 3] + "..."


def _clause(reason: str, remote: str) -> str:
    """The guard's sentence continuing ours: its remote parts shortened, a leading capital lowered."""
    host = remote.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    for long in sorted({remote, host}, key=len, reverse=True):
        if len(long) > MAX_REMOTE_CHARS:
            reason = reason.replace(long, _shown(long))
    if len(reason) > 1 and reason[0].isupper() and reason[1].islower():
        reason = reason[0].lower() + reason[1:]
    return reason if reason.endswith(".") else reason + "."


def _sentence(text: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= MAX_PROBLEM_CHARS else text[:MAX_PROBLEM_CHARS - 4] + "..."
