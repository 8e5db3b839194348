"""A CA's refusal in words a customer can act on (core/acme/problems.py): what it met, read from
the problem's type and the words of its detail, Let's Encrypt's and Pebble's; never its raw bytes."""

from __future__ import annotations

import pytest

from core.acme.problems import Problem, clean, explain, kind_of, replaces_refused

APEX, TARGET = "shop.example.com", "abc.acme.saas.example"


@pytest.mark.parametrize(("problem", "kind"), [
    (Problem("dns", "DNS problem: NXDOMAIN looking up TXT for _acme-challenge.shop.example.com - check that a DNS "
                    "record exists for this domain"), "nxdomain"),
    (Problem("unauthorized", clean("Error retrieving TXT records for DNS challenge (\"DNS lookup for "
                                   "\\\"_acme-challenge.shop.example.com\\\" returned an unsuccessful response: "
                                   "'\\\\x03'\")")), "nxdomain"),
    (Problem("dns", "DNS problem: SERVFAIL looking up TXT for _acme-challenge.shop.example.com - the domain's "
                    "nameservers may be malfunctioning"), "servfail"),
    (Problem("dns", "DNS problem: query timed out looking up TXT for _acme-challenge.shop.example.com"), "timeout"),
    (Problem("connection", "Fetching the record: connection refused"), "timeout"),
    (Problem("unauthorized", 'Incorrect TXT record "xyz" found at _acme-challenge.shop.example.com'), "wrong_value"),
    (Problem("unauthorized", "Correct value not found for DNS challenge"), "wrong_value"),
    (Problem("incorrectResponse", "The response did not match"), "wrong_value"),
    (Problem("unauthorized", "No TXT record found at _acme-challenge.shop.example.com"), "no_record"),
    (Problem("caa", "CAA record for shop.example.com prevents issuance"), "caa"),
    (Problem("dns", "DNS problem: looking up TXT: DNSSEC: DNSKEY Missing"), "dnssec"),
    (Problem("rejectedIdentifier", "Cannot issue for \"shop.example.com\": the domain is forbidden"), "rejected"),
    (Problem("rateLimited", "Your account is temporarily prevented from requesting certificates for shop.example.com "
                            "and possibly others. Please visit: https://portal.letsencrypt.org/sfe/v1/unpause?jwt=x"),
     "paused"),
    (Problem("rateLimited", "too many failed authorizations (5) for \"shop.example.com\" in the last 1h0m0s"),
     "limited"),
    (Problem("malformed", "something else entirely"), "refused"),
])
def test_what_the_ca_met_is_read_from_its_type_and_words(problem, kind):
    assert kind_of(problem) == kind


def test_an_escaped_rcode_byte_is_named():
    assert clean("returned an unsuccessful response: '\\x03'") == "returned an unsuccessful response: NXDOMAIN"


def test_control_characters_never_reach_the_words():
    assert clean("bad\x03 byte\x00 here\n") == "bad byte here"


def test_the_words_name_the_record_the_target_and_the_cas_own_words():
    refusal = explain(Problem("dns", "DNS problem: NXDOMAIN looking up TXT"), apex=APEX, target=TARGET, negative_ttl=60)
    assert f"_acme-challenge.{APEX}" in refusal.words and TARGET in refusal.words
    assert 'The certificate authority said: "DNS problem: NXDOMAIN looking up TXT" (dns).' in refusal.words


def test_a_cached_negative_answer_is_a_refusal_time_fixes():
    assert explain(Problem("dns", "NXDOMAIN"), apex=APEX, target=TARGET, negative_ttl=60).transient


def test_a_wrong_value_is_not_one_time_fixes():
    refusal = explain(Problem("unauthorized", "Incorrect TXT record"), apex=APEX, target=TARGET, negative_ttl=60)
    assert not refusal.transient and "remove any TXT record there" in refusal.fix


def test_a_paused_hostname_keeps_the_cas_link():
    link = "https://portal.letsencrypt.org/sfe/v1/unpause?jwt=a.b.c"
    refusal = explain(Problem("rateLimited", f"Your account is temporarily prevented ... Please visit: {link}"),
                      apex=APEX, target=TARGET, negative_ttl=60)
    assert refusal.link == link and link in refusal.fix


@pytest.mark.parametrize(("problem", "refused"), [
    (Problem("alreadyReplaced", "the certificate was already replaced"), True),
    (Problem("unauthorized", "the certificate named in replaces was not issued to this account"), True),
    (Problem("malformed", "invalid replaces field"), True),
    (Problem("unauthorized", "account is deactivated"), False),
    (Problem("rateLimited", "too many new orders replacing nothing"), False),
])
def test_a_refused_replaces_is_told_from_other_refusals(problem, refused):
    assert replaces_refused(problem) is refused
