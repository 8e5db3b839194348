"""core.text: the one rule for short user text, e-mail addresses, the text no field can hold, and how client text is quoted."""

from __future__ import annotations

import re
import unicodedata

import pytest

from core.text import EMAIL_PATTERN, PATTERN, email_address, printable, shown, unstorable
from core.text import REFUSED as RANGES

#: One of each kind the rule refuses: C0, DEL, C1 (NEL, CSI), NBSP, U+2028, U+2029, ZWSP, RLO,
#: word joiner, BOM, soft hyphen, ideographic space, private use, a noncharacter, a code point kept
#: for format characters, a lone surrogate, format characters beyond U+FFFF (a language tag, a
#: Kaithi number sign, a shorthand format control, an Egyptian hieroglyph format control of Unicode 15).
REFUSED = ["\x1b", "\x7f", "\x85", "\x9b", "\xa0", "\u2028", "\u2029", "\u200b", "\u202e", "\u2060", "\ufeff",
           "\xad", "\u3000", "\ue000", "\ufffe", "\u2065", "\udc00", "\U000e0001", "\U000110bd", "\U0001bca0",
           "\U0001343f"]
#: What Python's tables call the kinds the rule refuses (besides the space U+0020).
REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp", "Zs"}


def refused(cp: int) -> bool:
    return printable(chr(cp)) is None


class TestPrintable:
    @pytest.mark.parametrize("char", REFUSED)
    def test_a_refused_character_is_refused_wherever_it_stands(self, char):
        assert [printable(text) for text in (f"a{char}b", f"{char}ab", f"ab{char}")] == [None, None, None]

    def test_only_the_ascii_space_is_trimmed(self):
        assert printable("  eu west  ") == "eu west"

    def test_letters_of_any_script_and_symbols_are_printable(self):
        assert printable("café Straße 東京 🍰 ~!@#") == "café Straße 東京 🍰 ~!@#"


class TestTheRuleIsTheSameOnEveryPython:
    """The rule is the service's list (``REFUSED``, as Unicode ``UNICODE_VERSION`` has them), not
    the running Python's Unicode tables (issue 45, item 4)."""

    def test_a_character_newer_than_pythons_tables_is_accepted(self):
        """U+1FAE8 (shaking face, Unicode 15.0) is unassigned for Python 3.11 and was refused there."""
        assert printable("\U0001fae8") == "\U0001fae8"

    def test_code_points_unicode_has_not_assigned_are_accepted(self):
        unassigned = ["\u0378", "\U0003134b", "\U000dfffd"]  # in every Unicode to 18.0
        assert [printable(ch) for ch in unassigned] == unassigned

    def test_format_characters_newer_than_pythons_tables_are_refused(self):
        """U+13439 to U+1343F (Egyptian hieroglyph format controls, Unicode 15.0)."""
        assert all(refused(cp) for cp in range(0x13439, 0x13440))

    def test_every_noncharacter_is_refused(self):
        noncharacters = [*range(0xFDD0, 0xFDF0),
                         *(plane + last for plane in range(0, 0x110000, 0x10000) for last in (0xFFFE, 0xFFFF))]
        assert len(noncharacters) == 66 and all(refused(cp) for cp in noncharacters)

    def test_the_rule_refuses_what_pythons_tables_name_as_the_refused_kinds(self):
        """Wherever the running Python knows the character: Unicode has not moved one in or out of
        these kinds since ``UNICODE_VERSION`` (a Python with a newer Unicode that adds a format or
        space character fails here, and the list in core/text.py needs it)."""
        disagree = [f"U+{cp:04X}" for cp in range(0x110000)
                    if (category := unicodedata.category(chr(cp))) != "Cn"
                    and refused(cp) != (category in REFUSED_CATEGORIES and cp != 0x20)]
        assert disagree == []


