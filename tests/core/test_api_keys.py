"""core.identity.api_keys: the key format."""

from __future__ import annotations

import re

from core.identity.api_keys import new_secret, well_formed


class TestFormat:
    """ac_live_ + 32 base62 + 6 base62 checksum."""

    def test_shape(self):
        secret, prefix = new_secret()
        assert re.fullmatch(r"ac_live_[0-9A-Za-z]{38}", secret)
        assert prefix == secret[:16]

    def test_fresh_keys_differ(self):
        assert len({new_secret()[0] for _ in range(100)}) == 100

    def test_checksum_accepts_a_real_key(self):
        assert well_formed(new_secret()[0])

    def test_checksum_rejects_a_changed_character(self):
        secret = new_secret()[0]
        changed = secret[:10] + ("a" if secret[10] != "a" else "b") + secret[11:]
        assert not well_formed(changed)

    def test_wrong_length_and_alphabet_are_rejected(self):
        secret = new_secret()[0]
        assert not well_formed(secret[:-1])
        assert not well_formed(secret[:-1] + "_")
