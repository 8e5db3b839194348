"""The portal's webhooks: the workspace's endpoints, adding one (its signing secret shown once),
one endpoint's page (edit, disable or enable, rotate the secret, delete after a confirmation) with
its delivery log, one delivery's attempts, and redelivery.

Each page calls the same core functions as ``/v1/webhooks`` and keeps its roles: every member sees
the list, as every session may list endpoints in the API; only owners and admins see an endpoint's
page and its delivery log (the API's log is theirs alone) and change anything. Every action counts
in the ``/v1/webhooks`` rate-limit bucket. Another workspace's endpoint or delivery is a 404 page.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tornado.web import HTTPError, authenticated

from core.certificates import events as certificate_events
from core.domains import drift
from core.errors import ApiError, NotFound, ValidationError
from core.identity.scopes import MANAGERS
from core.webhooks import deliveries, endpoints
from core.wire import parse_timestamp
from handlers.portal.base import PortalHandler, path_id
from handlers.portal.forms import Outcome
from handlers.portal.pages import refusal_text
from store.records import WebhookEndpoint

API_PATH = "/v1/webhooks"  # the rate-limit bucket every action here counts in
ALL_EVENTS = "*"
#: The events a form offers: "all" (also any the service emits later), then each one it emits.
EVENT_CHOICES: tuple[tuple[str, str], ...] = (
    (ALL_EVENTS, "All events, including any added later"),
    (certificate_events.ISSUED, "a certificate was issued"),
    (certificate_events.ISSUE_PENDING, "issuance was requested and awaits activation"),
    (certificate_events.ISSUE_FAILED, "issuance failed"),
)
#: Offered too where they are sent: only with ``[lifecycle] events = "transitions"``.
TRANSITION_CHOICES: tuple[tuple[str, str], ...] = (
    (drift.DETECTED, "a check found the DNS a renewal needs wrong (drift)"),
    (drift.CLEARED, "that drift is fixed"),
    (certificate_events.CHAIN_CHANGED, "a renewal came from another intermediate than the certificate it replaced"),
    (certificate_events.RENEWAL_OVERDUE, "a certificate passed two thirds of its life without a renewal"),
)


def when(value: dt.datetime | str | None) -> str:
    """A time as the pages show it; the delivery detail carries the API's timestamp strings."""
    if value is None:
        return "never"
    moment = parse_timestamp(value) if isinstance(value, str) else value
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def subscribed_to(events: list[str]) -> list[str]:
    """What an endpoint's ``events`` mean, as ticked boxes: empty subscribes to all (spec)."""
    return [ALL_EVENTS] if not events or ALL_EVENTS in events else list(events)


class WebhooksHandler(PortalHandler):
    def manager(self) -> uuid.UUID:
        """The workspace of an owner or admin (a 403 page for any other role)."""
        return self.member(MANAGERS).workspace_id

    @property
    def transitions(self) -> bool:
        """Whether events beyond the spec's are sent (docs/webhooks.md): the pages say which."""
        return self.services.config.lifecycle.events == "transitions"

    def event_choices(self) -> tuple[tuple[str, str], ...]:
        return (*EVENT_CHOICES, *TRANSITION_CHOICES) if self.transitions else EVENT_CHOICES

    async def endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        try:
            return await self.services.store.run(endpoints.load, self.services, self.manager(), path_id(endpoint_id))
        except NotFound:
            raise HTTPError(404) from None

    def chosen_events(self) -> list[str]:
        """The ticked events. None ticked is refused rather than read as "all" as the API reads
        it: an empty box list looks like "nothing" to a person. Raised inside an action, the
        refusal releases the form, so the corrected form can be sent again."""
        chosen = self.typed_all("events")
        if not chosen:
            raise ValidationError.field("events", "Choose at least one event, or \u201cAll events\u201d.")
        return chosen

    async def act_or_404(self, action: Callable[[], Awaitable[Outcome]]) -> None:
        """Run the action; the endpoint or delivery gone meanwhile (deleted in another tab) is a 404."""
        try:
            await self.act(action)
        except NotFound:
            raise HTTPError(404) from None

    async def render_endpoint(self, endpoint: WebhookEndpoint, *, secret: str | None = None, error: str | None = None,
                              url: str | None = None, checked: list[str] | None = None) -> None:
        """The endpoint's page with a page of its delivery log, newest first."""
        log_error = None
        cursor = self.typed("cursor", query=True) or None
        try:
            log = await self.services.store.run(deliveries.list_deliveries, self.services,
                                                workspace_id=endpoint.workspace_id, endpoint_id=endpoint.id,
                                                limit=None, cursor=cursor)
        except ApiError as exc:  # a cursor edited by hand, or from another endpoint's log
            self.set_status(exc.status)
            log, log_error = deliveries.DeliveryPage(items=[], total=0), refusal_text(exc)
        choices = self.event_choices()
        own = [name for name in endpoint.events if name not in dict(choices)]
        self.render_page(
            "webhook.html", endpoint=endpoint, secret=secret, error=error, url=endpoint.url if url is None else url,
            choices=[*choices, *((name, "") for name in own)], transitions=self.transitions,
            checked=subscribed_to(endpoint.events) if checked is None else checked,
            log=log, log_error=log_error, cursor=cursor, when=when,
        )


