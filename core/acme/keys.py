"""Keys, certificate requests and certificates, as the ACME client needs them (``cryptography``).

Every key is ECDSA P-256: small, fast to make, accepted by every public CA and TLS terminator.
A certificate's key is made for its order and kept with it (encrypted, store/acme.py), so an order
finished by a refresh after a restart finalizes with the same key.
"""

from __future__ import annotations

import base64
import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from josepy.jwk import JWK, JWKEC


def new_key_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def account_key(pem: str) -> JWK:
    """The ACME account key (ES256) from its PEM."""
    return JWKEC(key=serialization.load_pem_private_key(pem.encode(), password=None))


def csr_pem(hostname: str, key_pem: str) -> bytes:
    """A certificate request for ``hostname`` alone (no wildcard), signed with its key."""
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([]))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
               .sign(key, hashes.SHA256()))
    return request.public_bytes(serialization.Encoding.PEM)


def leaf(chain_pem: str) -> x509.Certificate:
    """The first certificate of a chain: the one issued for the hostname."""
    return x509.load_pem_x509_certificate(chain_pem.encode())


def validity(chain_pem: str) -> tuple[dt.datetime, dt.datetime]:
    cert = leaf(chain_pem)
    return cert.not_valid_before_utc, cert.not_valid_after_utc


def issuer_name(chain_pem: str) -> str:
    """The issuing CA's common name (``R11``, ``Pebble Intermediate CA``), or its whole name."""
    name = leaf(chain_pem).issuer
    common = name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(common[0].value) if common else name.rfc4514_string()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def ari_id(chain_pem: str) -> str:
    """The certificate's ARI identifier (RFC 9773 section 4.1): its issuer's key identifier and its
    serial number, each base64url; also what an order's ``replaces`` names."""
    cert = leaf(chain_pem)
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier or b""
    serial = cert.serial_number
    serial_der = serial.to_bytes((serial.bit_length() + 8) // 8, "big")  # a DER INTEGER's bytes, sign bit clear
    return f"{_b64url(aki)}.{_b64url(serial_der)}"
