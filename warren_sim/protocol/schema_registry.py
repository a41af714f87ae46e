"""The normative JSON Schemas (draft 2020-12) of warren-agent/0: finding, loading and checking against them.

The schemas are data files, ``warren_sim/protocol/schemas/<name>.json``, one per wire object (run creation
body, run, run list, claim response, release response, briefing, envelope, command, receipt, problem,
scenario list and description, server info, schema list; ``objective`` is shared by several). They are the
contract for *any* warren-agent/0 server or client, so they are written by hand and kept beside the models
rather than generated from them: tests check that what this server sends fits them, and the seed's worked
example is among the golden fixtures (``tests/fixtures/``).

Each schema's ``$id`` is ``urn:warren-agent:0:<name>`` and cross-references use those ids, so a validator
needs the whole set: :func:`registry` builds it, :func:`validator` returns a ready validator. Validation
needs the optional ``jsonschema`` package (the ``test`` extra); loading and listing do not.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

__all__ = [
    "ID_PREFIX",
    "UnknownSchemaError",
    "load_schema",
    "registry",
    "schema_id",
    "schema_names",
    "validation_errors",
    "validator",
]

#: Every schema's ``$id`` is this prefix plus the schema's name.
ID_PREFIX = "urn:warren-agent:0:"


class UnknownSchemaError(KeyError):
    """No schema has that name; ``str()`` lists the names there are."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no schema named {self.name!r}; schemas: {', '.join(schema_names())}"


def _files() -> Any:
    return resources.files("warren_sim.protocol") / "schemas"


@functools.cache
def schema_names() -> tuple[str, ...]:
    """The names of all schemas, sorted (``briefing``, ``command``, ``envelope``, ...)."""
    return tuple(sorted(p.name[: -len(".json")] for p in _files().iterdir() if p.name.endswith(".json")))


@functools.cache
def _load(name: str) -> dict[str, Any]:
    if name not in schema_names():
        raise UnknownSchemaError(name)
    data = json.loads((_files() / f"{name}.json").read_text(encoding="utf-8"))
    if data.get("$id") != schema_id(name):
        raise ValueError(f"schemas/{name}.json: $id must be {schema_id(name)!r}, got {data.get('$id')!r}")
    return data


def load_schema(name: str) -> dict[str, Any]:
    """A fresh copy of the schema called ``name`` (raises :class:`UnknownSchemaError`)."""
    return copy.deepcopy(_load(name))


def schema_id(name: str) -> str:
    """The ``$id`` of a schema: ``urn:warren-agent:0:<name>``."""
    return ID_PREFIX + name


@functools.cache
def registry() -> Any:
    """A ``referencing.Registry`` holding every schema under its ``$id`` (needs ``jsonschema``); built once."""
    from referencing import Registry, Resource

    return Registry().with_resources((schema_id(n), Resource.from_contents(_load(n))) for n in schema_names())


@functools.cache
def validator(name: str) -> Any:
    """A draft 2020-12 validator for one schema, resolving references to the others (needs ``jsonschema``)."""
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "validating against the warren-agent/0 schemas needs the jsonschema package: "
            "pip install 'warren-sim[test]' (or pip install jsonschema)"
        ) from None
    # Not checked against the draft's metaschema here: these are the package's own files, each checked by
    # tests/test_schemas.py, and the check was most of a validator's build (~15 ms a schema), paid again by
    # every process that validates (each test run, each `warren conformance`).
    return jsonschema.Draft202012Validator(_load(name), registry=registry())


def validation_errors(instance: object, name: str) -> list[str]:
    """Every way ``instance`` breaks schema ``name``, as ``"$.path: message"`` lines (empty when it fits)."""
    out = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(f"{path}: {error.message}")
    return out
