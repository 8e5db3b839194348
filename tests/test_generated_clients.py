"""API clients generated from the served OpenAPI document work, in Python and in TypeScript.

Most API users never read the document: they generate a client from it. Here the document comes
from a running service (``python app.py``, ``GET /v1/openapi.json``), as a user gets it.

- Python: openapi-python-client makes a package in a temporary folder, without a warning; mypy
  --strict accepts it; and it drives the service through its own code only: the sign-in's code
  exchange, domains (create, read, patch, bulk, query pages), the delegation record, verification
  and the certificate it starts, webhooks and their deliveries, API keys and their secret, and each
  error answer parsed into its model. Only the identity provider's form (a browser's part, no API
  operation) is posted by hand.
- TypeScript: openapi-typescript makes the types, without a warning, and tsc checks
  ``tests/typescript/usage.ts`` against them. Needs npm (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.patience import PATIENCE_SECONDS
from tests.servers.https import HttpsReceiver
from tests.servers.pkce import new_flow
from tests.servers.service import ServiceProcess, identity_provider_code

ROOT = Path(__file__).resolve().parent.parent
TYPESCRIPT = ROOT / "tests" / "typescript"
BIN = Path(sys.executable).parent
OWNER = "owner@clients-test.com"
PACKAGE = "cps_client"


def hostname(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}.example.com"


def run(command: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # The generator runs ruff from PATH on what it made: this environment's, even when it is not activated.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


@pytest.fixture(scope="module")
def receiver(dns_server) -> Iterator[HttpsReceiver]:
    server = HttpsReceiver()
    dns_server.publish(server.hostname, "A", "127.0.0.1")
    yield server
    server.stop()
    dns_server.clear()


@pytest.fixture(scope="module")
def service(tmp_path_factory, dns_server, receiver) -> Iterator[ServiceProcess]:
    running = ServiceProcess(
        tmp_path_factory.mktemp("clients"), dns_address=dns_server.address,
        extra="[provider.sandbox]\nsimulate_dns = true\nsimulate_dns_delay_seconds = 0\nactivation_delay_seconds = 0\n"
              "[webhooks]\npoll_interval_seconds = 0.2\n"
              f'[network]\nallow_private_ranges = ["127.0.0.0/8"]\nca_bundle = "{receiver.ca_pem_path}"\n',
    ).start()
    yield running
    running.stop()


# -- Python --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(service, tmp_path_factory) -> Iterator[tuple[Path, subprocess.CompletedProcess[str]]]:
    """The client package made from the served document, importable as ``cps_client``."""
    folder = tmp_path_factory.mktemp("python-client")
    config = folder / "generator.json"
    config.write_text(json.dumps({"project_name_override": "cps-client", "package_name_override": PACKAGE}))
    project = folder / "cps-client"
    made = run([BIN / "openapi-python-client", "generate", "--url", f"{service.base_url}/v1/openapi.json",
                "--config", config, "--output-path", project], cwd=folder)
    assert made.returncode == 0, made.stdout + made.stderr
    sys.path.insert(0, str(project))
    yield project, made
    sys.path.remove(str(project))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


@attrs.frozen
class Owner:
    client: Any
    "The generated AuthenticatedClient with the owner's session token."
    signed_up: Any
    exchanged: Any


@pytest.fixture(scope="module")
def owner(service, generated) -> Iterator[Owner]:
    """The owner of a new workspace, signed in: its session client, sign-up and exchange answers."""
    from cps_client import AuthenticatedClient, Client
    from cps_client.api.auth import exchange_code, signup
    from cps_client.models import Exchange, ExchangeResult, SignedUp, Signup

    with Client(base_url=service.base_url, raise_on_unexpected_status=True) as anonymous:
        signed_up = signup.sync(client=anonymous, body=Signup(email=OWNER, domain=hostname("first")))
        assert isinstance(signed_up, SignedUp)
        flow = new_flow()
        code = identity_provider_code(service.base_url, flow, OWNER)
        exchanged = exchange_code.sync(
            client=anonymous, body=Exchange(code=code, code_verifier=flow["verifier"], nonce=flow["nonce"])
        )
        assert isinstance(exchanged, ExchangeResult)
    with AuthenticatedClient(base_url=service.base_url, token=exchanged.token, raise_on_unexpected_status=True) as session:
        yield Owner(session, signed_up, exchanged)


def new_key(owner: Owner, scopes: list[Any]) -> Any:
    from cps_client.api.api_keys import create_api_key
    from cps_client.models import ApiKeyWithSecret, CreateApiKey

    created = create_api_key.sync(client=owner.client, body=CreateApiKey(name="automation", scopes=scopes))
    assert isinstance(created, ApiKeyWithSecret)
    return created


def key_client(service, secret: str) -> Any:
    from cps_client import AuthenticatedClient

    return AuthenticatedClient(base_url=service.base_url, token=secret, raise_on_unexpected_status=True)


def new_domain(owner: Owner, label: str) -> Any:
    from cps_client.api.domains import create_domain
    from cps_client.models import CreateDomain, Domain

    domain = create_domain.sync(client=owner.client, body=CreateDomain(apex=hostname(label)))
    assert isinstance(domain, Domain)
    return domain


def mypy(project: Path, target: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", project / ".mypy_cache", target], cwd=project)


def readme_example() -> str:
    """The Python block of "Using the API from code" (docs/api-clients.md)."""
    page = (ROOT / "docs" / "api-clients.md").read_text()
    return page.split("```python\n", 1)[1].split("```", 1)[0]


class TestPythonClient:
    """openapi-python-client's package, made from the served document."""

    def test_the_generator_reports_no_warning(self, generated):
        _, made = generated
        output = made.stdout + made.stderr
        assert "warning" not in output.lower(), output

    def test_mypy_strict_accepts_the_package(self, generated):
        project, _ = generated
        checked = mypy(project, PACKAGE)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    def test_mypy_strict_accepts_the_readme_example(self, generated):
        project, _ = generated
        (project / "readme_example.py").write_text(readme_example())
        checked = mypy(project, "readme_example.py")
        assert checked.returncode == 0, checked.stdout + checked.stderr


