"""The service's periodic jobs: webhook deliveries, the lifecycle's background checks, the purge
of old Idempotency-Key records and of expired challenge values, the database's WAL checkpoints and
planner statistics (SQLite), the TLS terminator's files, the ACME provider's upkeep (and, once,
the CAs reached and the terminator's set-up said in the log: core/runtime/acme_setup.py) and the
check of the delegation zone's own delegation (at start-up, then every ``[lifecycle]
active_check_seconds``: core/dns/zone_check.py)."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tornado.ioloop import IOLoop, PeriodicCallback

from core.certificates import idempotency
from core.dns import zone_check
from core.edge.counted import CountedProvider
from core.identity import api_keys
from core.lifecycle.watcher import LifecycleWatcher
from core.tls_terminator.files import FILES_SECONDS, FilesJob
from core.verification import one_click
from core.webhooks.worker import WebhookWorker
from store import OUTBOX_CHANNEL

if TYPE_CHECKING:
    from core.acme.provider import AcmeProvider
    from core.delegation_dns import ChallengeRecords
    from core.services import Services

#: How often Idempotency-Key records older than their retention are purged (and portal forms'
#: secrets older than theirs, which is ten minutes, expired one-click states and DNS-01 values).
PURGE_INTERVAL_SECONDS = 300
#: The longest the lifecycle waits between looks for due checks (shorter when interval_seconds is).
SWEEP_SECONDS = 5.0
#: How often the WAL is copied back into the database file, away from requests (store/sqlite/checkpoints.py).
CHECKPOINT_SECONDS = 1.0
#: How often expired challenge values leave the delegation zone (a change, told to its secondaries by
#: NOTIFY: issue 47 item 4): the secondaries answer a value until then, the built-in server until it expires.
ZONE_PURGE_SECONDS = 30
#: How often SQLite's planner statistics are looked at (store.optimize), as its documentation
#: advises for a long-lived connection; also once at start and after imports.
STATISTICS_SECONDS = 3600.0


def start_jobs(services: Services) -> tuple[dict[str, PeriodicCallback], WebhookWorker]:
    """The periodic jobs, started with the server and stopped at shutdown.

    The webhook worker also runs as soon as a transaction that queued events commits, and once at
    start for whatever was queued before a restart.
    """
    worker = WebhookWorker(services)
    worker.listen()
    # Other processes on the same PostgreSQL database: their new events, their key revocations,
    # the domains they change.
    loop = IOLoop.current()
    services.store.keep_domains()
    services.store.on_notice(OUTBOX_CHANNEL, lambda _: worker.wake())
    services.store.on_notice(api_keys.KEYS_CHANNEL, lambda key_id: loop.add_callback(services.key_cache.forget_id, key_id))

    def purge() -> None:
        idempotency.purge(services)
        one_click.purge(services)

    async def purge_idempotency() -> None:
        await services.store.run(purge)

    jobs = {
        "webhooks": PeriodicCallback(worker.tick, services.config.webhooks.poll_interval_seconds * 1000, jitter=0.1),
        "idempotency-purge": PeriodicCallback(purge_idempotency, PURGE_INTERVAL_SECONDS * 1000),
    }
    if services.challenge_records is not None:  # kind = "acme" only
        _purge_zone_values(services, services.challenge_records, jobs)
    if services.store.backend == "sqlite":  # PostgreSQL's autovacuum keeps its statistics
        async def statistics(opening: bool = False) -> None:
            await services.store.run(services.store.optimize, opening=opening)

        jobs["statistics"] = PeriodicCallback(statistics, STATISTICS_SECONDS * 1000)
        # Once the service listens: a database never analysed (copied in, grown by use) is, in 0.1 s at 1M domains.
        IOLoop.current().add_callback(statistics, opening=True)
    checkpointer = services.store.checkpoint_elsewhere()
    if checkpointer is not None:
        thread = ThreadPoolExecutor(1, thread_name_prefix="checkpoint")

        async def checkpoint() -> None:  # awaited by PeriodicCallback: runs never overlap
            await IOLoop.current().run_in_executor(thread, checkpointer.run)

        jobs["checkpoint"] = PeriodicCallback(checkpoint, CHECKPOINT_SECONDS * 1000)
    if services.tls_terminator is not None and services.config.tls_terminator.files_dir:
        files = FilesJob(services.tls_terminator, services.config.tls_terminator)
        jobs["tls-files"] = PeriodicCallback(files.tick, FILES_SECONDS * 1000)
        IOLoop.current().add_callback(files.tick)
    lifecycle = services.config.lifecycle
    if lifecycle.enabled:
        watcher = LifecycleWatcher(services)
        every = min(SWEEP_SECONDS, lifecycle.interval_seconds / 2)
        jobs["lifecycle"] = PeriodicCallback(watcher.tick, every * 1000, jitter=0.1)
        IOLoop.current().add_callback(watcher.tick)
    acme = _acme(services)
    if acme is not None:
        from core.acme import upkeep  # with the provider's modules, imported for kind = "acme" only
        from core.runtime import acme_setup

        runs = itertools.count()

        async def acme_upkeep() -> None:
            await upkeep.revoke_deleted(acme, orphans=next(runs) % upkeep.ORPHANS_EVERY == 0)

        jobs["acme-upkeep"] = PeriodicCallback(acme_upkeep, upkeep.REVOKE_SECONDS * 1000, jitter=0.1)
        IOLoop.current().add_callback(upkeep.point_at_zone, acme)
        IOLoop.current().add_callback(acme_setup.log_at_start, services)  # the CAs reached, in the log
    if zone_check.applies(services.config):
        async def check_zone() -> None:
            await zone_check.check_and_keep(services)

        jobs["delegation-zone-check"] = PeriodicCallback(check_zone, lifecycle.active_check_seconds * 1000, jitter=0.1)
        IOLoop.current().add_callback(check_zone)  # at start-up: a warning in the log before any order fails
    for job in jobs.values():
        job.start()
    IOLoop.current().add_callback(worker.tick)
    return jobs, worker


def _purge_zone_values(services: Services, records: ChallengeRecords, jobs: dict[str, PeriodicCallback]) -> None:
    """Expired challenge values withdrawn from the zone the service serves (its stored records)."""
    from core.delegation_dns.records import StoredRecords, purge_expired  # imported with kind = "acme" only

    if not isinstance(records, StoredRecords):
        return
    stored = records

    def purge_values() -> int | None:
        """The serial the purge made, if it removed any value."""
        return services.store.delegation_zone.serial() if purge_expired(services.store, services.clock) else None

    async def purge_zone() -> None:
        stored.changed(await services.store.run(purge_values))

    jobs["delegation-zone-purge"] = PeriodicCallback(purge_zone, ZONE_PURGE_SECONDS * 1000, jitter=0.1)
    # The values a process that stopped halfway left, of orders over since: withdrawn now, not in an hour.
    IOLoop.current().add_callback(purge_zone)


def _acme(services: Services) -> AcmeProvider | None:
    if services.config.provider.kind != "acme":  # its modules are not imported with another provider
        return None
    from core.acme.provider import AcmeProvider

    provider = services.provider.provider if isinstance(services.provider, CountedProvider) else services.provider
    return provider if isinstance(provider, AcmeProvider) else None
