"""``/v1/webhooks``: endpoints, secret rotation, the delivery log and redelivery."""

from __future__ import annotations

from typing import Any

from core.identity.scopes import MANAGERS, READERS
from core.webhooks import deliveries, endpoints
from core.wire import dump
from handlers.base import ApiHandler, parse_id, require
from store.records import WebhookEndpoint


def _with_secret(endpoint: WebhookEndpoint, secret: str) -> dict[str, Any]:
    """Endpoint metadata plus the secret: only the create and rotate answers carry it."""
    return {**dump(endpoint), "secret": secret}


class WebhookListHandler(ApiHandler):
    # The spec: "session, or * API key"; metadata only, never a secret.
    @require(scopes=("*",), roles=READERS)
    async def get(self) -> None:
        self.send_json(await self.services.store.run(
            endpoints.list_endpoints, self.services, workspace_id=self.authorized.workspace_id))

    @require(scopes=None, roles=MANAGERS)
    async def post(self) -> None:
        request = self.body(endpoints.CreateWebhook)
        endpoint, secret = await endpoints.create(self.services, workspace_id=self.authorized.workspace_id, request=request)
        self.send_json(_with_secret(endpoint, secret), status=201)


class WebhookHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def patch(self, endpoint_id: str) -> None:
        request = self.body(endpoints.PatchWebhook)
        endpoint = await endpoints.patch(
            self.services, workspace_id=self.authorized.workspace_id, endpoint_id=parse_id(endpoint_id, "Webhook endpoint"),
            request=request,
        )
        self.send_json(endpoint)

    @require(scopes=None, roles=MANAGERS)
    async def delete(self, endpoint_id: str) -> None:
        await self.services.store.run(
            endpoints.delete, self.services, workspace_id=self.authorized.workspace_id,
            endpoint_id=parse_id(endpoint_id, "Webhook endpoint"),
        )
        self.send_empty()


class WebhookRotateHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def post(self, endpoint_id: str) -> None:
        endpoint, secret = await self.services.store.run(
            endpoints.rotate, self.services, workspace_id=self.authorized.workspace_id,
            endpoint_id=parse_id(endpoint_id, "Webhook endpoint"),
        )
        self.send_json(_with_secret(endpoint, secret))


class DeliveryListHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def get(self, endpoint_id: str) -> None:
        page = await self.services.store.run(
            deliveries.list_deliveries, self.services,
            workspace_id=self.authorized.workspace_id,
            endpoint_id=parse_id(endpoint_id, "Webhook endpoint"),
            limit=self.get_query_argument("limit", None),
            cursor=self.get_query_argument("cursor", None),
        )
        self.send_json(page)


class DeliveryHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def get(self, endpoint_id: str, delivery_id: str) -> None:
        self.send_json(
            await self.services.store.run(
                deliveries.detail, self.services, workspace_id=self.authorized.workspace_id,
                endpoint_id=parse_id(endpoint_id, "Webhook endpoint"), delivery_id=parse_id(delivery_id, "Delivery"),
            )
        )


class RedeliverHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def post(self, endpoint_id: str, delivery_id: str) -> None:
        delivery = await self.services.store.run(
            deliveries.redeliver, self.services, workspace_id=self.authorized.workspace_id,
            endpoint_id=parse_id(endpoint_id, "Webhook endpoint"), delivery_id=parse_id(delivery_id, "Delivery"),
        )
        self.send_json(delivery, status=202)


routes = [
    (r"/v1/webhooks", WebhookListHandler),
    (r"/v1/webhooks/([^/]+)", WebhookHandler),
    (r"/v1/webhooks/([^/]+)/rotate-secret", WebhookRotateHandler),
    (r"/v1/webhooks/([^/]+)/deliveries", DeliveryListHandler),
    (r"/v1/webhooks/([^/]+)/deliveries/([^/]+)", DeliveryHandler),
    (r"/v1/webhooks/([^/]+)/deliveries/([^/]+)/redeliver", RedeliverHandler),
]
