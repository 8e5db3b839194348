"""What an operator's disk and a browser see (review finding 11): private database files, and the
same safe headers on static files as on pages, with no server version."""

from __future__ import annotations

import email.utils
import os
import stat
import time

import attrs
import pytest

from core.config import load_config
from core.runtime.assembly import build_services
from store import Store


class TestDatabaseFiles:
    """The database holds e-mails, notes and ownership tokens."""

    def test_the_database_and_its_wal_files_are_private(self, tmp_path):
        path = tmp_path / "data" / "service.sqlite3"
        store = Store(path)
        with store.transaction():
            store.db.execute("CREATE TABLE t (x)")
        try:
            for name in ("service.sqlite3", "service.sqlite3-wal", "service.sqlite3-shm"):
                assert stat.S_IMODE(os.stat(path.parent / name).st_mode) == 0o600, name
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        finally:
            store.close()

    def test_the_default_data_folder_is_private_whichever_file_creates_it(self, tmp_path):
        config = load_config(None)
        data = tmp_path / "data"
        config = attrs.evolve(config, storage=attrs.evolve(
            config.storage, path=str(data / "service.sqlite3"), secret_key_file=str(data / "secret.key")))
        build_services(config).close()  # the key file, made first, creates the folder
        assert stat.S_IMODE(os.stat(data).st_mode) == 0o700

    def test_an_existing_readable_database_is_made_private(self, tmp_path):
        path = tmp_path / "service.sqlite3"
        path.touch(mode=0o644)
        os.chmod(path, 0o644)
        Store(path).close()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


class TestStaticFiles:
    """/static/..."""

    @pytest.mark.gen_test
    async def test_static_files_carry_nosniff_and_a_request_id(self, http_client, base_url):
        r = await http_client.fetch(base_url + "/static/portal.css")
        assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Request-Id"]

    @pytest.mark.gen_test
    async def test_every_response_is_dated_now(self, http_client, base_url):
        """The Date header is formatted once a second (issue 49 item 3), never a stale second."""
        for path in ("/static/portal.css", "/", "/v1/openapi.json", "/v1/nowhere"):
            before = int(time.time())
            r = await http_client.fetch(base_url + path, raise_error=False)
            dated = email.utils.parsedate_to_datetime(r.headers["Date"]).timestamp()
            assert before <= dated <= time.time(), (path, r.headers["Date"])
            assert r.headers["Date"].endswith(" GMT")

    @pytest.mark.gen_test
    async def test_no_response_names_the_server_software(self, http_client, base_url):
        for path in ("/static/portal.css", "/", "/v1/openapi.json", "/nowhere", "/v1/nowhere"):
            r = await http_client.fetch(base_url + path, raise_error=False)
            assert "Server" not in r.headers, path
