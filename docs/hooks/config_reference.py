"""The configuration reference, from ``config.example.toml``: one table per section (key, default,
meaning), so that the page says what the file says and cannot fall behind it.

How the file is read, which is how it is written:

- ``[section]`` starts a section; the comment lines at column 0 before its first key are its
  introduction, and one after a key is a note that stands between the rows it separates.
- ``key = value  # meaning``: the default is the value as written (parsed with tomllib, so a ``#``
  in a string is no comment); the meaning is the comment.
- An indented comment line continues the meaning of the key above it (``#   ...`` under the
  comment), so a meaning that takes several lines reads as one sentence.
- A key with no meaning at all stops the build, naming its line: the reference never shows an
  empty cell where the file forgot to say what a key does. So does a key the line reading missed
  (tomllib finds every key of the file; each must be in a table).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SECTION = re.compile(r"\[([A-Za-z0-9_.]+)\]\s*(?:#.*)?")
KEY = re.compile(r"([A-Za-z0-9_]+)\s*=\s*(.*)")
#: Addresses, the documentation's own pages and sections (``[provider.acme]``) in a comment become
#: links; the rest is text. An address with a placeholder (``http://{host}``) is no address.
LINKED = re.compile(r"https?://[^\s,;(){}]+[^\s,;(){}.]|docs/[\w/.-]+\.md|\[[a-z_.]+\]")
#: What Markdown would take for markup; ``<`` and ``>`` as entities, the rest backslash-escaped.
MARKUP = re.compile(r"[\\`*_{}\[\]|]")
#: The relative address, from the page, of a page of docs/ (``acme.md``).
Linker = Callable[[str], str]


class ConfigReferenceError(ValueError):
    """config.example.toml says something the reference cannot show: the build stops, naming the line."""


@dataclass
class Key:
    name: str
    default: str
    meaning: list[str]
    line: int


@dataclass
class Section:
    name: str
    intro: list[str] = field(default_factory=list)
    rows: list[Key | str] = field(default_factory=list)
    "Keys, and the notes (strings) that stand between them."


def parse(text: str) -> list[Section]:
    """The sections of the file, each key with its default and meaning, checked against tomllib."""
    sections: list[Section] = []
    last: Key | None = None  # the key an indented comment line continues
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            last = None
            continue
        if line.startswith("#"):
            comment = line.lstrip("#").strip()
            if raw[0].isspace():
                if last is None:
                    raise ConfigReferenceError(f"config.example.toml line {number}: an indented comment continues "
                                               "no key (it must follow the key's line directly)")
                last.meaning.append(comment)
            elif sections and sections[-1].rows:
                sections[-1].rows.append(comment)
                last = None
            elif sections:
                sections[-1].intro.append(comment)
            continue  # before the first section: the file's own heading, which the page says in its words
        if found := SECTION.fullmatch(line):
            sections.append(Section(found.group(1)))
            last = None
            continue
        found = KEY.fullmatch(line)
        if found is None or not sections:
            raise ConfigReferenceError(f"config.example.toml line {number}: not a key = value line in a section: {line}")
        default, comment = split_value(found.group(2), number)
        last = Key(found.group(1), default, [comment] if comment else [], number)
        sections[-1].rows.append(last)
    check(text, sections)
    return sections


def split_value(rest: str, number: int) -> tuple[str, str]:
    """The value as written and the comment after it: the longest text before a ``#`` that TOML reads."""
    cuts = [i for i, c in enumerate(rest) if c == "#"] + [len(rest)]
    for cut in cuts:
        value = rest[:cut].strip()
        try:
            tomllib.loads(f"v = {value}")
        except tomllib.TOMLDecodeError:
            continue
        return value, rest[cut + 1:].strip()
    raise ConfigReferenceError(f"config.example.toml line {number}: the value is not one line of TOML: {rest}")


def check(text: str, sections: list[Section]) -> None:
    """Every key has a meaning, and every key tomllib finds is in a table (and no other)."""
    for section in sections:
        for key in section.rows:
            if isinstance(key, Key) and not " ".join(key.meaning).strip():
                raise ConfigReferenceError(f"config.example.toml line {key.line}: [{section.name}] {key.name} has no "
                                           "comment saying what it does; the configuration reference needs one")
    shown = [f"{s.name}.{k.name}" for s in sections for k in s.rows if isinstance(k, Key)]
    found = sorted(leaves(tomllib.loads(text)))
    if sorted(shown) != found:
        raise ConfigReferenceError("config.example.toml: the keys read line by line are not those tomllib reads: "
                                   f"missed {sorted(set(found) - set(shown))}, extra {sorted(set(shown) - set(found))}")


def leaves(table: dict[str, Any], prefix: str = "") -> list[str]:
    """Each key that holds a value, as ``section.key``; a section (a table) is not a key."""
    found = []
    for name, value in table.items():
        if isinstance(value, dict):
            found += leaves(value, f"{prefix}{name}.")
        else:
            found.append(f"{prefix}{name}")
    return found


def render(sections: list[Section], link: Linker | None = None) -> str:
    """The reference in Markdown: per section a heading (its anchor the section's name, dots as
    dashes), its introduction, and its table. ``link(path)`` gives the relative address of a page
    of docs/ named in a comment (``docs/acme.md``); without it such a name stays text."""
    parts = []
    known = {section.name for section in sections}
    for section in sections:
        parts.append(f"## `[{section.name}]` {{#{section.name.replace('.', '-')}}}\n")
        if section.intro:
            parts.append(words(" ".join(section.intro), link, known) + "\n")
        table: list[str] = []
        for row in section.rows:
            if isinstance(row, str):  # a note between rows: the table stops, the note, the table goes on
                parts += [table_block(table)] if table else []
                parts.append(words(row, link, known) + "\n")
                table = []
            else:
                table.append(f"| `{row.name}` | `{row.default}` | {words(' '.join(row.meaning), link, known)} |")
        if table:
            parts.append(table_block(table))
    return "\n".join(parts)


def table_block(rows: list[str]) -> str:
    """A table in a block the docs' stylesheet lays out as cards on a narrow screen (md_in_html)."""
    return ('<div class="config-table" markdown>\n\n| key | default | meaning |\n|---|---|---|\n'
            + "\n".join(rows) + "\n\n</div>\n")


def words(text: str, link: Linker | None = None, sections: set[str] | frozenset[str] = frozenset()) -> str:
    """A comment as Markdown text: addresses, pages and sections linked, nothing else taken for markup."""
    out, at = [], 0
    for found in LINKED.finditer(text):
        out.append(escape(text[at:found.start()]))
        target = found.group(0)
        if target.startswith("docs/"):
            out.append(f"[{target}]({link(target.removeprefix('docs/'))})" if link else escape(target))
        elif target.startswith("["):
            name = target.strip("[]")
            out.append(f"[{escape(target)}](#{name.replace('.', '-')})" if name in sections else escape(target))
        else:
            out.append(f"<{target}>")
        at = found.end()
    out.append(escape(text[at:]))
    return "".join(out)


def escape(text: str) -> str:
    text = MARKUP.sub(lambda c: "\\" + c.group(0), text)
    return text.replace("<", "&lt;").replace(">", "&gt;")
