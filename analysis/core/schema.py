"""Read the harness's YAML files and check them against their JSON schemas (configs/schema/).

The schemas are the one place that states a default: a validator made with `fill_defaults`
writes each missing property's `default` into the document as it checks it, so the typed model
(analysis.core.model) is built from a complete document and no code repeats a default.
Everything wrong with a document is reported as one line naming the fix (ConfigError).
"""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Iterator

import yaml

from analysis.core import backend_path

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "configs" / "schema"
SWEEP_SCHEMA = "sweep.schema.yaml"

# libyaml's loader where PyYAML has it: every Snakemake start (a no-op re-run too) reads the
# sweep, the kernel table and the schemas.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ConfigError(Exception):
    """Bad input: the message is one line that says what to change."""


def read_yaml(path: Path) -> Any:
    try:
        with open(path) as f:
            return yaml.load(f, Loader=_LOADER)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory: name a sweep file (YAML) such as configs/default.yaml") from None
    except (UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path}: cannot be read as a YAML file ({e}): name a sweep file such as configs/default.yaml") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None


def load_schema(name: str) -> dict[str, Any]:
    """A schema of configs/schema/ by file name; the sweep schema as `sweep_schema` assembles it."""
    return sweep_schema() if name == SWEEP_SCHEMA else _read_schema(SCHEMA_DIR / name)


def _read_schema(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_LOADER)


def sweep_schema() -> dict[str, Any]:
    """The sweep file's schema: configs/schema/sweep.schema.yaml with each backend's part
    (analysis/backends/<name>.schema.yaml, or a user's beside its module; analysis.core.backend_path)
    put in: the `backends` list names the backends that run where listed (`listed`: a line of its
    description), and a backend with a `section` gets that top-level key. Adding a backend edits
    no schema. The configuration reference is generated from this."""
    doc = _read_schema(SCHEMA_DIR / SWEEP_SCHEMA)
    props = doc["properties"]
    listed = []
    for name, place in _places().items():
        part = _backend_part(place)
        if "listed" in part:
            listed.append(f"{name}: {part['listed']}")
            props["backends"]["items"].setdefault("enum", []).append(name)
        if "section" in part:
            if name in props:
                raise ConfigError(f"{place.module}: backend {name} would replace the sweep file's own key {name}: "
                                  "rename the backend")
            props[name] = part["section"]
    props["backends"]["description"] += " " + "; ".join(listed) + "."
    return doc


def backend_sections() -> list[str]:
    """The backends with a section of their own in the sweep file (its top-level key is the name)."""
    return [name for name, place in _places().items() if "section" in _backend_part(place)]


def _places() -> dict[str, backend_path.Place]:
    try:
        return backend_path.places()
    except backend_path.BackendPathError as e:
        raise ConfigError(str(e)) from None


def _backend_part(place: backend_path.Place) -> dict[str, Any]:
    """A backend's part of the sweep file ({listed: what it is} when it has no schema file)."""
    if not place.schema.exists():
        return {"listed": place.name}
    part = read_yaml(place.schema)
    if not isinstance(part, dict) or not part or set(part) - {"listed", "section"} \
            or not isinstance(part.get("listed", ""), str) or not isinstance(part.get("section", {}), dict):
        raise ConfigError(f"{place.schema}: a backend's part of the sweep file is `listed: <what it is>` (it runs "
                          "where the sweep lists it in backends) and/or `section: <JSON schema of its section>`")
    return part


def schema_default(schema_name: str, *where: str) -> Any:
    """One property's default as the schema states it (`where`: the keys down to the property,
    e.g. "properties", "results_dir"), for a caller that reads a document without validating it
    (the up-to-date check needs results_dir before anything else) or names a default in its text."""
    part: Any = load_schema(schema_name)
    for key in where:
        part = part[key]
    return copy.deepcopy(part["default"])


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON Schema counts 128.0 as an integer; the binaries' fixed-width arguments and range()
    # do not, and a float there failed inside a job (a traceback) instead of here.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    # YAML's .nan and .inf are floats: .nan compares false with every limit (it disabled the
    # time limit) and .inf overflows where a number becomes an integer.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def strict_validator(schema: dict[str, Any], fill_defaults: bool = False) -> Any:
    """A Draft 7 validator whose `integer` is a whole number written without a point and whose
    `number` is finite, for every schema the harness reads (sweep, kernel table, fingerprint).
    `fill_defaults`: also write every missing property's `default` into the document (the
    jsonschema documentation's recipe), before checking that object's properties, so a default
    object (`time_limit: {}`) gets its own properties' defaults too."""
    # jsonschema is imported here, not at the top: it is 40 % of the configuration's import time,
    # and a module that imports the configuration without loading a sweep validates nothing.
    import jsonschema

    checker = jsonschema.Draft7Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    validators: dict[str, Any] = {}
    if fill_defaults:
        check_properties = jsonschema.Draft7Validator.VALIDATORS["properties"]

        def fill_then_check(validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
            if isinstance(instance, dict):
                for name, sub in properties.items():
                    if isinstance(sub, dict) and "default" in sub and name not in instance:
                        instance[name] = copy.deepcopy(sub["default"])  # never share the schema's own list
            yield from check_properties(validator, properties, instance, schema)

        validators["properties"] = fill_then_check
    return jsonschema.validators.extend(jsonschema.Draft7Validator, validators, type_checker=checker)(schema)


def schema_message(e: Any) -> str:
    """One schema error as `where: what to change`."""
    where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
    value = e.instance
    if e.validator == "type" and isinstance(value, float) and not isinstance(value, bool):
        wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        if not math.isfinite(value) and {"number", "integer"} & set(wanted):
            return f"{where}: {value} is not a finite number: give a number such as 1 or 0.5"
        if "integer" in wanted and value.is_integer():
            return f"{where}: {value} is not a whole number: write {int(value)} (without a decimal point)"
    if e.validator == "minLength" and value == "":
        return f"{where}: empty: give a value"
    if e.validator == "not" and "propertyNames" in e.absolute_schema_path:
        # A key the schema refuses in this place (a selector a check's kind does not read).
        return f"{where}/{e.instance}: not used here: remove it"
    return f"{where}: {e.message}"


def validate_doc(doc: Any, schema_name: str, path: Path, fill_defaults: bool = False,
                 schema: dict[str, Any] | None = None) -> None:
    """Raise ConfigError on the first error; with `fill_defaults`, `doc` comes back with the
    schema's defaults written in. `schema`: a part of the named schema instead of the whole."""
    errors = sorted(strict_validator(schema or load_schema(schema_name), fill_defaults).iter_errors(doc),
                    key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(f"{path}: {schema_message(errors[0])} (schema {schema_name})")


def filled(doc: Any, schema_name: str, *where: str) -> Any:
    """`doc` checked against one part of a schema (say "properties", "time_limit") with that part's
    defaults written in: for a caller that builds one section on its own (a test, a one-cell
    command) from what it states."""
    schema = load_schema(schema_name)
    part: Any = schema
    for key in where:
        part = part[key]
    validate_doc(doc, schema_name, Path("/".join(where)), fill_defaults=True,
                 schema={**part, "definitions": schema.get("definitions", {})})
    return doc


def base_dir(config_path: Path) -> Path:
    """What relative paths in a sweep file are relative to: the repository for the shipped
    configs, the file's own directory for a user's config kept elsewhere."""
    p = config_path.resolve()
    return REPO if p.is_relative_to(REPO) else p.parent


def resolve_path(p: str, base: Path) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() else base / q
