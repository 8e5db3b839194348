"""core/acme/keys.py and the order message of core/acme/client.py: what the ``acme`` package lacks."""

from __future__ import annotations

import datetime as dt

import trustme
from acme import client as acme_client
from acme import messages
from cryptography import x509

from core.acme import keys
from core.acme.client import NewOrder


def _chain() -> str:
    return trustme.CA().issue_cert("shop.customer.test").cert_chain_pems[0].bytes().decode()


def test_the_ari_id_is_the_issuers_key_identifier_and_the_serial():
    """RFC 9773 section 4.1, checked against the ``acme`` package's own path (it uses it for ARI only)."""
    chain = _chain()
    expected = acme_client._renewal_info_path_component(x509.load_pem_x509_certificate(chain.encode()))
    assert keys.ari_id(chain) == expected


def test_a_renewal_order_names_the_certificate_it_replaces():
    identifiers = [messages.Identifier(typ=messages.IDENTIFIER_FQDN, value="shop.customer.test")]
    assert NewOrder(identifiers=identifiers, replaces="aaa.bbb").to_partial_json()["replaces"] == "aaa.bbb"


def test_a_first_order_names_nothing():
    identifiers = [messages.Identifier(typ=messages.IDENTIFIER_FQDN, value="shop.customer.test")]
    assert "replaces" not in NewOrder(identifiers=identifiers).to_partial_json()


def test_a_request_names_the_hostname_alone():
    request = x509.load_pem_x509_csr(keys.csr_pem("shop.customer.test", keys.new_key_pem()))
    names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == ["shop.customer.test"]


def test_a_certificates_validity_is_read_from_its_leaf():
    not_before, not_after = keys.validity(_chain())
    assert not_before < dt.datetime.now(dt.UTC) < not_after
