"""How ``q`` is asked of the trigram index (migration 11): as a phrase, or as its rarest trigrams.

A phrase of trigrams is exactly "contains this substring", but FTS5 reads the rows of every
trigram in it, and a trigram most rows hold ("com", "cus" in "customer") costs a pass over nearly
all of them. A few rare trigrams name a small superset at once, which LIKE then narrows. Which is
cheaper depends on how many rows the rare trigrams name (store.domains decides, by counting them
up to a bound).
"""

from __future__ import annotations

#: Ids in the index: the workspace's rowid above these bits, the domain's below.
TEXT_ID_BITS = 40
TEXT_ID_MASK = (1 << TEXT_ID_BITS) - 1
#: Trigrams asked for a superset: two or three rare ones narrow it about as far as all of them.
_RARE_TRIGRAMS = 3
#: The characters of hostnames and English text from the most to the least common, roughly: a
#: trigram of rarer characters (digits, punctuation, uncommon letters, other scripts) is rarer.
_COMMON = "etaoinsrhlcdumpgwfbyvk.-jxqz"


def _forms(q: str, q_hostname: str | None) -> list[str] | None:
    """``q`` and its hostname form; None when one is shorter than a trigram (a scan answers)."""
    forms = list(dict.fromkeys([q, q_hostname or q]))
    return None if any(len(form) < 3 for form in forms) else forms


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def phrase(q: str, q_hostname: str | None) -> str | None:
    """The exact query: each form as a phrase."""
    forms = _forms(q, q_hostname)
    return None if forms is None else " OR ".join(_quoted(form) for form in forms)


def _rarity(gram: str) -> int:
    return sum(_COMMON.index(ch) if ch in _COMMON else len(_COMMON) for ch in gram)


def rarest(form: str) -> list[str]:
    """``form``'s rarest-looking trigrams (all of them when it has few)."""
    grams = sorted(dict.fromkeys(form[i:i + 3] for i in range(len(form) - 2)), key=_rarity, reverse=True)
    return grams[:_RARE_TRIGRAMS]


def candidates(q: str, q_hostname: str | None) -> str | None:
    """A superset: each form's rarest-looking trigrams, all of them."""
    forms = _forms(q, q_hostname)
    if forms is None:
        return None
    groups = ["(" + " AND ".join(_quoted(g) for g in rarest(form)) + ")" for form in forms]
    return " OR ".join(groups)
