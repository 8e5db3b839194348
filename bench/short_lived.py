"""Short-lived certificates on their own clock (issue 50): prints numbers, asserts nothing. Not part
of the test run.

    python bench/short_lived.py [--certificates 1000] [--days 30] [--life-hours 144]

1,000 six-day certificates over a simulated month, on a fake clock, through the service's own
decisions, each as the background checks and the ACME provider take it:

- the next check of each domain: ``core.domains.schedule.after_check`` (the cadence on the
  certificate's own clock, core/lifetimes.py), with ``[lifecycle]`` defaults;
- at each check, the renewal time: ``core.acme.renewal.window`` (the CA's ARI window read again
  when due, the moment in it placed per certificate; two thirds without ARI), then
  ``core.acme.orders.renewal_due``;
- a renewal's new order, due, takes its turn from the ACME orders' ``Pacer`` (core/edge/pacing.py)
  as the provider takes it: not from the background share (``not_deferrable``), with the defaults
  (``orders_per_window = 300`` per ``window_seconds = 10800``); a turn too far away is
  ``ProviderBusy``, and the check is made again after its ``Retry-After`` as the watcher does;
- ``nextRenewalAt`` as results.py stores it (``core.lifetimes.planned_renewal``).

A fake CA in process issues at once, with the certificate's lifetime (``--life-hours``), and counts
new orders per hour and in any 3 hours against Let's Encrypt's 300 per 3 hours per account. Its
ARI window, when it offers one, is 50 % to 60 % into the life (short-lived certificates are asked
back early). Six runs: with and without ARI; first issuances spread evenly over one lifetime
(the steady state), all at once as the background checks issue an import (the background share of
the budget, 150 per 3 hours), and all at once at the CA's full rate (people calling
``verify-delegation`` for an import as fast as the budget allows: 300 per 3 hours).

Printed per run: renewals placed inside their window (%; without ARI the window is the last
third's first 1/12), CA orders per hour (max) and in any 3 hours (max) against the limit, the
largest fraction of its life any certificate was served before its renewal's order went (target:
at most 2/3), and the most any order went past two thirds (minutes: a renewal due at two thirds
waits its pacing turn), expired certificates served (target 0), and background checks per
certificate per day.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import datetime as dt
import heapq
import random
import sys
import time
import uuid
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import lifetimes
from core.acme import renewal
from core.acme.client import RenewalWindow
from core.acme.orders import renewal_due
from core.config import AcmeConfig, LifecycleConfig
from core.domains import schedule
from core.edge import ProviderBusy
from core.edge.pacing import BACKGROUND, Pacer, not_deferrable
from store.acme import AcmeCertificate
from store.records import DomainRow

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
LIMIT, LIMIT_WINDOW = 300, dt.timedelta(hours=3)  # Let's Encrypt: new orders per account
ARI_WINDOW = (0.5, 0.6)


class SimClock:
    """The one clock of the run: the checks, the pacer's monotonic time and its sleeps."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> dt.datetime:
        return START + dt.timedelta(seconds=self.t)

    def timestamp(self) -> float:
        return self.now().timestamp()


class FakeCa:
    """Issues at once; counts new orders; offers an ARI window or none."""

    directory_url = "https://ca.bench/directory"

    def __init__(self, clock: SimClock, life: dt.timedelta, ari: bool) -> None:
        self.clock, self.life, self.ari = clock, life, ari
        self.orders: list[float] = []
        self.windows: dict[str, tuple[dt.datetime, dt.datetime]] = {}
        self.client = self
        self.serial = 0

    async def call(self, fn, *args):  # the Ca's interface (core/acme/cas.py), in process
        return fn(*args)

    def issue(self) -> tuple[str, dt.datetime, dt.datetime]:
        self.orders.append(self.clock.t)
        self.serial += 1
        not_before = self.clock.now()
        chain = f"-----BEGIN CERTIFICATE-----\n{uuid.uuid4().hex}{self.serial}\n"
        lo, hi = ARI_WINDOW
        self.windows[chain] = (not_before + self.life * lo, not_before + self.life * hi)
        return chain, not_before, not_before + self.life

    def renewal_window(self, chain_pem: str) -> RenewalWindow | None:
        if not self.ari:
            return None
        start, end = self.windows[chain_pem]
        return RenewalWindow(start=start, end=end, retry_after=dt.timedelta(hours=6))


