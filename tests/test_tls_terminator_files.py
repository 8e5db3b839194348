"""Certificates as files for nginx and HAProxy (core/tls_terminator/files.py): the job of the serving
process keeps ``[tls_terminator] files_dir`` equal to what is served, and Debian's nginx (1.22) and
HAProxy (2.6) load the result, running the repository's deploy/nginx-customers.conf and
deploy/haproxy-customers.cfg (paths and ports replaced). Handshakes with each hostname as SNI get
its certificate; a renewal rewrites the files and runs the reload command (HAProxy: replaced
through its runtime API, no reload); a removed certificate's files go, and a deleted domain's at
the job's next pass.
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import sys
import time
import uuid
import warnings

import attrs
import pytest
import trustme

from core.config import TlsTerminatorConfig
from core.domains import operations
from core.tls_terminator.files import FilesJob
from tests.patience import PATIENCE_SECONDS
from tests.servers.terminators import (
    HAPROXY,
    NGINX,
    NOW,
    HAProxy,
    Nginx,
    certificates_folder,
    issue,
    mode,
    presented,
    world_readable_folder,
)

A, B = "shop.customer.test", "blog.customer.test"
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (apt-get install haproxy)")


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture
def folder():
    folder = world_readable_folder("cps-terminator-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def certificates(folder):
    return certificates_folder(folder, group="www-data")


def terminator(config, **settings):
    return attrs.evolve(config, tls_terminator=TlsTerminatorConfig(**settings))


def job_of(services) -> FilesJob:
    return FilesJob(services.tls_terminator, services.config.tls_terminator)


def handshake_version(port: int, server_name: str, ca: trustme.CA, version: ssl.TLSVersion) -> str:
    """The TLS version of a handshake that offers ``version`` alone."""
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    with warnings.catch_warnings():  # Python deprecates TLS 1.0 and 1.1, which a test offers to see them refused
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = context.maximum_version = version
    if version < ssl.TLSVersion.TLSv1_2:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer what nginx must refuse
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock, \
            context.wrap_socket(sock, server_hostname=server_name) as tls:
        return str(tls.version())


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


@needs_nginx
class TestNginx:
    @pytest.fixture
    def nginx(self, folder, certificates):
        (folder / "nginx").mkdir()
        server = Nginx(folder / "nginx", certificates)
        yield server
        server.stop()

    @pytest.fixture
    def config(self, config, nginx, certificates):
        return terminator(config, files_dir=str(certificates), files_format="nginx", reload_command=nginx.command("-s", "reload"))

    @pytest.mark.gen_test
    async def test_each_hostname_gets_its_certificate_from_nginx(self, services, nginx, certificates, ca):
        a = issue(services.store, services.keyring, ca, A)
        b = issue(services.store, services.keyring, ca, B)
        await job_of(services).tick()
        assert sorted(p.name for p in certificates.iterdir()) == [f"{B}.crt", f"{B}.key", f"{A}.crt", f"{A}.key"]
        assert (certificates / f"{A}.crt").read_bytes() == a.chain and (certificates / f"{A}.key").read_bytes() == a.key
        checked = nginx.test_config()
        assert checked.returncode == 0, checked.stderr
        nginx.start()
        assert presented(nginx.port, A, ca).serial_number == a.serial
        assert presented(nginx.port, B, ca).serial_number == b.serial

    @pytest.mark.gen_test
    @pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["1.3", "1.2"])
    async def test_tls_1_3_and_1_2_are_offered(self, services, nginx, ca, version):
        """deploy/nginx-customers.conf's ``ssl_protocols``: Debian 12's nginx offers no TLS 1.3 without it."""
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        nginx.start()
        assert handshake_version(nginx.port, A, ca, version) == version.name.replace("_", ".")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["1.0", "1.1"])
    async def test_obsolete_tls_versions_are_refused(self, services, nginx, ca, version):
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        nginx.start()
        with pytest.raises(OSError):  # ssl.SSLError, or the connection closed
            handshake_version(nginx.port, A, ca, version)

    @pytest.mark.gen_test
    async def test_a_hostname_without_files_fails_the_handshake(self, services, nginx, ca):
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        nginx.start()
        with pytest.raises(OSError):  # ssl.SSLError, or the connection closed
            presented(nginx.port, "unknown.customer.test", ca)

    @pytest.mark.gen_test
    async def test_a_renewal_rewrites_the_files_and_runs_the_reload_command(self, services, nginx, certificates, ca, clock):
        issue(services.store, services.keyring, ca, A, not_after=NOW.replace(month=3))
        job = job_of(services)
        await job.tick()
        nginx.start()
        renewed = issue(services.store, services.keyring, ca, A, not_after=NOW.replace(month=5))
        await job.tick()
        assert (certificates / f"{A}.crt").read_bytes() == renewed.chain
        assert (certificates / f"{A}.key").read_bytes() == renewed.key
        wait_for(lambda: "reconfiguring" in nginx.log(), "nginx reloaded by the reload command")
        assert presented(nginx.port, A, ca).serial_number == renewed.serial

    @pytest.mark.gen_test
    async def test_a_removed_certificate_removes_its_files(self, services, certificates, ca):
        issue(services.store, services.keyring, ca, A)
        gone = issue(services.store, services.keyring, ca, B)
        job = job_of(services)
        await job.tick()
        services.store.acme.delete(gone.handle)  # its domain deleted: the ACME client drops its certificate
        await job.tick()
        assert sorted(p.name for p in certificates.iterdir()) == [f"{A}.crt", f"{A}.key"]

    @pytest.mark.gen_test
    async def test_keys_are_0640_and_take_the_folders_group(self, services, certificates, ca):
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        assert mode(certificates / f"{A}.key") == 0o640
        assert mode(certificates / f"{A}.crt") == 0o644
        assert (certificates / f"{A}.key").group() == "www-data"  # nginx's workers read it, nobody else


class TestFolder:
    @pytest.fixture
    def config(self, config, tmp_path):
        return terminator(config, files_dir=str(tmp_path / "new" / "tls"), reload_command=["touch", str(tmp_path / "reloaded")])

    @pytest.mark.gen_test
    async def test_a_folder_the_service_creates_is_0700(self, services, tmp_path, ca):
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        assert mode(tmp_path / "new" / "tls") == 0o700

    @pytest.mark.gen_test
    async def test_files_of_hostnames_not_served_are_removed_and_leftovers_cleaned(self, services, tmp_path, ca):
        folder = tmp_path / "new" / "tls"
        folder.mkdir(parents=True)
        for name in ("old.customer.test.crt", "old.customer.test.key", ".cps-tmp-4242-shop.customer.test.key"):
            (folder / name).write_text("left by an earlier run")
        (folder / "README").write_text("not a certificate file: left alone")
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        assert sorted(p.name for p in folder.iterdir()) == ["README", f"{A}.crt", f"{A}.key"]

    @pytest.mark.gen_test
    async def test_a_restart_finding_the_same_files_writes_nothing_and_reloads_nothing(self, services, tmp_path, ca):
        issue(services.store, services.keyring, ca, A)
        await job_of(services).tick()
        (tmp_path / "reloaded").unlink()
        await job_of(services).tick()  # a new process: a job of its own
        assert not (tmp_path / "reloaded").exists()

    @pytest.mark.gen_test
    async def test_nothing_changed_runs_no_reload(self, services, tmp_path, ca):
        issue(services.store, services.keyring, ca, A)
        job = job_of(services)
        await job.tick()
        (tmp_path / "reloaded").unlink()
        await job.tick()
        assert not (tmp_path / "reloaded").exists()


class TestReloadCommand:
    @pytest.fixture
    def config(self, config, tmp_path):
        script = "import sys; sys.stderr.write('no such site\\n'); sys.exit(3)"
        return terminator(config, files_dir=str(tmp_path / "tls"), reload_command=[sys.executable, "-c", script])

    @pytest.mark.gen_test
    async def test_a_failure_is_logged_with_its_exit_code_and_run_again_at_the_next_change(self, services, ca, caplog):
        issue(services.store, services.keyring, ca, A)
        job = job_of(services)
        with caplog.at_level(logging.ERROR, logger="core.tls_terminator.files"):
            await job.tick()
            issue(services.store, services.keyring, ca, B)
            await job.tick()
        failures = [r.getMessage() for r in caplog.records if "reload command" in r.getMessage()]
        assert len(failures) == 2 and all("exited with 3: no such site" in line for line in failures), failures


@needs_haproxy
class TestHAProxy:
    @pytest.fixture
    def haproxy(self, folder, certificates):
        (folder / "haproxy").mkdir()
        server = HAProxy(folder / "haproxy", certificates)
        yield server
        server.stop()

    @pytest.fixture
    def config(self, config, haproxy, certificates, tmp_path):
        return terminator(config, files_dir=str(certificates), files_format="haproxy", haproxy_runtime=str(haproxy.socket),
                          reload_command=["touch", str(tmp_path / "reloaded")])

    @pytest.mark.gen_test
    async def test_haproxy_serves_each_hostname_its_certificate(self, services, haproxy, certificates, ca):
        a = issue(services.store, services.keyring, ca, A)
        b = issue(services.store, services.keyring, ca, B)
        await job_of(services).tick()
        assert (certificates / f"{A}.pem").read_bytes() == a.chain + a.key
        assert mode(certificates / f"{A}.pem") == 0o640
        haproxy.start()
        assert presented(haproxy.port, A, ca).serial_number == a.serial
        assert presented(haproxy.port, B, ca).serial_number == b.serial

    @pytest.mark.gen_test
    async def test_a_renewal_is_replaced_through_the_runtime_api_without_a_reload(self, services, haproxy, certificates, ca, tmp_path):
        issue(services.store, services.keyring, ca, A, not_after=NOW.replace(month=3))
        job = job_of(services)
        await job.tick()
        haproxy.start()
        (tmp_path / "reloaded").unlink()
        renewed = issue(services.store, services.keyring, ca, A, not_after=NOW.replace(month=5))
        await job.tick()
        assert presented(haproxy.port, A, ca).serial_number == renewed.serial
        assert (certificates / f"{A}.pem").read_bytes() == renewed.body  # and a restart loads it too
        assert not (tmp_path / "reloaded").exists()

    @pytest.mark.gen_test
    async def test_a_new_hostname_runs_the_reload_command(self, services, haproxy, ca, tmp_path):
        issue(services.store, services.keyring, ca, A)
        job = job_of(services)
        await job.tick()
        haproxy.start()
        (tmp_path / "reloaded").unlink()
        issue(services.store, services.keyring, ca, B)
        await job.tick()
        assert (tmp_path / "reloaded").exists()  # HAProxy loads a new file only when reloaded

    @pytest.mark.gen_test
    async def test_a_deleted_domains_file_goes_at_the_next_pass_and_the_reload_command_runs(
            self, services, certificates, ca, tmp_path):
        issue(services.store, services.keyring, ca, A)
        gone = issue(services.store, services.keyring, ca, B)
        job = job_of(services)
        await job.tick()
        (tmp_path / "reloaded").unlink()
        [(workspace_id, domain_id)] = services.store.sql.execute(
            "SELECT workspace_id, domain_id FROM certificates WHERE provider_hostname_id = ?", [gone.handle]).fetchall()
        operations.delete(services, workspace=services.store.accounts.get_workspace(uuid.UUID(workspace_id)),
                          domain_id=uuid.UUID(domain_id))
        await job.tick()
        assert sorted(p.name for p in certificates.iterdir()) == [f"{A}.pem"]
        assert (tmp_path / "reloaded").exists()  # HAProxy drops a removed file only when reloaded
