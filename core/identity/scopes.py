"""The spec's API-key scopes and human roles, in one table each."""

from __future__ import annotations

#: Scopes are exact grants (a write scope does not imply read); ``*`` covers every operation
#: an API key may reach, but never owner/admin management.
SCOPES = {
    "domains:read": "read and query domains, their DNS records, client records, session metadata",
    "domains:write": "create, update, delete domains and clients",
    "certificates:read": "read and query certificates; request bundle availability",
    "certificates:write": "request issuance; refresh provider certificate status",
    "*": "all API-key-accessible operations, including credential metadata reads",
}
ROLES = ("owner", "admin", "operator", "read_only")
#: Team, credential and webhook management.
MANAGERS = ("owner", "admin")
#: May change domains, clients and certificates.
WRITERS = ("owner", "admin", "operator")
#: May read domain, client and certificate records.
READERS = ROLES