@attrs.define
class FakeOrders:
    """What core.acme.renewal.window needs of Orders: the clock, and saving (in memory)."""

    clock: SimClock

    async def save(self, certificate: AcmeCertificate, *, new: bool = False) -> AcmeCertificate:
        return certificate


@attrs.define
class Hostname:
    row: DomainRow
    acme: AcmeCertificate
    first_attempt: float | None = None
    "Fraction of the served certificate's life at its first renewal attempt."


@attrs.frozen
class Result:
    inside: float
    per_hour: int
    per_window: int
    worst_fraction: float
    "The largest fraction of its life a certificate was served before its renewal's order went."
    late: float
    "The most an order went past two thirds of the life, as a fraction of it (0: none did)."
    expired: int
    checks_per_day: float
    renewals: int
    seconds: float


def _row(apex: str) -> DomainRow:
    return DomainRow(id=uuid.uuid4(), workspace_id=uuid.uuid4(), apex=apex, tags=[], created_at=START,
                     updated_at=START, delegation_target="t", validation_status="verified", cert_status="active",
                     ops_status="active", ownership_token="o")


def _issued(host: Hostname, chain: str, not_before: dt.datetime, not_after: dt.datetime) -> None:
    host.acme = attrs.evolve(host.acme, chain_pem=chain, not_before=not_before, not_after=not_after, renew_at=None,
                             ari_checked_at=None, ari_next_at=None)
    host.first_attempt = None


def _stored(host: Hostname) -> None:
    """The domain's cert summary as results.py stores it from the provider's report."""
    acme = host.acme
    host.row = attrs.evolve(host.row, cert_not_after=acme.not_after, cert_last_issued_at=acme.not_before,
                            cert_renew_at=acme.renew_at,
                            cert_next_renewal_at=lifetimes.planned_renewal(acme.not_after, not_before=acme.not_before,
                                                                           renew_at=acme.renew_at))


async def run(count: int, days: float, life: dt.timedelta, *, ari: bool, burst: float | None, seed: int) -> Result:
    """``burst``: the share of the CA's budget the first issuances took, all at once (None: spread
    evenly over one lifetime before the month, the steady state)."""
    random.seed(seed)
    clock = SimClock()
    ca, orders = FakeCa(clock, life, ari), FakeOrders(clock)
    lifecycle, acme = LifecycleConfig(), AcmeConfig()
    pacer = Pacer(acme.orders_per_window, acme.window_seconds, background_share=lifecycle.provider_share,
                  monotonic=lambda: clock.t + 2 * life.total_seconds(),  # a monotonic clock is never negative
                  sleep=_sleeper(clock))
    hosts: list[Hostname] = []
    queue: list[tuple[float, int]] = []
    spacing = (acme.window_seconds / acme.orders_per_window / burst) if burst else life.total_seconds() / count
    # The first issuances: evenly over one lifetime (steady state), or at the CA's full rate (an import).
    for i in range(count):
        clock.t = -life.total_seconds() + i * spacing if not burst else i * spacing
        host = Hostname(_row(f"h{i}.example.com"), AcmeCertificate(
            handle=str(i), apex=f"h{i}.example.com", directory_url=ca.directory_url, status="valid",
            created_at=START, updated_at=START))
        _issued(host, *ca.issue())
        host.acme = await renewal.window(orders, ca, host.acme)  # as _finish does after an issuance
        _stored(host)
        host.row = schedule.after_check(host.row, host.row, lifecycle, clock.now())
        hosts.append(host)
        heapq.heappush(queue, ((host.row.next_check_at - START).total_seconds(), i))
    clock.t = queue[0][0]  # the steady state's first issuances were a lifetime before the month
    end = days * 86400
    checks = renewals = inside = expired = 0
    worst = late = 0.0
    token = BACKGROUND.set(True)
    began = time.perf_counter()
    try:
        while queue and queue[0][0] < end:
            due, i = heapq.heappop(queue)
            clock.t = max(clock.t, due)
            host = hosts[i]
            checks += 1
            now = clock.now()
            assert host.acme.not_after is not None and host.acme.not_before is not None
            if now > host.acme.not_after:
                expired += 1
            wait: float | None = None
            host.acme = await renewal.window(orders, ca, host.acme)
            if renewal_due(host.acme, now):
                try:
                    with not_deferrable():  # as the provider takes a renewal that is due
                        await pacer.acquire()
                except ProviderBusy as busy:
                    wait = busy.retry_after  # no order: the check comes back after the pacer's Retry-After
                else:
                    life_now = host.acme.not_after - host.acme.not_before
                    host.first_attempt = (clock.now() - host.acme.not_before) / life_now
                    worst = max(worst, host.first_attempt)
                    late = max(late, (clock.now() - lifetimes.last_third_starts(host.acme.not_before,
                                                                                 host.acme.not_after)) / life_now)
                    renewals += 1
                    start, stop = _window(host.acme, ca)
                    inside += start <= clock.now() <= stop
                    _issued(host, *ca.issue())
                    host.acme = await renewal.window(orders, ca, host.acme)
            before = host.row
            _stored(host)
            host.row = schedule.after_check(before, host.row, lifecycle, clock.now(), wait_at_least=wait)
            heapq.heappush(queue, ((host.row.next_check_at - START).total_seconds(), i))
    finally:
        BACKGROUND.reset(token)
    # Certificates whose renewal time passed before the end without an attempt count too.
    for host in hosts:
        if host.first_attempt is None and host.acme.renew_at is not None and host.acme.renew_at < clock.now():
            assert host.acme.not_before is not None and host.acme.not_after is not None
            life_now = host.acme.not_after - host.acme.not_before
            worst = max(worst, (min(clock.now(), host.acme.not_after) - host.acme.not_before) / life_now)
    return Result(inside=100 * inside / max(renewals, 1), per_hour=_most(ca.orders, 3600),
                  per_window=_most(ca.orders, LIMIT_WINDOW.total_seconds()), worst_fraction=worst, late=late, expired=expired,
                  checks_per_day=checks / count / days, renewals=renewals, seconds=time.perf_counter() - began)


