"""A CA's refusal (its problem document, RFC 8555 section 6.7) in words a customer can act on.

A CA writes its problems for client developers, in its own phrasing: Let's Encrypt says
``DNS problem: NXDOMAIN looking up TXT for _acme-challenge.shop.example.com``, Pebble says
``DNS lookup ... returned an unsuccessful response: '\\x03'`` (the DNS rcode as a Go-quoted
byte). Neither is shown raw: the detail is cleaned (escaped bytes named, control characters
dropped) and read for what went wrong, by the problem's type and the detail's words:

| kind | what the CA met | a fix in DNS? |
|---|---|---|
| ``nxdomain`` | "no such name" for the TXT record (a resolver's cached answer, mostly) | no: time |
| ``no_record`` | no TXT record where the CNAME leads | no: time, or the CNAME |
| ``timeout`` | no answer from a nameserver in time | the zone's nameservers |
| ``servfail`` | SERVFAIL or REFUSED from the zone's nameservers | the nameservers, DNSSEC |
| ``dnssec`` | DNSSEC that does not validate | the zone's signatures or DS record |
| ``wrong_value`` | a TXT record with another value (one beside the CNAME, or an old one cached) | remove the TXT |
| ``caa`` | CAA records that do not allow the CA | CAA |
| ``rejected`` | a name the CA's policy refuses | none |
| ``paused`` | the CA paused the hostname for our account (too many failures in a row) | a person, at the CA's link |
| ``limited`` | the CA's own limit of failed validations per hostname and hour reached | no: time |
| ``refused`` | anything else | see the diagnosis |

The CA's cleaned words are kept after ours, so support can match them with the CA's documentation.
"""

from __future__ import annotations

import re

import attrs
import dns.rcode

#: Kinds that time alone may fix: the next order, after the wait, may well succeed.
TRANSIENT = frozenset({"nxdomain", "no_record", "timeout", "limited"})
#: Types of a CA's refusal of an order's ``replaces`` itself (RFC 9773 section 5), beside those
#: whose detail names it.
_REPLACES_REFUSED = ("alreadyReplaced",)

_ESCAPED_BYTE = re.compile(r"'?\\+x([0-9a-fA-F]{2})'?")
_ESCAPED_QUOTE = re.compile(r'\\+"')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_URL = re.compile(r"https?://[^\s\"'<>)]+")


@attrs.frozen
class Problem:
    """A CA's problem document, as far as the service reads it."""

    type: str
    "The last part of its type URN (``dns``, ``unauthorized``, ``rateLimited``...); empty without one."
    detail: str
    "Its detail, cleaned (``clean``)."


@attrs.frozen
class Refusal:
    """A CA's refusal of a hostname's validation, explained."""

    kind: str
    "See the module's table."
    words: str
    "What happened, for a customer, with the CA's own words after ours."
    fix: str
    "What to do about it."
    link: str | None = None
    "The CA's page for it (to unpause a paused hostname)."

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT


def clean(text: str) -> str:
    """A CA's words fit to show: an escaped byte read as the DNS rcode it is where it stands for
    one (Pebble's ``'\\x03'``: NXDOMAIN), escaped quotes unescaped, control characters dropped."""
    def rcode(match: re.Match[str]) -> str:
        value = int(match.group(1), 16)
        return dns.rcode.to_text(dns.rcode.Rcode(value)) if value < 24 else f"byte {value}"

    text = _ESCAPED_BYTE.sub(rcode, text)
    text = _ESCAPED_QUOTE.sub('"', text)
    return " ".join(_CONTROL.sub(" ", text).split())


def link_in(text: str) -> str | None:
    found = _URL.search(text)
    return found.group(0).rstrip(".,;") if found else None


def kind_of(problem: Problem) -> str:
    """What went wrong, from the problem's type and the words of its detail."""
    said, kind = problem.detail.lower(), problem.type
    if kind == "paused" or (kind in ("rateLimited", "unauthorized") and (
            "temporarily prevented" in said or "unpause" in said or "paused" in said)):
        return "paused"
    if kind == "rateLimited" and ("failed authorization" in said or "failed validation" in said):
        return "limited"
    if kind == "caa" or "caa record" in said:
        return "caa"
    if kind == "dnssec" or "dnssec" in said:
        return "dnssec"
    if "NXDOMAIN" in problem.detail:
        return "nxdomain"
    if "SERVFAIL" in problem.detail or "REFUSED" in problem.detail:
        return "servfail"
    if kind == "connection" or any(w in said for w in ("timeout", "timed out", "deadline exceeded")):
        return "timeout"
    if kind == "incorrectResponse" or "incorrect txt" in said or "correct value not found" in said:
        return "wrong_value"
    if "no txt record" in said or "no valid txt" in said or "noerror" in said:
        return "no_record"
    if kind == "rejectedIdentifier":
        return "rejected"
    return "refused"


