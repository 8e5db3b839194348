"""Composition root: read the config, open the store, build the app, listen.

``python app.py`` runs on embedded defaults; ``python app.py --config FILE`` reads a TOML file.
A configuration problem stops start-up with one line naming the key, and no traceback.
``python app.py COMMAND --config FILE`` (or ``--config FILE COMMAND``) runs one of the operator's
commands (core/runtime/commands.py), on the database and secret key file that exist: never new ones.

Only what binding the port needs is imported first: the rest of the service (handlers/, the
capabilities, the store), most of start-up, is imported once the port is bound, so that a client
connecting meanwhile waits in the backlog instead of being refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import resource
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from core import logs
from core.config import Config, ConfigError, load_config
from core.crypto import SecretKeyError
from core.runtime import cli
from core.runtime.sockets import Bound, bind

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from core.services import Services

    Serve = Callable[[Config, Services, Bound], Coroutine[None, None, None]]

log = logging.getLogger("app")
#: Open files (connections) the service asks the system to allow.
OPEN_FILES = 65536


def load(args: argparse.Namespace, *, serving: bool) -> Config:
    config = load_config(args.config)
    # A command prints its own result and its refusal; its log says only what failed. The warnings
    # that the sandbox provider and the development identity provider are on belong to serving.
    logs.configure(config.logging if serving else attrs.evolve(config.logging, level="error"))
    if config.storage.url:
        from store.inspection import redacted  # here, not above: see the module's docstring

        database = redacted(config.storage.url)
    else:
        database = str(Path(config.storage.path).resolve())
    log.info(
        "configuration %s; database %s; secret key file %s",
        Path(args.config).resolve() if args.config else "(embedded defaults)", database,
        Path(config.storage.secret_key_file).resolve(),
    )
    return config


def open_services(config: Config) -> Services:
    from core.runtime.assembly import build_services  # here, not above: see the module's docstring
    from store.migrations import SchemaTooNew

    try:
        return build_services(config)
    except sqlite3.Error as exc:
        raise ConfigError(f"storage.path: cannot open {config.storage.path}: {exc}") from None
    except SchemaTooNew as exc:  # a downgrade: never run code on a schema it does not know
        raise ConfigError(f"{'storage.url' if config.storage.url else 'storage.path'}: {exc}") from None
    except Exception as exc:  # psycopg's and its pool's: the database cannot be reached or used
        from store.inspection import database_error, redacted  # its refusal's words: only when refused

        if (why := database_error(exc, config.storage.url)) is None:
            raise
        raise ConfigError(f"storage.url: cannot use {redacted(config.storage.url)}: {why}") from None


def raise_open_files_limit() -> None:
    """Every connection is a file descriptor: the common soft limit of 1,024 would refuse the
    1,025th client while the hard limit allows far more. Raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, OPEN_FILES), hard))


def run_command(args: argparse.Namespace) -> int:
    """One of the operator's commands: its lines printed, or its refusal."""
    # here, not above: see the module's docstring
    from core.runtime.commands import CommandError, require_storage

    try:
        config = load(args, serving=False)
        # Before open_services, which would create the database and the secret key file.
        if args.command in cli.WRITING_NOTHING:
            print("\n".join(cli.run_writing_nothing(args, config)))
            return 0
        require_storage(args.command, config, args.config)
        services = open_services(config)
    except (ConfigError, SecretKeyError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except CommandError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        print("\n".join(cli.run_command(args, services)))
    except CommandError as exc:
        print(exc, file=sys.stderr)
        return 2
    finally:
        services.close()
    return 0


def start(args: argparse.Namespace) -> tuple[Config, Services, Bound, Serve] | int:
    """The configuration, the port bound, the services built and what serves them; or the exit code
    of a refusal. No collection runs meanwhile: two full ones came in the middle, each a pass over
    some 50,000 objects that all live as long as the process (issue 49). What it made is frozen
    once made, so that later collections do not go over it again either."""
    gc.disable()
    try:
        return _start(args)
    finally:
        gc.freeze()
        gc.enable()


def _start(args: argparse.Namespace) -> tuple[Config, Services, Bound, Serve] | int:
    try:
        config = load(args, serving=True)
    except (ConfigError, SecretKeyError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    raise_open_files_limit()
    try:
        bound = bind(config)
    except ConfigError as exc:
        print(f"start-up error: {exc}", file=sys.stderr)
        return 2
    # Bound before the services are built: with port 0, the addresses they sign in with (the
    # development issuer, the redirect URI) must name the port the OS picked.
    config = config.bound_to(bound.server[0].getsockname()[1])
    try:
        services = open_services(config)
    except (ConfigError, SecretKeyError) as exc:
        bound.close()
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    from handlers.server import serve  # here, not above: see the module's docstring

    return config, services, bound, serve


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args(argv)
    if args.command not in (None, "serve"):
        return run_command(args)
    started = start(args)
    if isinstance(started, int):
        return started
    config, services, bound, serve = started
    try:
        asyncio.run(serve(config, services, bound))
    finally:
        services.close()  # after the loop ended: no request or job can reach the store any more
    return 0


if __name__ == "__main__":
    sys.exit(main())
