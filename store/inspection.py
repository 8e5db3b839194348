"""Reading a database without changing anything, for ``check-config``: a check must not write.

``Store`` cannot do this: it creates the file and its folder when missing and applies pending
migrations. A plain read-only open is not enough either: on a WAL database at rest (the service
stopped, its ``-wal`` and ``-shm`` files gone) SQLite creates them, and leaves them behind.
A ``-wal`` left by an unclean stop is read, though: it may hold commits the file does not.
"""

from __future__ import annotations

import ipaddress
import re
import sqlite3
from pathlib import Path
from urllib.parse import unquote

import attrs

from store.migrations import SchemaTooNew, latest_version
from store.sqlite.schema import MIGRATIONS

#: Passwords shorter than this are not searched for outside quotes: they would match ordinary
#: words, and libpq quotes every value it echoes.
MIN_SCRUBBED = 4
#: libpq's own words it quotes (connection options, the ``]`` it looks for), kept in its messages.
_LIBPQ_WORDS = frozenset({"host", "hostaddr", "port", "dbname", "user", "sslmode", "connect_timeout", "]"})
_QUOTED = re.compile(r'(?<!\w)"[^"]*"|(?<!\w)\'[^\']*\'')  # not from the apostrophe of "couldn't"
#: What no user, host or database name that can be shown holds: the makings of a libpq keyword
#: string (``host=db password='a b'``), of a query, or of a fragment.
_UNPLAIN = re.compile(r"[\s=\"'\\?&#;]")
#: A ``password`` or ``passfile`` keyword (any case, with spaces around its ``=`` or none) and its
#: value: quoted as libpq quotes (to the closing quote, to the end when unclosed), or to a space.
_SECRET_KEYWORD = re.compile(r"(?i)(pass(?:word|file)\s*=\s*)('(?:\\.|[^'\\])*'?|\"(?:\\.|[^\"\\])*\"?|\S+)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_HOST = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(?::(\d*))?")


@attrs.frozen
class Summary:
    workspaces: int
    domains: int
    pending_migrations: list[int]
    "Versions this service would apply at its next start."
    version: int
    "The newest migration the database records."
    acme_accounts: dict[str, str] = attrs.Factory(dict)
    "Our ACME accounts kept: the CA's directory URL -> the account's URL (none before the table exists)."


def inspect(path: str | Path) -> Summary | None:
    """What the database holds; None when there is no database file yet. Raises
    ``sqlite3.Error`` when the file cannot be read or is not this service's database, and
    ``OSError`` when it (or its ``-wal`` or ``-shm``) cannot even be looked at, for example in a
    folder the user cannot enter: that is not "no database yet"; ``SchemaTooNew`` when a newer
    version of the service migrated it."""
    path = Path(path)
    if not path.is_file():
        return None
    # A -wal file holds commits not yet in the file itself: read through it, as a plain read-only
    # connection does (it creates the -shm when missing, after an unclean stop, as the service's
    # next start would). Only without one is everything in the file, and ``immutable`` opens it
    # without creating a -wal or -shm (and without locks); it would ignore an existing -wal.
    has_wal = Path(f"{path}-wal").exists()
    uri = path.resolve().as_uri() + ("?mode=ro" if has_wal else "?mode=ro&immutable=1")
    conn = sqlite3.connect(uri, uri=True)
    try:
        applied = {version for (version,) in conn.execute("SELECT version FROM schema_migrations")}
        [workspaces] = conn.execute("SELECT count(*) FROM workspaces").fetchone()
        [domains] = conn.execute("SELECT count(*) FROM domains").fetchone()
        accounts: dict[str, str] = {}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'acme_accounts'").fetchone():
            accounts = dict(conn.execute("SELECT directory_url, account_url FROM acme_accounts").fetchall())
    finally:
        conn.close()
    if applied and max(applied) > latest_version():
        raise SchemaTooNew(max(applied), latest_version())
    pending = [version for version, _, _ in MIGRATIONS if version not in applied]
    return Summary(workspaces=workspaces, domains=domains, pending_migrations=pending, version=max(applied, default=0),
                   acme_accounts=accounts)


def inspect_postgres(url: str) -> Summary:
    """What a PostgreSQL database holds, read in a read-only transaction; an empty database (no
    schema yet) is version 0 with every migration pending. Raises ``psycopg.Error`` when it cannot
    be reached or read, and ``SchemaTooNew`` as ``inspect`` does."""
    import psycopg

    from store.postgres.schema import MIGRATIONS_PG

    with psycopg.connect(url, connect_timeout=5) as conn:
        conn.read_only = True
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        applied: set[int] = set()
        workspaces = domains = 0
        accounts: dict[str, str] = {}
        if "schema_migrations" in tables:
            applied = {version for (version,) in conn.execute("SELECT version FROM schema_migrations")}
        if {"workspaces", "domains"} <= tables:
            workspaces = conn.execute("SELECT count(*) FROM workspaces").fetchone()[0]  # type: ignore[index]
            domains = conn.execute("SELECT count(*) FROM domains").fetchone()[0]  # type: ignore[index]
        if "acme_accounts" in tables:
            accounts = {str(url): str(account) for url, account in
                        conn.execute("SELECT directory_url, account_url FROM acme_accounts").fetchall()}
    if applied and max(applied) > latest_version(MIGRATIONS_PG):
        raise SchemaTooNew(max(applied), latest_version(MIGRATIONS_PG))
    pending = [version for version, _, _ in MIGRATIONS_PG if version not in applied]
    return Summary(workspaces=workspaces, domains=domains, pending_migrations=pending, version=max(applied, default=0),
                   acme_accounts=accounts)


