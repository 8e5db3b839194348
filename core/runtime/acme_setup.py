"""ACME mode as the operator sets it up (docs/acme.md): which CAs, reached how, with which account,
and how the certificates reach the TLS terminator. ``check-config`` prints these lines; a serving
process logs them once it listens (core/runtime/jobs.py), the CAs asked in a thread.

A CA that cannot be reached is a warning, not a refusal: nothing at start-up needs it (our account
is registered at the first order, core/acme/cas.py), an order meeting a CA down goes to the next
CA or is placed again by the background checks, and a CA's outage must not keep the service (its
portal, its API, its DNS server) down. A ``[provider.acme] ca_bundle`` that cannot be loaded is
refused: it is a mistake in the configuration, and no order could reach the CA with it.

Each CA's line is followed by the certificate profiles its directory offers (ACME profiles:
``meta.profiles``, name and description) and whether the one configured for it is among them: a
profile not offered is a warning, saying what orders there do instead (the CA's default, or none
with ``profile_required``).

Secrets are never said: the EAB HMAC key and the terminator's secret are only said to be set.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import pwd
import ssl
import stat
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import requests
from acme import errors as acme_errors
from acme import messages

from core.acme.client import CaClient, problem, unoffered
from core.config import ConfigError

if TYPE_CHECKING:
    from core.config import AcmeConfig, Config, TlsTerminatorConfig
    from core.services import Services

log = logging.getLogger(__name__)

#: Let's Encrypt's directories by host: which is which is what an operator must not get wrong.
LETS_ENCRYPT = {
    "acme-v02.api.letsencrypt.org": "Let's Encrypt production (publicly trusted certificates; its rate limits apply)",
    "acme-staging-v02.api.letsencrypt.org": ("Let's Encrypt staging, a test CA (its certificates are not publicly "
                                             "trusted: switch directory_url to production once an order succeeds)"),
}
#: Words in a directory URL that say the CA is a test one (Pebble, a staging or test environment).
TEST_WORDS = ("staging", "test", "pebble")


def ca_name(directory_url: str) -> str:
    """Which CA a directory is, as far as its URL says: Let's Encrypt's two by name, a test CA when
    its URL says so, else its host (whether its certificates are trusted is then the CA's to say)."""
    split = urlsplit(directory_url)
    host = split.hostname or directory_url
    if host in LETS_ENCRYPT:
        return LETS_ENCRYPT[host]
    if any(word in f"{split.netloc}{split.path}".lower() for word in TEST_WORDS):
        return f"a test CA, as its URL says (its certificates are not publicly trusted), at {split.netloc}"
    return f"the CA at {split.netloc}"


def check_ca_bundle(acme: AcmeConfig) -> None:
    """Refuse a ``ca_bundle`` that cannot be loaded, as a ``ConfigError`` naming the key."""
    if not acme.ca_bundle:
        return
    try:
        ssl.create_default_context(cafile=acme.ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"provider.acme.ca_bundle: cannot load {acme.ca_bundle}: {exc}") from None


def reach(directory_url: str, acme: AcmeConfig) -> tuple[bool, str, bool, dict[str, str]]:
    """Fetch the CA's directory as orders will (its ``ca_bundle``, its timeout): whether it
    answered, what to say of it, whether it requires External Account Binding, and the profiles
    it offers. Blocks."""
    client = CaClient(directory_url, ca_bundle=acme.ca_bundle, timeout=acme.timeout_seconds)
    trusted = f"[provider.acme] ca_bundle {acme.ca_bundle}" if acme.ca_bundle else "the system's CAs"
    try:
        required = client.external_account_required()
        offered = client.profiles()
    except requests.exceptions.SSLError:
        return False, f"its HTTPS certificate is not trusted by {trusted}", False, {}
    except requests.exceptions.Timeout:
        return False, f"no answer within {acme.timeout_seconds:g} s", False, {}
    except requests.exceptions.ConnectionError:
        return False, "cannot be reached (no connection: the host, its port or a firewall)", False, {}
    except (requests.RequestException, acme_errors.Error, messages.Error, ValueError) as exc:
        return False, f"answered, but not with an ACME directory: {problem(exc)}", False, {}
    finally:
        client.close()
    return True, f"its directory answered (HTTPS trusted by {trusted})", required, offered


def profile_lines(directory_url: str, profile: str, offered: dict[str, str], *, required: bool) -> list[str]:
    """The profiles a CA offers, and what becomes of the one configured for it."""
    listed = "; ".join(f'"{name}" ({said})' if said else f'"{name}"' for name, said in offered.items())
    lines = [f"    profiles offered: {listed}" if offered else "    profiles offered: none (its directory lists no "
             "meta.profiles): orders there are for its default"]
    if not profile:
        if offered:
            lines.append("    profile: none configured: orders there are for its default")
    elif profile in offered:
        lines.append(f'    profile "{profile}": offered; orders there name it')
    elif required:
        lines.append(f"    WARNING: {unoffered(directory_url, profile, offered)} [provider.acme] profile_required "
                     "is true: no order goes to it")
    else:
        lines.append(f"    WARNING: {unoffered(directory_url, profile, offered)} Orders there are for its default "
                     "profile ([provider.acme] profile_required is false)")
    return lines


def ca_lines(config: Config, accounts: dict[str, str] | None) -> list[str]:
    """The configured CAs, first the one ordered from, each reached, with our account there.
    ``accounts``: the accounts kept (directory URL -> account URL); None when there is no database."""
    acme = config.provider.acme
    lines: list[str] = []
    for number, (url, profile) in enumerate(acme.profiles()):
        role = "certificate authority" if number == 0 else f"fallback certificate authority {number}"
        answered, said, eab_required, offered = reach(url, acme)
        if answered:
            lines.append(f"  {role} {url}: {ca_name(url)}; {said}")
            lines += profile_lines(url, profile, offered, required=acme.profile_required)
        else:
            lines.append(f"  {role} {url}: {ca_name(url)}; WARNING: {said}. The service still starts: orders go to "
                         "the next CA, or wait and are placed again by the background checks")
        if url in (accounts or {}):
            lines.append(f"    account registered already: {(accounts or {})[url]}")
        else:
            where = "" if accounts is not None else " (the database does not exist yet)"
            lines.append(f"    no account yet{where}: registered at the first order")
        if eab_required and not acme.eab_kid:
            lines.append("    WARNING: the CA requires External Account Binding: set [provider.acme] eab_kid and "
                         "eab_hmac_key (from the CA's account page), or no account can be registered")
    contact = acme.contact_email or "none ([provider.acme] contact_email is empty: the CA has nobody to write to)"
    eab = (f"key id {acme.eab_kid}, its HMAC key set (not shown)" if acme.eab_kid else "none")
    lines.append(f"  ACME contact {contact}; External Account Binding {eab}")
    return lines


def terminator_lines(config: Config) -> list[str]:
    """How the certificates reach the TLS terminator: Caddy's endpoints and their secret, the files."""
    terminator = config.tls_terminator
    lines: list[str] = []
    if terminator.secret and terminator.listen:
        lines.append(f"  TLS terminator endpoints (Caddy's get_certificate, ask and permission) on "
                     f"http://{terminator.listen}/caddy/, with a secret (not shown)")
    elif not terminator.secret:
        lines.append("  WARNING: [tls_terminator] secret is empty: the endpoints Caddy asks for certificates "
                     "(get_certificate, ask, permission) are off, so Caddy cannot serve the certificates issued"
                     + ("; nginx or HAProxy read the files" if terminator.files_dir else
                        "; and no files_dir is set either: nothing hands them to a TLS terminator"))
    if terminator.files_dir:
        lines.append(files_dir_line(terminator))
    return lines


def files_dir_line(terminator: TlsTerminatorConfig) -> str:
    """``files_dir``: its owner, group and mode, and what in them would keep the keys from the TLS
    terminator or open them to others. The keys are 0640, the folder 2750, in the terminator's
    group (docs/acme.md, "Certificates to the TLS terminator")."""
    folder = Path(terminator.files_dir).resolve()
    said = f"  TLS terminator files ({terminator.files_format}) in {folder}"
    try:
        found = folder.stat()
    except FileNotFoundError:
        return (f"{said}: WARNING: it does not exist: the service creates it, mode 0700, which the TLS terminator's "
                f"user cannot read; make it yourself: install -d -o <the service's user> -g <the terminator's "
                f"group> -m 2750 {folder}")
    except OSError as exc:
        return f"{said}: WARNING: cannot look at it: {exc.strerror}; run check-config as the service's user"
    if not stat.S_ISDIR(found.st_mode):
        return f"{said}: WARNING: it is not a folder"
    mode = stat.S_IMODE(found.st_mode)
    said += f": owner {_user(found.st_uid)}, group {_group(found.st_gid)}, mode {mode:04o}"
    problems = []
    if not os.access(folder, os.W_OK | os.X_OK):
        problems.append(f"this user ({_user(os.geteuid())}) cannot write in it: run check-config as the service's "
                        "user, which must own it")
    if mode & 0o050 != 0o050:
        problems.append("its group cannot list and enter it: the TLS terminator reads the keys (0640) as the folder's "
                        "group")
    if mode & 0o007:
        problems.append("others may use it: only the service's user and the TLS terminator's group should (2750)")
    if not mode & stat.S_ISGID:
        problems.append("no setgid bit: new files take the service's group, not the folder's (chmod g+s)")
    return said + ("; WARNING: " + "; ".join(problems) if problems else "; as it should be")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def check_lines(config: Config, accounts: dict[str, str] | None) -> list[str]:
    """check-config's ACME lines; raises ``ConfigError`` for a ``ca_bundle`` that cannot be loaded."""
    if config.provider.kind != "acme":
        return []
    check_ca_bundle(config.provider.acme)
    return ca_lines(config, accounts) + terminator_lines(config)


async def log_at_start(services: Services) -> None:
    """The same, in the log of a process that listens: warnings as warnings."""
    config = services.config
    acme = config.provider.acme
    store = services.store

    def accounts() -> dict[str, str]:
        urls = dict.fromkeys([acme.directory_url, *acme.fallback_directory_urls])
        return {url: account.account_url for url in urls if (account := store.acme.account(url)) is not None}

    kept = await store.run(accounts)

    def lines() -> list[str]:
        try:
            return check_lines(config, kept)
        except ConfigError as exc:
            return [f"  WARNING: {exc}: no order can reach the CA"]

    for line in await asyncio.to_thread(lines):
        text = line.strip()
        if "WARNING: " in text:
            log.warning("ACME: %s", text.replace("WARNING: ", ""))
        else:
            log.info("ACME: %s", text)
