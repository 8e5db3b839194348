"""A fake DNS host speaking Domain Connect (the DNS-provider side), over real HTTPS on 127.0.0.1.

It checks apply URLs as a strict DNS host does, on its own, importing nothing of core.domain_connect:
it strips ``sig`` and ``key`` from the raw query received, fetches the public key by a real query to
the test DNS server and verifies RS256. It writes what it applies into that DNS server. Reached as
``https://<hostname>:<port>`` once the test DNS answers ``hostname`` with 127.0.0.1 (``announce``),
with ``[network] ca_bundle = ca_pem_path`` and loopback allowed. It serves ``GET /api/v2/<domain>/settings``
(``settings()`` for a hosted zone, else 404; ``settings_override``), ``GET /api/v2/domainTemplates/
providers/<pid>/services/<sid>`` (200 ``{"version": n}`` if installed, else 404; ``template_check_status``)
and ``/connect/v2/domainTemplates/providers/<pid>/services/<sid>/apply?...``: GET shows a consent page
whose form POSTs back to the same URL (button ``consent`` applies, ``cancel`` declines), then a 302 to
``redirect_uri``; a refused request gets 400 naming the problem and changes nothing. It runs in a
thread with its own event loop; controls are thread-safe, ``requests``/``applied``/``refusals`` are
lists it appends to.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import html
import json
import re
import shutil
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any, NamedTuple, Self
from urllib.parse import quote, unquote_plus, urlsplit

import tornado.web
import trustme
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from dnslib import CNAME, QTYPE, RR, TXT, DNSLabel, DNSRecord

from tests.servers._thread import ThreadedServer
from tests.servers.dns import DnsServer

_TEMPLATE = r"/v2/domainTemplates/providers/([^/]+)/services/([^/]+)"
_VARIABLE = re.compile(r"%([A-Za-z0-9_-]+)%")
#: Apply parameters that are not template variables (compared lowercased).
_RESERVED = {"domain", "host", "redirect_uri", "state", "groupid", "providername", "servicename",
             "instanceid", "key", "sig"}


class Answer(NamedTuple):
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    "Seconds before answering (other requests are served meanwhile)."
    location: str | None = None


class AppliedRecord(NamedTuple):
    type: str
    name: str
    "Absolute, lowercase, no trailing dot."
    value: str
    ttl: int


class Refused(Exception):
    """An apply request a strict DNS host turns down (400, nothing changed)."""


class FakeDnsHost:
    def __init__(self, dns: DnsServer, *, hostname: str = "dc.dnshost-test.com",
                 provider_id: str = "dnshost-test.com", provider_name: str = "DNS Host Test",
                 ca: trustme.CA | None = None, cloudflare_like: bool = False,
                 auto_approve: bool = False) -> None:
        self.dns = dns
        self.hostname = hostname
        self.provider_id = provider_id
        self.provider_name = provider_name
        self.cloudflare_like = cloudflare_like
        "Ignore txtConflictMatchingMode (a TXT replaces only an identical one) and never send ``state`` back."
        self.auto_approve = auto_approve
        "Apply on the GET itself, as if the customer had clicked Connect (for HTTP-client tests)."
        self.ca = ca or trustme.CA()
        self._folder = Path(tempfile.mkdtemp(prefix="dns-host-"))
        self.ca_pem_path = str(self._folder / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_pem_path)
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(hostname).configure_cert(self._tls)
        self._server = ThreadedServer(tornado.web.Application([
            (rf"/api{_TEMPLATE}", _Api, {"host": self}),
            (r"/api/v2/([^/]+)/settings", _Api, {"host": self}),
            (rf"/connect{_TEMPLATE}/apply", _Apply, {"host": self}),
        ], log_function=lambda _: None), ssl_options=self._tls)
        self.port: int = self._server.port
        self.url_api = f"https://{hostname}:{self.port}/api"
        self.url_sync_ux = f"https://{hostname}:{self.port}/connect"
        self.requests: list[tuple[str, str, str]] = []
        "``(method, path, raw query)`` of every request, oldest first."
        self.applied: list[AppliedRecord] = []
        "Every record an apply wrote into the DNS, in order."
        self.refusals: list[str] = []
        "The problem named by each refused apply request."
        self._lock = threading.Lock()
        self._zones: set[str] = set()
        self._templates: dict[tuple[str, str], dict[str, Any]] = {}
        self._settings_answer: Answer | None = None
        self._template_answer: Answer | None = None
        self._server.start()

    def value(self) -> str:
        """What ``_domainconnect.<zone>`` holds for a zone hosted here (no scheme, path included)."""
        return f"{self.hostname}:{self.port}/api"

    def settings(self) -> dict[str, Any]:
        """The settings document of every hosted zone (with a key the service must ignore)."""
        return {"providerId": self.provider_id, "providerName": self.provider_name,
                "providerDisplayName": f"{self.provider_name} Display", "urlSyncUX": self.url_sync_ux,
                "urlAPI": self.url_api, "width": 750, "height": 750, "market": "test"}

    # -- controls (any thread) ------------------------------------------------------------------

    def host_zone(self, zone: str) -> None:
        with self._lock:
            self._zones.add(zone.rstrip(".").lower())

    def announce(self, zone: str) -> None:
        """Publish in the test DNS what makes ``zone`` discoverable here: its TXT, and our address."""
        self.dns.publish(f"_domainconnect.{zone}", "TXT", self.value())
        with self.dns.zone.lock:
            known = "A" in self.dns.zone.records.get(self.hostname.lower(), {})
        if not known:
            self.dns.publish(self.hostname, "A", "127.0.0.1")

    def install(self, template: dict[str, Any]) -> None:
        """Deploy a template (the JSON an operator submits); the fake applies CNAME and TXT records only."""
        if unknown := {r["type"] for r in template["records"]} - {"CNAME", "TXT"}:
            raise ValueError(f"the fake applies CNAME and TXT records only, not {sorted(unknown)}")
        with self._lock:
            key = (template["providerId"].lower(), template["serviceId"].lower())
            self._templates[key] = copy.deepcopy(template)

    def settings_override(self, body: bytes, status: int = 200, delay: float = 0.0,
                          location: str | None = None) -> None:
        """Answer every settings request with this instead (oversize, slow, 302, not JSON, http URLs...)."""
        with self._lock:
            self._settings_answer = Answer(status, body, delay, location)

    def template_check_status(self, status: int, body: bytes = b"", delay: float = 0.0) -> None:
        """Answer every template check with this instead (200 empty, 500, slow...)."""
        with self._lock:
            self._template_answer = Answer(status, body, delay)

    def reset(self) -> None:
        """Forget zones, templates, overrides, requests, refusals and applied records; keep the flags."""
        with self._lock:
            self._zones.clear()
            self._templates.clear()
            self._settings_answer = self._template_answer = None
            del self.requests[:], self.applied[:], self.refusals[:]

    # -- the apply flow (on the host's thread) --------------------------------------------------

    async def _check(self, pid: str, sid: str, raw_query: str) -> _Request:
        with self._lock:
            template = copy.deepcopy(self._templates.get((pid.lower(), sid.lower())))
            hosted = set(self._zones)
        if template is None:
            raise Refused(f"template {pid}/{sid} is not installed here")
        parts = [part for part in raw_query.split("&") if part]
        params: dict[str, str] = {}
        for name, _, value in (part.partition("=") for part in parts):
            if unquote_plus(name).lower() in params:
                raise Refused(f"parameter {unquote_plus(name)} appears twice")
            params[unquote_plus(name).lower()] = unquote_plus(value)
        if template.get("syncPubKeyDomain"):
            if "sig" not in params or "key" not in params:
                raise Refused("the template requires a signed request (sig and key)")
            if parts[-1].partition("=")[0] != "sig":
                raise Refused("sig must be the last parameter")
            # What was signed: the query as received minus sig and key, nothing re-encoded or re-ordered.
            signed = "&".join(part for part in parts if part.partition("=")[0] not in ("sig", "key"))
            await self._verify(signed, params["sig"], params["key"], template["syncPubKeyDomain"])
        domain = params.get("domain", "").rstrip(".").lower()
        if domain not in hosted:
            raise Refused(f"domain {domain or '(none)'} is not hosted here")
        if redirect := params.get("redirect_uri", ""):
            listed = template.get("syncRedirectDomain", "").split(",")
            allowed = [d.strip().lower() for d in listed if d.strip()]
            if (urlsplit(redirect).hostname or "") not in allowed:
                raise Refused(f"the host of redirect_uri is not in syncRedirectDomain ({','.join(allowed)})")
        host = params.get("host", "").rstrip(".").lower()
        return _Request(template, domain, params, _render(template, domain, host, params))

    async def _verify(self, signed: str, sig: str, label: str, key_domain: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,63}", label):
            raise Refused("key is not one DNS label")
        name = f"{label}.{key_domain}"
        question = DNSRecord.question(name, "TXT")
        try:
            raw = await asyncio.get_running_loop().run_in_executor(
                None, lambda: question.send(self.dns.host, self.dns.port, timeout=2))
        except OSError:
            raise Refused(f"no DNS answer for {name}") from None
        fragments: dict[int, str] = {}
        try:
            for rr in DNSRecord.parse(raw).rr:
                if rr.rtype != QTYPE.TXT or not rr.rdata.data:
                    continue
                # The first character-string of each record only, as the reference verifier reads it.
                fields = dict(f.partition("=")[::2] for f in rr.rdata.data[0].decode().split(","))
                if fields.get("a", "RS256") != "RS256" or fields.get("t", "x509") != "x509":
                    raise Refused(f"the key at {name} is not RS256/x509")
                fragments[int(fields["p"])] = fields["d"]
            if not fragments:
                raise Refused(f"no public key at {name}")
            key = serialization.load_der_public_key(
                base64.b64decode("".join(fragments[p] for p in sorted(fragments)), validate=True))
            if not isinstance(key, rsa.RSAPublicKey):
                raise Refused(f"the key at {name} is not RSA")
            signature = base64.b64decode(sig, validate=True)
            key.verify(signature, signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        except (KeyError, binascii.Error, ValueError, UnsupportedAlgorithm):
            raise Refused(f"the public key at {name}, or sig, is unreadable") from None
        except InvalidSignature:
            raise Refused("the signature does not verify") from None

    def _publish(self, changes: list[_Change]) -> None:
        with self.dns.zone.lock:
            for record, mode, prefix in changes:
                at_name = self.dns.zone.records.setdefault(record.name, {})
                if record.type == "CNAME":  # a CNAME conflicts with everything at its name
                    at_name.clear()
                else:  # a TXT with the CNAME, and with other TXT as the template says (Cloudflare: identical)
                    at_name.pop("CNAME", None)
                    mode = "None" if self.cloudflare_like else mode
                    kept = at_name.get("TXT", [])
                    at_name["TXT"] = [rr for rr in kept if not _conflicts(rr, record.value, mode, prefix)]
                rdata = CNAME(record.value) if record.type == "CNAME" else TXT(record.value)
                rr = RR(DNSLabel(record.name), getattr(QTYPE, record.type), rdata=rdata, ttl=record.ttl)
                at_name.setdefault(record.type, []).append(rr)
        with self._lock:
            self.applied.extend(change.record for change in changes)

    def _note(self, into: list[Any], item: Any) -> None:
        with self._lock:
            into.append(item)

    # -- lifetime -------------------------------------------------------------------------------

    def start(self) -> FakeDnsHost:
        return self

    def stop(self) -> None:
        self._server.stop()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


class _Change(NamedTuple):
    record: AppliedRecord
    mode: str
    "txtConflictMatchingMode (TXT only)."
    prefix: str


class _Request(NamedTuple):
    template: dict[str, Any]
    domain: str
    params: dict[str, str]
    "Decoded, names lowercased."
    changes: list[_Change]


def _render(template: dict[str, Any], domain: str, host: str, params: dict[str, str]) -> list[_Change]:
    """The template's records for this request (spec "Template Record"; draft "Host Name Rendering")."""
    fqdn = f"{host}.{domain}" if host else domain
    values = {name: value for name, value in params.items() if name not in _RESERVED}
    values |= {"domain": domain, "host": host, "fqdn": fqdn}

    def fill(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            if match.group(1).lower() not in values:
                raise Refused(f"variable {match.group(1)} is missing")
            return values[match.group(1).lower()]

        return _VARIABLE.sub(one, text)  # substituted values are not scanned again

    groups = {g.strip() for g in params.get("groupid", "").split(",") if g.strip()}
    changes = []
    for record in template["records"]:
        if groups and record.get("groupId") not in groups:
            continue
        label = fill(record.get("host", "")).lower()  # relative to [host.]domain unless it ends with a dot
        name = fqdn if label in ("", "@") else label[:-1] if label.endswith(".") else f"{label}.{fqdn}"
        if name != domain and not name.endswith("." + domain):
            raise Refused(f"record {name} is outside the zone {domain}")
        value = fill(record["pointsTo"] if record["type"] == "CNAME" else record["data"])
        value = fqdn if value == "@" else value.rstrip(".") if record["type"] == "CNAME" else value
        applied = AppliedRecord(record["type"], name, value, int(fill(str(record.get("ttl", 3600)))))
        changes.append(_Change(applied, record.get("txtConflictMatchingMode", "None"),
                               record.get("txtConflictMatchingPrefix", "")))
    return changes


def _conflicts(rr: RR, new: str, mode: str, prefix: str) -> bool:
    existing = b"".join(rr.rdata.data).decode("utf-8", "replace")
    return existing == new or mode == "All" or (mode == "Prefix" and existing.startswith(prefix))


def _page(title: str, body: str) -> str:
    title = html.escape(title)
    return (f"<!doctype html><html><head><title>{title}</title></head>"
            f"<body><h1>{title}</h1>{body}</body></html>")


class _Handler(tornado.web.RequestHandler):
    def initialize(self, host: FakeDnsHost) -> None:
        self.host = host

    def prepare(self) -> None:
        request = self.request
        self.host._note(self.host.requests, (request.method or "", request.path, request.query))

    async def _override(self, answer: Answer | None) -> bool:
        if answer is None:
            return False
        if answer.delay:
            try:  # ends early when the host stops, so no handler outlives it
                await asyncio.wait_for(self.host._server._stop.wait(), answer.delay)
            except TimeoutError:
                pass
        self.set_status(answer.status)
        if answer.location is not None:
            self.set_header("Location", answer.location)
        self.finish(answer.body)
        return True


class _Api(_Handler):
    """The settings of a hosted zone (one group: the domain), or a template check (two: pid, sid)."""

    async def get(self, *names: str) -> None:
        with self.host._lock:
            settings = len(names) == 1
            answer = self.host._settings_answer if settings else self.host._template_answer
            template = self.host._templates.get((names[0].lower(), names[-1].lower()))
            found = names[0].lower() in self.host._zones if settings else template is not None
        if not await self._override(answer):
            if not found:
                raise tornado.web.HTTPError(404)
            self.set_header("Content-Type", "application/json")
            document = self.host.settings() if settings else {"version": template.get("version", 1)}
            self.finish(json.dumps(document))


class _Apply(_Handler):
    async def get(self, pid: str, sid: str) -> None:
        if (request := await self._checked(pid, sid)) is None:
            return
        if self.host.auto_approve:
            self.host._publish(request.changes)
            self._back(request)
            return
        esc = html.escape
        rows = "".join(f"<li>{esc(c.record.type)} {esc(c.record.name)} {esc(c.record.value)}</li>"
                       for c in request.changes)
        self.finish(_page(self.host.provider_name, (
            f"<p>{esc(request.template.get('providerName', ''))} "
            f"asks to add these records to {esc(request.domain)}:</p><ul>{rows}</ul>"
            f'<form method="post" action="{esc(self.request.uri or "")}">'
            '<button type="submit" name="consent" value="yes">Connect</button> '
            '<button type="submit" name="cancel" value="yes">Cancel</button></form>')))

    async def post(self, pid: str, sid: str) -> None:
        if (request := await self._checked(pid, sid)) is None:
            return
        if self.get_body_argument("consent", None) is None:
            self._back(request, ("error", "access_denied"), ("error_description", "user_cancel"))
            return
        self.host._publish(request.changes)
        self._back(request)

    async def _checked(self, pid: str, sid: str) -> _Request | None:
        try:
            return await self.host._check(pid, sid, self.request.query)
        except Refused as problem:
            self.host._note(self.host.refusals, str(problem))
            self.set_status(400)
            self.finish(_page("Request refused", f"<p>{html.escape(str(problem))}</p>"))
            return None

    def _back(self, request: _Request, *extra: tuple[str, str]) -> None:
        if not (redirect := request.params.get("redirect_uri", "")):
            outcome = "cancelled" if extra else "applied"
            self.finish(_page(f"Changes {outcome}", ""))
            return
        if (state := request.params.get("state", "")) and not self.host.cloudflare_like:
            extra = (*extra, ("state", state))
        query = "&".join(f"{name}={quote(value, safe='')}" for name, value in extra)
        self.redirect(f"{redirect}{'&' if '?' in redirect else '?'}{query}" if query else redirect)
