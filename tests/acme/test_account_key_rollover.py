"""Issue 50, item 3: the operator rolls our ACME account's key over (RFC 8555 section 7.3.5,
``keyChange``) with ``roll-account-key``, on Pebble: the account stays, its key changes, the old
key is refused by the CA, and a process that loaded the old key goes on with the new one."""

from __future__ import annotations

import pytest
from acme import messages

from core.acme import keys
from core.acme.cas import make_cas
from core.acme.client import CaClient
from core.runtime import commands
from store.acme import ACCOUNT_KEY, AcmeAccount
from tests.acme.conftest import needs_lab
from tests.acme.test_issuing import add, verify_until_issued
from tests.servers.service import free_port, run_app

pytestmark = needs_lab


async def registered(services, clock):
    """Our account at the CA, registered by another process (its own CAs, on the same database):
    the service's own provider has loaded no key yet."""
    cas, executor = make_cas(services.config.provider.acme)
    try:
        await cas[0].ready(services.store, services.keyring, clock)
    finally:
        cas[0].client.close()
        executor.shutdown(wait=False)
    return services.store.acme.account(cas[0].directory_url)


def key_pem(services, ciphertext, directory_url):
    return services.keyring.decrypt(ACCOUNT_KEY, ciphertext, bound_to=directory_url)


def client(services, directory_url):
    acme = services.config.provider.acme
    return CaClient(directory_url, ca_bundle=acme.ca_bundle, timeout=acme.timeout_seconds)