def _window(certificate: AcmeCertificate, ca: FakeCa) -> tuple[dt.datetime, dt.datetime]:
    """The renewal window a renewal should fall in: the CA's, else the last third's first 1/12."""
    assert certificate.chain_pem is not None and certificate.not_before is not None and certificate.not_after is not None
    if ca.ari:
        return ca.windows[certificate.chain_pem]
    start = lifetimes.last_third_starts(certificate.not_before, certificate.not_after)
    return start, start + (certificate.not_after - certificate.not_before) / 12


def _sleeper(clock: SimClock):
    async def sleep(seconds: float) -> None:
        clock.t += seconds
    return sleep


def _most(times: list[float], span: float) -> int:
    """The most events in any ``span`` seconds."""
    ordered = sorted(times)
    return max((bisect.bisect_right(ordered, t + span - 1e-9) - k for k, t in enumerate(ordered)), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certificates", type=int, default=1000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--life-hours", type=float, default=144, help="each certificate's lifetime (6 days)")
    parser.add_argument("--seed", type=int, default=50)
    args = parser.parse_args()
    life = dt.timedelta(hours=args.life_hours)
    print(f"{args.certificates} certificates of {args.life_hours:g} h over {args.days:g} simulated days; "
          f"CA limit {LIMIT} new orders per {LIMIT_WINDOW.total_seconds() / 3600:g} h")
    print(f"{'run':<32}{'renewals':>9}{'in window':>11}{'orders/h max':>14}{'orders/3h max':>15}"
          f"{'life unrenewed max':>20}{'past 2/3 max':>14}{'expired':>9}{'checks/cert/day':>17}{'cpu s':>7}")
    for ari in (True, False):
        for burst, how in ((None, "steady"), (LifecycleConfig().provider_share, "import by checks"),
                           (1.0, "import by API")):
            result = asyncio.run(run(args.certificates, args.days, life, ari=ari, burst=burst, seed=args.seed))
            name = f"{'ARI' if ari else 'no ARI (2/3)'}, {how}"
            print(f"{name:<32}{result.renewals:>9}{result.inside:>10.1f}%{result.per_hour:>14}"
                  f"{result.per_window:>11} /{LIMIT}{result.worst_fraction:>20.4f}{result.late * life.total_seconds() / 60:>10.1f} min{result.expired:>9}"
                  f"{result.checks_per_day:>17.2f}{result.seconds:>7.1f}")


if __name__ == "__main__":
    main()
