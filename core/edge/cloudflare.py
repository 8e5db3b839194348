"""Cloudflare for SaaS custom hostnames.

The API and its token are operator configuration, so requests go straight out (no outbound
address guard), with timeouts, through one ``Pacer`` budget per provider, over kept connections
(``KeepAliveClient``): a new connection and TLS handshake per call cost more than the call. Every answer is read
through ``_call``: Cloudflare can answer ``success: false`` with any status code, so both are
checked, and its error codes decide whether the hostname was refused (``ProviderRejected``) or we
simply learnt nothing (``ProviderUnavailable``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import re
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import attrs

from core.config import CLOUDFLARE_CAA_ISSUERS, CloudflareConfig
from core.dns import caa
from core.edge import (
    HostnameGone,
    ProviderBusy,
    ProviderError,
    ProviderRejected,
    ProviderState,
    ProviderUnavailable,
)
from core.edge.pacing import Pacer, parse_ratelimit, parse_retry_after
from core.outbound.http import Answer, KeepAliveClient, RequestTimeout

if TYPE_CHECKING:
    from store import Store

log = logging.getLogger(__name__)

DCV_ZONE = "dcv.cloudflare.com"
_DELEGATION_ID = re.compile(r"^[0-9a-z]{8,64}$")
MAX_CLIENTS = 16
FIRST_BACKOFF_SECONDS = 0.5
BUSY_DEFAULT_SECONDS = 60
#: 10000 "Authentication error" and 1000-1005 (bearer token / JWT problems).
TOKEN_CODES = frozenset({10000, 1000, 1001, 1002, 1003, 1004, 1005})
#: Codes that blame the shape of our request, not the hostname: retrying as-is cannot help, but
#: neither is the hostname at fault, so these are not stored as a refusal of it.
REQUEST_CODES = frozenset({1400, 1402, 1403, 1432, 1433, 1434, 1435, 1437, 1438, 1440, 1449})
DUPLICATE = 1406
NOT_FOUND = 1436
SSL_METHODS = ("txt", "http", "email")
MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: How long the API host's addresses are reused before they are looked up again.
ADDRESSES_SECONDS = 60.0


class DelegationUnavailable(ProviderUnavailable):
    """The zone's DCV delegation id could not be read."""


