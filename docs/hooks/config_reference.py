"""MkDocs hook: the configuration reference page, written from the JSON schemas at build time.

The schemas (configs/schema/) are what the harness validates every file against and the only
place a default is stated; a page written by hand from them drifted (configs/README.md's table
had to be edited beside every new key). This hook adds `reference/configuration.md` to the site
as a generated file, from each schema's properties, types, defaults, allowed values and
descriptions, so the page cannot say what the schema does not. The page is never committed.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# mkdocs loads a hook by its path, and `.venv/bin/mkdocs` puts its own folder first on sys.path,
# not the repository: the schema loader lives in the repository's analysis/ package.
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mkdocs.config.defaults import MkDocsConfig  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

from analysis.core import schema  # noqa: E402

PAGE = "reference/configuration.md"

Row = tuple[str, str, str, str, str, bool]  # key, type, default, allowed, description, required


def sweep_schema() -> dict[str, Any]:
    """The sweep file's schema as the harness validates it: configs/schema/sweep.schema.yaml
    with each backend's part (analysis/backends/<name>.schema.yaml) assembled in."""
    return schema.sweep_schema()


# (title, schema file as the reader finds it, how to get the schema, what the file is)
SCHEMAS: list[tuple[str, str, Any, str]] = [
    ("Sweep file", "configs/schema/sweep.schema.yaml", sweep_schema,
     "What `./harness sweep --config F` reads: `configs/default.yaml` and the other sweep files, "
     "or your own."),
    ("Kernel table", "configs/schema/kernels.schema.yaml", lambda: schema.load_schema("kernels.schema.yaml"),
     "`configs/kernels.yaml`, and the tables a sweep adds with `extra_kernel_tables` (your own kernels)."),
    ("gem5 systems", "configs/schema/gem5_systems.schema.yaml",
     lambda: schema.load_schema("gem5_systems.schema.yaml"), "`configs/gem5_systems.yaml`: the systems gem5 simulates."),
    ("Golden fingerprint", "configs/schema/fingerprint.schema.yaml",
     lambda: schema.load_schema("fingerprint.schema.yaml"),
     "`<golden_dir>/<name>.fingerprint.json`, written by `./harness bless` and checked by `./harness regress`."),
]


def cell(value: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(value.replace("|", "\\|").split())


def code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False).replace("|", "\\|") + "`"


def anchor(title: str, name: str) -> str:
    return f"{title}-{name}".lower().replace(" ", "-").replace("_", "-")


def type_of(node: dict[str, Any], title: str) -> str:
    """The JSON type(s) of a node; a reference names the definition it points to."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{anchor(title, name)})"
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if "array" in kinds and isinstance(node.get("items"), dict):
        inner = type_of(node["items"], title)
        kinds = [f"array of {inner}" if k == "array" and inner else k for k in kinds]
    if "object" in kinds and isinstance(node.get("additionalProperties"), dict) and not node.get("properties"):
        inner = type_of(node["additionalProperties"], title)
        kinds = [f"map of {inner}" if k == "object" and inner else k for k in kinds]
    return " or ".join(kinds)


def allowed(node: dict[str, Any]) -> str:
    """Enum, const, bounds and patterns, as the validator checks them."""
    parts = []
    target = node.get("items") if node.get("type") == "array" and isinstance(node.get("items"), dict) else node
    for where in (node, target) if target is not node else (node,):
        if "enum" in where:
            parts.append("one of " + ", ".join(code(v) for v in where["enum"]))
        if "const" in where:
            parts.append("exactly " + code(where["const"]))
        for key, text in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if key in where:
                parts.append(f"{text} {where[key]}")
        if "pattern" in where:
            parts.append(f"matches `{where['pattern']}`")
    if "minItems" in node:
        parts.append(f"at least {node['minItems']} item{'s' if node['minItems'] != 1 else ''}")
    if node.get("uniqueItems"):
        parts.append("no repeats")
    return "; ".join(parts)


def rows(node: dict[str, Any], prefix: str, title: str, required: bool) -> Iterator[Row]:
    """One row per property, nested objects (in arrays and maps too) as dotted keys."""
    if prefix:
        default = code(node["default"]) if "default" in node else ""
        yield prefix, type_of(node, title), default, allowed(node), node.get("description", ""), required
    if "$ref" in node:
        return  # a definition is listed once, in its own table
    inner = node
    suffix = ""
    if isinstance(node.get("items"), dict) and "properties" in node["items"]:
        inner, suffix = node["items"], "[]"
    elif isinstance(node.get("additionalProperties"), dict) and "properties" in node["additionalProperties"]:
        inner, suffix = node["additionalProperties"], ".<name>"
    needed = set(inner.get("required", []))
    for name, sub in inner.get("properties", {}).items():
        if isinstance(sub, dict):
            key = f"{prefix}{suffix}.{name}" if prefix else name
            yield from rows(sub, key, title, name in needed)


def table(node: dict[str, Any], title: str) -> list[str]:
    out = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for key, kind, default, allow, text, required in rows(node, "", title, False):
        default = default or ("(required)" if required else "")
        out.append(f"| `{key}` | {kind} | {default} | {cell(allow)} | {cell(text)} |")
    return out


def section(title: str, path: str, doc: dict[str, Any], what: str) -> list[str]:
    out = [f"## {title}", "", f"Schema `{path}`. {what}", ""]
    if doc.get("description"):
        out += [cell(doc["description"]), ""]
    out += table(doc, title) + [""]
    for name, node in doc.get("definitions", {}).items():
        out += [f"### {name} {{#{anchor(title, name)}}}", ""]
        if node.get("description"):
            out += [cell(node["description"]), ""]
        out += [f"Type: {type_of(node, title) or 'any'}. {cell(allowed(node))}".rstrip(), ""]
        if node.get("properties") or isinstance(node.get("items"), dict) and node["items"].get("properties"):
            out += table(node, title) + [""]
    return out


def page() -> str:
    out = ["# Configuration reference", "",
           "Generated when the site is built, from the JSON schemas the harness validates every file "
           "against (`configs/schema/`, read through `analysis/core/schema.py`): the schemas are the "
           "only place a default is stated, and the loader writes each default into the document as "
           "it validates it. Nested keys are dotted: `kernels[].kernel` is the `kernel` of each item "
           "of the list `kernels`, `sizes.<name>` an entry of a map. What the sweep files are for, "
           "and the rules of the verdicts: `configs/README.md`.", ""]
    for title, path, load, what in SCHEMAS:
        out += section(title, path, load(), what)
    return "\n".join(out) + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=page()))
    return files