class TestFlow:
    """The service driven through the generated code only."""

    def test_the_code_exchange_gives_a_session(self, owner):
        from cps_client.api.auth import get_session
        from cps_client.models import Session

        assert owner.exchanged.token_type == "Bearer"
        session = get_session.sync(client=owner.client)
        assert isinstance(session, Session)
        assert (session.user_email, session.org.id) == (OWNER, owner.signed_up.domain.org_id)

    def test_a_domain_is_created_read_and_patched(self, owner):
        from cps_client.api.domains import create_domain, get_domain, patch_domain
        from cps_client.models import (
            CreateDomain,
            DnsRecordType,
            Domain,
            OpsStatus,
            PatchDomain,
            ValidationStatus,
        )

        apex = hostname("shop")
        created = create_domain.sync_detailed(client=owner.client, body=CreateDomain(apex=apex, tags=["eu"]))
        assert created.status_code == HTTPStatus.CREATED and isinstance(created.parsed, Domain)
        domain = created.parsed
        assert (domain.apex, domain.tags, domain.ops_status) == (apex, ["eu"], OpsStatus.ACTION_NEEDED)
        assert domain.validation.status is ValidationStatus.PENDING
        assert domain.validation.delegation.type_ is DnsRecordType.CNAME
        assert domain.validation.ownership.type_ is DnsRecordType.TXT

        assert get_domain.sync(domain.id, client=owner.client) == domain

        patched = patch_domain.sync(domain.id, client=owner.client, body=PatchDomain(tags=["eu", "vip"], notes="Call first"))
        assert isinstance(patched, Domain)
        assert (patched.tags, patched.notes) == (["eu", "vip"], "Call first")

    def test_a_request_names_its_workspace_in_the_header(self, owner):
        """X-Workspace-Id is typed as the string it is sent as (a UUID type failed at run time)."""
        import inspect

        from cps_client.api.domains import get_domain

        domain = new_domain(owner, "workspace-header")
        annotation = str(inspect.signature(get_domain.sync).parameters["x_workspace_id"].annotation)
        assert "str" in annotation and "UUID" not in annotation
        assert get_domain.sync(domain.id, client=owner.client, x_workspace_id=str(domain.org_id)) == domain

    def test_a_bulk_create_answers_for_each_hostname(self, owner):
        from cps_client.api.domains import bulk_create_domains
        from cps_client.models import BulkCreate, BulkResult

        good = hostname("bulk")
        result = bulk_create_domains.sync(client=owner.client, body=BulkCreate(apex_list=[good, "*.wild.example.com"]))
        assert isinstance(result, BulkResult)
        assert [d.apex for d in result.created] == [good]
        assert [r.apex for r in result.rejected] == ["*.wild.example.com"]
        assert "ildcard" in result.rejected[0].reason

    def test_a_query_is_walked_page_by_page_with_its_cursor(self, owner):
        from cps_client.api.domains import bulk_create_domains, query_domains
        from cps_client.models import (
            BulkCreate,
            DomainPage,
            DomainSort,
            DomainSortField,
            PageRequest,
            QueryDomains,
            SortDirection,
        )
        from cps_client.types import UNSET

        tag = f"walk-{uuid.uuid4().hex[:6]}"
        apexes = sorted(hostname(f"w{i}") for i in range(5))
        bulk_create_domains.sync(client=owner.client, body=BulkCreate(apex_list=apexes, tags=[tag]))

        seen, cursor = [], UNSET
        sort = DomainSort(by=DomainSortField.APEX, dir_=SortDirection.ASC)
        while True:
            page = query_domains.sync(client=owner.client, body=QueryDomains(
                tags=[tag], sort=sort, page=PageRequest(limit=2, cursor=cursor)))
            assert isinstance(page, DomainPage) and page.total == 5
            seen += [d.apex for d in page.items]
            if not page.next_cursor:
                break
            cursor = page.next_cursor
        assert seen == apexes

    def test_verification_with_the_delegation_record_starts_the_certificate(self, owner):
        from cps_client.api.domains import get_delegation_record, verify_delegation
        from cps_client.models import (
            CertificateStatus,
            DelegationRecord,
            DnsRecordType,
            IssuanceSummary,
            ValidationStatus,
            VerifyResult,
        )

        domain = new_domain(owner, "verify")
        record = get_delegation_record.sync(domain.id, client=owner.client)
        assert isinstance(record, DelegationRecord)
        assert (record.type_, record.host) == ("CNAME", f"_acme-challenge.{domain.apex}")
        assert record.ownership.type_ is DnsRecordType.TXT

        verified = verify_delegation.sync(domain.id, client=owner.client)
        assert isinstance(verified, VerifyResult)
        assert verified.status is ValidationStatus.VERIFIED
        assert isinstance(verified.certificate, IssuanceSummary)
        assert verified.certificate.status is CertificateStatus.ACTIVE  # the sandbox's, at once

    def test_a_certificate_is_queried_read_and_refreshed(self, owner):
        from cps_client.api.certificates import get_certificate, query_certificates, refresh_certificate
        from cps_client.api.domains import verify_delegation
        from cps_client.models import (
            Certificate,
            CertificatePage,
            CertificateStatus,
            IssuanceSummary,
            QueryCertificates,
        )

        domain = new_domain(owner, "cert")
        verify_delegation.sync(domain.id, client=owner.client)
        page = query_certificates.sync(domain.id, client=owner.client, body=QueryCertificates())
        assert isinstance(page, CertificatePage) and page.total == 1
        certificate = get_certificate.sync(page.items[0].id, client=owner.client)
        assert isinstance(certificate, Certificate)
        assert (certificate.apex, certificate.status) == (domain.apex, CertificateStatus.ACTIVE)

        refreshed = refresh_certificate.sync(certificate.id, client=owner.client)
        assert isinstance(refreshed, IssuanceSummary)
        assert (refreshed.certificate_id, refreshed.status) == (certificate.id, CertificateStatus.ACTIVE)

    def test_a_webhook_gets_its_secret_once_and_its_deliveries_are_listed(self, owner, receiver):
        from cps_client.api.domains import verify_delegation
        from cps_client.api.webhooks import (
            create_webhook,
            get_webhook_delivery,
            list_webhook_deliveries,
            list_webhooks,
        )
        from cps_client.models import (
            CreateWebhook,
            DeliveryPage,
            DeliveryStatus,
            WebhookDeliveryDetail,
            WebhookEndpoint,
            WebhookEndpointWithSecret,
            WebhookStatus,
        )

        created = create_webhook.sync(client=owner.client, body=CreateWebhook(url=receiver.url()))
        assert isinstance(created, WebhookEndpointWithSecret)
        assert created.secret.startswith("whsec_") and created.status is WebhookStatus.ACTIVE
        listed = list_webhooks.sync(client=owner.client)
        assert isinstance(listed, list) and all(isinstance(w, WebhookEndpoint) for w in listed)
        assert [w.id for w in listed] == [created.id]
        assert "secret" not in listed[0].to_dict()

        domain = new_domain(owner, "hooked")
        verify_delegation.sync(domain.id, client=owner.client)  # issued at once: cert.issued
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            page = list_webhook_deliveries.sync(created.id, client=owner.client)
            assert isinstance(page, DeliveryPage)
            mine = [d for d in page.items if d.data.apex == domain.apex]
            if mine and mine[0].status is DeliveryStatus.DELIVERED or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert [(d.type_, d.status) for d in mine] == [("cert.issued", DeliveryStatus.DELIVERED)]
        detail = get_webhook_delivery.sync(created.id, mine[0].id, client=owner.client)
        assert isinstance(detail, WebhookDeliveryDetail)
        assert [a.status_code for a in detail.attempts] == [200]

    def test_an_api_key_secret_is_shown_once_and_works(self, owner, service):
        from cps_client.api.api_keys import list_api_keys, revoke_api_key, rotate_api_key
        from cps_client.api.domains import get_domain
        from cps_client.models import ApiKey, ApiKeyStatus, ApiKeyWithSecret, Domain, Scope

        domain = new_domain(owner, "keyed")
        created = new_key(owner, [Scope.DOMAINS_READ])
        assert created.secret.startswith(created.prefix) and created.scopes == [Scope.DOMAINS_READ]
        with key_client(service, created.secret) as key:
            assert isinstance(get_domain.sync(domain.id, client=key), Domain)

        listed = list_api_keys.sync(client=owner.client)
        assert isinstance(listed, list) and all(isinstance(k, ApiKey) for k in listed)
        mine = next(k for k in listed if k.id == created.id)
        assert mine.status is ApiKeyStatus.ACTIVE and "secret" not in mine.to_dict()

        rotated = rotate_api_key.sync(created.id, client=owner.client)
        assert isinstance(rotated, ApiKeyWithSecret) and rotated.secret != created.secret
        assert revoke_api_key.sync_detailed(created.id, client=owner.client).status_code == HTTPStatus.NO_CONTENT


