"""Webhooks: endpoints and their encrypted secrets, the signature, the fan-out of outbox events
into deliveries, the worker that sends and retries them, and the delivery log.

Every request to a receiver goes through the outbound guard of ``core/outbound/guard.py``.

May import: core.certificates, core.edge, core.domains, core.outbound, core.dns, the base modules
of core/ and store/.
"""
