"""The master secret and the keys derived from it.

One file (``storage.secret_key_file``) serves several jobs: peppering API-key hashes, signing
cursors and cookies, encrypting stored secrets. Each job gets its own HKDF subkey, so a key
leaked or misused in one job says nothing about the others.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

log = logging.getLogger(__name__)

MASTER_KEY_BYTES = 32
_SEALED_VERSION = b"\x01"


class SecretKeyError(Exception):
    """The secret key file cannot be created or read."""


def load_or_create_master_key(path: str | Path) -> bytes:
    """Read the master key, creating it (mode 0600, never overwritten) on first start."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # beside secrets: private
        # O_EXCL: two processes starting at once cannot both write a key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SecretKeyError(f"storage.secret_key_file: cannot create {path}: {exc.strerror}") from None
    else:
        with os.fdopen(fd, "w") as f:
            f.write(base64.urlsafe_b64encode(secrets.token_bytes(MASTER_KEY_BYTES)).decode() + "\n")
            f.flush()
            os.fsync(f.fileno())
        log.info("created secret key file %s", path)
    return read_master_key(path)


def read_master_key(path: str | Path) -> bytes:
    """Read the master key, never creating it (``check-config`` must not write)."""
    path = Path(path)
    try:
        raw = base64.urlsafe_b64decode(path.read_text().strip())
    except OSError as exc:
        raise SecretKeyError(f"storage.secret_key_file: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise SecretKeyError(f"storage.secret_key_file: {path} is not base64 text") from None
    if len(raw) < MASTER_KEY_BYTES:
        raise SecretKeyError(f"storage.secret_key_file: {path} holds fewer than {MASTER_KEY_BYTES} bytes")
    if path.stat().st_mode & 0o077:
        log.warning("secret key file %s is readable by other users; chmod 600 it", path)
    return raw


class Keyring:
    """Subkeys of the master secret, one per purpose."""

    def __init__(self, master: bytes) -> None:
        self._master = master
        self._cache: dict[str, bytes] = {}

    def subkey(self, purpose: str) -> bytes:
        if purpose not in self._cache:
            self._cache[purpose] = HKDF(
                algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()
            ).derive(self._master)
        return self._cache[purpose]

    def mac(self, purpose: str, data: str | bytes) -> str:
        """Hex HMAC-SHA256 of ``data`` under the purpose's subkey."""
        if isinstance(data, str):
            data = data.encode()
        return hmac.digest(self.subkey(purpose), data, "sha256").hex()  # one-shot, in C: on every request

    def seal(self, purpose: str, payload: dict[str, Any]) -> str:
        """An opaque, tamper-evident token carrying ``payload`` (readable, not secret)."""
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{body}.{self.mac(purpose, body)[:32]}"

    def unseal(self, purpose: str, token: str) -> dict[str, Any] | None:
        """The payload of a token made by ``seal`` for this purpose, or ``None``."""
        body, _, tag = token.partition(".")
        # Constant-time: a forger learns nothing from how long the comparison took.
        if not body or not hmac.compare_digest(tag.encode(), self.mac(purpose, body)[:32].encode()):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None

    def encrypt(self, purpose: str, plaintext: str, *, bound_to: str) -> str:
        """AES-256-GCM with a fresh nonce; ``bound_to`` (e.g. the row id) is authenticated too,
        so a ciphertext copied onto another row does not decrypt."""
        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self.subkey(purpose)).encrypt(nonce, plaintext.encode(), bound_to.encode())
        return base64.urlsafe_b64encode(_SEALED_VERSION + nonce + sealed).decode()

    def decrypt(self, purpose: str, token: str, *, bound_to: str) -> str:
        """The plaintext of ``encrypt``; ``ValueError`` when the token was altered or moved."""
        raw = base64.urlsafe_b64decode(token.encode())
        if raw[:1] != _SEALED_VERSION:
            raise ValueError("unknown ciphertext version")
        try:
            return AESGCM(self.subkey(purpose)).decrypt(raw[1:13], raw[13:], bound_to.encode()).decode()
        except InvalidTag:
            raise ValueError("ciphertext failed authentication") from None
