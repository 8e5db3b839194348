"""The certificates as files, for nginx and HAProxy: ``[tls_terminator] files_dir`` holds exactly
the served hostnames' files, and ``reload_command`` runs after each change.

``files_format = "nginx"``: ``<host>.crt`` (the chain, leaf first) and ``<host>.key``, which nginx
reads at each handshake through ``ssl_certificate /dir/$ssl_server_name.crt`` (deploy/
nginx-customers.conf). ``"haproxy"``: ``<host>.pem`` (chain, then key), which HAProxy loads from
``crt /dir/`` at start and reload; with ``haproxy_runtime`` set, a renewed certificate is replaced
in place through its runtime API instead (core/tls_terminator/haproxy.py), and only new or removed
hostnames need the reload.

Each file is written whole to a temporary file in the same folder, flushed to disk and renamed over
the old one, so a reader sees the old file or the new one, never a part. A file holding a key is
mode 0640: nginx's worker processes read it at each handshake, as nginx's user, so an operator
gives the folder that user's group (``install -d -o cps -g www-data -m 2750``: new files take the
folder's group) and nobody else can read it; a folder the service creates itself is 0700.

The folder is the service's: every ``.crt``, ``.key`` (nginx) or ``.pem`` (HAProxy) file in it that
names no served hostname is removed. Blocking work (files, the reload command, the runtime API)
runs in a thread of its own (``FilesJob``), on a snapshot of the index.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from core.config import TlsTerminatorConfig
from core.tls_terminator import haproxy
from core.tls_terminator.index import CertificateIndex, Served

log = logging.getLogger(__name__)

#: Names that are safe as file names (the store keeps hostnames in lower-case ASCII).
_FILE_SAFE = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?")
_TEMP_PREFIX = ".cps-tmp-"
#: How often the job looks at the stored certificates when no reload woke it.
FILES_SECONDS = 5.0
#: How long the reload command may run.
RELOAD_TIMEOUT_SECONDS = 60.0


@attrs.frozen
class Change:
    """What one pass changed, by hostname."""

    written: frozenset[str]
    removed: frozenset[str]
    renewed: frozenset[str]
    "Of ``written``: the hostnames whose files were there before (HAProxy has them loaded)."


def _hosts(files: set[str]) -> frozenset[str]:
    return frozenset(file.rsplit(".", 1)[0] for file in files)


class CertificateFiles:
    def __init__(self, config: TlsTerminatorConfig) -> None:
        self.config = config
        self.folder = Path(config.files_dir)
        self.suffixes = (".crt", ".key") if config.files_format == "nginx" else (".pem",)
        self._on_disk: dict[str, bytes] | None = None
        "File name -> contents as last written or read; None until the folder was read once."

    def files_of(self, served: dict[str, Served]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for name, entry in served.items():
            if not _FILE_SAFE.fullmatch(name) or ".." in name:
                log.warning("TLS terminator: no file for %r, which is not a plain hostname", name)
            elif self.config.files_format == "nginx":
                files[name + ".crt"], files[name + ".key"] = entry.chain, entry.key
            else:
                files[name + ".pem"] = entry.body
        return files

    def sync(self, served: dict[str, Served]) -> Change:
        """Make the folder hold exactly the files of ``served``; the hostnames written and removed."""
        on_disk = self._read_folder() if self._on_disk is None else self._on_disk
        before = set(on_disk)
        wanted = self.files_of(served)
        written = {file for file, data in wanted.items() if on_disk.get(file) != data}
        removed = before - set(wanted)
        # The key before the chain: nginx, reading both at a handshake in between, finds the new key
        # with the old chain for an instant (that handshake fails, the next one works).
        for file in sorted(written, key=lambda f: not f.endswith(".key")):
            self._write(file, wanted[file])
            on_disk[file] = wanted[file]
        for file in removed:
            (self.folder / file).unlink(missing_ok=True)
            del on_disk[file]
        self._on_disk = on_disk
        return Change(written=_hosts(written), removed=_hosts(removed), renewed=_hosts(written & before))

    def _read_folder(self) -> dict[str, bytes]:
        """The files a previous run left (so a restart rewrites nothing), and no temporary file."""
        if not self.folder.exists():
            self.folder.mkdir(parents=True, mode=0o700)
        found: dict[str, bytes] = {}
        for path in self.folder.iterdir():
            if path.name.startswith(_TEMP_PREFIX):
                path.unlink(missing_ok=True)  # left by a crash between writing and renaming
            elif path.suffix in self.suffixes and path.is_file():
                found[path.name] = path.read_bytes()
        return found

    def _write(self, file: str, data: bytes) -> None:
        has_key = not file.endswith(".crt")
        mode = 0o640 if has_key else 0o644
        temp = self.folder / f"{_TEMP_PREFIX}{os.getpid()}-{file}"  # two processes never share one
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, mode)  # exactly this mode, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.folder / file)

    def reload(self) -> bool:
        """Run ``reload_command`` (no shell); whether it succeeded. A failure is logged, never raised."""
        command = self.config.reload_command
        if not command:
            return True
        try:
            done = subprocess.run(command, capture_output=True, timeout=RELOAD_TIMEOUT_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.error("TLS terminator: reload command %s failed: %s", command[0], exc)
            return False
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
            log.error("TLS terminator: reload command %s exited with %d%s", command[0], done.returncode,
                      f": {said[-1]}" if said else "")
            return False
        log.info("TLS terminator: reload command %s done", command[0])
        return True


class FilesJob:
    """The serving process's job: every ``FILES_SECONDS``, and at once when the index reloads, the
    folder is made equal to the index; after a change, HAProxy's runtime API (renewals only) or the
    reload command. A failure is logged and the next pass tries again; the job never stops."""

    def __init__(self, index: CertificateIndex, config: TlsTerminatorConfig) -> None:
        self.index = index
        self.config = config
        self.files = CertificateFiles(config)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tls-files")
        self._synced: dict[str, Served] | None = None
        self._running = False
        self._again = False
        self._woken: asyncio.Task[None] | None = None
        index.on_reload(self.wake)

    def wake(self) -> None:
        self._woken = asyncio.ensure_future(self.tick())

    async def tick(self) -> None:
        if self._running:
            self._again = True  # the pass under way may have read the index before this change
            return
        self._running = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await self.index.refresh()
                served = self.index.served  # replaced whole at each reload: the thread reads a snapshot
                if served is self._synced:
                    continue
                try:
                    await asyncio.get_running_loop().run_in_executor(self._thread, self.apply, served)
                except OSError as exc:
                    log.error("TLS terminator: cannot write the files in %s: %s", self.config.files_dir, exc)
                    return
                self._synced = served
        finally:
            self._running = False

    def apply(self, served: dict[str, Served]) -> None:
        change = self.files.sync(served)
        if not (change.written or change.removed):
            return
        log.info("TLS terminator: files of %d hostnames written, %d removed, in %s",
                 len(change.written), len(change.removed), self.config.files_dir)
        address = self.config.haproxy_runtime
        if address and self.config.files_format == "haproxy" and change.written == change.renewed and not change.removed:
            failed = False
            for host in sorted(change.renewed):
                why = haproxy.replace_certificate(address, str(self.files.folder / f"{host}.pem"), served[host].body)
                if why is not None:
                    log.warning("TLS terminator: HAProxy did not take the certificate of %s: %s", host, why)
                    failed = True
            if not failed:
                return  # every renewal replaced in place: no reload
        self.files.reload()
