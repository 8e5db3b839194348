"""Which of the chains a CA offers for a certificate is served (RFC 8555 section 7.4.2).

A CA answers the certificate's download with its default chain and may offer others (``Link:
rel="alternate"``): the same certificate, chaining to another root (Let's Encrypt's ISRG Root X1
or its cross-sign, Pebble's alternate roots). ``[provider.acme] preferred_chain`` names the issuer
of the chain's top certificate, as certbot's ``--preferred-chain`` does; the chain picked is then
stored as it came and served as stored (core/tls_terminator/), never rebuilt from a cache: the
intermediate may differ from one issuance to the next.
"""

from __future__ import annotations

from cryptography import x509


def certificates(chain_pem: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(chain_pem.encode())


def _common_name(name: x509.Name) -> str:
    common = name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(common[0].value) if common else name.rfc4514_string()


def top_issuer(chain_pem: str) -> str:
    """The common name of the issuer of the chain's last certificate: the root it chains to."""
    return _common_name(certificates(chain_pem)[-1].issuer)


def same_leaf(chain_pem: str, other_pem: str) -> bool:
    """Whether both chains start with the same certificate: an alternate chain is only another path
    for the certificate issued, never another certificate."""
    return certificates(chain_pem)[0] == certificates(other_pem)[0]


def wanted(chain_pem: str, preferred: str) -> bool:
    """Whether the chain is the one ``preferred`` names (its top certificate's issuer)."""
    return top_issuer(chain_pem) == preferred.strip()
