"""A MkDocs hook (mkdocs.yml, ``hooks:``): the pages whose substance is another file of the repository,
rendered from it at every build so that they cannot fall out of step with it.

- In ``docs/api.md`` the marker line becomes the API reference, from ``static/openapi.json``, the
  document the service serves and the contract tests hold it to: the operations by tag, each with
  its method and path, who may call it, its parameters, request body and answers, then the schemas.
- In ``docs/operating/configuration.md`` the marker line becomes the configuration reference, from
  ``config.example.toml``: a table per section, of each key's default and meaning (config_reference.py,
  which stops the build on a key the file does not explain).

The OpenAPI document and ``config.example.toml`` themselves are published beside the pages, as
``openapi.json`` and ``config.example.toml``, for reading whole.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Any

import config_reference  # beside this file: MkDocs puts a hook's folder on the path while loading it
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "static" / "openapi.json"
CONFIG_EXAMPLE = ROOT / "config.example.toml"
API_MARKER = "<!-- the operations and schemas of static/openapi.json -->"
CONFIG_MARKER = "<!-- config.example.toml -->"
METHODS = ("get", "put", "post", "patch", "delete")
#: Headers every answer carries, described once on the reference page rather than at each answer.
COMMON_HEADERS = {"X-Request-Id", "RateLimit", "RateLimit-Policy"}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """``mkdocs serve`` rebuilds when either source changes, as it does for the pages."""
    config.watch.extend([str(OPENAPI), str(CONFIG_EXAMPLE)])
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The OpenAPI document beside the pages, for generators and for reading whole; the example
    configuration too, to copy as it is."""
    files.append(File.generated(config, "openapi.json", abs_src_path=str(OPENAPI)))
    files.append(File.generated(config, CONFIG_EXAMPLE.name, abs_src_path=str(CONFIG_EXAMPLE)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Each marker replaced by what its file holds now; every page's tables read as GitHub reads them."""
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference(json.loads(OPENAPI.read_text())))
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, configuration_reference(page))
    return github_table_pipes(markdown)


def configuration_reference(page: Page) -> str:
    """The file's sections as tables, after a link to the file itself, with the pages its comments
    name (``docs/acme.md``) linked from where the page is."""
    here = posixpath.dirname(page.file.src_uri)
    sections = config_reference.parse(CONFIG_EXAMPLE.read_text())
    raw = posixpath.relpath(CONFIG_EXAMPLE.name, here or ".")
    return (f"The file itself, to copy: [{CONFIG_EXAMPLE.name}]({raw}).\n\n"
            + config_reference.render(sections, lambda target: posixpath.relpath(target, here or ".")))


def github_table_pipes(markdown: str) -> str:
    """A pipe in a table cell's code span is written ``\\|`` for GitHub, which shows these pages too;
    Python-Markdown needs no escape there, and would show the backslash."""
    def unescape(code: re.Match[str]) -> str:
        return code.group(0).replace("\\|", "|")
    return re.sub(r"^\|.*$", lambda row: re.sub(r"`[^`]*`", unescape, row.group(0)), markdown, flags=re.MULTILINE)


def api_reference(doc: dict[str, Any]) -> str:
    """The operations by tag, in the document's order, then the shared parameters and the schemas."""
    operations = [(path, method, item.get("parameters", []), op)
                  for path, item in doc["paths"].items() for method, op in item.items() if method in METHODS]
    tags = [tag["name"] for tag in doc.get("tags", [])]
    tags += sorted({tag for *_, op in operations for tag in op.get("tags", [])} - set(tags))
    parts = []
    for tag in tags:
        parts.append(f"## {tag}\n")
        parts += [operation(doc, *found) for found in operations if tag in found[3].get("tags", [])]
    shared = doc["components"].get("parameters", {})
    if shared:
        parts += ["## Shared parameters\n"] + [f"### `{p['name']}` ({p['in']}) {{#parameter-{name}}}\n\n"
                                               f"{type_of(p.get('schema', {}))}. {p.get('description', '')}\n"
                                               for name, p in shared.items()]
    parts += ["## Schemas\n"] + [schema_section(name, schema) for name, schema in doc["components"]["schemas"].items()]
    return "\n".join(parts)


