"""core.identity.api_keys: the key format, and the cache of keys that authenticated recently."""

from __future__ import annotations

import datetime as dt
import re
import uuid

from core.identity.api_keys import KeyCache, new_secret, well_formed
from store.records import ApiKey, Workspace

NOW = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)


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


def stored_key() -> tuple[ApiKey, Workspace]:
    workspace = Workspace(id=uuid.uuid4(), name="Acme", created_at=NOW)
    key = ApiKey(id=uuid.uuid4(), name="ci", prefix=new_secret()[1], scopes=["*"], created_at=NOW, status="active",
                 workspace_id=workspace.id, secret_hash="h")
    return key, workspace


class TestCache:
    """KeyCache: a key is read in a unit of work and cached on the event loop after it."""

    def test_a_key_read_is_cached(self):
        cache, (key, workspace) = KeyCache(), stored_key()
        cache.put("secret", key, workspace, read_after=cache.forgotten)
        assert cache.get("secret").key == key

    def test_forgetting_a_key_drops_its_entry(self):
        cache, (key, workspace) = KeyCache(), stored_key()
        cache.put("secret", key, workspace)
        cache.forget(key.id)
        assert cache.get("secret") is None

    def test_a_key_read_before_a_rotation_or_revocation_forgot_it_is_not_cached(self):
        # The read happened in a unit of work; the rotation committed and forgot the key before the
        # read's result came back to the event loop: caching it would keep the old secret working.
        cache, (key, workspace) = KeyCache(), stored_key()
        read_after = cache.forgotten
        cache.forget(key.id)
        entry = cache.put("secret", key, workspace, read_after=read_after)
        assert entry.key == key  # this request was authenticated before the rotation
        assert cache.get("secret") is None
