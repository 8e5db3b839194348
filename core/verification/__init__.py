"""Proving control of a hostname and explaining why it is not proven yet: verify-delegation and
recheck (``checks``; a verified domain's ownership read again, ``ownership``), shareable
verification links for a DNS administrator (``links``), and the diagnosis (``diagnosis``, with its
questions answered in ``record_findings`` and ``provider_findings``).

May import: core.identity, core.webhooks, core.certificates, core.edge, core.domains,
core.outbound, core.dns, the base modules of core/ and store/.
"""