class TestTypedErrors:
    """Each error answer is parsed into its model, with the code as a member of ErrorCode."""

    def test_a_400_is_a_validation_error_naming_the_field(self, owner):
        from cps_client.api.domains import create_domain
        from cps_client.models import CreateDomain, ValidationError

        answer = create_domain.sync_detailed(client=owner.client, body=CreateDomain(apex="*.example.com"))
        assert answer.status_code == HTTPStatus.BAD_REQUEST
        assert isinstance(answer.parsed, ValidationError)
        assert answer.parsed.code == "validation_error"
        assert "apex" in answer.parsed.details.field_errors

    def test_a_401_is_an_error_for_an_unknown_key(self, owner, service):
        from cps_client.api.domains import get_domain
        from cps_client.models import Error, ErrorCode

        with key_client(service, "ac_live_" + "0" * 38) as stranger:
            answer = get_domain.sync_detailed(owner.signed_up.domain.id, client=stranger)
        assert answer.status_code == HTTPStatus.UNAUTHORIZED
        assert isinstance(answer.parsed, Error) and answer.parsed.code is ErrorCode.INVALID_API_KEY

    def test_a_403_is_an_error_for_a_missing_scope(self, owner, service):
        from cps_client.api.domains import create_domain
        from cps_client.models import CreateDomain, Error, ErrorCode, Scope

        reader = new_key(owner, [Scope.DOMAINS_READ])
        with key_client(service, reader.secret) as key:
            answer = create_domain.sync_detailed(client=key, body=CreateDomain(apex=hostname("denied")))
        assert answer.status_code == HTTPStatus.FORBIDDEN
        assert isinstance(answer.parsed, Error) and answer.parsed.code is ErrorCode.INSUFFICIENT_SCOPE

    def test_a_404_is_an_error_for_an_unknown_domain(self, owner):
        from cps_client.api.domains import get_domain
        from cps_client.models import Error, ErrorCode

        answer = get_domain.sync_detailed(uuid.uuid4(), client=owner.client)
        assert answer.status_code == HTTPStatus.NOT_FOUND
        assert isinstance(answer.parsed, Error) and answer.parsed.code is ErrorCode.NOT_FOUND

    def test_a_409_is_an_error_for_issuing_before_verification(self, owner):
        from cps_client.api.certificates import issue_certificate
        from cps_client.models import Error, ErrorCode, IssueRequest

        domain = new_domain(owner, "early")
        answer = issue_certificate.sync_detailed(domain.id, client=owner.client, body=IssueRequest())
        assert answer.status_code == HTTPStatus.CONFLICT
        assert isinstance(answer.parsed, Error) and answer.parsed.code is ErrorCode.DELEGATION_NOT_VERIFIED


# -- TypeScript ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def typescript(service, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A copy of tests/typescript/ with its pinned packages and openapi-typescript's types for the
    served document in generated/api.d.ts."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (.ci/run installs it)")
    folder = tmp_path_factory.mktemp("typescript")
    for name in ("package.json", "package-lock.json", "tsconfig.json", "usage.ts"):
        shutil.copy(TYPESCRIPT / name, folder)
    installed = run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    made = run([folder / "node_modules" / ".bin" / "openapi-typescript", f"{service.base_url}/v1/openapi.json",
                "--default-non-nullable", "false", "--output", "generated/api.d.ts"], cwd=folder)
    assert made.returncode == 0, made.stdout + made.stderr
    return folder, made


class TestTypeScriptTypes:
    """openapi-typescript's types, made from the served document."""

    def test_the_generator_reports_no_warning(self, typescript):
        _, made = typescript
        assert not made.stderr.strip(), made.stderr
        assert "warn" not in made.stdout.lower(), made.stdout

    def test_tsc_accepts_the_usage_file(self, typescript):
        folder, _ = typescript
        checked = run([folder / "node_modules" / ".bin" / "tsc", "-p", "."], cwd=folder)
        assert checked.returncode == 0, checked.stdout + checked.stderr
