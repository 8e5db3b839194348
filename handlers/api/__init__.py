"""The JSON API under ``/v1/``: one module per resource, each ending in its ``routes``; every
handler an ``ApiHandler`` (handlers/base.py: authentication, scopes and roles, rate limits, the
error envelope)."""
