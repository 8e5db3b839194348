"""Real DNS software on loopback: NSD as the authoritative server, Unbound as the validating resolver.

The fake server of tests/servers/dns.py answers what a test tells it to; these two behave as the
DNS a customer has: Unbound caches answers (positive and negative) for their TTLs and validates
DNSSEC, NSD serves zone files, signed ones included. The lab serves ``com`` (so nothing is asked of
the internet), and under it one zone per test, each delegated and stubbed to NSD:

- ``lab.com`` and any zone a test adds with ``zone()``, unsigned;
- ``expired.com``, signed with signatures that expired in 2020, and trusted by Unbound (its key is
  Unbound's trust anchor), so every answer from it is bogus: SERVFAIL, unless asked with CD;
- ``resigned.com``, signed and trusted the same way, until ``resign`` signs it again with valid
  signatures: DNSSEC fixed;
- ``lame.com``, delegated by ``com`` to three nameservers of which none serves it: one silent
  (``SILENT``, a socket that never answers), one REFUSED (``REFUSING``, a second NSD that serves
  only ``elsewhere.net``), one with nothing listening (``CLOSED``);
- ``partly.com``, served by NSD and also delegated to the silent one.

The zones' nameservers are asked on ``nsd_port`` at their loopback addresses; Unbound, which asks
port 53 when it follows a referral, reaches the served zones through its stub zones only.

``publish`` rewrites a zone file and has NSD reload it (SIGHUP, then wait for the new serial).
``delegate`` and ``undelegate`` add or remove a served zone, its NS records at its parent and
Unbound's stub, restarting both servers (a fresh cache, as after a delegation's TTL); ``resign``
restarts them too (Unbound forgets the answers it found bogus, as it does after a minute).
Needs ``nsd``, ``unbound`` and ``ldns-signzone`` (Debian packages nsd, unbound, ldnsutils).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode

from tests.patience import PATIENCE_SECONDS
from tests.servers.service import free_port

TOOLS = ("nsd", "unbound", "ldns-keygen", "ldns-signzone")
SOA_MINIMUM = 300
"The lab zones' negative-caching time (their SOA minimum and SOA TTL)."
SIGNED = "expired.com"
RESIGNED = "resigned.com"
SIGNED_ZONES = (SIGNED, RESIGNED)
"Zones signed with a key Unbound trusts; with expired signatures until ``resign``."
LAB, SILENT, REFUSING, CLOSED = "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"
"The nameserver addresses of the lab: NSD, a socket that never answers, another NSD, nothing at all."
LAME = "lame.com"
PARTLY = "partly.com"


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


class DnsLab:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.nsd_port = free_port()
        self.unbound_port = free_port()
        self.resolver = f"127.0.0.1:{self.unbound_port}"
        "The validating resolver, as ``[dns] nameservers`` takes it."
        self.records: dict[str, list[str]] = {"com": [], "lab.com": [], SIGNED: [], RESIGNED: [], PARTLY: []}
        "Each served zone's records beyond its SOA and NS, as zone-file lines."
        self.nameservers: dict[str, list[tuple[str, str]]] = {PARTLY: [(f"ns1.{PARTLY}", LAB), (f"ns2.{PARTLY}", SILENT)]}
        "A zone's (NS name, address) pairs, where not only ``ns1.<zone>`` at ``LAB``."
        self.unserved: dict[str, list[tuple[str, str]]] = {
            LAME: [(f"ns1.{LAME}", SILENT), (f"ns2.{LAME}", REFUSING), (f"ns3.{LAME}", CLOSED)]}
        "Zones delegated to nameservers that do not serve them, by their parent."
        self.stubs: dict[str, str] = {}
        "Other zones Unbound asks one server for (``zone``: ``ip@port``): the service's delegation zone."
        self.serials: dict[str, int] = {}
        self.valid: set[str] = set()
        "Signed zones signed again with valid signatures (``resign``)."
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def start(self) -> DnsLab:
        self._silent.bind((SILENT, self.nsd_port))  # bound, never read: queries go unanswered
        self._write_zones()
        try:
            self._start_servers()
        except BaseException:
            self.stop()  # a server left running would fail a later test of this worker on its warning
            raise
        return self

    def _start_servers(self) -> None:
        (self.folder / "nsd.conf").write_text(self._nsd_conf("nsd", LAB, {z: self._zone_file(z) for z in self.records}))
        self._run("nsd", "-d", "-c", str(self.folder / "nsd.conf"))
        (self.folder / "elsewhere.zone").write_text(
            "$ORIGIN elsewhere.net.\n@ 300 IN SOA ns1 hostmaster 1 3600 600 86400 300\n@ 300 IN NS ns1\nns1 300 IN A 127.0.0.3\n")
        conf = self._nsd_conf("nsd-refusing", REFUSING, {"elsewhere.net": "elsewhere.zone"})
        (self.folder / "nsd-refusing.conf").write_text(conf)
        self._run("nsd", "-d", "-c", str(self.folder / "nsd-refusing.conf"), name="nsd-refusing")
        for zone in self.records:
            self._wait_for_serial(zone)
        (self.folder / "unbound.conf").write_text(self._unbound_conf())
        self._run("unbound", "-d", "-c", str(self.folder / "unbound.conf"))
        self._wait_until_resolving()

    def _run(self, *command: str, name: str = "") -> None:
        name = name or command[0]
        with open(self.folder / f"{name}.log", "wb") as log:  # the child keeps its own copy
            self._processes[name] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)

    def stop(self) -> None:
        self._stop_servers()
        self._silent.close()

    def delegate(self, zone: str) -> None:
        """Serve ``zone`` (a name below a served zone) from NSD, delegated by its parent."""
        self.records[zone] = []
        self._restart()

    def resign(self, zone: str) -> None:
        """Sign ``zone`` (one of ``SIGNED_ZONES``) with valid signatures: its DNSSEC fixed."""
        self.valid.add(zone)
        self._restart()

    def undelegate(self, zone: str) -> None:
        """Stop serving ``zone`` and remove its delegation: its names are the parent's again."""
        del self.records[zone]
        self._restart()

    def _restart(self) -> None:
        self._stop_servers()
        self._write_zones()
        self._start_servers()

    def _stop_servers(self) -> None:
        for process in self._processes.values():
            process.terminate()
        for process in self._processes.values():
            process.wait(timeout=10)

    def zone(self, name: str) -> None:
        """A new unsigned zone under com (before ``start``)."""
        self.records.setdefault(name, [])

    def publish(self, zone: str, line: str) -> None:
        """Add a zone-file line (``name TTL IN TYPE value``, names absolute) and reload."""
        self.records[zone].append(line)
        self._reload(zone)

    def publish_many(self, zone: str, lines: list[str]) -> None:
        """``publish`` for many lines, with one reload."""
        self.records[zone] += lines
        self._reload(zone)

    def remove(self, zone: str, name: str) -> None:
        """Remove every record at ``name`` and reload."""
        self.records[zone] = [line for line in self.records[zone] if not line.startswith(name + ". ")]
        self._reload(zone)

    def _reload(self, zone: str) -> None:
        """NSD reloads into new server processes while the old ones finish: one of those may still
        answer from the old zone after a new one has answered the new serial (seen on a busy
        machine), and Unbound would cache its NXDOMAIN for ``SOA_MINIMUM``. So the reload is done
        once the old servers have gone too."""
        self._write_zone(zone)
        nsd = self._processes["nsd"]
        old_servers = _servers_below(nsd.pid)
        nsd.send_signal(signal.SIGHUP)
        self._wait_for_serial(zone)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while _servers_below(nsd.pid) & old_servers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"NSD's old servers still run after its reload: {(self.folder / 'nsd.log').read_text()}")
            time.sleep(0.02)

    def _write_zones(self) -> None:
        for zone in self.records:
            self._write_zone(zone)

    def _write_zone(self, zone: str) -> None:
        serial = self.serials[zone] = self.serials.get(zone, 0) + 1
        delegations = []
        for child in [*self.records, *self.unserved]:
            if self._parent(child) == zone:
                delegations += self._ns_lines(child)
        text = "\n".join([
            f"$ORIGIN {zone}.",
            f"@ {SOA_MINIMUM} IN SOA ns1.{zone}. hostmaster.{zone}. {serial} 3600 600 86400 {SOA_MINIMUM}",
            *[line for line in self._ns_lines(zone) if f".{line.split()[0]}".endswith(f".{zone}.")],  # no out-of-zone glue
            *delegations,
            *self.records[zone],
            "",
        ])
        path = self.folder / f"{zone}.zone"
        path.write_text(text)
        if zone in SIGNED_ZONES:
            self._sign(path, zone)

    def _sign(self, path: Path, zone: str) -> None:
        """Sign with signatures valid from 2019-12-01 to 2020-01-01 (long expired), or, once
        ``resign`` said so, from yesterday for 30 days."""
        keys = self.folder / f"keys-{zone}"
        if not keys.exists():
            keys.mkdir()
            base = subprocess.run(["ldns-keygen", "-a", "ECDSAP256SHA256", "-k", zone], cwd=keys, check=True,
                                  capture_output=True, text=True).stdout.strip()
            with open(self.folder / "anchor", "a") as anchor:
                anchor.write((keys / f"{base}.key").read_text().rstrip("\n") + "\n")
            (keys / "base").write_text(base)
        base = keys / (keys / "base").read_text()
        start, end = "20191201000000", "20200101000000"
        if zone in self.valid:
            start, end = (time.strftime("%Y%m%d%H%M%S", time.gmtime(time.time() + days * 86400)) for days in (-1, 30))
        subprocess.run(["ldns-signzone", "-i", start, "-e", end, "-o", zone, "-f",
                        str(path) + ".signed", str(path), str(base)], check=True, capture_output=True)

    def _parent(self, zone: str) -> str | None:
        """The closest served zone above ``zone``."""
        labels = zone.split(".")
        return next((".".join(labels[i:]) for i in range(1, len(labels)) if ".".join(labels[i:]) in self.records), None)

    def _ns_lines(self, zone: str) -> list[str]:
        """The zone's NS records with their glue, as its parent and the zone itself both publish them."""
        pairs = self.unserved.get(zone) or self.nameservers.get(zone) or [(f"ns1.{zone}", LAB)]
        return [line for ns, address in pairs for line in (f"{zone}. 3600 IN NS {ns}.", f"{ns}. 3600 IN A {address}")]

    def _zone_file(self, zone: str) -> str:
        return f"{zone}.zone.signed" if zone in SIGNED_ZONES else f"{zone}.zone"

    def _nsd_conf(self, name: str, address: str, zones: dict[str, str]) -> str:
        """An NSD instance ``name`` on ``address`` serving ``zones`` (zone name: zone file)."""
        served = "".join(f'zone:\n  name: "{zone}"\n  zonefile: "{self.folder / file}"\n' for zone, file in zones.items())
        return (
            "server:\n"
            f"  ip-address: {address}@{self.nsd_port}\n"
            '  username: ""\n'
            f'  zonesdir: "{self.folder}"\n'
            f'  database: ""\n'
            f'  zonelistfile: "{self.folder / (name + ".zone.list")}"\n'
            f'  xfrdfile: "{self.folder / (name + ".xfrd.state")}"\n'
            f'  xfrdir: "{self.folder}"\n'
            f'  pidfile: "{self.folder / (name + ".pid")}"\n'
            "  server-count: 1\n"
            "remote-control:\n  control-enable: no\n"
            + served
        )

    def _unbound_conf(self) -> str:
        stubs = "".join(f'stub-zone:\n  name: "{zone}."\n  stub-addr: 127.0.0.1@{self.nsd_port}\n'
                        for zone in self.records)
        stubs += "".join(f'stub-zone:\n  name: "{zone}."\n  stub-addr: {address}\n' for zone, address in self.stubs.items())
        return (
            "server:\n"
            f"  interface: 127.0.0.1@{self.unbound_port}\n"
            f"  port: {self.unbound_port}\n"
            '  username: ""\n  chroot: ""\n'
            f'  directory: "{self.folder}"\n'
            f'  pidfile: "{self.folder / "unbound.pid"}"\n'
            '  logfile: ""\n  use-syslog: no\n'
            "  do-ip6: no\n  do-not-query-localhost: no\n"
            "  num-threads: 1\n"
            '  module-config: "validator iterator"\n'
            f'  trust-anchor-file: "{self.folder / "anchor"}"\n'
            "remote-control:\n  control-enable: no\n"
            + stubs
        )

    def _ask(self, port: int, name: str, rtype: str) -> dns.message.Message:
        return dns.query.udp(dns.message.make_query(name, rtype), "127.0.0.1", port=port, timeout=1)

    def _wait_for_serial(self, zone: str) -> None:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while time.monotonic() < deadline:
            try:
                answer = self._ask(self.nsd_port, zone, "SOA")
                if answer.answer and answer.answer[0][0].serial == self.serials[zone]:
                    return
            except (OSError, dns.exception.Timeout):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"NSD did not serve {zone} serial {self.serials[zone]}: {(self.folder / 'nsd.log').read_text()}")

    def _wait_until_resolving(self) -> None:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while time.monotonic() < deadline:
            if self._processes["unbound"].poll() is not None:
                break
            try:
                if self._ask(self.unbound_port, "ns1.lab.com", "A").rcode() == dns.rcode.NOERROR:
                    return
            except (OSError, dns.exception.DNSException):  # a timeout, or not yet Unbound's answer
                pass
            time.sleep(0.05)
        raise RuntimeError(f"Unbound did not answer: {(self.folder / 'unbound.log').read_text()}")


def _servers_below(pid: int) -> set[int]:
    """NSD's server processes among the descendants of ``pid`` (its xfrd, whose child is its main)."""
    servers, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [int(child) for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        except OSError:  # it ended meanwhile
            continue
        todo += children
        for child in children:
            try:
                if Path(f"/proc/{child}/comm").read_text().startswith("nsd: server"):
                    servers.add(child)
            except OSError:
                continue
    return servers
