"""core.hostnames: one canonical form, and a precise reason for every refusal."""

from __future__ import annotations

import random

import idna
import pytest

from core.hostnames import HostnameError, _plain_ascii, match_key, normalise


class TestNormalise:
    """Accepted names."""

    @pytest.mark.parametrize(
        ("raw", "canonical"),
        [
            ("shop.example.com", "shop.example.com"),
            ("  Shop.EXAMPLE.com.  ", "shop.example.com"),
            ("München.de", "xn--mnchen-3ya.de"),
            ("xn--mnchen-3ya.de", "xn--mnchen-3ya.de"),
            ("faß.de", "xn--fa-hia.de"),  # IDNA 2008, not the transitional mapping to "fass"
            ("shop.example.co.uk", "shop.example.co.uk"),
            ("my-site.github.io", "my-site.github.io"),
        ],
    )
    def test_canonical_form(self, raw, canonical):
        assert normalise(raw) == canonical


class TestRefusals:
    """Refused names, each with its reason."""

    @pytest.mark.parametrize(
        ("raw", "reason"),
        [
            ("*.example.com", "Wildcard hostnames are not supported"),
            ("10.0.0.1", "is an IP address"),
            ("[2001:db8::1]", "is an IP address"),
            ("example", "single label"),
            ("com", "single label"),
            ("co.uk", "is a public suffix"),
            ("github.io", "is a public suffix"),
            ("shop.local", "special-use"),
            ("shop.corp", "not a public top-level domain"),
            ("a.b.1234", "numeric label"),
            ("a..example.com", "not a valid hostname"),
            ("-shop.example.com", "not a valid hostname"),
            ("shop.example.com:8443", "leave out the scheme, port and path"),
            ("shop example.com", "white space"),
            ("sh_op.example.com", "underscore"),
            ("one.example.com,two.example.com", "contains ',', which hostnames may not: only letters, digits, hyphens and dots"),
            ("shop!.example.com", "contains '!'"),
            ("x" * 64 + ".example.com", "not a valid hostname"),
            (".".join(["a" * 60] * 5) + ".com", "not a valid hostname"),
            ("   ", "empty"),
        ],
    )
    def test_reason(self, raw, reason):
        with pytest.raises(HostnameError) as info:
            normalise(raw)
        assert reason in str(info.value)


class TestSpecialUse:
    """Special-use names (RFC 6761, 6762, 7686, 8375, 9476) and lookalikes (review finding 12)."""

    @pytest.mark.parametrize(
        "raw",
        ["example.onion", "shop.local", "x.localhost", "a.invalid", "shop.test", "shop.example", "router.home.arpa",
         "1.0.0.127.in-addr.arpa", "x.alt", "host.internal"],
    )
    def test_special_use_names_are_refused_with_the_reason(self, raw):
        with pytest.raises(HostnameError, match="special-use"):
            normalise(raw)

    def test_documentation_domains_under_real_tlds_stay_allowed(self):
        assert normalise("shop.example.com") == "shop.example.com"

    def test_a_label_mixing_latin_and_cyrillic_is_refused(self):
        with pytest.raises(HostnameError, match="mixes Latin and Cyrillic"):
            normalise("p\u0430ypal.com")  # a Cyrillic "а" among Latin letters

    def test_a_wholly_cyrillic_label_is_allowed(self):
        assert normalise("\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444") == "xn--e1afmkfd.xn--p1ai"

    def test_japanese_scripts_may_mix(self):
        assert normalise("日本語テスト.jp").startswith("xn--")


class TestPlainAsciiShortcut:
    """Plain ASCII names skip the IDNA library: only where it would give them back unchanged."""

    def test_every_name_taken_as_plain_is_one_idna_returns_unchanged(self):
        rng = random.Random(5)
        pieces = ["a", "b", "0", "9", "-", "--", ".", "xn--", "z" * 62, "ab--c", "."]
        taken = 0
        for _ in range(20_000):
            name = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
            if _plain_ascii(name):
                taken += 1
                assert idna.encode(name, uts46=True, transitional=False).decode("ascii") == name, name
        assert taken > 1_000  # the shortcut is taken often enough for this to mean something

    @pytest.mark.parametrize("name", ["a..b.com", "-a.com", "a-.com", "ab--c.com", "xn--abc.com", "a" * 64 + ".com",
                                      ("a" * 63 + ".") * 4 + "com", "Shop.com", "ex_ample.com"])
    def test_names_the_shortcut_leaves_to_idna(self, name):
        assert not _plain_ascii(name)


class TestMatchKey:
    """A name a peer sends (the TLS terminator's ``server_name``), as it is looked up (issue 45, item 6)."""

    @pytest.mark.parametrize(("sent", "key"), [
        ("shop.example.com", "shop.example.com"),
        ("SHOP.Example.COM.", "shop.example.com"),
        ("b\u00fccher.example.com", "xn--bcher-kva.example.com"),
        ("XN--BCHER-KVA.example.com", "xn--bcher-kva.example.com"),
        ("B\u00fccher.example.com", "xn--bcher-kva.example.com"),
    ])
    def test_ascii_case_and_one_trailing_dot_aside_a_name_is_its_idna_form(self, sent, key):
        assert match_key(sent) == key

    @pytest.mark.parametrize("sent", [
        "\u212aiosk.example.com",  # KELVIN SIGN: lower() and UTS 46 make it k
        "\uff4biosk.example.com",  # FULLWIDTH k
        "kiosk\u3002example.com",  # IDEOGRAPHIC FULL STOP, a dot to UTS 46
        "\u0130stanbul.example.com",  # I WITH DOT ABOVE: lower() makes it i and a combining dot
        "bu\u0308cher.example.com",  # not NFC
        " shop.example.com", "shop.example.com\x00", "shop.example.com..", "", ".", "a..b.com", "ex_ample.com",
        "a" * 64 + ".com",
    ])
    def test_anything_else_is_no_hostname_and_matches_nothing(self, sent):
        assert match_key(sent) is None