class TestThePatternTheDocumentStates:
    """``PATTERN`` (the OpenAPI document's ``PrintableText``) agrees with ``printable`` on every code
    point, those beyond U+FFFF included."""

    def test_every_code_point_is_matched_as_printable_says(self):
        # fullmatch: ECMA-262's $ (JSON Schema's dialect) ends the text; Python's also a final newline.
        pattern = re.compile(PATTERN)
        disagree = [f"U+{cp:04X}" for cp in range(0x110000) if bool(pattern.fullmatch(chr(cp))) == refused(cp)]
        assert disagree == []

    def test_characters_beyond_u_ffff_are_written_as_themselves(self):
        """ECMA-262 (with the u flag) and Python read a character alike; their escapes for one differ."""
        assert "\U000110bd" in PATTERN and "\\U" not in PATTERN and "\\u{" not in PATTERN


class TestUnstorable:
    def test_a_nul_cannot_be_stored(self):
        assert "NUL" in unstorable("a\x00b")

    def test_a_lone_surrogate_cannot_be_stored(self):
        assert "surrogate" in unstorable("a\ud800")

    def test_newlines_tabs_and_other_controls_can_be_stored(self):
        assert unstorable("line 1\nline 2\t\x1b\u202e") is None


class TestShown:
    def test_printable_text_is_quoted_as_it_is(self):
        assert shown("shop.example.com") == "shop.example.com"

    def test_every_character_that_is_not_printable_is_escaped(self):
        assert shown("\x1b[31mred\u202e\x85\udc00") == "\\x1b[31mred\\u202e\\x85\\udc00"

    def test_long_text_is_cut_to_80_characters(self):
        assert shown("a" * 100) == "a" * 77 + "..."


class TestEmailAddress:
    """One rule for every e-mail address the service takes (issue 45, item 2)."""

    @pytest.mark.parametrize("email", ["ops@example.com", "first.last+tag@mail.example.co.uk", "josé@bücher.de",
                                       "a@b.c", "x@shop.test", "A@Example.COM"])
    def test_an_address_is_kept_as_given(self, email):
        assert email_address(email) == email

    def test_ascii_spaces_around_are_trimmed(self):
        assert email_address("  ops@example.com ") == "ops@example.com"

    @pytest.mark.parametrize("email", ["", "ops", "@example.com", "ops@", "ops@@example.com", "o@ps@example.com",
                                       "ops@example", "ops@example.com.", "ops@exa_mple.com", "ops@1.2.3.4",
                                       "ops@[1.2.3.4]", "ops@-example.com", "o ps@example.com"])
    def test_a_malformed_address_is_refused(self, email):
        assert email_address(email) is None

    @pytest.mark.parametrize("char", [*REFUSED, "\t", "\n", "\u205f"])
    def test_a_refused_character_is_refused_in_either_part(self, char):
        assert [email_address(e) for e in (f"o{char}ps@example.com", f"ops@exa{char}mple.com", f"ops@example.com{char}",
                                           f"{char}ops@example.com")] == [None] * 4

    def test_escape_sequences_and_bells_are_refused(self):
        assert email_address("z\u001b[2j\u0007@x.com") is None

    def test_at_most_254_characters_as_sent(self):
        longest = "a" * 64 + "@" + ".".join(["b" * 61] * 3) + ".com"
        assert len(longest) == 254 and email_address(longest) == longest
        assert email_address(longest + " ") is None and email_address("a" + longest) is None


class TestTheEmailPatternTheDocumentStates:
    """``EMAIL_PATTERN`` (the OpenAPI document's ``EmailAddress``) refuses nothing the service
    accepts: an address it refuses, ``email_address`` refuses too."""

    def test_a_character_the_pattern_refuses_in_the_local_part_is_refused(self):
        pattern = re.compile(EMAIL_PATTERN)
        disagree = [f"U+{cp:04X}" for cp in range(0x110000)
                    if not pattern.fullmatch(address := f"o{chr(cp)}ps@example.com") and email_address(address)]
        assert disagree == []

    def test_a_refused_character_in_the_domain_is_refused_by_both(self):
        pattern = re.compile(EMAIL_PATTERN)
        disagree = [f"U+{cp:04X}" for first, last, _ in RANGES for cp in range(first, last + 1)
                    if pattern.fullmatch(address := f"ops@exa{chr(cp)}mple.com") or email_address(address)]
        assert disagree == []

    @pytest.mark.parametrize("email", [" ops@example.com ", "josé@bücher.de"])
    def test_what_the_service_takes_the_pattern_admits(self, email):
        assert re.fullmatch(EMAIL_PATTERN, email) and email_address(email)
