"""The operator's commands (``python app.py COMMAND --config FILE``): what someone running the
service needs without a browser, safe on a live database (SQLite in WAL mode takes a second
connection while the service runs).

Each returns the lines to print; a refusal is a ``CommandError`` with one line to print (exit 2).
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from core.certificates import idempotency
from core.config import ConfigError
from core.crypto import SecretKeyError, read_master_key
from core.errors import ApiError, ValidationError
from core.identity import api_keys
from core.runtime import sockets
from core.text import normalise_email
from core.wire import parse_timestamp, parse_uuid
from store import inspection
from store.migrations import SchemaTooNew, latest_version

if TYPE_CHECKING:
    from core.config import Config
    from core.services import Services


class CommandError(Exception):
    """A refusal, worded for the operator."""


def check_config(config: Config, *, nameserver_port: int = 53) -> list[str]:
    """What the service would run with, read without writing anything: no database, folder or
    secret key file is created, no migration applied (the service does that at its start).

    With ``kind = "acme"``, the delegation zone's delegation is checked as start-up checks it
    (core/dns/zone_check.py): a broken one is a warning line, not a refusal (the service runs without
    one in development). Its nameservers are asked on ``nameserver_port`` (tests run them elsewhere).
    The CAs are asked for their directory, the account kept for each is read from the database when
    there is one, and the TLS terminator's secret and files folder are looked at
    (core/runtime/acme_setup.py): a CA that does not answer is a warning too.

    Each port the service listens on is bound and let go at once: one in use is a warning naming
    its key (core/runtime/sockets.py ``check``: the service itself holds it while it runs).

    It takes no services: opening them creates what is missing, so app.py calls this before
    building any. What start-up refuses is refused here too where it can be checked without
    writing: ``[network] ca_bundle`` is loaded as the outbound client loads it. The development
    identity provider's key file is not: ``dev_idp.load_key`` creates it when missing.
    """
    key_file = Path(config.storage.secret_key_file).resolve()
    database, summary = _inspect_database(config)
    # Imported here, as the service imports them where they are used: every other command started
    # half a second faster without them (the ACME client, dnspython). After the database is read:
    # a database that cannot be is refused without them.
    from core.delegation_dns import ChallengeRecordsError
    from core.delegation_dns.records import check_lines as delegation_dns_lines
    from core.dns import zone_check
    from core.dns.authority import Authority
    from core.outbound.guard import tls_context
    from core.outbound.policy import AddressPolicy
    from core.runtime import acme_setup

    if summary is None:
        held = "does not exist yet: created at the first start"
    else:
        held = f"{summary.workspaces} workspaces, {summary.domains} domains"
        if summary.pending_migrations:
            held += (f"; schema version {summary.version}: start-up will migrate it to {latest_version()} "
                     f"({len(summary.pending_migrations)} migration(s); back it up first)")
        else:
            held += f"; schema version {summary.version}, as this code writes it: start-up will not migrate"
    try:
        key_exists = key_file.exists()
    except OSError as exc:
        raise _unreadable("check-config", "storage.secret_key_file", key_file, exc) from None
    if key_exists:
        try:
            read_master_key(key_file)
        except SecretKeyError as exc:
            raise CommandError(f"check-config: {exc}") from None
        key = str(key_file)
    else:
        key = f"{key_file} (does not exist yet: created at the first start; back it up with the database)"
    try:
        tls_context(config.network.ca_bundle)  # what the outbound client loads at start-up: it refuses the same
    except ConfigError as exc:
        raise CommandError(f"check-config: {exc}") from None
    try:
        delegation = delegation_dns_lines(config)
    except ConfigError as exc:
        raise CommandError(f"check-config: {exc}") from None
    except ChallengeRecordsError as exc:
        raise CommandError(f"check-config: delegation_dns.server: {exc}") from None
    try:
        ports = sockets.check(config)
        acme = acme_setup.check_lines(config, summary.acme_accounts if summary is not None else None)
    except ConfigError as exc:
        raise CommandError(f"check-config: {exc}") from None
    issuer = config.oidc.issuer or f"{config.server.base_url}/idp (the built-in development provider)"
    allowed = AddressPolicy(config.network.allow_private_ranges).allows  # as the outbound client's policy
    authority = Authority(config.dns, allowed=allowed, port=nameserver_port)
    return [
        "configuration OK",
        f"  listens on {config.server.host}:{config.server.port}",
        *ports,
        f"  base_url {config.server.base_url}; portal_url {config.server.portal_url}",
        f"  database {database} ({held})",
        f"  secret key file {key}",
        f"  identity provider {issuer}",
        *_provider_lines(config),
        *acme,
        f"  DNS resolvers {', '.join(config.dns.nameservers) or '(the system resolver)'}",
        *delegation,
        *zone_check.check_lines(config, authority),
    ]


def _provider_lines(config: Config) -> list[str]:
    """The edge provider, and whether what it does is simulated (the sandbox): said as plainly as
    the portal's banner says it, so nobody takes a sandbox for the real thing."""
    if config.provider.kind != "sandbox":
        return [f"  edge provider {config.provider.kind}"]
    lines = ["  edge provider sandbox: certificates are SIMULATED (development only; none is publicly trusted)"]
    sandbox = config.provider.sandbox
    if sandbox.simulate_dns:
        lines.append(f"  DNS is SIMULATED ([provider.sandbox] simulate_dns = true): every domain's two records count as "
                     f"published {sandbox.simulate_dns_delay_seconds:g} s after it is added; nothing is published or "
                     "looked up")
    return lines


