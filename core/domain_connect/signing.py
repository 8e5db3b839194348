"""Signed apply URLs and the public key records that let a DNS host check them.

A DNS host verifies a signature over the query string exactly as it receives it, minus ``sig``
and ``key``; it never rebuilds the string. So the URL is written byte by byte here and must reach
the browser unchanged: no URL library gets a chance to re-encode or re-order it.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Iterable, Mapping
from urllib.parse import quote

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from core.config import ConfigError

KEY_SETTING = "domain_connect.private_key_file"
MIN_KEY_BITS = 2048
#: The only algorithm DNS hosts implement (RSASSA-PKCS1-v1_5 with SHA-256).
ALGORITHM = "RS256"
#: One TXT character-string: DNS hosts read only the first string of each record.
TXT_STRING_BYTES = 255
_RESERVED = ("key", "sig")


def load_private_key(path: str) -> RSAPrivateKey:
    """The signing key, refused at start-up rather than at the first click when it is unusable."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ConfigError(f"{KEY_SETTING}: cannot read {path} ({e.strerror})") from None
    if stat.S_IMODE(mode) & 0o077:
        # Whoever reads it can sign consent links for any hostname in our name.
        raise ConfigError(f"{KEY_SETTING}: {path} is open to group or others "
                          f"(mode {stat.S_IMODE(mode):03o}); run chmod 600 {path}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"{KEY_SETTING}: cannot read {path} ({e.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ConfigError(f"{KEY_SETTING}: {path} is encrypted; store it without a passphrase") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"{KEY_SETTING}: {path} is not a PEM private key") from None
    if not isinstance(key, RSAPrivateKey):
        raise ConfigError(f"{KEY_SETTING}: {path} is not an RSA key (DNS hosts verify RS256 only)")
    if key.key_size < MIN_KEY_BITS:
        raise ConfigError(f"{KEY_SETTING}: {path} is a {key.key_size}-bit RSA key; "
                          f"use {MIN_KEY_BITS} bits or more")
    return key


def _q(text: str) -> str:
    # RFC 3986 unreserved characters only: nothing a verifier could decode differently.
    return quote(text, safe="")


def apply_url(*, url_sync_ux: str, provider_id: str, service_id: str, params: Mapping[str, str],
              key: RSAPrivateKey, key_label: str) -> str:
    """The synchronous apply URL, signed; ``key`` then ``sig`` last (some hosts require sig last).

    Empty values are left out (``host`` for the zone apex): hosts differ on what an empty one means.
    """
    reserved = [name for name in _RESERVED if name in params]
    if reserved:
        raise ValueError(f"{reserved[0]!r} is added by the signature, not a parameter")
    pairs = sorted((_q(name), _q(value)) for name, value in params.items() if value)
    query = "&".join(f"{name}={value}" for name, value in pairs)
    signature = key.sign(query.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    sig = base64.b64encode(signature).decode("ascii")
    path = f"/v2/domainTemplates/providers/{_q(provider_id)}/services/{_q(service_id)}/apply"
    base = url_sync_ux.rstrip("/") + path
    return f"{base}?{query}&key={_q(key_label)}&sig={_q(sig)}"


def public_key_der(key: RSAPublicKey) -> bytes:
    """DER SubjectPublicKeyInfo: what the records carry (called "x509" by the protocol)."""
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def public_key_records(key: RSAPublicKey) -> list[str]:
    """The TXT values to publish at ``<key_label>.<key_host>``, one record each, in ``p`` order."""
    data = base64.b64encode(public_key_der(key)).decode("ascii")
    records: list[str] = []
    while data:
        prefix = f"p={len(records) + 1},a={ALGORITHM},d="
        size = TXT_STRING_BYTES - len(prefix)
        records.append(prefix + data[:size])
        data = data[size:]
    return records


def published_public_key(values: Iterable[str]) -> bytes | None:
    """The DER public key rebuilt from the TXT values found at the key's name; None when unusable.

    Read as strictly as DNS hosts do, so a key that passes here also verifies there: every value
    must be a fragment, numbered 1..n once each, RS256 and x509 where stated.
    """
    fragments: dict[int, str] = {}
    for value in values:
        fields: dict[str, str] = {}
        for item in value.split(","):
            name, sep, content = item.partition("=")
            if not sep or name.strip() in fields:
                return None
            fields[name.strip()] = content.strip()
        if fields.get("a", ALGORITHM) != ALGORITHM or fields.get("t", "x509") != "x509":
            return None
        number, data = fields.get("p", ""), fields.get("d")
        if not (number.isascii() and number.isdigit()) or data is None or int(number) in fragments:
            return None
        fragments[int(number)] = data
    if not fragments or sorted(fragments) != list(range(1, len(fragments) + 1)):
        return None
    try:
        der = base64.b64decode("".join(fragments[n] for n in sorted(fragments)), validate=True)
        key = serialization.load_der_public_key(der)
    except (binascii.Error, ValueError, UnsupportedAlgorithm):
        return None
    if not isinstance(key, RSAPublicKey):
        return None
    return public_key_der(key)
