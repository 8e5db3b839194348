"""The ACME provider against real parts on loopback, as a CA validates in production:

- the customer's zone ``lab.com`` in the DNS lab (NSD), where a test publishes the delegation
  CNAME and the ownership TXT;
- the delegation zone ``acme.saas.test``, answered by the service's own built-in server (on a
  Store of its own, on the test's database, in a thread: another process), at a port fixed for the
  module;
- Unbound resolving both (stub zones), which the service and Pebble ask: Pebble follows
  ``_acme-challenge.<hostname>`` through the CNAME into the delegation zone;
- Pebble (tests/servers/pebble.py), behind ``Directory`` for renewal information and CAA identities.

The service itself is built in process (``services``, ``api``), on SQLite, with the fake clock.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from core.config import AcmeConfig, DelegationDnsConfig, DnsConfig, ProviderConfig
from core.delegation_dns.server import DelegationServer
from core.delegation_dns.sockets import bind
from store import Store
from tests.patience import PATIENCE_SECONDS
from tests.servers.delegation import InThread
from tests.servers.dns_lab import DnsLab, missing_tools
from tests.servers.pebble import Directory, Pebble, missing
from tests.servers.service import free_port

ZONE = "acme.saas.test"
CUSTOMER_ZONE = "lab.com"
#: For each test module: skipped, saying why, where the Debian packages are missing.
needs_lab = pytest.mark.skipif(bool(missing_tools()) or missing() is not None,
                               reason="needs nsd, unbound, ldnsutils and pebble (.ci/run installs them)")


@attrs.define
class AcmeLab:
    lab: DnsLab
    dns_port: int
    pebble: Pebble
    directory: Directory

    def publish_records(self, created: dict, *, cname: str | None = None, ttl: int = 300) -> None:
        """The delegation CNAME (or another) and the ownership TXT in the customer's zone."""
        apex = created["apex"]
        target = cname or created["validation"]["delegation"]["value"]
        self.lab.publish(CUSTOMER_ZONE, f"_acme-challenge.{apex}. {ttl} IN CNAME {target}.")
        self.lab.publish(CUSTOMER_ZONE, f'_service-verify.{apex}. 300 IN TXT "{created["validation"]["ownership"]["value"]}"')


@pytest.fixture(scope="module")
def acme_lab(tmp_path_factory) -> Iterator[AcmeLab]:
    yield from make_lab(tmp_path_factory)


def make_lab(tmp_path_factory, **pebble_options) -> Iterator[AcmeLab]:
    """The lab; ``pebble_options`` for its Pebble (``alternate_roots``: a module that needs them)."""
    folder = tmp_path_factory.mktemp("acme-lab")
    dns_port = free_port()
    lab = DnsLab(folder / "dns")
    (folder / "dns").mkdir()
    lab.stubs[ZONE] = f"127.0.0.1@{dns_port}"
    lab.start()
    pebble = Pebble(folder / "pebble", dns_server=lab.resolver, **pebble_options)
    try:
        pebble.start()
        directory = Directory(pebble).start()
    except BaseException:  # the servers started so far, stopped: left running, they fail a later test
        pebble.stop()
        lab.stop()
        raise
    yield AcmeLab(lab=lab, dns_port=dns_port, pebble=pebble, directory=directory)
    directory.stop()
    pebble.stop()
    lab.stop()


def acme_config(config, acme_lab: AcmeLab, *, dns_timeout_seconds: float = 10.0, **acme):
    """The test's configuration with the ACME provider, the lab's DNS and CA.

    ``wait_seconds`` and the DNS timeout are bounds only a hang reaches: a call ends as soon as its
    order is done, a lookup as soon as it is answered. With 10 s a check on a busy machine ended with
    the order still under way, and with a DNS timeout of 2 s a verification missed its records. The
    tests of servers that never answer choose their own, shorter, timeout."""
    settings = {"directory_url": acme_lab.directory.directory_url, "ca_bundle": str(acme_lab.pebble.ca_bundle),
                "contact_email": "ops@saas.test", "wait_seconds": PATIENCE_SECONDS, **acme}
    return attrs.evolve(
        config,
        provider=ProviderConfig(kind="acme", acme=AcmeConfig(**settings)),
        delegation_dns=DelegationDnsConfig(zone=ZONE, nameservers=["ns1.saas.test"], listen=f"127.0.0.1:{acme_lab.dns_port}"),
        dns=DnsConfig(nameservers=[acme_lab.lab.resolver], timeout_seconds=dns_timeout_seconds),
        network=attrs.evolve(config.network, allow_private_ranges=["127.0.0.0/29"]),
    )


@pytest.fixture
def config(config, acme_lab):
    return acme_config(config, acme_lab)


class Answering:
    """The delegation zone's built-in server on the test's database, from a thread of its own."""

    def __init__(self, config, clock) -> None:
        self.store = Store(config.storage.path)
        self.serving = InThread(DelegationServer(config.delegation_dns, self.store, clock,
                                                 bind(config.delegation_dns.listen)))

    def start(self) -> Answering:
        self.serving.start()
        return self

    def stop(self) -> None:
        self.serving.stop()
        self.store.close()


@pytest.fixture(autouse=True)
def front(acme_lab) -> Iterator[Directory]:
    """The CA's front (tests/servers/pebble.py ``Directory``) as Pebble answers, after each test too."""
    yield acme_lab.directory
    directory = acme_lab.directory
    directory.refuse_orders = directory.refuse_replaces = directory.explanation_url = None
    directory.profiles = None
    directory.retry_after = "21600"


@pytest.fixture(autouse=True)
def answering(services, config, clock) -> Iterator[Answering]:
    """The built-in server answers while the test runs (after ``services`` made the database)."""
    server = Answering(config, clock).start()
    yield server
    server.stop()
