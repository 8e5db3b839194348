"""core.domains.dns_hosts: the zone's NS records name its DNS host, and each host's panel gets our records'
names and CNAME target in the form it expects."""

from __future__ import annotations

import re

import pytest

from core.domains.dns_hosts import HOSTS, by_key, cname_target, identify, record_name

#: Name-server sets as DNS hosts hand them out, one per host (two where a host has two families).
SAMPLES = [
    (("kim.ns.cloudflare.com", "lars.ns.cloudflare.com"), "cloudflare"),
    (("ns-1536.awsdns-00.co.uk", "ns-0.awsdns-00.com", "ns-1024.awsdns-00.org", "ns-512.awsdns-00.net"),
     "route53"),
    (("ns45.domaincontrol.com", "ns46.domaincontrol.com"), "godaddy"),
    (("ns-cloud-e1.googledomains.com", "ns-cloud-e2.googledomains.com", "ns-cloud-e3.googledomains.com",
      "ns-cloud-e4.googledomains.com"), "google_or_squarespace"),
    (("ns1-01.azure-dns.com", "ns2-01.azure-dns.net", "ns3-01.azure-dns.org", "ns4-01.azure-dns.info"),
     "azure"),
    (("dns1.registrar-servers.com", "dns2.registrar-servers.com"), "namecheap"),
    (("pdns1.registrar-servers.com", "pdns2.registrar-servers.com"), "namecheap"),
    (("freedns1.registrar-servers.com", "freedns2.registrar-servers.com", "freedns3.registrar-servers.com"),
     "namecheap"),
    (("ns1.digitalocean.com", "ns2.digitalocean.com", "ns3.digitalocean.com"), "digitalocean"),
    (("hydrogen.ns.hetzner.com", "oxygen.ns.hetzner.com", "helium.ns.hetzner.de"), "hetzner"),
    (("ns1.first-ns.de", "robotns2.second-ns.de", "robotns3.second-ns.com"), "hetzner"),
    (("dns10.ovh.net", "ns10.ovh.net"), "ovhcloud"),
    (("ns1045.ui-dns.com", "ns1107.ui-dns.biz", "ns1047.ui-dns.org", "ns1101.ui-dns.de"), "ionos"),
    (("ns-135-a.gandi.net", "ns-27-b.gandi.net", "ns-115-c.gandi.net"), "gandi"),
    (("curitiba.ns.porkbun.com", "fortaleza.ns.porkbun.com", "maceio.ns.porkbun.com",
      "salvador.ns.porkbun.com"), "porkbun"),
    (("ns1.vercel-dns.com", "ns2.vercel-dns.com"), "vercel"),
    (("dns1.p03.nsone.net", "dns2.p03.nsone.net", "dns3.p03.nsone.net", "dns4.p03.nsone.net"),
     "netlify_or_ns1"),
    (("ns1.dnsimple.com", "ns2.dnsimple-edge.net", "ns3.dnsimple.com", "ns4.dnsimple-edge.org"), "dnsimple"),
    (("ns1.dnsimple.com", "ns2.dnsimple.com", "ns3.dnsimple.com", "ns4.dnsimple.com"), "dnsimple"),
]
ZONE = "example.com"
BELOW = "_acme-challenge.shop.example.com"


def host(key: str):
    found = by_key(key)
    assert found is not None
    return found


class TestIdentify:
    @pytest.mark.parametrize(("nameservers", "key"), SAMPLES, ids=[f"{key}-{ns[0]}" for ns, key in SAMPLES])
    def test_a_hosts_name_servers_name_that_host(self, nameservers, key):
        found = identify(nameservers)
        assert found is not None and found.key == key

    def test_every_host_has_a_sample(self):
        assert {key for _, key in SAMPLES} == {h.key for h in HOSTS}

    @pytest.mark.parametrize("nameserver", sorted({ns for names, _ in SAMPLES for ns in names}))
    def test_a_sample_name_server_matches_one_host_only(self, nameserver):
        matching = [h.key for h in HOSTS if any(re.fullmatch(p, nameserver) for p in h.ns_patterns)]
        assert len(matching) == 1

    def test_case_and_trailing_dots_do_not_matter(self):
        found = identify(["KIM.NS.Cloudflare.COM.", " lars.ns.cloudflare.com. "])
        assert found is not None and found.key == "cloudflare"

    def test_a_mixed_set_names_the_host_most_of_its_names_belong_to(self):
        found = identify(["kim.ns.cloudflare.com", "ns-0.awsdns-00.com", "ns-512.awsdns-00.net",
                          "ns-1024.awsdns-00.org"])
        assert found is not None and found.key == "route53"

    def test_an_even_split_between_two_hosts_names_none(self):
        assert identify(["kim.ns.cloudflare.com", "lars.ns.cloudflare.com", "ns-0.awsdns-00.com",
                         "ns-512.awsdns-00.net"]) is None

    def test_a_host_matching_only_half_the_names_is_not_named(self):
        assert identify(["kim.ns.cloudflare.com", "lars.ns.cloudflare.com", "ns1.example.net",
                         "ns2.example.net"]) is None

    def test_name_servers_of_no_known_host_name_none(self):
        assert identify(["ns1.example.net", "ns2.example.net"]) is None

    def test_no_name_servers_name_none(self):
        assert identify([]) is None

    def test_a_name_server_listed_twice_counts_once(self):
        assert identify(["kim.ns.cloudflare.com", "kim.ns.cloudflare.com.", "ns1.example.net"]) is None

    def test_a_lookalike_under_another_domain_is_not_matched(self):
        assert identify(["kim.ns.cloudflare.com.evil.example", "lars.ns.cloudflare.com.evil.example"]) is None


