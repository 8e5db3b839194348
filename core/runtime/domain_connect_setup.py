"""The operator's side of one-click set-up (docs/one-click.md): the template to
submit to Domain Connect's templates repository, the public-key records to publish, and the check
that the published key is the one the service signs with.

Both run before the services are built, like ``check-config``: they write nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from core.config import Config, ConfigError
from core.dns.lookups import DnsChecker
from core.domain_connect import signing, simulated, template
from core.runtime.commands import CommandError

TEMPLATES_REPOSITORY = "https://github.com/Domain-Connect/Templates"


def redirect_domain(config: Config) -> str:
    return config.domain_connect.redirect_domain or (urlsplit(config.server.portal_url).hostname or "")


def _local_name(name: str) -> bool:
    """A name only this machine or network knows: loopback, private or link-local addresses, localhost."""
    try:
        return not ipaddress.ip_address(name).is_global
    except ValueError:
        return name in ("", "localhost") or name.endswith((".localhost", ".local", ".internal"))


def redirect_warning(config: Config) -> list[str]:
    """A warning when the template would send customers back to a name no DNS host can send them to."""
    domain = redirect_domain(config)
    if not _local_name(domain):
        return []
    warning = (f"# WARNING: syncRedirectDomain is {domain or '(empty)'}, which is not a public name: DNS hosts would "
               "send nobody back to it. Set [server] portal_url to the portal's public address before submitting the template.")
    return [warning]


def key_name(config: Config) -> str:
    return f"{config.domain_connect.key_label}.{config.domain_connect.key_host}"


def _key(config: Config, command: str) -> RSAPrivateKey:
    if not config.domain_connect.enabled:
        raise CommandError(f"{command}: one-click set-up is off: set [domain_connect] provider_id, service_id, "
                           "private_key_file and key_host first")
    try:
        return signing.load_private_key(config.domain_connect.private_key_file)
    except ConfigError as exc:
        raise CommandError(f"{command}: {exc}") from None


def template_lines(config: Config) -> list[str]:
    """``domain-connect-template``: the template JSON, then the TXT records of the public key."""
    dc = config.domain_connect
    key = _key(config, "domain-connect-template")
    body = json.dumps(template.template(dc, redirect_domain=redirect_domain(config)), indent=2)
    records = [f'{key_name(config)}. 300 IN TXT "{value}"' for value in signing.public_key_records(key.public_key())]
    return [
        f"# The template: submit it as {dc.provider_id.lower()}.{dc.service_id.lower()}.json to {TEMPLATES_REPOSITORY}",
        body,
        "",
        *redirect_warning(config),
        f"# The public key: publish these TXT records at {key_name(config)} (zone file syntax)",
        *records,
    ]


def check_lines(config: Config) -> list[str]:
    """``check-config``'s part: the key loads, and where its public key is published, it is this one's."""
    dc = config.domain_connect
    if dc.simulate:
        host = config.server.portal_url.rstrip("/") + simulated.PATH
        return [f"  one-click DNS set-up SIMULATED: a stand-in DNS host at {host} applies records to the simulated DNS"]
    if not dc.enabled:
        return ["  one-click DNS set-up off ([domain_connect] provider_id is empty)"]
    key = _key(config, "check-config")
    name = key_name(config)
    found = asyncio.run(DnsChecker(config.dns).lookup(name, "TXT"))
    said = f"  one-click DNS set-up as {dc.provider_id}/{dc.service_id}; public key at {name}"
    if found.outcome in ("timeout", "error"):
        return [f"{said}: not checked, the lookup failed ({found.outcome}{': ' + found.detail if found.detail else ''})"]
    if found.outcome != "found":
        return [f"{said}: not published yet ({found.outcome}); `python app.py domain-connect-template` prints it"]
    published = signing.published_public_key(found.values)
    if published != signing.public_key_der(key.public_key()):
        raise CommandError(f"check-config: domain_connect.private_key_file: the public key published at {name} is "
                           "not this key's (or cannot be read): DNS hosts would refuse every signed set-up; publish "
                           "the records `python app.py domain-connect-template` prints")
    return [f"{said} matches the private key"]
