"""Contract fuzzing: schemathesis against the document the running service serves, as three callers.

Every operation, every phase: examples, coverage, fuzzing, and the stateful phase, which chains
create -> read/change/delete through the document's own ``links`` (domains, certificates, clients,
API keys, webhooks, verification links). The coverage phase (each schema's boundary and invalid
values, four fifths of a unit run's 2,200 cases) runs as the owner only, and the keys' fuzzing tries
two cases an operation where the owner's tries six: what they try is the input rules, the same for
every caller, and the narrow key meets mostly 403s before them. A key's run is for its own
authentication and scopes on every operation (issue 49: the keys' fuzzing took 41 and 23 s). The
stateful phase runs as the callers that can create: the narrow key's followed none of the 34 links
and sent only the ten operations its unit run already sends (195 cases, 10 core-seconds).

Settings are in ``schemathesis.toml`` beside this file: a fixed seed, no example database, a
bounded number of examples, and values the service accepts for the fields a schema cannot describe
(hostnames, webhook URLs, the caller's own workspace).

Each run acts in a workspace of its own, so that what one run revokes or deletes cannot disarm
the next; after its run the caller must still be signed in, so a run that locked itself out
fails rather than passing on 401s. Beyond schemathesis' checks, the service must have logged no
traceback while it ran.

Every check runs except ``positive_data_acceptance``: a schema cannot say what a hostname, an
e-mail address or a client of this workspace is, so values the schema admits are rightly refused
with a 400 in the envelope (and ``negative_data_rejection`` still checks that whatever the schema
refuses is refused).
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.servers.dns import DnsServer
from tests.servers.pkce import new_flow
from tests.servers.service import ServiceProcess, call, identity_provider_code

CONFIG = Path(__file__).with_name("schemathesis.toml")
SCHEMATHESIS = Path(sys.executable).parent / "st"
UNLIMITED = "\n".join(f"{bucket} = 1000000" for bucket in (
    "api", "auth", "signup", "public_verification_links", "verification_links", "site_scan"))
#: The three callers, by the API-key scopes they hold (a session is an owner's).
SCOPES = {"session": "", "star key": "*", "narrow key": "domains:read"}
#: Callers that may create something: the stateful phase, which chains from creates, runs as these.
CREATORS = ("session", "star key")
#: The stateful phase runs in a workspace of its own: the unit phases fill the first one up
#: (20 webhook endpoints at most), and creates that fail leave the links nothing to follow.
RUNS = [(caller, phases) for caller in SCOPES
        for phases in ("examples,coverage,fuzzing" if caller == "session" else "examples,fuzzing",
                       *(("stateful",) if caller in CREATORS else ()))]
#: Cases an operation in the keys' fuzzing (schemathesis.toml's ``max-examples`` in the owner's).
KEY_EXAMPLES = 2
#: Links the stateful phase of a creating caller must follow at least (of 34; about 16 to 21 are).
MIN_LINKS_COVERED = 5


def session_token(base: str, email: str) -> str:
    """The owner's ID token, through the built-in identity provider's form and the exchange."""
    flow = new_flow()
    code = identity_provider_code(base, flow, email)
    exchange = {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"]}
    return call(base, "POST", "/v1/auth/oidc/exchange", exchange)[1]["token"]


@pytest.fixture(scope="module")
def resolver():
    """Resolves the webhook URL of schemathesis.toml to 127.0.0.1; every other name is NXDOMAIN at once."""
    server = DnsServer().start()
    server.publish("hooks.example.com", "A", "127.0.0.1")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory, resolver):
    running = ServiceProcess(
        tmp_path_factory.mktemp("fuzz"), dns_address=resolver.address,
        extra="[provider.sandbox]\nsimulate_dns = true\nsimulate_dns_delay_seconds = 0\nactivation_delay_seconds = 0\n"
        '[site_scan]\ntimeout_seconds = 0.5\n[network]\nallow_private_ranges = ["127.0.0.1/32"]\n'
        f"[rate_limits]\n{UNLIMITED}\n",
    ).start()
    yield running
    running.stop()


def new_workspace(service: ServiceProcess, caller: str) -> tuple[str, str]:
    """A workspace of its own (signed up, with one domain) and the caller's credential in it."""
    email = f"fuzz-{uuid.uuid4().hex[:12]}@example.com"
    status, answer = call(service.base_url, "POST", "/v1/public/signup", {"email": email, "domain": "fuzz.example.com"})
    assert status == 201, answer
    workspace = answer["domain"]["orgId"]
    if caller == "session":
        return session_token(service.base_url, email), workspace
    made = subprocess.run(
        [sys.executable, "app.py", "create-api-key", "--workspace", workspace, "--scopes", SCOPES[caller],
         "--config", str(service.config)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True,
    )
    return made.stdout.splitlines()[1], workspace


def schemathesis(service: ServiceProcess, token: str, workspace: str, phases: str, more: tuple[str, ...] = ()) -> str:
    """Schemathesis' report of the phases run as the caller with ``token``, ``more`` added to its
    command line; fails the test on any finding."""
    config = service.folder / f"schemathesis-{workspace}.toml"
    config.write_text(CONFIG.read_text() + f'\n[dictionaries.own-workspace]\nvalues = ["{workspace}"]\n')
    result = subprocess.run(
        [str(SCHEMATHESIS), "--no-color", "--config-file", str(config), "run", f"{service.base_url}/v1/openapi.json",
         "--header", f"Authorization: Bearer {token}",
         "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--phases", phases, "--workers", "1", *more],
        capture_output=True, text=True, timeout=600, check=False,
        cwd=service.folder,  # its cache folder goes there, not into the checkout
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize(("caller", "phases"), RUNS)
def test_no_server_error_and_no_answer_outside_the_document(service, caller, phases):
    token, workspace = new_workspace(service, caller)
    log_before = service.log.stat().st_size
    fewer = ("--max-examples", str(KEY_EXAMPLES)) if caller != "session" and phases != "stateful" else ()
    report = schemathesis(service, token, workspace, phases, fewer)
    cases = re.search(r"Test cases:\s+(\d+) generated, (\d+) passed", report)
    assert cases and cases[1] == cases[2], report[-3000:]
    if phases == "stateful":  # it did chain operations through the links
        links = re.search(r"API Links:\s+(\d+) covered", report)
        assert links and int(links[1]) >= MIN_LINKS_COVERED, report[-3000:]
    # Still signed in: a run that locked itself out would have passed on nothing but 401s.
    assert call(service.base_url, "GET", "/v1/auth/session", token=token)[0] == 200
    with service.log.open() as log:
        log.seek(log_before)
        logged = log.read()
    assert "Traceback" not in logged, logged[logged.index("Traceback") - 500:][:3000]
