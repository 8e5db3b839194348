"""The access log: one scrubbed line per request.

Only the path is logged, never the query string, headers or body, so bearer tokens, codes and
secrets cannot leak into logs; verification-link tokens, which travel in paths (the public API and
the public page), are replaced before the path is written.
"""

from __future__ import annotations

import logging
import re

from tornado.escape import url_unescape
from tornado.web import RequestHandler

from core import logs

access_log = logging.getLogger("access")
_LINK_TOKEN = re.compile(r"vl_[A-Za-z0-9_-]+")
_GROUP = re.compile(r"\([^)]*\)")
#: Methods metrics name; Tornado accepts any token, and each new label would be a new series.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Health checks that pass write no line (handlers/health.py).
_PROBES = frozenset({"/healthz", "/readyz"})


def shown_path(path: str) -> str:
    """A request path fit for any log: decoded first (``%76l_`` is ``vl_``), tokens replaced."""
    if "%" not in path and "vl_" not in path:
        return path  # nothing to decode or hide: most requests
    return _LINK_TOKEN.sub("vl_<redacted>", url_unescape(path, plus=False))


def route_label(pattern: str) -> str:
    """A route as metrics name it: ``/v1/domains/([^/]+)`` becomes ``/v1/domains/:param``."""
    return _GROUP.sub(":param", pattern).removesuffix("$")


def log_request(handler: RequestHandler) -> None:
    status = handler.get_status()
    request = handler.request
    seconds = request.request_time()
    settings = handler.application.settings
    metrics = settings.get("metrics")
    if metrics is not None:
        route = settings.get("route_labels", {}).get(type(handler), "unmatched")
        method = request.method if request.method in _METHODS else "OTHER"
        metrics.requests.count(route, method, status, seconds)  # count_request's own, one call fewer
    if status < 400 and request.path in _PROBES:
        return  # a balancer's health check, every few seconds: counted, not logged
    if status < 400:
        level = logging.INFO
    elif status < 500:
        level = logging.WARNING
    else:
        level = logging.ERROR
    principal = getattr(handler, "principal", None)
    who = principal.label if principal is not None else "-"
    ip = getattr(handler, "client_ip", request.remote_ip)
    path = shown_path(request.path)
    direct = logs.direct_handler(access_log, level)
    if direct is not None:  # the same line, without a LogRecord: see direct_handler
        direct.write_direct(level, "access", f"{status} {request.method} {path} ({who}@{ip}) {1000.0 * seconds:.1f}ms")
        return
    access_log.log(
        level,
        "%d %s %s (%s@%s) %.1fms",  # the request id and workspace follow, as on every line of the request
        status,
        request.method,
        path,
        who,
        ip,
        1000.0 * seconds,
    )
