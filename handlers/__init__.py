"""HTTP edge: parse, authenticate, authorize, call one core function, render. The JSON API is in
``api/``, the portal's pages in ``portal/``; beside them, what both share (``base``: the handlers'
base classes; ``log``, ``limits``, ``static``), the operational endpoints (``health``, ``metrics``),
the TLS terminator's endpoints (``tls_terminator``), and serving (``server``, ``listeners``)."""

from __future__ import annotations

from handlers import health, metrics
from handlers.api import (
    api_keys,
    auth,
    certificates,
    clients,
    domains,
    meta,
    site_scan,
    team,
    verification_links,
    webhooks,
    workspaces,
)
from handlers.base import ApiNotFoundHandler
from handlers.portal import account, keys, live, signin
from handlers.portal import base as portal
from handlers.portal import connect as portal_connect
from handlers.portal import domain as portal_domain
from handlers.portal import domains as portal_domains
from handlers.portal import team as portal_team
from handlers.portal import webhooks as portal_webhooks

# Tornado tries the routes in order and no two match the same path, so the busiest come first:
# a GET of a domain matched the 16th pattern it tried before.
routes = [
    *domains.routes,
    *certificates.routes,
    *meta.routes,
    *metrics.routes,
    *health.routes,
    *auth.routes,
    *api_keys.routes,
    *clients.routes,
    *team.routes,
    *workspaces.routes,
    *webhooks.routes,
    *verification_links.routes,
    *site_scan.routes,
    *signin.routes,
    *account.routes,
    *portal.routes,
    *portal_domains.routes,
    *live.routes,
    *keys.routes,
    *portal_domain.routes,
    *portal_connect.routes,
    *portal_team.routes,
    *portal_webhooks.routes,
    # Last: unknown /v1/ paths get the JSON 404 envelope; other paths an HTML page.
    (r"/v1/.*", ApiNotFoundHandler),
]