def explain(problem: Problem, *, apex: str, target: str, negative_ttl: int) -> Refusal:
    """The refusal of ``apex``'s validation (its CNAME leading to ``target``) in a customer's words."""
    kind = kind_of(problem)
    owner = f"_acme-challenge.{apex}"
    looked = f"The certificate authority looked up the TXT record at {owner} (its CNAME leads to {target})"
    retry = "the service orders again by itself once that has passed; or check again then"
    link = link_in(problem.detail)
    if kind == "nxdomain":
        words = (f"{looked} and was told that the name does not exist (NXDOMAIN). The value was published; a "
                 "resolver the certificate authority asks most likely still held an earlier answer that the name "
                 f"does not exist (kept up to {negative_ttl} seconds), or did not see the CNAME yet.")
        fix = f"Nothing to change while the CNAME at {owner} points to {target}: {retry}."
    elif kind == "no_record":
        words = f"{looked} and found no TXT record there: it did not see the CNAME, or not yet."
        fix = f"Keep the CNAME at {owner} pointing to {target} at every nameserver of the zone: {retry}."
    elif kind == "timeout":
        words = (f"{looked} and got no answer in time from a nameserver on the way (the zone of {apex}, or the "
                 "zone its CNAME leads to).")
        fix = (f"Make sure every nameserver of the zone of {apex} answers (the diagnosis names any that do not), "
               "then check again.")
    elif kind == "servfail":
        words = (f"{looked} and the lookup failed (SERVFAIL or REFUSED): the nameservers of the zone did not "
                 "answer for it, or its DNSSEC did not validate.")
        fix = (f"Make sure every nameserver of the zone of {apex} answers for {owner} and that its DNSSEC "
               "validates (the diagnosis checks both), then check again.")
    elif kind == "dnssec":
        words = f"{looked} and DNSSEC validation failed for it."
        fix = (f"Check the DNSSEC of the zone of {apex} (for example with dnsviz.net): re-sign the zone, or "
               "remove the DS record at the registrar if DNSSEC is not meant to be on; then check again.")
    elif kind == "wrong_value":
        words = (f"{looked} and found a TXT record there, but not the value it asked for: a TXT record is "
                 f"published at {owner} beside or instead of the CNAME, or a resolver still held an older value.")
        fix = f"Keep only the CNAME at {owner} (value {target}) and remove any TXT record there, then check again."
    elif kind == "caa":
        words = (f"The CAA records of {apex} (or of a parent domain) do not allow the certificate authority to "
                 "issue for it.")
        fix = ("Add a CAA record that allows the certificate authority (the diagnosis names the exact record), "
               "or remove the CAA records that forbid it, then check again.")
    elif kind == "rejected":
        words = f"The certificate authority does not issue certificates for {apex}: its policy refuses the name."
        fix = "Nothing in DNS changes this; the name needs a certificate from another certificate authority."
    elif kind == "paused":
        words = (f"The certificate authority has paused issuance for {apex} for the service's account, after too "
                 "many failed validations in a row: it accepts no order for it until someone unpauses it.")
        fix = (f"Unpause it at the certificate authority's page {link or '(linked in its words)'} (the service's "
               "operator can too), then check again.")
    elif kind == "limited":
        words = (f"The certificate authority refuses to validate {apex} again for now: too many of its validations "
                 "failed in the last hour.")
        fix = f"Wait: {retry}."
    else:
        words = f"The certificate authority refused the validation of {apex}."
        fix = ("Check both DNS records (the diagnosis shows what the certificate authority is likely to see), "
               "then check again.")
    said = f' The certificate authority said: "{problem.detail}"' + (f" ({problem.type})." if problem.type else ".")
    return Refusal(kind=kind, words=words + said, fix=fix, link=link if kind == "paused" else None)


def replaces_refused(problem: Problem) -> bool:
    """The CA refused an order for what its ``replaces`` names (RFC 9773 section 5): a certificate
    replaced already (by an order since abandoned), or one another account issued."""
    return problem.type in _REPLACES_REFUSED or (
        problem.type in ("malformed", "unauthorized", "badRequest") and "replace" in problem.detail.lower())
