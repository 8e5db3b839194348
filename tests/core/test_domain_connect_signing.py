"""core.domain_connect.signing and .template: apply URLs a DNS host can verify, the key records, the template.

Signatures are checked here the way a DNS host checks them: on the query string as received,
minus ``sig`` and ``key``, with nothing decoded, re-encoded or re-ordered before verifying.
"""

from __future__ import annotations

import base64
import random
from urllib.parse import parse_qsl, unquote_plus, urlsplit

import attrs
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from core.config import ConfigError, DomainConnectConfig
from core.domain_connect.signing import apply_url, load_private_key, public_key_records, published_public_key
from core.domain_connect.template import (
    DELEGATION_VARIABLE,
    OWNERSHIP_VARIABLE,
    TEMPLATE_VERSION,
    split,
    template,
    variables,
)

SETTING = "domain_connect.private_key_file"
PARAMS = {"domain": "customer-test.com", "host": "shop",
          "dcvtarget": "shop.customer-test.com.5e0c.dcv.example", "verifytoken": "abc123",
          "redirect_uri": "https://portal.operator-test.com/dc/done", "state": "Q3x"}


@pytest.fixture(scope="session")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def sign(key, params, **overrides):
    arguments = {"url_sync_ux": "https://connect.dnshost-test.com", "provider_id": "operator-test.com",
                 "service_id": "tls-hostname", "params": params, "key": key, "key_label": "_dck1"}
    return apply_url(**(arguments | overrides))


def query_parts(url):
    return urlsplit(url).query.split("&")