class TestRecordName:
    def test_an_unknown_host_gets_the_name_relative_to_the_zone(self):
        assert record_name(None, BELOW, ZONE) == "_acme-challenge.shop"

    def test_an_unknown_host_gets_at_for_the_zone_itself(self):
        assert record_name(None, ZONE, ZONE) == "@"

    def test_a_relative_panel_gets_the_name_without_the_zone(self):
        assert record_name(host("cloudflare"), BELOW, ZONE) == "_acme-challenge.shop"

    def test_a_relative_panel_gets_at_for_the_zone_itself(self):
        assert record_name(host("cloudflare"), ZONE, ZONE) == "@"

    def test_a_blank_apex_panel_gets_the_name_without_the_zone(self):
        assert record_name(host("route53"), BELOW, ZONE) == "_acme-challenge.shop"

    def test_a_blank_apex_panel_gets_nothing_for_the_zone_itself(self):
        assert record_name(host("route53"), ZONE, ZONE) == ""

    def test_a_record_for_the_zones_own_hostname_is_one_label(self):
        assert record_name(host("godaddy"), "_acme-challenge.example.com", ZONE) == "_acme-challenge"

    def test_case_and_trailing_dots_do_not_matter(self):
        name = record_name(host("godaddy"), "_ACME-challenge.Shop.Example.com.", "Example.COM.")
        assert name == "_acme-challenge.shop"

    def test_a_name_outside_the_zone_comes_back_whole(self):
        outside = "_acme-challenge.shop.myexample.com"
        assert record_name(host("godaddy"), outside, ZONE) == outside


class TestCnameTarget:
    TARGET = "shop-example-com.acme.service.example.net"

    @pytest.mark.parametrize("key", ["hetzner", "ovhcloud", "gandi"])
    def test_a_panel_that_reads_a_bare_target_as_relative_gets_a_trailing_dot(self, key):
        assert cname_target(host(key), self.TARGET) == self.TARGET + "."

    @pytest.mark.parametrize("key", ["cloudflare", "route53", "godaddy", "digitalocean"])
    def test_other_panels_get_the_target_without_a_dot(self, key):
        assert cname_target(host(key), self.TARGET + ".") == self.TARGET

    def test_an_unknown_host_gets_the_target_without_a_dot(self):
        assert cname_target(None, self.TARGET) == self.TARGET

    def test_a_target_already_ending_in_a_dot_gets_only_one(self):
        assert cname_target(host("hetzner"), self.TARGET + ".") == self.TARGET + "."


class TestTable:
    def test_every_key_is_unique(self):
        keys = [h.key for h in HOSTS]
        assert len(keys) == len(set(keys))

    def test_every_key_is_a_plain_lower_case_id(self):
        assert all(re.fullmatch(r"[a-z0-9_]+", h.key) for h in HOSTS)

    def test_every_help_url_is_https(self):
        assert all(h.help_url.startswith("https://") for h in HOSTS if h.help_url is not None)

    @pytest.mark.parametrize("entry", HOSTS, ids=[h.key for h in HOSTS])
    def test_by_key_gives_back_the_host(self, entry):
        assert by_key(entry.key) is entry

    def test_an_unknown_or_empty_key_gives_none(self):
        assert by_key("no-such-host") is None and by_key("") is None

    def test_only_hosts_listed_as_domain_connect_providers_claim_it(self):
        assert {h.key for h in HOSTS if h.domain_connect} == {"cloudflare", "godaddy", "ionos", "vercel"}

    def test_every_gotcha_is_a_sentence(self):
        assert all(g and g[0].isupper() and g.endswith(".") for h in HOSTS for g in h.gotchas)
