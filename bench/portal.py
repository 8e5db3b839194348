"""Portal, verification-link and site-scan timings: prints numbers, asserts nothing. Not part of the
test run.

    python bench/portal.py [--rounds 300]

Starts a real DNS server and a TLS server (a trustme CA, one valid and one expired certificate) on
loopback in this process, seeds a workspace of 500 domains through the service's own core code,
starts the real service (``python app.py``, sandbox provider) on the other core, signs in through
its built-in identity provider the way a browser does, and measures, one keep-alive connection at a
time (p50 / p95 of ``--rounds`` requests after a warm-up):

- the whole sign-in (``/login``, the provider's form, ``/auth/callback``), each step a new connection;
- the portal's domains page and a domain's DNS page (the session cookie verified on each);
- creating a verification link, its public page and its public JSON view;
- the HTTPS scan of a host with a valid certificate (one handshake) and of one with an expired
  certificate (two handshakes: the verified one fails, a second reads the certificate);
- the DNS page again once the domain has that many active links (it shows the newest 20), and with
  16 connections at once, in pages per second;
- every other page a signed-in person opens: the account page, API keys (10 keys), the team (10
  members, 5 invitations), webhooks (the list, an endpoint with 60 deliveries and its log, one
  delivery's attempts), a domain's delete confirmation, and the DNS page with its HTTPS scan.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import http.cookiejar
import json
import logging
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import trustme

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.certificates import _pin, pct, seed, start_dns, start_service, stop, write_config
from core.config import load_config
from core.identity import accounts, api_keys, team
from core.identity.auth import Principal
from core.identity.dev_idp import DEFAULT_CLIENT_ID
from core.runtime.assembly import build_services
from tests.helpers import stored_deliveries
from tests.servers.service import free_port
from tests.servers.tls import TlsServer

DOMAINS = 500
LOAD_SECONDS = 5
RATE_LIMITS = "".join(f"{bucket} = 10000000\n" for bucket in (
    "auth", "signup", "public_verification_links", "verification_links", "site_scan"))


class Connection:
    """One keep-alive HTTP/1.1 connection; each request returns (status, body, milliseconds)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, bytes, float]:
        start = time.perf_counter()
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}",
                 *(f"{k}: {v}" for k, v in headers.items())]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        answer = await self.reader.readexactly(int(length.group(1))) if length else b""
        return int(head.split(b" ", 2)[1]), answer, (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.writer.close()


class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def sign_in(base_url: str, email: str) -> str:
    """A browser's sign-in through the built-in provider: the session cookie's ``name=value``."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(Stay, urllib.request.HTTPCookieProcessor(jar))

    def location(request: urllib.request.Request | str) -> str:
        try:
            opener.open(request, timeout=10)
        except urllib.error.HTTPError as redirected:
            with redirected:
                return redirected.headers["Location"]
            raise RuntimeError(f"no redirect from {request}")

    authorize = urllib.parse.urlsplit(location(base_url + "/login?next=/domains"))
    assert authorize.path.endswith("/idp/authorize"), authorize
    params = dict(urllib.parse.parse_qsl(authorize.query))
    assert params["client_id"] == DEFAULT_CLIENT_ID
    form = urllib.request.Request(base_url + "/idp/authorize", method="POST",
                                  data=urllib.parse.urlencode({**params, "email": email}).encode())
    callback = location(form)
    assert location(callback) == "/domains"
    return next(f"{c.name}={c.value}" for c in jar if c.name == "cps_session")


async def timed(port: int, rounds: int, method: str, path: str, headers: dict[str, str], body: bytes = b"",
                expect: int = 200) -> dict:
    conn = await Connection(port).open()
    try:
        samples = []
        for n in range(rounds + rounds // 10):
            status, answer, ms = await conn.request(method, path, headers, body)
            if status != expect:
                raise RuntimeError(f"{method} {path} answered {status}: {answer[:300]!r}")
            if n >= rounds // 10:  # the first tenth warms up
                samples.append(ms)
        return {"p50": pct(samples, .5), "p95": pct(samples, .95), "last": answer}
    finally:
        conn.close()


async def pages_per_second(port: int, path: str, headers: dict[str, str], connections: int = 16) -> float:
    deadline, count = time.perf_counter() + LOAD_SECONDS, 0

    async def client() -> None:
        nonlocal count
        conn = await Connection(port).open()
        try:
            while time.perf_counter() < deadline:
                status, _, _ = await conn.request("GET", path, headers)
                assert status == 200, status
                count += 1
        finally:
            conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    return count / (time.perf_counter() - start)


def seed_the_other_pages(config: Path, workspace_id) -> tuple[str, str]:
    """What the other pages show, written through the core's own functions: members, invitations,
    keys, and an endpoint with 60 deliveries; its id and one delivery's."""
    services = build_services(load_config(config))
    try:
        workspace = services.store.accounts.get_workspace(workspace_id)
        owner = services.store.accounts.user_by_email("bench@example.com")
        principal = Principal(workspace=workspace, user=owner, role="owner")
        for n in range(9):
            accounts.add_member(services, workspace_id=workspace.id, email=f"member{n}@example.com",
                                role=("admin", "operator", "read_only")[n % 3])
        for n in range(5):
            team.invite(services, principal=principal, request=team.Invite(email=f"invited{n}@example.com", role="operator"))
        for n in range(9):
            api_keys.create(services, workspace_id=workspace.id,
                            request=api_keys.CreateKeyRequest(name=f"key {n}", scopes=["domains:read"]))
        with services.store.transaction():
            deliveries = stored_deliveries(services, workspace, *[("delivered", n % 7) for n in range(60)])
        endpoint = services.store.webhooks.endpoints(workspace.id)[0].id
        return str(endpoint), str(deliveries[0])
    finally:
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    _pin(1)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-portal-"))
    dns, tls, proc = start_dns(), TlsServer(), None
    try:
        ca = trustme.CA()
        (tmp / "ca.pem").write_bytes(ca.cert_pem.bytes())
        now = dt.datetime.now(dt.UTC)
        tls.serve("www.scanned-shop.com", ca.issue_cert("www.scanned-shop.com"))
        tls.serve("old.scanned-shop.com", ca.issue_cert("old.scanned-shop.com", not_before=now - dt.timedelta(days=90),
                                                        not_after=now - dt.timedelta(days=1)))
        for name in ("www.scanned-shop.com", "old.scanned-shop.com"):
            dns.publish(name, "A", "127.0.0.1")
        config = write_config(tmp / "service", dns, 'kind = "sandbox"')
        port = free_port()  # the built-in identity provider is reached at base_url, so it needs the real port
        text = config.read_text().replace("port = 0\n", f"port = {port}\n").replace(":8080", f":{port}")
        config.write_text(text.replace("[rate_limits]\n", "[rate_limits]\n" + RATE_LIMITS) + (
            f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{tmp / "ca.pem"}"\n'
            f'[site_scan]\nport = {tls.port}\ntimeout_seconds = 5\n'))
        names = [f"shop{n}.customer{n}.com" for n in range(DOMAINS - 1)] + ["www.scanned-shop.com"]
        key, rows = asyncio.run(seed(config, names, verified=False))
        endpoint, delivery = seed_the_other_pages(config, rows[0].workspace_id)
        proc, port = start_service(config)
        base_url = f"http://127.0.0.1:{port}"
        domain = rows[DOMAINS // 2]

        sign_ins = []
        for _ in range(20):
            start = time.perf_counter()
            session = sign_in(base_url, "bench@example.com")
            sign_ins.append((time.perf_counter() - start) * 1000)
        browser = {"Cookie": session}
        api = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        link_body = json.dumps({"domainId": str(domain.id)}).encode()

        async def measure() -> dict:
            results = {
                "domains page": await timed(port, args.rounds, "GET", "/domains", browser),
                "DNS page": await timed(port, args.rounds, "GET", f"/site/{domain.id}/dns", browser),
                "create a verification link (API)": await timed(port, args.rounds, "POST", "/v1/verification-links",
                                                                api, link_body, expect=201),
            }
            token = json.loads(results["create a verification link (API)"]["last"])["url"].rsplit("/", 1)[1]
            results["public link page /verify/<token>"] = await timed(port, args.rounds, "GET", f"/verify/{token}", {})
            results["public link JSON view"] = await timed(port, args.rounds, "GET",
                                                           f"/v1/public/verification-links/{token}", {})
            for label, host in (("scan, valid certificate (secure)", "www.scanned-shop.com"),
                                ("scan, expired certificate (not_secure)", "old.scanned-shop.com")):
                body = json.dumps({"urlOrDomain": f"https://{host}/"}).encode()
                results[label] = await timed(port, args.rounds // 3, "POST", "/v1/site-scan/https", api, body)
                results[label]["status"] = json.loads(results[label]["last"])["status"]
            results[f"DNS page, {args.rounds + args.rounds // 10} active links"] = await timed(port, args.rounds, "GET", f"/site/{domain.id}/dns", browser)
            results["rate"] = await pages_per_second(port, f"/site/{domain.id}/dns", browser)
            for label, path in (("account page", "/account"), ("API keys page (10 keys)", "/account/keys"),
                                ("team page (10 members, 5 invitations)", "/team"), ("webhooks page", "/webhooks"),
                                ("webhook endpoint, 60 deliveries", f"/webhooks/{endpoint}"),
                                ("one delivery's attempts", f"/webhooks/{endpoint}/deliveries/{delivery}"),
                                ("delete confirmation", f"/site/{domain.id}/delete")):
                results[label] = await timed(port, args.rounds, "GET", path, browser)
            results["DNS page with its HTTPS scan"] = await timed(port, args.rounds // 3, "GET",
                                                                  f"/site/{rows[-1].id}/dns?scan=1", browser)
            return results

        results = asyncio.run(measure())
    finally:
        if proc is not None:
            stop(proc)
        tls.stop()
        dns.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{'measure':<46} {'p50 / p95':<18}")
    print(f"{'sign-in: /login, provider form, callback':<46} {pct(sign_ins, .5):.1f} / {pct(sign_ins, .95):.1f} ms")
    for label, figures in results.items():
        if label != "rate":
            note = f"  ({figures['status']})" if "status" in figures else ""
            print(f"{label:<46} {figures['p50']:.1f} / {figures['p95']:.1f} ms{note}")
    print(f"{'DNS page, 16 connections':<46} {results['rate']:.0f} pages/s")
    print(f"(one workspace of {DOMAINS} domains; {args.rounds} requests a measure, scans a third of that; "
          f"whole run {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
