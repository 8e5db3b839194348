"""Contract fuzzing: schemathesis against the document the running service serves, as three callers.

Every operation, every phase (examples, coverage, fuzzing, and the stateful phase that chains
operations through the links schemathesis infers), with a fixed seed and a bounded number of
examples so a run takes seconds. Every check runs except ``positive_data_acceptance``: a schema
cannot say what a hostname, an e-mail address or a client of this workspace is, so values the
schema admits are rightly refused with a 400 in the envelope (and ``negative_data_rejection``
still checks that whatever the schema refuses is refused).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from core.dev_idp import DEFAULT_CLIENT_ID
from tests.servers.pkce import authorize_params, code_from, new_flow
from tests.servers.service import ServiceProcess

EXAMPLES = 10
UNLIMITED = "\n".join(f"{bucket} = 1000000" for bucket in (
    "api", "auth", "signup", "public_verification_links", "verification_links", "site_scan"))
SCHEMATHESIS = Path(sys.executable).parent / "st"


def post(base: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def session_token(base: str, email: str) -> str:
    """The owner's ID token, through the built-in identity provider's form and the exchange."""
    flow = new_flow()
    params = authorize_params(flow, client_id=DEFAULT_CLIENT_ID, redirect_uri=base + "/auth/callback")

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    form = urllib.request.Request(base + "/idp/authorize", method="POST",
                                  data=urllib.parse.urlencode({**params, "email": email}).encode())
    with pytest.raises(urllib.error.HTTPError) as redirected:
        urllib.request.build_opener(Stay).open(form, timeout=10)
    with redirected.value as answer:
        code = code_from(answer.headers["Location"])
    return post(base, "/v1/auth/oidc/exchange", {"code": code, "codeVerifier": flow["verifier"], "nonce": flow["nonce"]})["token"]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    running = ServiceProcess(
        folder, dns_address="127.0.0.1:9",  # nothing answers there: made-up names fail in 0.5 s
        extra="[provider.sandbox]\nsimulate_dns = true\nsimulate_dns_delay_seconds = 0\nactivation_delay_seconds = 0\n"
        f"[site_scan]\ntimeout_seconds = 0.5\n[rate_limits]\n{UNLIMITED}\n",
    ).start()
    signed_up = post(running.base_url, "/v1/public/signup", {"email": "fuzz@example.com", "domain": "fuzz.example.com"})
    workspace = signed_up["domain"]["orgId"]

    def key(scopes: str) -> str:
        made = subprocess.run(
            [sys.executable, "app.py", "create-api-key", "--workspace", workspace, "--scopes", scopes,
             "--config", str(running.config)],
            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True,
        )
        return made.stdout.splitlines()[1]

    running.credentials = {
        "session": session_token(running.base_url, "fuzz@example.com"),
        "star key": key("*"),
        "narrow key": key("domains:read"),
    }
    yield running
    running.stop()


@pytest.mark.parametrize("caller", ["session", "star key", "narrow key"])
def test_no_server_error_and_no_answer_outside_the_document(service, caller):
    result = subprocess.run(
        [str(SCHEMATHESIS), "--no-color", "run", f"{service.base_url}/v1/openapi.json",
         "--header", f"Authorization: Bearer {service.credentials[caller]}",
         "--checks", "all", "--exclude-checks", "positive_data_acceptance",
         "--phases", "examples,coverage,fuzzing,stateful",
         "--max-examples", str(EXAMPLES), "--seed", "1", "--workers", "1"],
        capture_output=True, text=True, timeout=300, check=False,
        cwd=service.folder,  # its cache folder goes there, not into the checkout
    )
    summary = result.stdout[result.stdout.find("SUMMARY"):]
    assert result.returncode == 0, result.stdout[-6000:]
    assert "generated" in summary and " failed" not in summary.split("Test cases:")[-1]
