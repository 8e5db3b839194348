"""Certificates: issuance and refresh through the edge provider, the mapping of the provider's
states to ours, the CAA pre-flight, Idempotency-Key records and the events written to the outbox.

The adapters to the providers themselves live in ``core/edge/``.

May import: core.edge, core.domains, core.outbound, core.dns, the base modules of core/ and store/.
"""
