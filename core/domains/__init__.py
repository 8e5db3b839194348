"""Domains: the two records a customer publishes and the statuses a domain moves through
(``records``), the API's ``Domain`` (``shape``), creating, changing and deleting domains
(``operations``), ``POST /v1/domains/query`` (``query``), clients (``clients``) and the portal's
DNS instructions (``instructions``).

May import: the base modules of core/ and store/.
"""