def operation(doc: dict[str, Any], path: str, method: str, path_parameters: list[Any], op: dict[str, Any]) -> str:
    """One operation's section, its ``operationId`` the anchor that links to it."""
    lines = [f"### {op['summary']} {{#{op['operationId']}}}\n", f"`{method.upper()} {path}`"
             + (" (deprecated)" if op.get("deprecated") else "") + "\n"]
    if op.get("description"):
        lines.append(op["description"] + "\n")
    lines.append(who(op) + "\n")
    parameters = path_parameters + op.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | required | type | description |", "|---|---|---|---|---|"]
        for given in parameters:
            p = resolve(doc, given)
            # A shared parameter's description is said once, in its own section.
            description = (f"[See its section](#parameter-{given['$ref'].rsplit('/', 1)[1]})." if "$ref" in given
                           else p.get("description", ""))
            lines.append(row(f"`{p['name']}`", p["in"], "yes" if p.get("required") else "no",
                             type_of(p.get("schema", {})), description))
        lines.append("")
    if "requestBody" in op:
        body = resolve(doc, op["requestBody"])
        for content_type, content in body.get("content", {}).items():
            lines.append(f"Request body ({'required' if body.get('required') else 'optional'}): `{content_type}`, "
                         f"{type_of(content.get('schema', {}))}\n")
    lines += ["| answer | description | body |", "|---|---|---|"]
    for status, answer in op["responses"].items():
        answer = resolve(doc, answer)
        bodies = [f"`{content_type}`" + (f" {type_of(content['schema'])}" if "schema" in content else "")
                  for content_type, content in answer.get("content", {}).items()]
        headers = [f"`{name}`" for name in answer.get("headers", {}) if name not in COMMON_HEADERS]
        description = answer.get("description", "") + (f" (headers: {', '.join(headers)})" if headers else "")
        lines.append(row(status, description, ", ".join(bodies)))
    return "\n".join(lines) + "\n"


def who(op: dict[str, Any]) -> str:
    """Who may call it, from ``security``, ``x-scopes`` and ``x-roles`` (the document's description says how)."""
    security = op.get("security")
    if security == []:
        return "Credentials: none."
    said = ["Credentials: a bearer, optional." if {} in (security or []) else "Credentials: a bearer."]
    if "x-scopes" in op:
        scopes = op["x-scopes"]
        said.append("API keys: none may call it." if scopes is None else
                    f"API keys with the scopes {', '.join(f'`{s}`' for s in scopes)}." if scopes else "Any API key.")
    if "x-roles" in op:
        said.append(f"Sessions with the roles {', '.join(f'`{r}`' for r in op['x-roles'])}.")
    return " ".join(said)


def schema_section(name: str, schema: dict[str, Any]) -> str:
    """One schema's section: its description, then each field (or what it is, when it has none)."""
    lines = [f"### `{name}` {{#{anchor(name)}}}\n"]
    if schema.get("description"):
        lines.append(schema["description"] + "\n")
    parts = schema.get("allOf", [schema])
    for part in parts:
        if "$ref" in part:
            lines.append(f"With every field of {type_of(part)}.\n")
        elif "properties" in part:
            required = set(part.get("required", []))
            lines += ["| field | type | required | description |", "|---|---|---|---|"]
            lines += [row(f"`{field}`", type_of(spec), "yes" if field in required else "no", spec.get("description", ""))
                      for field, spec in part["properties"].items()]
            lines.append("")
        else:
            lines.append(f"Type: {type_of(part)}.\n")
    return "\n".join(lines)


def type_of(schema: dict[str, Any]) -> str:
    """A schema in a few words, a referenced schema as a link to its section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{anchor(name)})"
    for combined, word in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")):
        if combined in schema:
            return word.join(type_of(s) for s in schema[combined])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v if isinstance(v, str) else json.dumps(v)}`" for v in schema["enum"])
    types = schema.get("type", "any")
    words = []
    for kind in types if isinstance(types, list) else [types]:
        if kind == "array":
            words.append(f"array of {type_of(schema.get('items', {}))}")
        elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            words.append(f"object of {type_of(schema['additionalProperties'])}")
        else:
            words.append(f"{kind} ({schema['format']})" if "format" in schema else kind)
    return " or ".join(words)


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A component a ``$ref`` names (``#/components/...``), or the node itself."""
    while "$ref" in node:
        found: Any = doc
        for key in node["$ref"].removeprefix("#/").split("/"):
            found = found[key]
        node = found
    return node


def anchor(schema_name: str) -> str:
    """The anchor of a schema's section, apart from the operations' (an operation and a schema may share a name)."""
    return f"schema-{schema_name}"


def row(*cells: str) -> str:
    """A table row; a cell's line breaks and pipes would end the row or the cell."""
    return "| " + " | ".join(str(cell).replace("\n", " ").replace("|", "\\|") for cell in cells) + " |"
