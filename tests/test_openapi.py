"""The OpenAPI document and the application describe the same API."""

from __future__ import annotations

import json
import re

import pytest
from tornado.web import RequestHandler

import handlers
from core import text
from core.certificates import events
from core.domains import drift, operations
from core.edge.cloudflare import CloudflareProvider
from core.edge.sandbox import SandboxProvider
from core.wire import parse_uuid
from tests.helpers import OPENAPI, OTHER_SPELLINGS, openapi, template_regex

METHODS = ("get", "post", "put", "patch", "delete")
PRINTABLE = {"$ref": "#/components/schemas/PrintableText"}
UUID = "0b9f3a44-6f4e-4c1e-9d55-1f6f0a3f8e21"
#: Every e-mail address a request carries (issue 45, item 2).
EMAIL_FIELDS = (("Signup", "email"), ("Invite", "email"), ("CreateDomain", "contactEmail"),
                ("CreateVerificationLink", "recipientEmail"))


def app_operations() -> dict[tuple[str, str], RequestHandler]:
    """(route regex, method) -> handler method, for every /v1/ route the app serves, and the health checks."""
    found = {}
    for pattern, handler in handlers.routes:
        if not (pattern.startswith("/v1/") or pattern in ("/healthz", "/readyz")) or pattern == r"/v1/.*":
            continue
        for method in METHODS:
            implementation = getattr(handler, method)
            if implementation is not getattr(RequestHandler, method):
                found[(pattern.replace(r"\.", "."), method)] = implementation
    return found