class TestRollover:
    @pytest.mark.gen_test
    async def test_the_ca_holds_the_new_stored_key_for_the_same_account(self, services, clock):
        before = await registered(services, clock)
        commands.roll_account_key(services, directory=None)
        after = services.store.acme.account(before.directory_url)
        new_pem = key_pem(services, after.key_ciphertext, after.directory_url)
        assert new_pem != key_pem(services, before.key_ciphertext, before.directory_url)
        ca = client(services, after.directory_url)
        try:
            assert ca.account_of(keys.account_key(new_pem)) == before.account_url
        finally:
            ca.close()

    @pytest.mark.gen_test
    async def test_the_account_url_is_unchanged(self, services, clock):
        before = await registered(services, clock)
        lines = commands.roll_account_key(services, directory=None)
        assert services.store.acme.account(before.directory_url).account_url == before.account_url
        said = f"{before.directory_url}: account {before.account_url} now signs with a new key; the old key is forgotten"
        assert lines == [said]

    @pytest.mark.gen_test
    async def test_the_old_key_is_refused_by_the_ca_afterwards(self, services, clock):
        before = await registered(services, clock)
        commands.roll_account_key(services, directory=None)
        ca = client(services, before.directory_url)
        ca.use(keys.account_key(key_pem(services, before.key_ciphertext, before.directory_url)), before.account_url)
        try:
            with pytest.raises(messages.Error):
                ca.new_order("old-key.lab.com", replaces=None)
        finally:
            ca.close()

    @pytest.mark.gen_test
    async def test_a_new_order_afterwards_is_issued_with_the_new_key(self, api, world, acme_lab, services, clock):
        await registered(services, clock)
        commands.roll_account_key(services, directory=None)
        caller, created = await add(api, world, "after-roll.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)

    @pytest.mark.gen_test
    async def test_a_process_that_loaded_the_old_key_recovers_and_its_order_is_issued(self, api, world, acme_lab,
                                                                                       services, clock):
        await services.provider.provider.cas[0].ready(services.store, services.keyring, clock)  # the old key, loaded
        await registered(services, clock)
        commands.roll_account_key(services, directory=None)  # by another process
        caller, created = await add(api, world, "loaded-old.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)


class TestRolloverRefused:
    @pytest.mark.gen_test
    async def test_a_ca_that_refuses_leaves_the_stored_key_unchanged(self, services, clock):
        before = await registered(services, clock)
        unknown = before.account_url.rstrip("/") + "0000"  # an account the CA does not know: it refuses
        services.store.sql.execute("UPDATE acme_accounts SET account_url = ?", [unknown])
        with pytest.raises(commands.CommandError, match="the CA refused the key change: .*the account keeps its key"):
            commands.roll_account_key(services, directory=None)
        after = services.store.acme.account(before.directory_url)
        assert (after.key_ciphertext, after.pending_key_ciphertext) == (before.key_ciphertext, None)

    @pytest.mark.gen_test
    async def test_a_ca_that_cannot_be_reached_leaves_the_stored_key_unchanged(self, services, clock):
        down = f"https://127.0.0.1:{free_port()}/dir"
        services.config.provider.acme.fallback_directory_urls.append(down)
        sealed = services.keyring.encrypt(ACCOUNT_KEY, keys.new_key_pem(), bound_to=down)
        with services.store.transaction():
            services.store.acme.add_account(AcmeAccount(directory_url=down, account_url=f"{down}/acct/1",
                                                        key_ciphertext=sealed, created_at=clock.now()))
        with pytest.raises(commands.CommandError, match="could not be reached .*the account keeps its key"):
            commands.roll_account_key(services, directory=down)
        after = services.store.acme.account(down)
        assert (after.key_ciphertext, after.pending_key_ciphertext) == (sealed, None)

    @pytest.mark.gen_test
    async def test_a_directory_that_is_not_configured_is_refused(self, services, clock):
        await registered(services, clock)
        with pytest.raises(commands.CommandError, match="is not a configured CA"):
            commands.roll_account_key(services, directory="https://elsewhere.test/dir")

    @pytest.mark.gen_test
    async def test_no_secret_is_printed(self, services, clock):
        before = await registered(services, clock)
        lines = commands.roll_account_key(services, directory=None)
        after = services.store.acme.account(before.directory_url)
        said = "\n".join(lines)
        for ciphertext in (before.key_ciphertext, after.key_ciphertext):
            pem = key_pem(services, ciphertext, before.directory_url)
            assert ciphertext not in said and pem.splitlines()[1] not in said


def half_way(services, before):
    """A rollover the CA took, but whose new key the database kept only as pending (the write that
    makes it the account's failed): the key the CA holds now."""
    url = before.directory_url
    new_pem = keys.new_key_pem()
    ca = client(services, url)
    ca.use(keys.account_key(key_pem(services, before.key_ciphertext, url)), before.account_url)
    try:
        ca.change_key(keys.account_key(new_pem))
    finally:
        ca.close()
    with services.store.transaction():
        services.store.acme.begin_key_change(url, services.keyring.encrypt(ACCOUNT_KEY, new_pem, bound_to=url))
    return new_pem


def config_file(services, tmp_path):
    """The operator's configuration file for the test's database and CA."""
    storage, acme, zone = services.config.storage, services.config.provider.acme, services.config.delegation_dns
    path = tmp_path / "ops.toml"
    path.write_text(f'''[storage]\npath = "{storage.path}"\nsecret_key_file = "{storage.secret_key_file}"\n
[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "{acme.directory_url}"\nca_bundle = "{acme.ca_bundle}"\n
[delegation_dns]\nzone = "{zone.zone}"\nnameservers = ["ns1.saas.test"]\n''')
    return path


class TestTheOperatorsCommand:
    @pytest.mark.gen_test
    async def test_a_refusal_exits_2_naming_the_ca_and_that_the_key_is_kept(self, services, clock, tmp_path):
        before = await registered(services, clock)
        services.store.sql.execute("UPDATE acme_accounts SET account_url = ?", [before.account_url + "0000"])
        result = run_app(config_file(services, tmp_path), "roll-account-key")
        assert result.returncode == 2, result.stdout
        assert result.stderr.startswith(f"roll-account-key: {before.directory_url}: the CA refused the key change: ")
        assert result.stderr.rstrip().endswith("the account keeps its key")

    @pytest.mark.gen_test
    async def test_a_rollover_prints_one_line_per_ca(self, services, clock, tmp_path):
        before = await registered(services, clock)
        result = run_app(config_file(services, tmp_path), "roll-account-key")
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == (f"{before.directory_url}: account {before.account_url} now signs with a new key; "
                                 "the old key is forgotten\n")


class TestRolloverLeftHalfWay:
    @pytest.mark.gen_test
    async def test_a_process_that_loaded_the_old_key_goes_on_with_the_pending_one(self, api, world, acme_lab,
                                                                                 services, clock):
        await services.provider.provider.cas[0].ready(services.store, services.keyring, clock)
        half_way(services, await registered(services, clock))
        caller, created = await add(api, world, "pending-key.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)

    @pytest.mark.gen_test
    async def test_the_command_run_again_records_the_key_the_ca_holds_then_rolls_over(self, services, clock):
        before = await registered(services, clock)
        held = half_way(services, before)
        lines = commands.roll_account_key(services, directory=None)
        assert lines[0].startswith(f"{before.directory_url}: the CA held the new key of a rollover left half-way")
        after = services.store.acme.account(before.directory_url)
        assert after.pending_key_ciphertext is None
        new_pem = key_pem(services, after.key_ciphertext, after.directory_url)
        assert new_pem != held
        ca = client(services, after.directory_url)
        try:
            assert ca.account_of(keys.account_key(new_pem)) == before.account_url
        finally:
            ca.close()
