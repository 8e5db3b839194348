"""HTTP edge: parse, authenticate, authorize, call one core function, render."""

from __future__ import annotations

from handlers import (
    account,
    api_keys,
    auth,
    certificates,
    clients,
    domains,
    health,
    meta,
    metrics,
    pages,
    portal,
    portal_connect,
    portal_domain,
    portal_team,
    portal_webhooks,
    site_scan,
    team,
    verification_links,
    webhooks,
    workspaces,
)
from handlers.base import ApiNotFoundHandler

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
    *pages.routes,
    *account.routes,
    *portal.routes,
    *portal_domain.routes,
    *portal_connect.routes,
    *portal_team.routes,
    *portal_webhooks.routes,
    # Last: unknown /v1/ paths get the JSON 404 envelope; other paths an HTML page.
    (r"/v1/.*", ApiNotFoundHandler),
]
