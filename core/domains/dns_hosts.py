"""The DNS hosts the service knows, and how each one's panel wants our two records typed.

The step where onboarding fails is the customer typing our records into their DNS host's panel.
Panels disagree on how a name is entered: most add the zone themselves, so a pasted full name
becomes ``_acme-challenge.shop.example.com.example.com``; a few want the whole name; some read a
CNAME target without a trailing dot as a name inside the zone. Knowing the host lets the pages
show each name in the form that panel expects, with the few host-specific traps for our records
(the ``_acme-challenge.<hostname>`` CNAME and the ``_service-verify.<hostname>`` TXT).

The host is recognised from the zone's NS records (found by the zone walk), not from the domain's
registrar or its Domain Connect settings: the NS records name who serves, and so who edits, the
zone. Patterns are regular expressions matched in full against NS names in lower case without the
trailing dot. Where one family of name servers serves two products, the entry names both, since
the NS records cannot tell them apart.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from typing import Literal

import attrs

from core.hostnames import relative_name

PanelNameForm = Literal["relative", "relative_blank_apex"]


@attrs.frozen
class DnsHost:
    key: str
    "Stable id, stored with the domain and returned by the API: never rename one."
    name: str
    "Shown to people."
    ns_patterns: tuple[str, ...]
    "Regular expressions, each matched in full against a lower-case NS name without its trailing dot."
    panel_name_form: PanelNameForm
    """``relative``: the name without the zone, ``@`` for the zone itself; ``relative_blank_apex``: the
    same, but left empty for the zone itself. (No panel known here takes only the full name: the
    pages show it beside this one anyway.)"""
    cname_needs_dot: bool
    "The panel reads a CNAME target without a trailing dot as a name in the zone (as a BIND zone file does)."
    gotchas: tuple[str, ...]
    "Sentences about our two records at this host, shown with the records."
    help_url: str | None
    "The host's own page on adding a DNS record, where a well-known one exists."
    domain_connect: bool
    """Listed as supporting Domain Connect. A hint only: whether one-click set-up is offered for a
    zone is decided by that zone's own ``_domainconnect`` discovery."""


def _without_domain(host: str, field: str = "name") -> str:
    return (f"Enter the {field} without your domain, as shown: {host} adds the domain itself, so a pasted "
            "full name can end up as _acme-challenge.shop.example.com.example.com.")


def _keep_the_dot(host: str) -> str:
    return (f"Keep the trailing dot on the CNAME target, as shown: without it {host} may read the target "
            "as a name inside your zone and add your domain to it.")


