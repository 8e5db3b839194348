"""``/v1/clients``: the client records domains refer to (designed here; the spec shows scopes only)."""

from __future__ import annotations

from core.domains import clients
from core.identity.scopes import READERS, WRITERS
from handlers.base import ApiHandler, parse_id, require


class ClientListHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=READERS)
    async def get(self) -> None:
        self.send_json(await self.services.store.run(clients.list_clients, self.services, workspace=self.authorized.workspace))

    @require(scopes=("domains:write",), roles=WRITERS)
    async def post(self) -> None:
        request = self.body(clients.CreateClient)
        client = await self.services.store.run(clients.create, self.services, workspace=self.authorized.workspace,
                                               request=request)
        self.send_json(client, status=201)


class ClientHandler(ApiHandler):
    @require(scopes=("domains:read",), roles=READERS)
    async def get(self, client_id: str) -> None:
        self.send_json(await self.services.store.run(clients.load, self.services, self.authorized.workspace,
                                                     parse_id(client_id, "Client")))

    @require(scopes=("domains:write",), roles=WRITERS)
    async def patch(self, client_id: str) -> None:
        request = self.body(clients.PatchClient)
        client = await self.services.store.run(
            clients.patch, self.services, workspace=self.authorized.workspace, client_id=parse_id(client_id, "Client"),
            request=request,
        )
        self.send_json(client)

    @require(scopes=("domains:write",), roles=WRITERS)
    async def delete(self, client_id: str) -> None:
        await self.services.store.run(clients.delete, self.services, workspace=self.authorized.workspace,
                                      client_id=parse_id(client_id, "Client"))
        self.send_empty()


routes = [
    (r"/v1/clients", ClientListHandler),
    (r"/v1/clients/([^/]+)", ClientHandler),
]