def verifies(url, public_key):
    """What a strict DNS host does with the URL it receives."""
    parts = query_parts(url)
    signed = "&".join(p for p in parts if p.partition("=")[0] not in ("sig", "key")).encode()
    sig = base64.b64decode(unquote_plus(dict(p.partition("=")[::2] for p in parts)["sig"]), validate=True)
    try:
        public_key.verify(sig, signed, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def der(public_key):
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


class TestApplyUrl:
    def test_the_signed_url_verifies_with_the_public_key(self, key):
        assert verifies(sign(key, PARAMS), key.public_key())

    def test_the_url_is_the_apply_path_of_our_template_under_url_sync_ux(self, key):
        url = sign(key, PARAMS, url_sync_ux="https://connect.dnshost-test.com/dc/")
        assert url.startswith("https://connect.dnshost-test.com/dc/v2/domainTemplates"
                              "/providers/operator-test.com/services/tls-hostname/apply?")

    def test_sig_is_the_last_parameter_and_key_comes_just_before_it(self, key):
        parts = query_parts(sign(key, PARAMS))
        assert parts[-2] == "key=_dck1"
        assert parts[-1].startswith("sig=")

    def test_the_signed_parameters_are_sorted_by_name(self, key):
        names = [p.partition("=")[0] for p in query_parts(sign(key, PARAMS))[:-2]]
        assert names == sorted(PARAMS)

    def test_the_sig_is_percent_encoded_standard_base64(self, key):
        sig = query_parts(sign(key, PARAMS))[-1].removeprefix("sig=")
        assert not set(sig) & set("+/=")
        assert len(base64.b64decode(unquote_plus(sig), validate=True)) == 256

    @pytest.mark.parametrize("value", ["two words", "a+b", "a/b", "a=b&c=d", "100%", "ünïcödé", "~-._"])
    def test_awkward_values_are_percent_encoded_and_the_signature_still_holds(self, key, value):
        url = sign(key, PARAMS | {"verifytoken": value})
        assert dict(parse_qsl(urlsplit(url).query))["verifytoken"] == value
        assert verifies(url, key.public_key())

    def test_only_unreserved_characters_stay_unencoded(self, key):
        query = urlsplit(sign(key, PARAMS | {"verifytoken": "a b+c/d"})).query
        assert "verifytoken=a%20b%2Bc%2Fd&" in query

    def test_an_empty_host_is_left_out_for_the_zone_apex(self, key):
        url = sign(key, PARAMS | {"host": ""})
        assert "host" not in [p.partition("=")[0] for p in query_parts(url)]
        assert verifies(url, key.public_key())

    def test_a_tampered_value_fails_verification(self, key):
        url = sign(key, PARAMS)
        assert not verifies(url.replace("verifytoken=abc123", "verifytoken=abc124"), key.public_key())

    def test_another_key_does_not_verify_it(self, key):
        other = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # size does not matter here
        assert not verifies(sign(key, PARAMS), other.public_key())

    @pytest.mark.parametrize("name", ["sig", "key"])
    def test_sig_and_key_cannot_be_passed_as_parameters(self, key, name):
        with pytest.raises(ValueError, match=name):
            sign(key, PARAMS | {name: "x"})


class TestPublicKeyRecords:
    @pytest.fixture(scope="class", params=[2048, 3072, 4096])
    def sized_key(self, request, key):
        if request.param == 2048:
            return key
        return rsa.generate_private_key(public_exponent=65537, key_size=request.param)

    def test_each_record_fits_one_txt_string(self, sized_key):
        assert all(len(r.encode()) <= 255 for r in public_key_records(sized_key.public_key()))

    def test_records_are_numbered_fragments_of_rs256(self, sized_key):
        records = public_key_records(sized_key.public_key())
        numbered = [[f"p={n}", "a=RS256"] for n in range(1, len(records) + 1)]
        assert [r.split(",")[:2] for r in records] == numbered

    def test_records_give_back_the_key(self, sized_key):
        records = public_key_records(sized_key.public_key())
        assert published_public_key(records) == der(sized_key.public_key())

    def test_records_in_any_order_give_back_the_key(self, sized_key):
        records = public_key_records(sized_key.public_key())
        random.Random(3).shuffle(records)
        assert published_public_key(reversed(records)) == der(sized_key.public_key())

    def test_a_2048_bit_key_takes_two_records(self, key):
        assert len(public_key_records(key.public_key())) == 2


class TestPublishedPublicKey:
    @pytest.fixture
    def records(self, key):
        return public_key_records(key.public_key())

    def test_an_explicit_x509_format_is_accepted(self, key, records):
        records = [r.replace(",a=RS256,", ",a=RS256,t=x509,") for r in records]
        assert published_public_key(records) == der(key.public_key())

    def test_a_missing_fragment_gives_none(self, records):
        assert published_public_key(records[1:]) is None

    def test_a_duplicated_fragment_gives_none(self, records):
        assert published_public_key([*records, records[0]]) is None

    def test_another_algorithm_gives_none(self, records):
        assert published_public_key([r.replace("a=RS256", "a=RS512") for r in records]) is None

    def test_another_format_gives_none(self, records):
        assert published_public_key([r.replace(",d=", ",t=pem,d=") for r in records]) is None

    def test_a_value_that_is_not_a_fragment_gives_none(self, records):
        assert published_public_key([*records, "v=spf1 -all"]) is None

    def test_damaged_data_gives_none(self, records):
        assert published_public_key([records[0][:-4] + "!!!!", records[1]]) is None

    def test_no_records_give_none(self):
        assert published_public_key([]) is None


class TestLoadPrivateKey:
    def write(self, tmp_path, private_key, *, mode=0o600):
        path = tmp_path / "dc.pem"
        path.write_bytes(private_key.private_bytes(serialization.Encoding.PEM,
                                                   serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
        path.chmod(mode)
        return str(path)

    def refusal(self, path):
        with pytest.raises(ConfigError) as refused:
            load_private_key(path)
        message = str(refused.value)
        assert message.startswith(SETTING + ": ")
        assert "\n" not in message
        return message

    def test_an_owner_only_rsa_2048_key_is_loaded(self, tmp_path, key):
        loaded = load_private_key(self.write(tmp_path, key))
        assert loaded.private_numbers() == key.private_numbers()

    def test_a_missing_file_is_refused(self, tmp_path):
        assert "cannot read" in self.refusal(str(tmp_path / "absent.pem"))

    def test_a_file_readable_by_others_is_refused(self, tmp_path, key):
        assert "chmod 600" in self.refusal(self.write(tmp_path, key, mode=0o644))

    def test_a_file_writable_by_the_group_is_refused(self, tmp_path, key):
        assert "chmod 600" in self.refusal(self.write(tmp_path, key, mode=0o620))

    def test_a_folder_is_refused(self, tmp_path):
        folder = tmp_path / "keys"
        folder.mkdir(mode=0o700)
        assert "cannot read" in self.refusal(str(folder))

    def test_a_file_that_is_not_pem_is_refused(self, tmp_path):
        path = tmp_path / "dc.pem"
        path.write_text("not a key\n")
        path.chmod(0o600)
        assert "not a PEM private key" in self.refusal(str(path))

    def test_a_public_key_is_refused(self, tmp_path, key):
        path = tmp_path / "dc.pem"
        path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo))
        path.chmod(0o600)
        assert "not a PEM private key" in self.refusal(str(path))

    def test_an_encrypted_key_is_refused(self, tmp_path, key):
        path = tmp_path / "dc.pem"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(b"secret")))
        path.chmod(0o600)
        assert "passphrase" in self.refusal(str(path))

    def test_a_key_that_is_not_rsa_is_refused(self, tmp_path):
        assert "not an RSA key" in self.refusal(self.write(tmp_path, ec.generate_private_key(ec.SECP256R1())))

    def test_a_key_under_2048_bits_is_refused(self, tmp_path):
        small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        assert "1024-bit" in self.refusal(self.write(tmp_path, small))