class WebhookListPage(WebhooksHandler):
    """``/webhooks``: the endpoints, and the form that adds one."""

    @authenticated
    async def get(self) -> None:
        error, typed = self.refused()
        await self.render_list(error=error, url=typed.get("url", ""), checked=typed.get("events", [ALL_EVENTS]))

    @authenticated
    async def post(self) -> None:
        await self.hit_rate_limit(API_PATH)
        workspace_id = self.manager()
        url = self.typed("url")
        checked = self.typed_all("events")

        async def add() -> Outcome:
            request = endpoints.CreateWebhook(url=url, events=self.chosen_events())
            endpoint, secret = await endpoints.create(self.services, workspace_id=workspace_id, request=request)
            return Outcome(f"/webhooks/{endpoint.id}", "The endpoint was added.", secret=secret)

        try:
            await self.act(add)
        except ApiError as exc:
            self.refuse("/webhooks", refusal_text(exc), {"url": url, "events": checked})

    async def render_list(self, *, error: str | None, url: str, checked: list[str]) -> None:
        principal = self.member()
        listed = await self.services.store.run(endpoints.list_endpoints, self.services,
                                               workspace_id=principal.workspace_id)
        self.render_page(
            "webhooks.html", endpoints=listed,
            can_manage=principal.role in MANAGERS, choices=self.event_choices(), transitions=self.transitions,
            checked=checked, url=url, error=error,
            subscribed_to=subscribed_to, when=when,
        )


class WebhookPage(WebhooksHandler):
    """``/webhooks/<id>``: one endpoint and its delivery log; the form changes its URL and events."""

    @authenticated
    async def get(self, endpoint_id: str) -> None:
        endpoint = await self.endpoint(endpoint_id)
        error, typed = self.refused()
        # Shown here once, never stored in clear: the page is not cached (Cache-Control: no-store).
        await self.render_endpoint(endpoint, secret=self.revealed_secret(), error=error, url=typed.get("url"),
                                   checked=typed.get("events"))

    @authenticated
    async def post(self, endpoint_id: str) -> None:
        await self.hit_rate_limit(API_PATH)
        endpoint = await self.endpoint(endpoint_id)
        url = self.typed("url")
        checked = self.typed_all("events")

        async def edit() -> Outcome:
            # An unchanged URL is not looked up again: changing the events of an endpoint whose
            # name resolves elsewhere now must not fail on its URL (its deliveries say so).
            request = endpoints.PatchWebhook(url=None if url == endpoint.url else url, events=self.chosen_events())
            await endpoints.patch(self.services, workspace_id=endpoint.workspace_id, endpoint_id=endpoint.id, request=request)
            return Outcome(f"/webhooks/{endpoint.id}", "The endpoint was changed.")

        try:
            await self.act_or_404(edit)
        except ApiError as exc:
            self.refuse(f"/webhooks/{endpoint.id}", refusal_text(exc), {"url": url, "events": checked})


