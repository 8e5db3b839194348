"""The business rules and the adapters to the outside world; no HTTP and no SQL here.

A package per capability, each named for what a person looks for, over a small base:

- the base (the modules directly in ``core/``): configuration, the clock, crypto and keys, ids,
  errors, the wire format, user text, cursors, e-mail addresses and hostnames, logs, metrics, rate
  limits and the ``Services`` container. It imports no package of ``core/``.
- ``dns/``: lookups, and the zone's own nameservers for the diagnosis.
- ``delegation_dns/``: the delegation zone's DNS-01 challenge records: the built-in authoritative
  server that answers them, or RFC 2136 updates to the operator's nameserver (beside ``dns/``,
  neither importing the other).
- ``domains/``: the records a domain publishes, its API shape, creating and changing domains, the
  query, clients, the portal's DNS instructions.
- ``outbound/``: every request to a destination a user names (the guard and its policy), the HTTP
  client pools, the HTTPS scan, e-mail.
- ``edge/``: the edge provider's adapters (Cloudflare, sandbox) and the development DNS simulation.
- ``certificates/``: issuance and refresh, states, CAA, Idempotency-Key records, events.
- ``identity/``: accounts, workspaces, team, sign-up, sign-in, OIDC, the development identity
  provider, API keys, scopes.
- ``webhooks/``: endpoints, signing, deliveries and the worker.
- ``verification/``: verify-delegation and recheck, verification links, the diagnosis.
- ``runtime/``: building the services, the periodic jobs and the operator's commands.

Each package imports only those listed before it (and the base and ``store/``); ``handlers/``
sits on top. The ``[tool.importlinter]`` contracts in pyproject.toml hold that order in CI.
"""
