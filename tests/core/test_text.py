"""core.text: the one rule for short user text, the text no field can hold, and how client text is quoted."""

from __future__ import annotations

import re
import unicodedata

import pytest

from core.text import PATTERN, printable, shown, unstorable

#: One of each kind the rule refuses: C0, DEL, C1 (NEL, CSI), NBSP, U+2028, U+2029, ZWSP, RLO,
#: word joiner, BOM, soft hyphen, ideographic space, private use, unassigned, a lone surrogate, a
#: format character beyond U+FFFF (a language tag).
REFUSED = ["\x1b", "\x7f", "\x85", "\x9b", "\xa0", "\u2028", "\u2029", "\u200b", "\u202e", "\u2060", "\ufeff",
           "\xad", "\u3000", "\ue000", "\u0378", "\udc00", "\U000e0001"]


class TestPrintable:
    @pytest.mark.parametrize("char", REFUSED)
    def test_a_refused_character_is_refused_wherever_it_stands(self, char):
        assert [printable(text) for text in (f"a{char}b", f"{char}ab", f"ab{char}")] == [None, None, None]

    def test_only_the_ascii_space_is_trimmed(self):
        assert printable("  eu west  ") == "eu west"

    def test_letters_of_any_script_and_symbols_are_printable(self):
        assert printable("café Straße 東京 🍰 ~!@#") == "café Straße 東京 🍰 ~!@#"


class TestThePatternTheDocumentStates:
    """``PATTERN`` (the OpenAPI document's ``PrintableText``) agrees with ``printable`` on every
    assigned character of the Basic Multilingual Plane; the rest it cannot write."""

    def test_every_assigned_bmp_character_is_matched_as_printable_says(self):
        # fullmatch: ECMA-262's $ (JSON Schema's dialect) ends the text; Python's also a final newline.
        pattern = re.compile(PATTERN)
        disagree = [f"U+{cp:04X}" for cp in range(0x10000)
                    if unicodedata.category(chr(cp)) not in ("Cn", "Cs")
                    and bool(pattern.fullmatch(chr(cp))) != (printable(chr(cp)) is not None)]
        assert disagree == []


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
