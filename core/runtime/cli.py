"""The command line: ``python app.py [COMMAND] [--config FILE]``, parsed next to the commands it runs
(core/runtime/commands.py).

Parsing imports little: the service parses its command line before it binds its port, and the
commands' modules (the capabilities, the store) are imported when a command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config import Config
    from core.services import Services


def version() -> str:
    """The installed package's version; a checkout run without ``pip install`` has none."""
    import importlib.metadata  # here, not above: with zipfile, email and csv under it, not at every start

    try:
        return importlib.metadata.version("certificate-provisioning-service")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout without pip install
        return "unknown"


class _Version(argparse.Action):
    """argparse's ``version`` action, but the installed version is looked up (importlib.metadata,
    15 ms) only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command and its options; no command means serve."""
    # --config goes before the command or after it. A subcommand's parser writes every option it
    # knows into the one namespace, defaults included: with the same destination and a default,
    # the command's --config would overwrite the one given before the command with None (the
    # embedded defaults: a new database under ./data). So the command's has its own destination,
    # set only when given, and the two are merged below.
    help_text = "TOML configuration file, before or after the command (default: embedded defaults)"
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", dest="config_after_command", default=argparse.SUPPRESS,
                        help=help_text)
    parser = argparse.ArgumentParser(
        description="Certificate Provisioning Service. Without a command it serves; the commands are "
                    "the operator's tools and are safe while the service runs.",
    )
    parser.add_argument("--config", metavar="FILE", help=help_text)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    subcommands.add_parser("serve", parents=[config], help="run the service (the default)")
    subcommands.add_parser("check-config", parents=[config], help="load the configuration, key file and database, and say what would run")
    subcommands.add_parser("domain-connect-template", parents=[config],
                           help="the Domain Connect template to submit, and the public-key TXT records to publish")
    backup = subcommands.add_parser("backup", parents=[config], help="an online, consistent copy of the database")
    move = subcommands.add_parser("copy-to-postgres", parents=[config],
                                  help="copy the SQLite database into an empty PostgreSQL database")
    move.add_argument("url", help="postgresql://user@host/database")
    backup.add_argument("path", help="the new file to write (must not exist)")
    workspaces = subcommands.add_parser("list-workspaces", parents=[config],
                                     help="the workspaces, with the id create-api-key takes and their owners")
    workspaces.add_argument("--email", help="only the workspaces this person belongs to")
    key = subcommands.add_parser("create-api-key", parents=[config], help="an API key for automation, printed once")
    key.add_argument("--workspace", required=True, help="the workspace id")
    key.add_argument("--scopes", required=True, help="comma-separated scopes, e.g. domains:read,domains:write or *")
    key.add_argument("--name", default="automation", help="a label for the key (default: automation)")
    key.add_argument("--expires-at", help="a date (the start of that day, UTC), e.g. 2027-01-01, or an ISO 8601 "
                     "time with offset, e.g. 2027-01-01T12:00:00Z")
    rebind = subcommands.add_parser("rebind-user", parents=[config],
                                 help="after switching identity provider: let users bind again by verified e-mail")
    who = rebind.add_mutually_exclusive_group(required=True)
    who.add_argument("--email", help="one user")
    who.add_argument("--from-issuer", metavar="URL", help="every user bound to this (old) issuer")
    purge = subcommands.add_parser("purge", parents=[config], help="drop old idempotency records and delivered webhook deliveries")
    purge.add_argument("--webhook-days", type=int, default=30, help="keep delivered deliveries this many days (default 30)")
    roll = subcommands.add_parser("roll-account-key", parents=[config],
                                  help="roll the ACME account key over at each configured CA (RFC 8555 keyChange)")
    roll.add_argument("--directory", metavar="URL", help="only this configured CA (its directory URL)")
    args = parser.parse_args(argv)
    after = vars(args).pop("config_after_command", None)
    if after is not None:
        if args.config is not None and args.config != after:
            parser.error(f"--config is given twice, {args.config} and {after}: give the one configuration to act on")
        args.config = after
    return args


#: Commands run before the services are built, since building them creates the database and the
#: secret key file: these write nothing.
WRITING_NOTHING = ("check-config", "domain-connect-template")


def run_writing_nothing(args: argparse.Namespace, config: Config) -> list[str]:
    from core.runtime import commands  # here, not above: see the docstring

    lines = commands.check_config(config) if args.command == "check-config" else []
    # After check-config's database check: a database that cannot be read is refused without it.
    from core.runtime import domain_connect_setup

    if args.command == "check-config":
        return lines + domain_connect_setup.check_lines(config)
    assert args.command == "domain-connect-template"
    return domain_connect_setup.template_lines(config)


def run_command(args: argparse.Namespace, services: Services) -> list[str]:
    """Run a command other than serve and check-config; the lines it returns are printed."""
    from core.runtime import commands  # here, not above: see the docstring

    if args.command == "backup":
        return commands.backup(services, args.path)
    if args.command == "copy-to-postgres":
        return commands.copy_to_postgres(services, args.url)
    if args.command == "create-api-key":
        scopes = [scope.strip() for scope in args.scopes.split(",") if scope.strip()]
        return commands.create_api_key(services, workspace=args.workspace, name=args.name, scopes=scopes,
                                       expires_at=args.expires_at)
    if args.command == "list-workspaces":
        return commands.list_workspaces(services, email=args.email)
    if args.command == "rebind-user":
        return commands.rebind_users(services, email=args.email, from_issuer=args.from_issuer)
    if args.command == "roll-account-key":
        return commands.roll_account_key(services, directory=args.directory)
    assert args.command == "purge"
    return commands.purge(services, webhook_days=args.webhook_days)