class WebhookStatus(WebhooksHandler):
    """The "Disable" and "Enable" buttons."""

    @authenticated
    async def post(self, endpoint_id: str, action: str) -> None:
        await self.hit_rate_limit(API_PATH)
        endpoint = await self.endpoint(endpoint_id)
        status, message = {
            "disable": ("disabled", "The endpoint is disabled: it gets no new deliveries, and queued ones wait until it is enabled."),
            "enable": ("active", "The endpoint is enabled: deliveries queued for it resume."),
        }[action]

        async def change() -> Outcome:
            await endpoints.patch(self.services, workspace_id=endpoint.workspace_id, endpoint_id=endpoint.id,
                                  request=endpoints.PatchWebhook(status=status))
            return Outcome(f"/webhooks/{endpoint.id}", message)

        await self.act_or_404(change)


class RotateSecret(WebhooksHandler):
    @authenticated
    async def post(self, endpoint_id: str) -> None:
        await self.hit_rate_limit(API_PATH)
        endpoint = await self.endpoint(endpoint_id)

        async def rotate() -> Outcome:
            _, secret = await self.services.store.run(endpoints.rotate, self.services,
                                                      workspace_id=endpoint.workspace_id, endpoint_id=endpoint.id)
            return Outcome(
                f"/webhooks/{endpoint.id}",
                "The secret was rotated. The old one stopped working at once: every attempt from now on is signed "
                "with the new one (a request already on its way may still carry the old signature).",
                secret=secret,
            )

        await self.act_or_404(rotate)


class DeleteWebhook(WebhooksHandler):
    """``/webhooks/<id>/delete``: a page asking to confirm, naming the URL; its button deletes."""

    @authenticated
    async def get(self, endpoint_id: str) -> None:
        self.render_page("webhook_delete.html", endpoint=await self.endpoint(endpoint_id))

    @authenticated
    async def post(self, endpoint_id: str) -> None:
        await self.hit_rate_limit(API_PATH)
        self.manager()

        async def delete() -> Outcome:
            # Looked up here, not before: the same form sent again (a double click) finds the
            # endpoint gone, and answers as the first did without getting this far.
            endpoint = await self.endpoint(endpoint_id)
            await self.services.store.run(endpoints.delete, self.services, workspace_id=endpoint.workspace_id,
                                          endpoint_id=endpoint.id)
            return Outcome("/webhooks", f"The endpoint {endpoint.url} was deleted; its queued deliveries were removed.")

        await self.act_or_404(delete)


class DeliveryPage(WebhooksHandler):
    """``/webhooks/<id>/deliveries/<delivery_id>``: one delivery and every attempt, oldest first."""

    @authenticated
    async def get(self, endpoint_id: str, delivery_id: str) -> None:
        endpoint = await self.endpoint(endpoint_id)
        try:
            delivery: dict[str, Any] = await self.services.store.run(
                deliveries.detail, self.services, workspace_id=endpoint.workspace_id, endpoint_id=endpoint.id,
                delivery_id=path_id(delivery_id))
        except NotFound:
            raise HTTPError(404) from None
        self.render_page("webhook_delivery.html", endpoint=endpoint, delivery=delivery, when=when)


class Redeliver(WebhooksHandler):
    @authenticated
    async def post(self, endpoint_id: str, delivery_id: str) -> None:
        await self.hit_rate_limit(API_PATH)
        endpoint = await self.endpoint(endpoint_id)
        wanted = path_id(delivery_id)

        async def redeliver() -> Outcome:
            await self.services.store.run(deliveries.redeliver, self.services, workspace_id=endpoint.workspace_id,
                                          endpoint_id=endpoint.id, delivery_id=wanted)
            return Outcome(f"/webhooks/{endpoint.id}/deliveries/{wanted}",
                           "The delivery was queued again, with the same id, for a new round of attempts starting now.")

        await self.act_or_404(redeliver)


routes = [
    (r"/webhooks", WebhookListPage),
    (r"/webhooks/([^/]+)", WebhookPage),
    (r"/webhooks/([^/]+)/(disable|enable)", WebhookStatus),
    (r"/webhooks/([^/]+)/rotate-secret", RotateSecret),
    (r"/webhooks/([^/]+)/delete", DeleteWebhook),
    (r"/webhooks/([^/]+)/deliveries/([^/]+)", DeliveryPage),
    (r"/webhooks/([^/]+)/deliveries/([^/]+)/redeliver", Redeliver),
]
