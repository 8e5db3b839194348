"""Issue 48, item 3: who issues and who serves, named for the configured provider (core/edge/words.py):
the CA and the service's own TLS terminator with ACME, the edge provider with Cloudflare, and the
providers' states in people's words wherever a sentence carries them."""

from __future__ import annotations

import datetime as dt

from core.acme import reported
from core.certificates.states import classify, describe
from core.config import AcmeConfig, ProviderConfig
from core.edge import ProviderState
from core.edge.words import EDGE, ca_name, provider_words
from core.verification.provider_findings import ProviderView
from store.acme import AcmeCertificate

LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory"
ACME = provider_words(ProviderConfig(kind="acme", acme=AcmeConfig(directory_url=LETS_ENCRYPT)))
PENDING = ProviderState(hostname_id="h", hostname_status="pending", ssl_status="pending_validation")


def test_lets_encrypt_is_named_from_its_directory():
    assert ca_name(LETS_ENCRYPT) == "Let's Encrypt"


def test_lets_encrypts_staging_is_named_as_staging():
    assert ca_name("https://acme-staging-v02.api.letsencrypt.org/directory") == "Let's Encrypt (staging)"


def test_pebble_is_named_by_its_directory_path():
    assert ca_name("https://127.0.0.1:14000/dir") == "Pebble"


def test_another_ca_is_named_by_its_host():
    assert ca_name("https://acme.example.net:8443/acme/directory") == "acme.example.net"


def test_with_fallback_cas_the_words_name_the_certificate_authority():
    words = provider_words(ProviderConfig(kind="acme", acme=AcmeConfig(
        directory_url=LETS_ENCRYPT, fallback_directory_urls=["https://acme.zerossl.com/v2/DV90"])))
    assert words.issuer == "the certificate authority"


def test_an_acme_message_names_the_ca_and_says_the_state_in_words():
    message = describe(PENDING, classify(PENDING, was_active=False), ACME)
    assert message.startswith("Let's Encrypt is issuing the certificate (certificate waiting for validation);")
    assert "pending_validation" not in message and "edge provider" not in message


def test_an_edge_providers_message_keeps_its_words_with_its_states_in_words():
    message = describe(PENDING, classify(PENDING, was_active=False), EDGE)
    assert message.startswith("The edge provider is issuing the certificate (hostname not yet confirmed, "
                              "certificate waiting for validation);")


def test_an_active_acme_certificate_is_said_to_be_served_by_the_services_terminator():
    active = ProviderState(hostname_id="h", hostname_status="active", ssl_status="active")
    assert describe(active, classify(active, was_active=False), ACME) == (
        "The certificate is active: issued by Let's Encrypt, served by this service's TLS terminator.")


def test_the_acme_view_in_the_diagnosis_names_the_ca_without_cloudflares_fields():
    view = ProviderView(certificate_status="pending", hostname_status="pending", ssl_status="pending_validation",
                        last_error=None, checked_at=None, not_after=None, words=ACME)
    assert view.in_words() == ["Let's Encrypt is still working on the certificate.",
                               "Its order is waiting for validation."]


def test_a_failed_orders_certificate_names_the_ca_it_was_ordered_from():
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    failed = AcmeCertificate(handle="h", apex="shop.example.com", directory_url=LETS_ENCRYPT, status="invalid",
                             created_at=now, updated_at=now, error="The CA found no TXT record.")
    assert reported.state(failed, None).issuer == "Let's Encrypt"


def test_deleting_with_cloudflare_keeps_the_hostname_at_the_edge_provider():
    """A deletion calls no edge provider (the spec): its words say so, as the page did before."""
    assert EDGE.deletion().startswith("nothing changes at the edge provider: the certificate is not revoked")
