"""``Store.watch_loop_calls`` on SQLite: the tests' watch for statements run on the event loop
outside ``Store.run`` (on PostgreSQL those would block the loop). SQLite calls its trace for every
statement and for every trigger a statement runs, each time with every parameter written out, so
the watch is off inside a unit of work, where statements belong."""

from __future__ import annotations

import asyncio

from store import Store


def watched(tmp_path) -> tuple[Store, list[str]]:
    store = Store(str(tmp_path / "service.sqlite3"))
    reported: list[str] = []
    store.watch_loop_calls(reported.append, exempt=lambda: False)
    return store, reported


def select_one(store: Store) -> None:
    store.db.execute("SELECT 1").fetchall()


def test_a_statement_on_the_loop_outside_a_unit_of_work_is_reported(tmp_path):
    store, reported = watched(tmp_path)

    async def on_the_loop() -> None:
        select_one(store)

    asyncio.run(on_the_loop())
    store.close()
    assert reported


def test_a_statement_in_a_unit_of_work_is_not(tmp_path):
    store, reported = watched(tmp_path)
    asyncio.run(store.run(select_one, store))
    store.close()
    assert reported == []


def test_the_watch_is_back_once_a_unit_of_work_ends(tmp_path):
    store, reported = watched(tmp_path)

    async def after_a_unit() -> None:
        await store.run(select_one, store)
        select_one(store)

    asyncio.run(after_a_unit())
    store.close()
    assert len(reported) == 1