def documented_operations() -> dict[tuple[str, str], dict]:
    return {
        (template_regex(path), method): operation
        for path, item in openapi()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def all_refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from all_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from all_refs(value)


class TestParity:
    """Routes and document match both ways."""

    def test_every_route_is_documented(self):
        missing = set(app_operations()) - set(documented_operations())
        assert not missing, f"routes missing from the OpenAPI document: {sorted(missing)}"

    def test_every_documented_operation_exists(self):
        extra = set(documented_operations()) - set(app_operations())
        assert not extra, f"documented operations the app does not serve: {sorted(extra)}"

    def test_documented_authorization_matches_the_handlers(self):
        for key, implementation in app_operations().items():
            operation = documented_operations()[key]
            requirement = getattr(implementation, "requirement", None)
            if requirement is None:
                assert "x-scopes" not in operation, key
                continue
            scopes = requirement["scopes"]
            assert operation["x-scopes"] == (None if scopes is None else list(scopes)), key
            assert operation["x-roles"] == list(requirement["roles"]), key

    def test_every_reference_resolves(self):
        doc = openapi()
        for ref in set(all_refs(doc)):
            node = doc
            for part in ref.removeprefix("#/").split("/"):
                node = node[part]


def resolved(node: dict) -> dict:
    """``node`` with its ``$ref`` followed (within the document)."""
    while "$ref" in node:
        node = target_of(node["$ref"])
    return node


def target_of(ref: str) -> dict:
    """The node a local ``$ref`` (``#/components/...``) names."""
    node = openapi()
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def has_field(schema: dict, pointer: list[str]) -> bool:
    """Whether a body matching ``schema`` can hold a value at ``pointer`` (properties, through allOf)."""
    if not pointer:
        return True
    schema = resolved(schema)
    parts = [schema] + [resolved(part) for part in schema.get("allOf", [])]
    return any(pointer[0] in part.get("properties", {}) and has_field(part["properties"][pointer[0]], pointer[1:])
               for part in parts)


def links() -> list[tuple[dict, dict, str, dict]]:
    """(source operation, its response, link name, link) of every link in the document."""
    return [(operation, resolved(response), name, link)
            for item in openapi()["paths"].values() for operation in item.values() if isinstance(operation, dict)
            for response in operation.get("responses", {}).values()
            for name, link in resolved(response).get("links", {}).items()]


class TestLinks:
    """The links the stateful fuzzing (tests/contract/test_fuzz.py) follows: a link to an operation or
    a field that does not exist would not fail there, it would quietly never run."""

    def test_every_link_names_an_operation_and_only_parameters_it_takes(self):
        by_id = {op["operationId"]: op for item in openapi()["paths"].values() for op in item.values()
                 if isinstance(op, dict) and "operationId" in op}
        assert links()
        for _, _, name, link in links():
            target = by_id[link["operationId"]]
            taken = {resolved(parameter)["name"] for parameter in target.get("parameters", [])}
            assert set(link.get("parameters", {})) <= taken, name
            if "requestBody" in link:
                schema = target["requestBody"]["content"]["application/json"]["schema"]
                assert all(has_field(schema, [field]) for field in link["requestBody"]), name

    def test_every_link_takes_its_values_from_what_the_source_has(self):
        for source, response, name, link in links():
            for expression in [*link.get("parameters", {}).values(), *link.get("requestBody", {}).values()]:
                if expression.startswith("$request.path."):
                    path_parameters = {resolved(p)["name"] for p in source["parameters"] if resolved(p)["in"] == "path"}
                    assert expression.removeprefix("$request.path.") in path_parameters, name
                else:
                    pointer = expression.removeprefix("$response.body#/").split("/")
                    assert has_field(response["content"]["application/json"]["schema"], pointer), (name, expression)


class TestServed:
    """GET /v1/openapi.json."""

    @pytest.mark.gen_test
    async def test_the_document_is_served_as_kept_in_the_repository(self, api):
        r = await api.get("/v1/openapi.json")
        assert r.status == 200
        assert r.body == json.loads(OPENAPI.read_text())
        assert r.body["openapi"] == "3.1.0"


def operation(path: str, method: str) -> dict:
    return openapi()["paths"][path][method]


class TestDescriptions:
    """What the document says matches what the service does (invitations are offers answered
    explicitly; a pending invitation never blocks sign-up; API keys belong to the workspace)."""

    def test_sign_up_202_is_not_said_to_answer_a_pending_invitation(self):
        text = operation("/v1/public/signup", "post")["responses"]["202"]["description"]
        assert "a user or a pending invitation" not in text
        assert "pending invitation does not count" in text

    def test_an_invitation_is_said_to_be_accepted_explicitly_not_at_sign_in(self):
        text = operation("/v1/team/invitations", "post")["responses"]["201"]["description"]
        assert "first sign-in" not in text
        assert "/v1/invitations/{invitationId}/accept" in text

    def test_api_keys_are_said_to_outlive_the_admin_who_created_them(self):
        for method in ("get", "post"):
            text = operation("/v1/api-keys", method)["description"]
            assert "belongs to the workspace" in text or "belong to the workspace" in text, method
            assert "outlive" in text, method


class TestSharedEnums:
    """Values the service sends in several places are one named enum, equal to the code's own list."""

    def test_delivery_types_are_the_named_event_types_the_service_sends(self):
        schemas = openapi()["components"]["schemas"]
        assert schemas["EventType"]["enum"] == [*events.TYPES, *drift.EVENT_TYPES, *events.TRANSITION_TYPES]
        for name in ("WebhookDelivery", "WebhookDeliveryDetail"):
            assert schemas[name]["properties"]["type"] == {"$ref": "#/components/schemas/EventType"}, name

    def test_a_delivery_s_data_is_a_certificate_or_a_drift_summary_or_one_beyond_the_spec(self):
        schemas = openapi()["components"]["schemas"]
        for name in ("WebhookDelivery", "WebhookDeliveryDetail"):
            assert schemas[name]["properties"]["data"] == {"oneOf": [
                {"$ref": "#/components/schemas/EventData"}, {"$ref": "#/components/schemas/DriftEventData"},
                {"$ref": "#/components/schemas/ChainChangedEventData"},
                {"$ref": "#/components/schemas/RenewalOverdueEventData"}]}, name
        assert schemas["DriftEventData"]["properties"]["drift"]["items"] == {"$ref": "#/components/schemas/DriftProblem"}

    def test_an_events_provider_is_the_named_certificate_provider(self):
        schemas = openapi()["components"]["schemas"]
        assert schemas["EventData"]["properties"]["provider"] == {"$ref": "#/components/schemas/CertificateProvider"}
        assert {CloudflareProvider.name, SandboxProvider.name} <= set(schemas["CertificateProvider"]["enum"])


class TestRulesTheSchemaStates:
    """Rules the server enforces that JSON Schema can say, said in the document (review 2, item 13),
    each pattern agreeing with the server's own rule on both sides."""

    def schema(self, name):
        return openapi()["components"]["schemas"][name]["properties"]

    def test_printable_text_is_the_services_one_rule(self):
        """The pattern is core/text.py's (tests/core/test_text.py checks it against the rule)."""
        printable = openapi()["components"]["schemas"]["PrintableText"]
        assert printable["pattern"] == text.PATTERN

    def test_printable_text_names_every_range_it_refuses(self):
        """Each range of core/text.py's list, by its code points (issue 45, item 4); the noncharacters
        at the end of each plane by name, and the Unicode version the list follows."""
        description = openapi()["components"]["schemas"]["PrintableText"]["description"]
        unnamed = [(f"U+{first:04X}", f"U+{last:04X}") for first, last, why in text.REFUSED if why != "noncharacters"
                   if f"U+{first:04X}" not in description or f"U+{last:04X}" not in description]
        assert unnamed == []
        version = text.UNICODE_VERSION.removesuffix(".0")  # "15.1"
        assert "last two code points of every plane" in description and f"Unicode {version} lists them" in description

    @pytest.mark.parametrize(("schema", "field"), EMAIL_FIELDS)
    def test_every_email_field_is_an_email_address(self, schema, field):
        email, value = {"$ref": "#/components/schemas/EmailAddress"}, self.schema(schema)[field]
        assert value == email or value["anyOf"] == [email, {"type": "null"}]

    def test_no_email_field_states_a_rule_of_its_own(self):
        found = {(name, field) for name, schema in openapi()["components"]["schemas"].items()
                 for field, value in schema.get("properties", {}).items()
                 if "format" in json.dumps(value) and "email" in json.dumps(value)}
        assert found == set()

    def test_an_email_address_is_the_services_one_rule(self):
        email = openapi()["components"]["schemas"]["EmailAddress"]
        assert (email["pattern"], email["maxLength"]) == (text.EMAIL_PATTERN, text.EMAIL_MAX)
        assert all(words in email["description"] for words in ("254", "one `@`", "hostname", "IDNA", "PrintableText"))

    @pytest.mark.parametrize(("schema", "field"), [
        ("CreateDomain", "tags"), ("BulkCreate", "tags"), ("PatchDomain", "tags"), ("QueryDomains", "tags"),
        ("CreateWebhook", "events"), ("PatchWebhook", "events"),
    ])
    def test_list_items_are_printable_text(self, schema, field):
        items = self.schema(schema)[field]["items"]
        assert items["$ref"] == PRINTABLE["$ref"] and items["minLength"] == 1

    def test_the_query_text_is_printable_text(self):
        assert self.schema("QueryDomains")["q"]["anyOf"] == [{**PRINTABLE, "maxLength": 200}, {"type": "null"}]

    @pytest.mark.parametrize("schema", ["CreateDomain", "PatchDomain", "CreateClient", "PatchClient"])
    def test_notes_say_what_they_may_hold(self, schema):
        assert "newlines" in self.schema(schema)["notes"]["description"]

    def test_a_patch_client_id_is_a_uuid_or_empty(self):
        """A UUID or "" (issue 37, item 11), exactly as the service reads it: a UUID's other spellings
        are refused by both (issue 45, item 3)."""
        pattern = self.schema("PatchDomain")["clientId"]["pattern"]
        admitted = ["", UUID]
        refused = ["abc", " ", UUID[:-1], UUID + "x", *(spell(UUID) for spell in OTHER_SPELLINGS.values())]
        for value in admitted + refused:
            errors: dict[str, list[str]] = {}
            operations._clean_client_id(value, errors)
            assert bool(re.fullmatch(pattern, value)) == (value in admitted) == ("clientId" not in errors), value

    @pytest.mark.parametrize("where", ["the Uuid schema", "X-Workspace-Id"])
    def test_a_uuid_is_what_the_services_one_rule_reads(self, where):
        """core.wire.parse_uuid, for path ids, the header and bodies, agrees with the patterns."""
        document = openapi()["components"]
        schema = document["schemas"]["Uuid"] if where == "the Uuid schema" else document["parameters"]["WorkspaceId"]["schema"]
        values = [UUID, "abc", UUID[:-1], UUID + "x", *(spell(UUID) for spell in OTHER_SPELLINGS.values())]
        for value in values:
            try:
                read = bool(parse_uuid(value))
            except ValueError:
                read = False
            assert bool(re.search(schema["pattern"], value)) == read == (value == UUID), value

    def test_the_idempotency_key_is_printable_ascii(self):
        for path in ("/v1/domains/{domainId}/certificates/issue", "/v1/domains/{domainId}/issue"):
            [header] = [p for p in openapi()["paths"][path]["post"]["parameters"] if p.get("name") == "Idempotency-Key"]
            pattern = header["schema"]["pattern"]
            assert re.search(pattern, "k-1 ~!") and not re.search(pattern, "clé") and not re.search(pattern, "a\tb")

    @pytest.mark.parametrize("schema", ["CreateWebhook", "PatchWebhook"])
    def test_webhook_urls_are_https(self, schema):
        pattern = self.schema(schema)["url"]["pattern"]
        assert re.search(pattern, "https://hooks.example.net/x") and re.search(pattern, "HTTPS://hooks.example.net/")
        assert not re.search(pattern, "http://hooks.example.net/") and not re.search(pattern, "ftp://x")

    def test_wildcard_may_only_be_false(self):
        wildcard = self.schema("IssueRequest")["wildcard"]
        assert wildcard["not"] == {"const": True} and "wildcard_not_supported_in_minimal_edge_provider_mode" in wildcard["description"]
