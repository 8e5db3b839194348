"""The databases bench/scale.py (and bench/instructions.py) measure: one workspace of ``size``
domains, grown as the service grows it (see bench/scale.py's docstring), made once and kept under
``~/.cache/cps-bench``."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs

from bench import pg
from bench.domains import CERT_MIX, TAGS
from core.config import Config, OidcConfig, StorageConfig
from core.domains import operations, records
from core.identity import accounts, api_keys
from core.runtime import jobs
from core.runtime.assembly import build_services
from core.services import Services
from store.records import DomainRow, Workspace

#: Hostnames in one bulk request as the database is grown: the API's largest (core.domains.operations.BULK_MAX).
BULK = operations.BULK_MAX


def seeded_batches(size: int) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """The workspace's other ``size - 1`` hostnames in bulk requests of ``BULK`` (the API's largest),
    each with its tags (two of six, as bench/domains.py; a bulk request tags all its hostnames alike)
    and each hostname's certificate status (as bench/domains.py varies them)."""
    rng = random.Random(size)
    for first in range(1, size, BULK):
        numbers = range(first, min(first + BULK, size))
        yield ([f"host{n}.customer{n % 997}.com" for n in numbers], rng.sample(TAGS, 2),
               [rng.choice(CERT_MIX) for _ in numbers])


def seeded_rows(template: DomainRow, size: int) -> Iterator[DomainRow]:
    """The workspace's other ``size - 1`` domains, the same on either backend (ids aside)."""
    rng = random.Random(size)
    now = template.created_at
    for n in range(1, size):
        cert = rng.choice(CERT_MIX)
        validation = "verified" if cert != "none" else "pending"
        yield attrs.evolve(
            template, id=uuid.uuid4(), apex=f"host{n}.customer{n % 997}.com", tags=rng.sample(TAGS, 2),
            created_at=now, updated_at=now, cert_status=cert, validation_status=validation,
            ops_status=records.ops_status(validation, cert),
        )


def _with_statuses(services: Services, rows: list[DomainRow], certs: dict[str, str]) -> None:
    """The certificate and validation statuses the lifecycle would have reached, written by the
    store's own update (as the lifecycle writes them), in one unit of work per bulk request."""
    store = services.store
    with store.transaction():
        for row in rows:
            cert = certs[row.apex]
            if cert != "none":
                store.domains.update(attrs.evolve(
                    row, cert_status=cert, validation_status="verified",
                    ops_status=records.ops_status("verified", cert)))


async def grow(services: Services, workspace: Workspace, size: int) -> float:
    """The domains written as the service writes them: bulk creates of 500 through the function
    behind POST /v1/domains/bulk, with the service's statistics upkeep (its look at start, its
    periodic one, and the bulk path's own ``optimize_if_grown``) and its WAL checkpoints from a
    thread of their own, as ``core.runtime.jobs.start_jobs`` runs them. Domains per second."""
    store = services.store
    await store.run(store.optimize, opening=True)
    checkpointer = store.checkpoint_elsewhere()
    stop = threading.Event()

    def checkpoints() -> None:
        while not stop.wait(jobs.CHECKPOINT_SECONDS):
            checkpointer.run()

    thread = threading.Thread(target=checkpoints, daemon=True)
    if checkpointer is not None:
        thread.start()
    started = last_look = time.perf_counter()
    written = 0
    try:
        for apexes, tags, certs in seeded_batches(size):
            result = await operations.bulk_create(
                services, workspace=workspace, request=operations.BulkCreate(apex_list=apexes, tags=tags))
            await store.run(_with_statuses, services, result.created, dict(zip(apexes, certs, strict=True)))
            written += len(apexes)
            if time.perf_counter() - last_look > jobs.STATISTICS_SECONDS:
                await store.run(store.optimize)
                last_look = time.perf_counter()
            if written % 100_000 < BULK:
                rate = written / (time.perf_counter() - started)
                print(f"seeded {written} domains, {rate:.0f}/s", file=sys.stderr, flush=True)
    finally:
        stop.set()
        if checkpointer is not None:
            thread.join()
    return written / (time.perf_counter() - started)


def seed(folder: Path, size: int, server: pg.BenchPostgres | None = None, database: str = "") -> dict:
    """A database of one workspace with ``size`` domains, and an API key; made once, then reused.
    With ``server``, the PostgreSQL ``database`` there (``folder`` keeps the key files): its rows are
    written as the bulk path's store code writes them (``pg.grow_domains``); SQLite's are grown
    through the bulk path itself (``grow``)."""
    done = folder / "seed.json"
    if done.exists() and (server is None or server.exists(database)):
        return json.loads(done.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    url = ""
    if server is not None:
        server.drop_database(database)
        url = server.create_database(database)
    config = Config(storage=StorageConfig(path=str(folder / "service.sqlite3"), url=url,
                                          secret_key_file=str(folder / "secret.key")),
                    oidc=OidcConfig(**pg.OIDC) if url else OidcConfig())
    services = build_services(config)
    facts: dict = {}
    try:
        workspace, _ = accounts.create_workspace(services, name="Scale", owner_email="scale@example.com")
        _, key = api_keys.create(services, workspace_id=workspace.id, request=api_keys.CreateKeyRequest(name="bench", scopes=["*"]))
        first = asyncio.run(operations.bulk_create(
            services, workspace=workspace, request=operations.BulkCreate(apex_list=["host0.customer0.com"])))
        template = services.store.domains.get(workspace.id, uuid.UUID(str(first.created[0].id)))
        store = services.store
        if server is not None:
            pg.grow_domains(store, seeded_rows(template, size))
        else:
            rate = asyncio.run(grow(services, workspace, size))
            facts["seeded_per_s"] = round(rate)
            print(f"seeded {size} domains through the bulk path: {rate:.0f}/s", file=sys.stderr)
    finally:
        services.close()
    facts.update({"key": key, "domain": str(template.id)})
    done.write_text(json.dumps(facts))
    return facts
