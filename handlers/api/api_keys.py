"""``/v1/api-keys``: list, create, rotate, revoke."""

from __future__ import annotations

from typing import Any

from core.identity import api_keys
from core.identity.scopes import MANAGERS, WRITERS
from core.wire import dump
from handlers.base import ApiHandler, parse_id, require
from store.records import ApiKey


def _with_secret(key: ApiKey, secret: str) -> dict[str, Any]:
    """Key metadata plus the full secret: only the create and rotate answers carry it."""
    return {**dump(key), "secret": secret}


class ApiKeyListHandler(ApiHandler):
    # read_only reads domain, client and certificate records and nothing else (spec, rule 4).
    @require(scopes=("*",), roles=WRITERS)
    async def get(self) -> None:
        run = self.services.store.run
        self.send_json(await run(api_keys.list_keys, self.services, workspace_id=self.authorized.workspace_id))

    @require(scopes=None, roles=MANAGERS)
    async def post(self) -> None:
        request = self.body(api_keys.CreateKeyRequest)
        key, secret = await self.services.store.run(
            api_keys.create, self.services, workspace_id=self.authorized.workspace_id, request=request
        )
        self.send_json(_with_secret(key, secret), status=201)


class ApiKeyRotateHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def post(self, key_id: str) -> None:
        key, secret = await self.services.store.run(
            api_keys.rotate, self.services, workspace_id=self.authorized.workspace_id, key_id=parse_id(key_id, "API key")
        )
        self.send_json(_with_secret(key, secret))


class ApiKeyRevokeHandler(ApiHandler):
    @require(scopes=None, roles=MANAGERS)
    async def post(self, key_id: str) -> None:
        await self.services.store.run(
            api_keys.revoke, self.services, workspace_id=self.authorized.workspace_id, key_id=parse_id(key_id, "API key")
        )
        self.send_empty()


routes = [
    (r"/v1/api-keys", ApiKeyListHandler),
    (r"/v1/api-keys/([^/]+)/rotate", ApiKeyRotateHandler),
    (r"/v1/api-keys/([^/]+)/revoke", ApiKeyRevokeHandler),
]