HOSTS: tuple[DnsHost, ...] = (
    DnsHost(
        key="cloudflare", name="Cloudflare", ns_patterns=(r"[a-z0-9-]+\.ns\.cloudflare\.com",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(
            ("Set the _acme-challenge CNAME to DNS only (grey cloud): a proxied record answers with "
             "Cloudflare's addresses instead of the CNAME, and the check fails."),
            ("Leave CNAME flattening off for the _acme-challenge CNAME (on the record, and \"CNAME "
             "flattening for all CNAME records\" in the DNS settings): a flattened CNAME is not returned, so "
             "the check can fail."),
            ("Delete any other record at the _acme-challenge name first (often a TXT left by an earlier "
             "certificate): a CNAME must be the only record at its name."),
        ),
        help_url="https://developers.cloudflare.com/dns/manage-dns-records/how-to/create-dns-records/",
        domain_connect=True,
    ),
    DnsHost(
        key="route53", name="Amazon Route 53",
        ns_patterns=(r"ns-\d+\.awsdns-\d+\.(com|net|org|co\.uk)",),
        panel_name_form="relative_blank_apex", cname_needs_dot=False,
        gotchas=(
            ("Enter the TXT value inside double quotes (\"service-domain-verification=...\"): Route 53 "
             "expects TXT values quoted."),
            "Type only the part of the name before the domain shown next to the Record name field.",
        ),
        help_url=("https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/"
                  "resource-record-sets-creating.html"),
        domain_connect=False,
    ),
    # domaincontrol.com is GoDaddy's own: every name server under it is GoDaddy DNS (nsNN, pdnsNN).
    DnsHost(
        key="godaddy", name="GoDaddy", ns_patterns=(r"[a-z0-9-]+\.domaincontrol\.com",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(_without_domain("GoDaddy"),),
        help_url="https://www.godaddy.com/help/add-a-cname-record-19236",
        domain_connect=True,
    ),
    # ns-cloud-*.googledomains.com serves both Google Cloud DNS zones and Squarespace's (the domains it
    # took over from Google Domains), so the NS records cannot say which panel the customer uses; the
    # name says both. Both panels take the name without the zone, and our records are never at the
    # zone itself, where they differ (Cloud DNS leaves it empty, Squarespace uses "@"). Squarespace
    # offers Domain Connect and Cloud DNS does not: the flag says only what holds for every zone
    # served here, and the zone's own discovery decides. No help page: there is none for both.
    DnsHost(
        key="google_or_squarespace", name="Google Cloud DNS or Squarespace",
        ns_patterns=(r"ns-cloud-[a-z]\d+\.googledomains\.com",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(
            ("Enter the name without your domain, as shown: both Google Cloud DNS and Squarespace add the "
             "domain themselves."),
        ),
        help_url=None, domain_connect=False,
    ),
    DnsHost(
        key="azure", name="Azure DNS", ns_patterns=(r"ns[1-4]-\d+\.azure-dns\.(com|net|org|info)",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(
            ("Enter the record set name without your domain, as shown: Azure DNS names are relative to the "
             "zone."),
        ),
        help_url="https://learn.microsoft.com/en-us/azure/dns/dns-operations-recordsets-portal",
        domain_connect=False,
    ),
    # BasicDNS (dnsN), PremiumDNS (pdnsN) and FreeDNS (freednsN) share one panel, Advanced DNS.
    DnsHost(
        key="namecheap", name="Namecheap", ns_patterns=(r"(dns|pdns|freedns)\d+\.registrar-servers\.com",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(_without_domain("Namecheap", field="Host"),),
        help_url=("https://www.namecheap.com/support/knowledgebase/article.aspx/9646/10/"
                  "how-can-i-set-up-a-cname-record-for-my-domain/"),
        domain_connect=False,
    ),
    DnsHost(
        key="digitalocean", name="DigitalOcean", ns_patterns=(r"ns[1-3]\.digitalocean\.com",),
        panel_name_form="relative", cname_needs_dot=False, gotchas=(),
        help_url="https://docs.digitalocean.com/products/networking/dns/how-to/manage-records/",
        domain_connect=False,
    ),
    # The DNS Console (and its successor in the Cloud Console) and the Robot's zone-file editor.
    DnsHost(
        key="hetzner", name="Hetzner",
        ns_patterns=(r"(hydrogen|oxygen|helium)\.ns\.hetzner\.(com|de)", r"[a-z0-9-]+\.first-ns\.de",
                     r"[a-z0-9-]+\.second-ns\.(de|com)"),
        panel_name_form="relative", cname_needs_dot=True,
        gotchas=(_keep_the_dot("Hetzner"), _without_domain("Hetzner")),
        help_url=None, domain_connect=False,
    ),
    DnsHost(
        key="ovhcloud", name="OVHcloud", ns_patterns=(r"(dns|ns)\d+\.ovh\.net",),
        panel_name_form="relative_blank_apex", cname_needs_dot=True,
        gotchas=(
            _keep_the_dot("OVHcloud"),
            "In the Sub-domain field enter only the part of the name before your domain.",
        ),
        help_url=None, domain_connect=False,
    ),
    DnsHost(
        key="ionos", name="IONOS", ns_patterns=(r"ns\d+\.ui-dns\.(de|com|org|biz)",),
        panel_name_form="relative", cname_needs_dot=False, gotchas=(), help_url=None, domain_connect=True,
    ),
    DnsHost(
        key="gandi", name="Gandi", ns_patterns=(r"ns-\d+-[a-c]\.gandi\.net",),
        panel_name_form="relative", cname_needs_dot=True,
        gotchas=(_keep_the_dot("Gandi"),),
        help_url=None, domain_connect=False,
    ),
    DnsHost(
        key="porkbun", name="Porkbun", ns_patterns=(r"[a-z0-9-]+\.ns\.porkbun\.com",),
        panel_name_form="relative_blank_apex", cname_needs_dot=False,
        gotchas=(
            ("New Porkbun domains have a wildcard (*) CNAME to pixie.porkbun.com, its parking page: a check "
             "that finds that target means the record is not saved under the exact name shown yet."),
        ),
        help_url=None, domain_connect=False,
    ),
    # Vercel's CLI takes "@" for the zone itself; our records are never there in any case.
    DnsHost(
        key="vercel", name="Vercel", ns_patterns=(r"ns\d+\.vercel-dns\.com",),
        panel_name_form="relative", cname_needs_dot=False, gotchas=(),
        help_url="https://vercel.com/docs/domains/managing-dns-records", domain_connect=True,
    ),
    # Netlify DNS runs on NS1 and hands out NS1's name servers (dnsN.pNN.nsone.net), so the two are one
    # entry. Netlify comes first in the name: it is the likelier of the two for a customer hostname.
    # Whether their record forms add the zone is not confirmed against the live panels: the name is
    # given relative, as most panels take it, and the gotcha covers a form that wants the whole name.
    DnsHost(
        key="netlify_or_ns1", name="Netlify or NS1", ns_patterns=(r"dns\d+\.p\d+\.nsone\.net",),
        panel_name_form="relative", cname_needs_dot=False,
        gotchas=(
            ("If the name field does not show your domain after it, enter the full name instead, or the "
             "record ends up outside your hostname."),
        ),
        help_url=None, domain_connect=False,
    ),
    DnsHost(
        key="dnsimple", name="DNSimple", ns_patterns=(r"ns[1-4]\.dnsimple(-edge)?\.(com|net|org)",),
        panel_name_form="relative_blank_apex", cname_needs_dot=False, gotchas=(),
        help_url="https://support.dnsimple.com/articles/manage-cname-record/", domain_connect=False,
    ),
)

_BY_KEY = {host.key: host for host in HOSTS}


@functools.cache
def _matchers() -> tuple[tuple[re.Pattern[str], DnsHost], ...]:
    """Compiled when a zone's host is first identified, not on import: they were a hundredth of a
    second of every start-up, before the first answer, which identifies none (issue 49)."""
    return tuple((re.compile("|".join(f"(?:{p})" for p in host.ns_patterns)), host) for host in HOSTS)


def _bare(name: str) -> str:
    return name.strip().lower().removesuffix(".")


def _host_of(nameserver: str) -> DnsHost | None:
    for pattern, host in _matchers():
        if pattern.fullmatch(nameserver):
            return host
    return None


def identify(nameservers: Iterable[str]) -> DnsHost | None:
    """The host serving more than half of the zone's NS names; None on a tie, a split or no match.

    A zone mid-move, or served by two hosts at once, lists NS names of both: the host most of them
    belong to is the one to name, and naming either when the set is split evenly would be a guess.
    """
    names = {_bare(name) for name in nameservers} - {""}
    counts = Counter(host.key for name in names if (host := _host_of(name)) is not None)
    for key, count in counts.items():
        if 2 * count > len(names):
            return _BY_KEY[key]
    return None


def by_key(key: str) -> DnsHost | None:
    return _BY_KEY.get(key)


def record_name(host: DnsHost | None, name: str, zone: str) -> str:
    """``name`` as typed in the host's panel for ``zone``; relative with ``@`` when the host is unknown,
    the form most panels take. A name outside the zone comes back whole: there is nothing to cut."""
    name, zone = _bare(name), _bare(zone)
    form = host.panel_name_form if host is not None else "relative"
    relative = relative_name(name, zone)
    return "" if relative == "@" and form == "relative_blank_apex" else relative


def cname_target(host: DnsHost | None, target: str) -> str:
    """The CNAME target as typed in the host's panel: with a trailing dot only where the panel would
    otherwise add the zone to it, since some panels refuse a trailing dot."""
    bare = target.strip().removesuffix(".")
    return bare + "." if host is not None and host.cname_needs_dot else bare