def _inspect_database(config: Config, command: str = "check-config") -> tuple[str, inspection.Summary | None]:
    """The database named and what it holds: the SQLite file, or PostgreSQL (connected to, read
    in a read-only transaction: the connection and the migration level are what is checked)."""
    if config.storage.url:
        shown = inspection.redacted(config.storage.url)
        try:
            return shown, inspection.inspect_postgres(config.storage.url)
        except SchemaTooNew as exc:
            raise CommandError(f"{command}: storage.url: {exc}") from None
        except Exception as exc:  # psycopg's errors: cannot connect, no permission, not ours
            if (why := inspection.database_error(exc, config.storage.url)) is None:
                raise
            raise CommandError(f"{command}: storage.url: cannot read {shown}: {why}") from None
    database = Path(config.storage.path).resolve()
    try:
        return str(database), inspection.inspect(database)
    except OSError as exc:
        raise _unreadable(command, "storage.path", database, exc) from None
    except sqlite3.Error as exc:
        raise CommandError(f"{command}: storage.path: cannot read {database}: {exc}") from None
    except SchemaTooNew as exc:
        raise CommandError(f"{command}: storage.path: {exc}") from None


def _unreadable(command: str, setting: str, path: Path, exc: OSError) -> CommandError:
    """A file that cannot even be looked at (typically: a data folder, 0700, of another user)."""
    return CommandError(f"{command}: {setting}: cannot read {exc.filename or path}: {exc.strerror or exc}; "
                        "run the command as the service's user")


def require_storage(command: str, config: Config, config_file: str | None) -> None:
    """Refuse, before the services are opened, a command that would act on a database other than
    the service's: opening them creates the database and the secret key file when missing, as the
    service's first start must. A command run with the wrong configuration, or none (the embedded
    defaults), then acted on a new, empty database ("no workspace"), and with no key file made a
    new key, under which nothing the service's database holds decrypts. So a command acts only on
    a database that exists and is this service's (a PostgreSQL one with its schema), and only with
    an existing key file; what it reads is read as ``check-config`` reads it, writing nothing."""
    if config.storage.url and command in ("backup", "copy-to-postgres"):
        raise _not_on_postgres(command)
    named = f"in {config_file}" if config_file else "its embedded default: no --config was given"
    database, summary = _inspect_database(config, command)
    if summary is None or (config.storage.url and summary.version == 0):
        setting = "storage.url" if config.storage.url else "storage.path"
        where = f"{database} holds no tables of this service" if summary is not None else f"no database at {database}"
        raise CommandError(f"{command}: {where} ({setting} {named}): a command acts on the service's existing database "
                           "and never creates one; give --config the service's configuration file")
    key_file = Path(config.storage.secret_key_file).resolve()
    try:
        key_exists = key_file.exists()
    except OSError as exc:
        raise _unreadable(command, "storage.secret_key_file", key_file, exc) from None
    if not key_exists:
        raise CommandError(f"{command}: no secret key file at {key_file} (storage.secret_key_file {named}): a command "
                           "never makes a new key, as what the database holds is encrypted under the service's; give "
                           "--config the service's configuration file, or restore the key file backed up with the "
                           "database")