class TestTemplate:
    @pytest.fixture
    def config(self):
        return DomainConnectConfig(provider_id="operator-test.com", service_id="tls-hostname",
                                   private_key_file="/keys/dc.pem", key_host="keys.operator-test.com")

    def test_it_names_our_service_and_requires_signatures_from_the_key_host(self, config):
        doc = template(config, redirect_domain="portal.operator-test.com")
        assert doc["providerId"] == "operator-test.com"
        assert doc["serviceId"] == "tls-hostname"
        assert doc["version"] == TEMPLATE_VERSION
        assert doc["syncPubKeyDomain"] == "keys.operator-test.com"
        assert doc["syncRedirectDomain"] == "portal.operator-test.com"

    def test_it_neither_warns_of_phishing_nor_blocks_the_synchronous_flow(self, config):
        doc = template(config, redirect_domain="portal.operator-test.com")
        assert "warnPhishing" not in doc
        assert "syncBlock" not in doc

    def test_the_provider_name_defaults_to_the_provider_id(self, config):
        assert template(config, redirect_domain="p.test")["providerName"] == "operator-test.com"

    def test_the_provider_name_and_logo_are_shown_when_set(self, config):
        config = attrs.evolve(config, provider_name="Operator", logo_url="https://operator-test.com/logo.svg")
        doc = template(config, redirect_domain="p.test")
        assert (doc["providerName"], doc["logoUrl"]) == ("Operator", "https://operator-test.com/logo.svg")

    def test_there_is_no_logo_unless_configured(self, config):
        assert "logoUrl" not in template(config, redirect_domain="p.test")

    def test_it_has_the_delegation_cname_and_the_ownership_txt(self, config):
        assert template(config, redirect_domain="p.test")["records"] == [
            {"groupId": "delegation", "type": "CNAME", "host": "_acme-challenge", "pointsTo": "%dcvtarget%",
             "ttl": 300},
            {"groupId": "ownership", "type": "TXT", "host": "_service-verify",
             "data": "service-domain-verification=%verifytoken%", "txtConflictMatchingMode": "Prefix",
             "txtConflictMatchingPrefix": "service-domain-verification=", "ttl": 300},
        ]

    def test_variables_fill_the_two_placeholders(self):
        assert variables("shop.customer-test.com.5e0c.dcv.example", "abc123") == {
            DELEGATION_VARIABLE: "shop.customer-test.com.5e0c.dcv.example", OWNERSHIP_VARIABLE: "abc123"}


class TestSplit:
    @pytest.mark.parametrize(
        ("apex", "zone", "parts"),
        [
            ("customer-test.com", "customer-test.com", ("customer-test.com", "")),
            ("shop.customer-test.com", "customer-test.com", ("customer-test.com", "shop")),
            ("eu.shop.customer-test.com", "customer-test.com", ("customer-test.com", "eu.shop")),
            ("shop.sub.customer-test.com", "sub.customer-test.com", ("sub.customer-test.com", "shop")),
        ],
    )
    def test_domain_is_the_zone_and_host_the_labels_below_it(self, apex, zone, parts):
        assert split(apex, zone) == parts

    @pytest.mark.parametrize(("apex", "zone"), [
        ("customer-test.com", "shop.customer-test.com"),
        ("shop.other-test.com", "customer-test.com"),
        ("shopcustomer-test.com", "customer-test.com"),
    ])
    def test_a_name_not_at_or_below_the_zone_is_refused(self, apex, zone):
        with pytest.raises(ValueError, match="not at or below"):
            split(apex, zone)
