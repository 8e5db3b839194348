"""The DNS servers bench/delegation_dns.py measures, each on a port of its own on loopback: the
built-in server (in a process of its own, ``delegation_dns.py --serve``), NSD and Knot serving the
same zone, with what they need (their configurations, CPU time, readiness), and the store seeded
with challenge names."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode

from core.clock import SystemClock
from core.config import DelegationDnsConfig
from core.delegation_dns import TXT_TTL
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.sockets import bind
from store import Store
from tests.servers.service import free_port

ENTRY = Path(__file__).resolve().with_name("delegation_dns.py")
ZONE = "acme.bench.example"
NAMESERVERS = ["ns1.bench.example", "ns2.bench.example"]
VALUE = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
SERVER_CORE = 0
#: Response-rate limiting off, for the speed runs (one source asks everything).
NO_RATE_LIMIT = {"rrl_responses_per_second": 0}
PATIENCE = 30.0


def builtin_config(listen: str, **options: Any) -> DelegationDnsConfig:
    """The zone on ``listen``, with ``options`` (other ``[delegation_dns]`` keys)."""
    return DelegationDnsConfig(zone=ZONE, nameservers=NAMESERVERS, listen=listen, **options)


def make_server(config: DelegationDnsConfig, store: Store) -> DelegationServer:
    """The built-in server as the service makes it: every other argument at its default."""
    return DelegationServer(config, store, SystemClock(), bind(config.listen))


def open_store(where: str) -> Store:
    return Store(url=where) if where.startswith("postgres") else Store(Path(where))



def pinned(core: int, command: list[str]) -> list[str]:
    """``command`` on ``core`` from its first instruction (its forks and threads included)."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(core), *command]
    return command


def cpu_seconds(pid: int) -> float:
    """CPU seconds used by ``pid`` and its descendants so far (each process's threads included;
    NSD answers from a child of the process started)."""
    parents, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # fields[0] is field 3, the state
        except OSError:
            continue  # ended meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
        ticks[int(stat.parent.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    total = 0
    for child, used in ticks.items():
        ancestor = child
        while ancestor not in (pid, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        total += used if ancestor == pid else 0
    return total / os.sysconf("SC_CLK_TCK")


class Server:
    """A server process answering for the zone on ``port`` until ``stop``."""

    def __init__(self, name: str, command: list[str], port: int, folder: Path) -> None:
        self.name, self.port, self.folder = name, port, folder
        self.log = folder / f"{name}.log"
        with open(self.log, "wb") as out:  # the child keeps its own copy
            self.process = subprocess.Popen(pinned(SERVER_CORE, command), stdout=out, stderr=subprocess.STDOUT)

    def wait_for(self, name: str = ZONE, rdtype: str = "SOA", value: str = "") -> None:
        """Until the server answers ``name`` (with ``value`` among the TXT strings, if given)."""
        deadline = time.monotonic() + PATIENCE
        while not answers(self.port, name, rdtype, value):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} does not answer {name} {rdtype}:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def answers(port: int, name: str, rdtype: str, value: str = "") -> bool:
    try:
        answer = dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=port, timeout=0.5)
    except (dns.exception.Timeout, OSError):
        return False
    if not value:
        return bool(answer.answer)
    return any(value.encode() in rdata.strings for rrset in answer.answer for rdata in rrset)


def zone_file(path: Path, names: list[str]) -> None:
    """The zone as the built-in server answers it: SOA, NS and one TXT value at each name."""
    path.write_text("".join([
        f"$ORIGIN {ZONE}.\n",
        f"@ 60 IN SOA {NAMESERVERS[0]}. hostmaster.{ZONE}. 1 3600 600 1209600 60\n",
        *(f"@ 3600 IN NS {ns}.\n" for ns in NAMESERVERS),
        *(f'{name.removesuffix("." + ZONE)} {TXT_TTL} IN TXT "{VALUE}"\n' for name in names),
    ]))


def nsd_conf(folder: Path, name: str, port: int, zone: str, *, rrl: bool = True) -> Path:
    """An NSD instance ``name`` on ``port``, one answering process, serving ``zone`` (NSD's own
    ``zone:`` lines), as tests/servers/dns_lab.py writes it."""
    path = folder / f"{name}.conf"
    path.write_text(
        "server:\n"
        f"  ip-address: 127.0.0.1@{port}\n"
        '  username: ""\n'
        f'  zonesdir: "{folder}"\n'
        '  database: ""\n'
        f'  zonelistfile: "{folder / (name + ".zone.list")}"\n'
        f'  xfrdfile: "{folder / (name + ".xfrd.state")}"\n'
        f'  xfrdir: "{folder}"\n'
        f'  pidfile: "{folder / (name + ".pid")}"\n'
        "  server-count: 1\n"
        "  minimal-responses: yes\n"
        "  xfrd-reload-timeout: 0\n"  # a secondary loads a transfer at once (docs/acme.md, hidden primary)
        + ("" if rrl else "  rrl-ratelimit: 0\n")
        + "remote-control:\n  control-enable: no\n"
        + zone
    )
    return path


def knot_conf(folder: Path, name: str, port: int, zone: str) -> Path:
    """A Knot instance ``name`` on ``port``, one UDP and one TCP worker (as NSD's one process),
    serving ``zone`` (Knot's own lines: key, remote, acl and zone sections)."""
    (folder / f"{name}-db").mkdir()
    path = folder / f"{name}.conf"
    path.write_text(f"""\
server:
    listen: 127.0.0.1@{port}
    rundir: "{folder}"
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{folder / (name + '-db')}"
log:
  - target: stderr
    any: warning
{zone}""")
    return path


def start_nsd(folder: Path, names: list[str]) -> Server:
    zone_file(folder / "nsd.zone", names)
    port = free_port()
    conf = nsd_conf(folder, "nsd", port, f'zone:\n  name: "{ZONE}"\n  zonefile: "{folder / "nsd.zone"}"\n', rrl=False)
    server = Server("NSD", ["nsd", "-d", "-c", str(conf)], port, folder)
    server.wait_for()
    return server


def start_knot(folder: Path, names: list[str]) -> Server:
    zone_file(folder / "knot.zone", names)
    port = free_port()
    conf = knot_conf(folder, "knot", port, f'zone:\n  - domain: {ZONE}\n    storage: "{folder}"\n    file: "knot.zone"\n')
    server = Server("Knot", ["knotd", "-c", str(conf)], port, folder)
    server.wait_for()
    return server


def start_builtin(folder: Path, where: str) -> Server:
    port = free_port()
    server = Server("built-in", [sys.executable, str(ENTRY), "--serve", str(port), where], port, folder)
    server.wait_for()
    return server


def seed(store: Store, count: int) -> list[str]:
    """``count`` live challenge names, one value each: the names."""
    names = [f"{uuid.uuid4().hex[:16]}.{ZONE}" for _ in range(count)]
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    with store.transaction():
        for name in names:
            store.delegation_zone.publish(name, VALUE, expires, dt.datetime.now(dt.UTC))
    return names


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile, in milliseconds (0 without values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def load() -> float:
    return os.getloadavg()[0]