def _not_on_postgres(command: str) -> CommandError:
    if command == "backup":
        return CommandError("backup: the database is PostgreSQL ([storage] url): back it up with its own tools "
                            "(pg_dump, or base backups with WAL archiving), and the secret key file with it")
    return CommandError("copy-to-postgres: [storage] url already names PostgreSQL; the command copies the SQLite "
                        "file at [storage] path: run it with the configuration that names that file")


def backup(services: Services, target: str) -> list[str]:
    """An online, consistent copy through SQLite's backup API, private (0600) like the original."""
    if services.store.pg is not None:
        raise _not_on_postgres("backup")
    path = Path(target)
    if path.is_symlink():  # even one pointing nowhere: O_EXCL refuses it, and it is no new file
        raise CommandError(f"backup: {path} already exists (a symbolic link); choose a new file")
    if path.exists():
        raise CommandError(f"backup: {path} already exists; choose a new file")
    if not path.parent.is_dir():
        raise CommandError(f"backup: the folder {path.parent} does not exist")
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:  # made meanwhile, no permission, a read-only file system...
        raise CommandError(f"backup: cannot create {path}: {exc.strerror or exc}") from None
    copy = sqlite3.connect(path)
    try:
        services.store.db.conn.backup(copy)
        ok = copy.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.Error as exc:
        copy.close()
        path.unlink(missing_ok=True)
        raise CommandError(f"backup: {exc}") from None
    copy.close()
    return [
        f"backed up to {path} ({path.stat().st_size} bytes, integrity {ok})",
        ("keep the secret key file with it: webhook secrets, link tokens and the ACME account and certificate "
         "keys are encrypted under that key, and API keys are checked with it"),
    ]


def copy_to_postgres(services: Services, url: str) -> list[str]:
    """This SQLite database's rows, from a snapshot taken through the backup API (the service may
    run meanwhile), copied into the empty PostgreSQL database ``url`` (store/postgres/copy.py)."""
    if services.store.pg is not None:
        raise _not_on_postgres("copy-to-postgres")
    if not url.startswith(("postgresql://", "postgres://")):
        raise CommandError('copy-to-postgres: the database URL must start with "postgresql://"')  # never echoed: it holds a password
    from store.postgres import copy as copying  # loads psycopg: only here, not in every SQLite process

    shown = inspection.redacted(url)
    with copying.temporary_folder() as folder:
        snapshot = copying.snapshot(services.store.db.conn, folder)
        try:
            copied = copying.copy(snapshot, url)
        except copying.CopyRefused as exc:
            raise CommandError(f"copy-to-postgres: {exc}") from None
        except Exception as exc:  # psycopg's errors: cannot connect, a row refused (nothing was copied)
            if (why := inspection.database_error(exc, url)) is None:
                raise
            raise CommandError(f"copy-to-postgres: {shown}: {why}; nothing was copied") from None
    return [
        f"copied to {shown}; every table's rows counted on both sides:",
        *(f"  {table}: {count}" for table, count in copied.items()),
        ("next: stop the service, copy again into an emptied database if anything was written since, "
         "then set [storage] url (docs/operating/postgresql.md)"),
    ]


def list_workspaces(services: Services, *, email: str | None) -> list[str]:
    """Each workspace's id (what ``create-api-key --workspace`` takes), name and owners."""
    found = services.store.accounts.workspaces_with_owners(member_email=normalise_email(email) if email else None)
    if not found:
        return ["no workspace"]
    return [f"{workspace.id}  {workspace.name}  owners: {', '.join(owners) or '-'}" for workspace, owners in found]


