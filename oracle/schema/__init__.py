"""The JSON Schema of a suite's ``manifest.json`` (``manifest.schema.json``, JSON Schema
2020-12, versioned with the manifest's ``schema_version``), and a small validator for
the part of JSON Schema it uses, so that ``verify`` enforces it without a dependency.

The validator implements: ``type`` (one name or a list), ``const``, ``enum``,
``properties``, ``required``, ``additionalProperties`` (false or a schema),
``propertyNames``, ``minProperties``, ``items``, ``minItems``, ``pattern`` (Python
``re.search``, the schema's patterns being anchored), ``minLength``, ``minimum``,
``anyOf``, ``oneOf`` and ``$ref`` to ``#/$defs/NAME``. A keyword it does not implement is
an error (the schema cannot silently use more than is enforced); annotations
(``$schema``, ``$id``, ``title``, ``description``) are ignored.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_FILE", "manifest_schema", "schema_problems", "validate"]

SCHEMA_FILE = Path(__file__).with_name("manifest.schema.json")

_ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs"}
_KEYWORDS = {"type", "const", "enum", "properties", "required", "additionalProperties",
             "propertyNames", "minProperties", "items", "minItems", "pattern", "minLength",
             "minimum", "anyOf", "oneOf", "$ref"}


@lru_cache(maxsize=1)
def manifest_schema() -> dict[str, Any]:
    """The manifest schema shipped with the package."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise ValueError(f"schema: unknown type {t!r}")


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) \
        else a == b


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None,
             where: str = "$") -> list[str]:
    """The places where ``value`` breaks ``schema`` (empty when it conforms), each as
    ``"$.cases[3].expected.codes: ..."``.

    Raises:
        ValueError: the schema uses a keyword this validator does not implement.
    """
    root = schema if root is None else root
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"schema at {where}: keywords {sorted(unknown)} are not "
                         "implemented by this validator")
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"schema: only #/$defs/ references are implemented, got {ref!r}")
        return validate(value, root["$defs"][ref[len("#/$defs/"):]], root, where)
    out: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return [f"{where}: expected {' or '.join(types)}, got {type(value).__name__}"]
    if "const" in schema and not _equal(value, schema["const"]):
        out.append(f"{where}: must be {schema['const']!r}, got {value!r}")
    if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
        out.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{where}: {value!r} does not match {schema['pattern']!r}")
        if len(value) < schema.get("minLength", 0):
            out.append(f"{where}: shorter than {schema['minLength']} characters")
    if _is_type(value, "number") and "minimum" in schema and value < schema["minimum"]:
        out.append(f"{where}: {value!r} is below the minimum {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{where}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                out += validate(item, schema["items"], root, f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{where}: missing field {key!r}")
        if len(value) < schema.get("minProperties", 0):
            out.append(f"{where}: fewer than {schema['minProperties']} fields")
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            if "propertyNames" in schema:
                out += validate(key, schema["propertyNames"], root, f"{where} (name {key!r})")
            if key in props:
                out += validate(v, props[key], root, f"{where}.{key}")
            elif extra is False:
                out.append(f"{where}: unexpected field {key!r}")
            elif isinstance(extra, dict):
                out += validate(v, extra, root, f"{where}.{key}")
    if "anyOf" in schema:
        if not any(not validate(value, s, root, where) for s in schema["anyOf"]):
            out.append(f"{where}: matches none of the allowed forms")
    if "oneOf" in schema:
        n = sum(1 for s in schema["oneOf"] if not validate(value, s, root, where))
        if n != 1:
            out.append(f"{where}: matches {n} of the allowed forms, not exactly one")
    return out


def schema_problems(manifest: Any) -> list[str]:
    """The places where a parsed manifest breaks ``manifest.schema.json``."""
    return validate(manifest, manifest_schema())
