"""Where a CNAME leads when it does not point straight at the target: DNS-01 follows chains.

A certificate authority looking up ``_acme-challenge.<host>`` follows every CNAME on the way, so a
delegation CNAME that points to another name whose CNAME points to the target works. Asked for a
CNAME, a resolver answers only the first link; the rest is asked here, link by link, through the
same resolvers, until the target, a name that is no CNAME, a loop, or ``MAX_LINKS``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from core.dns.lookups import Resolver

#: Links followed at most; resolvers give up on longer chains (Unbound after about ten).
MAX_LINKS = 8

End = Literal["target", "elsewhere", "loop", "too_long", "unknown"]


@attrs.frozen
class Chain:
    names: tuple[str, ...]
    "Every name on the way, from the CNAME's owner to the last name reached."
    end: End
    "``target``; ``elsewhere`` (the last name is no CNAME); ``loop`` (it leads back to a name on the way);"
    " ``too_long``; ``unknown`` (a link was not answered)."

    def __str__(self) -> str:
        return " → ".join(self.names)

    @property
    def last(self) -> str:
        return self.names[-1]


def _key(name: str) -> str:
    return name.rstrip(".").lower()


async def follow(resolver: Resolver, owner: str, first: str, target: str) -> Chain:
    """The chain from ``owner``, whose CNAME points to ``first``, towards ``target``."""
    names = [owner, first]
    while True:
        current = names[-1]
        if _key(current) == _key(target):
            return Chain(tuple(names), "target")
        if _key(current) in {_key(name) for name in names[:-1]}:
            return Chain(tuple(names), "loop")
        if len(names) > MAX_LINKS:
            return Chain(tuple(names), "too_long")
        lookup = await resolver.lookup(current, "CNAME")
        if lookup.outcome in ("timeout", "error"):
            return Chain(tuple(names), "unknown")
        if lookup.outcome != "found":
            return Chain(tuple(names), "elsewhere")
        names.append(lookup.values[0])