def create_api_key(services: Services, *, workspace: str, name: str, scopes: list[str],
                   expires_at: str | None) -> list[str]:
    """A key for automation set up without a browser; its secret is printed once."""
    try:
        workspace_id = parse_uuid(workspace)
    except ValueError:
        raise CommandError("create-api-key: --workspace must be a workspace id as list-workspaces prints it "
                           f"(a lowercase UUID), not {workspace!r}") from None
    if services.store.accounts.get_workspace(workspace_id) is None:
        raise CommandError(f"create-api-key: no workspace {workspace_id}")
    try:
        expires = _expiry(expires_at) if expires_at else None
        request = api_keys.CreateKeyRequest(name=name, scopes=scopes, expires_at=expires)
        key, secret = api_keys.create(services, workspace_id=workspace_id, request=request)
    except (ApiError, ValueError) as exc:
        raise CommandError(f"create-api-key: {_reason(exc)}") from None
    return [
        f"API key {key.id} ({key.name}, scopes {' '.join(key.scopes)}) for workspace {workspace_id}, "
        + (f"expires {key.expires_at:%Y-%m-%d %H:%M:%S} UTC" if key.expires_at else "never expires"),
        secret,
        "the secret is shown this once; store it now",
    ]


def _expiry(text: str) -> dt.datetime:
    """``--expires-at``: a time with its offset, or a date alone (the start of that day, UTC)."""
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return parse_timestamp(text)
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def rebind_users(services: Services, *, email: str | None, from_issuer: str | None) -> list[str]:
    """Unbind users from their identity-provider account so the next sign-in binds them again.

    Users are bound to an issuer and subject at their first sign-in. After a switch of identity
    provider (typically from the built-in development one to a real one) nobody's new identity
    matches; unbinding lets each user's next sign-in with a verified e-mail at the new provider
    bind again, exactly as a first sign-in does.
    """
    if (email is None) == (from_issuer is None):
        raise CommandError("rebind-user: give either --email ADDRESS or --from-issuer URL")
    with services.store.transaction():
        unbound = services.store.accounts.unbind_users(
            email=email.strip().lower() if email else None, issuer=from_issuer
        )
    if not unbound:
        return ["no bound user matched; nothing changed"]
    return [
        f"unbound {len(unbound)} user(s): {', '.join(unbound)}",
        "each is bound again at their next sign-in with that verified e-mail address",
    ]


def purge(services: Services, *, webhook_days: int) -> list[str]:
    """Old idempotency records, and delivered webhook deliveries (with their attempts) older than
    ``webhook_days``; pending and failed deliveries are kept."""
    if webhook_days < 1:
        raise CommandError("purge: --webhook-days must be at least 1")
    records = idempotency.purge(services)
    cutoff = services.clock.now() - dt.timedelta(days=webhook_days)
    with services.store.transaction():
        deliveries = services.store.webhooks.purge_delivered(before=cutoff)
    return [
        f"purged {records} idempotency record(s) older than {idempotency.RETENTION.total_seconds() / 3600:g} hours",
        f"purged {deliveries} delivered webhook delivery(ies) older than {webhook_days} day(s), with their attempts",
    ]


def roll_account_key(services: Services, *, directory: str | None) -> list[str]:
    """Roll our ACME account's key over at each configured CA, or at ``directory`` alone (RFC 8555
    section 7.3.5; core/acme/rollover.py): the accounts stay, their keys change. Each CA is rolled
    over on its own; a CA that refused or could not be heard from fails the command, after the
    others were done, with what happened there and what to do. Nothing secret is said."""
    from core.acme import rollover  # the ACME client: imported by the one command that uses it

    acme = services.config.provider.acme
    if services.config.provider.kind != "acme":
        raise CommandError(f'roll-account-key: [provider] kind is "{services.config.provider.kind}": the service '
                           'has ACME accounts only with kind = "acme"')
    configured = list(dict.fromkeys([acme.directory_url, *acme.fallback_directory_urls]))
    if directory is not None and directory not in configured:
        raise CommandError(f"roll-account-key: --directory {directory} is not a configured CA ([provider.acme] "
                           f"directory_url or fallback_directory_urls: {', '.join(configured)})")
    lines: list[str] = []
    failed: list[str] = []
    for url in [directory] if directory is not None else configured:
        try:
            lines.append(rollover.roll(services.store, services.keyring, acme, url))
        except rollover.RolloverError as exc:
            failed.append(str(exc))
    if failed:
        raise CommandError("\n".join([*lines, *(f"roll-account-key: {why}" for why in failed)]))
    return lines


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{field}: {' '.join(problems)}" for field, problems in exc.field_errors.items()) or exc.message
    return str(exc)