def redacted(url: str) -> str:
    """A database URL fit for logs and output: no password, wherever it was. Only the user, host,
    port and database are kept: everything between ``://`` and the last ``@`` after the user name
    goes (a password may hold unencoded ``/`` or ``@``), and the query (``?password=``) too. A part
    that is not a plain name (a space, ``=`` or a quote in it, even percent-encoded: a libpq keyword
    string such as ``host=db password=...`` written where the URL's parts go), or a port that is
    not a number, may hold the password and is shown as "…"."""
    split = _split(url)
    if split is None:
        return "(not a URL)"
    scheme, user, hosts, database, query = split
    shown_user = (user if _plain(user) else "…") + "@" if user is not None else ""
    location = f"{','.join(hosts)}/{database}" if database is not None else ",".join(hosts)
    shown = location if all(_plain_host(host) for host in hosts) and _plain(database or "") else "…"
    return f"{scheme}://{shown_user}{shown}" + ("?…" if query else "")


def database_error(exc: BaseException, url: str) -> str | None:
    """PostgreSQL's or its pool's error in one line (its text may span several), with nothing of
    ``url`` that may be secret; None for an exception that is not theirs.

    libpq quotes what it cannot use, and what it quotes can hold the password: the whole URL (an
    unclosed ``[``), the token around a bad ``%`` escape, a piece of a password holding ``@`` or
    ``/`` that it read as the host, port or database, or a keyword string (``host=... password=...``)
    it read as a host name. So a quoted value is kept only when it is one ``redacted`` shows (the
    user, a host, port or database, read after the last ``@``), an IP address or a word of libpq's
    own, and is no part of the password; any other becomes "…". The password and the URL are then
    taken out of the rest, wherever they appear, and anything left after a ``password`` or
    ``passfile`` keyword too.
    """
    if not type(exc).__module__.startswith("psycopg"):
        return None
    secrets = _passwords(url)
    shown = _shown_parts(url)

    def kept(quoted: re.Match[str]) -> str:
        value = quoted.group(0)[1:-1]
        if (value in shown or value in _LIBPQ_WORDS or _is_ip(value)) and not any(value in secret for secret in secrets):
            return quoted.group(0)
        return quoted.group(0)[0] + "…" + quoted.group(0)[-1]

    text = _QUOTED.sub(kept, " ".join(str(exc).split()))
    for secret in sorted({url, unquote(url), *secrets}, key=len, reverse=True):
        if len(secret) >= MIN_SCRUBBED:
            text = text.replace(secret, "…")
    text = _SECRET_KEYWORD.sub(r"\1…", text)
    if "percent-encoded" in text:
        text += " (a % in the URL is written %25)"
    return text


def _split(url: str) -> tuple[str, str | None, list[str], str | None, bool] | None:
    """``url`` read as ``redacted`` reads it: the scheme, the user (None without an ``@``), the
    hosts (each with its port), the database (None without a ``/``) and whether it has a query;
    None when it is no URL."""
    scheme, separator, rest = url.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        return None
    userinfo, at, location = rest.rpartition("@")
    location, question, _ = location.partition("?")
    hosts, slash, database = location.partition("/")
    return scheme, userinfo.split(":", 1)[0] if at else None, hosts.split(","), database if slash else None, bool(question)


def _plain(value: str) -> bool:
    """Whether a user, host or database name is one that can be shown: nothing in it, as written
    or percent-decoded, that a ``keyword=value`` pair or a quoted value is made of."""
    return not (_UNPLAIN.search(value) or _UNPLAIN.search(unquote(value)))


def _plain_host(host: str) -> bool:
    """A host and its port: a plain name (an IPv6 address in brackets) and digits."""
    return (found := _HOST.fullmatch(host)) is not None and _plain(found.group(1))


def _passwords(url: str) -> list[str]:
    """The password as written in ``url`` (after the user's ``:`` up to the last ``@``, any
    ``password=`` of the query, and the value after any ``password`` or ``passfile`` keyword,
    quoted or not, percent-encoded or not), and each percent-decoded."""
    userinfo, at, _ = url.partition("://")[2].rpartition("@")
    written = [userinfo.partition(":")[2]] if at else []
    pairs = (pair.partition("=") for pair in url.partition("?")[2].split("&"))
    written += [value for name, _, value in pairs if name == "password"]
    for text in (url, unquote(url)):
        for found in _SECRET_KEYWORD.finditer(text):
            value = found.group(2)
            unquoted = value[1:].removesuffix(value[0]) if value[0] in "'\"" else value
            # A URL's & or @ may end it, or be part of it: both are taken out.
            written += [value, unquoted, re.sub(r"\\(.)", r"\1", unquoted), re.split(r"[&@/?]", unquoted)[0]]
    return list(dict.fromkeys(form for value in written for form in (value, unquote(value)) if form))


def _shown_parts(url: str) -> set[str]:
    """What ``redacted`` shows of ``url``: the user name, and each host, port and database."""
    split = _split(url)
    if split is None:
        return set()
    _, user, hosts, database, _ = split
    parts = {user, unquote(user)} if user is not None and _plain(user) else set()
    if all(_plain_host(host) for host in hosts) and _plain(database or ""):
        parts |= {database or "", unquote(database or "")}
        for host in hosts:
            name, port = _HOST.fullmatch(host).groups("")  # type: ignore[union-attr]  # plain: it matches
            parts |= {port, unquote(name).strip("[]")}
    return parts - {""}


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