class CloudflareProvider:
    name = "edge_provider_for_saas"

    def __init__(self, config: CloudflareConfig, *, caa_issuers: list[str] | None = None,
                 background_share: float = 1.0, workspace_share: float = 1.0,
                 new_workspace_share: float | None = None, calls_per_active_hostname: int = 0,
                 monotonic: Callable[[], float] = time.monotonic, store: Store | None = None) -> None:
        self.config = config
        self._caa_issuers = caa.terms(caa_issuers if caa_issuers is not None else CLOUDFLARE_CAA_ISSUERS)
        self.pacer = Pacer(config.requests_per_window, config.window_seconds, background_share=background_share,
                           workspace_share=workspace_share, new_workspace_share=new_workspace_share,
                           calls_per_hostname=calls_per_active_hostname, monotonic=monotonic)
        if store is not None and store.pg is not None:  # several processes spend one token's budget
            self.pacer.share_with_processes(store, f"cloudflare:{config.zone_id}")
        self._monotonic = monotonic
        self._delegation_id: str | None = None
        api = urlsplit(config.api_base.rstrip("/"))
        self._host = api.hostname or ""
        self._port = api.port or (80 if api.scheme == "http" else 443)
        self._base_path = api.path
        tls = None if api.scheme == "http" else ssl.create_default_context()
        self._http = KeepAliveClient(max_clients=MAX_CLIENTS, ssl_context=tls, max_body_bytes=MAX_ANSWER_BYTES)
        self._addresses: tuple[float, list[tuple[int, Any]]] | None = None

    def close(self) -> None:
        self._http.close()

    # -- the operations of EdgeProvider ---------------------------------------------------------

    async def caa_issuers(self) -> list[caa.CaaIssuer]:
        """The CAs Cloudflare issues from, as ``[provider] caa_issuers`` lists them (it picks one after checking CAA)."""
        return self._caa_issuers

    async def delegation_target(self, apex: str) -> str:
        if self._delegation_id is None:
            try:
                result = await self._call("GET", "/dcv_delegation/uuid", trace_id=None)
            except ProviderBusy:
                raise
            except ProviderError as exc:  # whatever it was, it is not about the customer's hostname
                raise DelegationUnavailable(exc.message) from None
            value = result.get("uuid") if isinstance(result, dict) else None
            if not isinstance(value, str) or not _DELEGATION_ID.match(value):
                raise DelegationUnavailable("The edge provider sent no usable DCV delegation id.")
            self._delegation_id = value
        return f"{apex}.{self._delegation_id}.{DCV_ZONE}"

    async def issue(self, apex: str, *, trace_id: uuid.UUID) -> ProviderState:
        """Create the custom hostname; on 1406 (it exists already) adopt the existing one.

        Only ``method`` and ``type`` are sent: Cloudflare picks the CA after checking CAA. A create
        answer without validation records is fine; the caller's next refresh reads them.
        """
        body = {"hostname": apex, "ssl": {"method": "txt", "type": "dv"}}
        try:
            result = await self._call("POST", "/custom_hostnames", trace_id=trace_id, body=body)
        except ProviderRejected as exc:
            if exc.provider_code != DUPLICATE:
                raise
            result = await self._find(apex, trace_id)
        return parse_state(result)

    async def refresh(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """Read the hostname, a timed-out certificate reported as it is (no re-validation here)."""
        return parse_state(await self._call("GET", f"/custom_hostnames/{quote(hostname_id, safe='')}", trace_id=trace_id))

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """Read the hostname; a timed-out certificate or ``moved`` hostname is validated again
        (``revalidated``), any other state is answered as read.

        The documented re-validation trigger is a PATCH repeating the current ``ssl`` method and
        type; it also resets Cloudflare's validation back-off schedule.
        """
        path = f"/custom_hostnames/{quote(hostname_id, safe='')}"
        result = await self._call("GET", path, trace_id=trace_id)
        state = parse_state(result)
        if (state.ssl_status or "").endswith("_timed_out") or state.hostname_status == "moved":
            method = _dict(result.get("ssl")).get("method")
            body = {"ssl": {"method": method if method in SSL_METHODS else "txt", "type": "dv"}}
            log.info("cloudflare re-validating %s (%s, %s) (trace %s)",
                     apex, state.hostname_status, state.ssl_status, trace_id)
            state = attrs.evolve(parse_state(await self._call("PATCH", path, trace_id=trace_id, body=body)),
                                 revalidated=True)
        return state

    async def _find(self, apex: str, trace_id: uuid.UUID) -> dict[str, Any]:
        """The existing custom hostname named ``apex`` (the list answer is an array: compare here)."""
        query = urlencode({"hostname": apex})
        result = await self._call("GET", f"/custom_hostnames?{query}", trace_id=trace_id)
        for item in result if isinstance(result, list) else []:
            if isinstance(item, dict) and str(item.get("hostname", "")).lower() == apex.lower():
                return item
        raise ProviderUnavailable(
            "The edge provider reported the hostname as existing but did not list it; try again shortly."
        )

    # -- one call: pacing, retries, the envelope -----------------------------------------------

    async def _call(self, method: str, path: str, *, trace_id: uuid.UUID | None, body: Any = None) -> Any:
        """The ``result`` of one API operation, retrying what may succeed later within ``retry_seconds``."""
        started = self._monotonic()
        waited = 0.0
        attempt = 0
        while True:
            await self.pacer.acquire()
            response, problem = await self._send(method, path, trace_id, body)
            retry_after = None
            if response is not None:
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                remaining, reset = parse_ratelimit(response.headers.get("Ratelimit"))
                self.pacer.observe(remaining=remaining, reset_seconds=reset, retry_after=retry_after)
                await self.pacer.tell_others(retry_after)
                if response.code not in (408, 429) and response.code < 500:
                    try:
                        return _result(response)
                    except ProviderError as exc:
                        log.warning("cloudflare %s %s refused (trace %s): %s", method, path, trace_id or "-", exc)
                        raise
                problem = f"The edge provider answered HTTP {response.code}; try again shortly."
            wait = retry_after if retry_after is not None else FIRST_BACKOFF_SECONDS * 2**attempt
            spent = max(waited, self._monotonic() - started)
            if spent + wait > self.config.retry_seconds:
                if response is not None and response.code == 429:
                    raise ProviderBusy(math.ceil(retry_after) if retry_after else BUSY_DEFAULT_SECONDS)
                raise ProviderUnavailable(problem)
            await asyncio.sleep(wait)
            waited += wait
            attempt += 1

    async def _send(
        self, method: str, path: str, trace_id: uuid.UUID | None, body: Any
    ) -> tuple[Answer | None, str]:
        """One request: the answer, or ``None`` and why there was none. Logs one line."""
        started = time.monotonic()
        try:
            answer = await self._http.request(
                method, host=self._host, port=self._port,
                path=f"{self._base_path}/zones/{quote(self.config.zone_id, safe='')}{path}",
                addresses=await self._api_addresses(),
                headers={"Authorization": f"Bearer {self.config.api_token}", "Content-Type": "application/json"},
                body=b"" if body is None else json.dumps(body).encode(),
                timeout=self.config.timeout_seconds,
            )
        except (RequestTimeout, OSError) as exc:
            log.warning("cloudflare %s %s -> %s after %.0f ms (trace %s)",
                        method, path, exc, _ms(started), trace_id or "-")
            if isinstance(exc, RequestTimeout):
                return None, "The edge provider did not answer in time; try again shortly."
            return None, "The edge provider could not be reached; try again shortly."
        log.info("cloudflare %s %s -> %s in %.0f ms (trace %s)",
                 method, path, answer.code, _ms(started), trace_id or "-")
        return answer, ""

    async def _api_addresses(self) -> list[tuple[int, Any]]:
        """The API host's addresses, looked up again once a minute (the operator's host: no guard)."""
        now = time.monotonic()
        if self._addresses is None or now >= self._addresses[0]:
            found = await asyncio.get_running_loop().getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
            self._addresses = (now + ADDRESSES_SECONDS, [(family, address) for family, _, _, _, address in found])
        return self._addresses[1]


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _result(response: Answer) -> Any:
    """The envelope's ``result``, or the error the envelope (and status) amount to."""
    try:
        data = json.loads(response.body or b"")
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ProviderUnavailable(f"The edge provider sent an answer that could not be read (HTTP {response.code}).")
    if 200 <= response.code < 300 and data.get("success") is not False:
        return data.get("result")
    raise _refusal(response.code, [e for e in _list(data.get("errors")) if isinstance(e, dict)])


def _refusal(status: int, errors: list[dict[str, Any]]) -> ProviderError:
    """What an error answer means for us: Cloudflare's codes first, the status where they are silent."""
    codes = [e["code"] for e in errors if isinstance(e.get("code"), int)]
    said = "; ".join(_sentence_part(e) for e in errors) or f"HTTP {status}"
    if status == 401 or (status == 403 and (not codes or TOKEN_CODES.intersection(codes))):
        return ProviderUnavailable(
            f"The edge provider refused the service's API token ({said}); check provider.cloudflare.api_token."
        )
    if NOT_FOUND in codes:
        return HostnameGone(f"The edge provider no longer has this hostname ({said}).", provider_code=NOT_FOUND)
    if status == 404:
        return ProviderUnavailable(
            f"The edge provider does not know the zone ({said}); check provider.cloudflare.zone_id."
        )
    if status < 500 and codes and not REQUEST_CODES.intersection(codes):  # also a 200 with success: false
        return ProviderRejected(f"The edge provider refused the hostname: {said}.", provider_code=codes[0])
    return ProviderUnavailable(f"The edge provider did not accept the request: {said}.")


def _sentence_part(error: dict[str, Any]) -> str:
    message = str(error.get("message") or "error").strip().rstrip(".")
    if len(message) > 1 and message[1].islower():
        message = message[0].lower() + message[1:]
    code = error.get("code")
    return f"{message} (Cloudflare error {code})" if code is not None else message


# -- reading a custom hostname object --------------------------------------------------------------


def parse_state(result: Any) -> ProviderState:
    """A ``ProviderState`` from a custom hostname object; odd or missing fields become ``None``."""
    if not isinstance(result, dict) or not _str(result.get("id")):
        raise ProviderUnavailable("The edge provider's answer names no custom hostname; try again shortly.")
    ssl = _dict(result.get("ssl"))
    certificates = ssl.get("certificates")
    certificate = _dict(certificates[0]) if isinstance(certificates, list) and certificates else {}
    delegation = ssl.get("dcv_delegation_records")
    record = _dict(delegation[0]) if isinstance(delegation, list) and delegation else {}
    errors = [e for e in _list(result.get("verification_errors")) if isinstance(e, str)]
    for error in _list(ssl.get("validation_errors")):
        if isinstance(error, dict) and error.get("message"):
            errors.append(str(error["message"]))
    return ProviderState(
        hostname_id=result["id"],
        hostname_status=_str(result.get("status")) or "pending",
        ssl_id=_str(ssl.get("id")),
        ssl_status=_str(ssl.get("status")),
        certificate_id=_str(certificate.get("id")),
        issuer=_str(certificate.get("issuer")) or _str(ssl.get("issuer")),
        issued_at=parse_time(certificate.get("issued_on")),
        expires_at=parse_time(certificate.get("expires_on")) or parse_time(ssl.get("expires_on")),
        delegation_target=_str(record.get("cname_target")),
        errors=tuple(errors),
    )


_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from RFC 3339 (``Z``, offsets, any fraction); ``None`` if unreadable."""
    if not isinstance(value, str):
        return None
    try:
        text = _FRACTION.sub(r"\1", value.strip()).replace("Z", "+00:00").replace("z", "+00:00")
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
