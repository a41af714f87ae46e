"""The one cattrs converter for warren-agent/0, and the one place wire errors are turned into teaching text.

Why a custom converter: cattrs' defaults are built for trusted data and coerce quietly: ``str(x)`` accepts a
number for a string, ``float(x)`` accepts ``true`` and ``"1.5"``, a list field accepts any iterable (so
``"ab"`` becomes ``["a", "b"]``), and a bad ``Literal`` gives an unreadable message. Here every primitive,
list, mapping, literal and attrs class has a strict hook that checks the JSON type and raises a
:class:`WireTypeError` that says what was expected. Unknown keys are refused (``forbid_extra_keys=True``).

:func:`structure_or_error` then walks cattrs' exception groups and produces one :class:`WireError` listing
each bad field by JSON path (``$.pace: expected ...``) and, for unknown keys, the valid field names.

Unstructuring gives plain dicts in field order; free-form JSON fields (``dict``) are passed through as they
are (they already are JSON data built by the engine) rather than copied recursively.
"""

import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_unstructure_fn, make_mapping_structure_fn, override

from warren_sim.protocol.models import (
    ControlledAgents,
    FieldValueError,
    NpcPolicyValue,
    ParamValue,
    RoleSelector,
    RunView,
)
from warren_sim.protocol.strict_json import MAX_SAFE_INTEGER, format_path, json_type_name

__all__ = ["WireError", "WireTypeError", "converter", "describe_type", "make_converter", "structure_or_error"]

T = TypeVar("T")


class WireTypeError(TypeError):
    """A value has the wrong JSON type (or is not allowed) for its field; the message says what was expected.

    ``got`` describes the offending value when the problem is its type, so the error report can restate the
    expectation from the field's full annotation (``a number or null`` rather than the inner ``a number``).
    """

    def __init__(self, message: str, got: str | None = None) -> None:
        super().__init__(message)
        self.got = got


class WireError(ValueError):
    """Data did not fit a wire model. ``problems`` lists ``(json_path, message)``; ``str()`` teaches."""

    def __init__(self, message: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems


def _wire_name(cls: type) -> str:
    return getattr(cls, "WIRE_NAME", None) or f"the {cls.__name__} object"


def describe_type(tp: Any) -> str:
    """Say in JSON words what a type annotation accepts: ``"a number or null"``, ``"one of 'a', 'b'"``."""
    if tp is str:
        return "a string"
    if tp is bool:
        return "a boolean (true or false)"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is dict or tp is Any:
        return "an object" if tp is dict else "any JSON value"
    if tp == ParamValue:
        return "a string, number or boolean"
    if tp == ControlledAgents:
        return 'an array of agent ids, "all", or {"role": ROLE}'
    if tp == NpcPolicyValue:
        return "'solution', 'none' or a team {KEY: POLICY}"
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in get_args(tp))
    if origin is list:
        (elem,) = get_args(tp) or (Any,)
        return f"an array of {_plural(describe_type(elem))}"
    if origin is dict:
        args = get_args(tp)
        if not args or args[1] is Any:
            return "an object"
        return f"an object whose values are {_plural(describe_type(args[1]))}"
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if type(None) in args:
            rest = [a for a in args if a is not type(None)]
            inner = describe_type(rest[0]) if len(rest) == 1 else " or ".join(describe_type(a) for a in rest)
            return f"{inner} or null"
        return " or ".join(describe_type(a) for a in args)
    if isinstance(tp, type) and attrs.has(tp):
        return f"an object ({_wire_name(tp)})"
    return getattr(tp, "__name__", repr(tp))


def _plural(phrase: str) -> str:
    if phrase == "a string, number or boolean":
        return "strings, numbers or booleans"
    for article in ("an ", "a "):
        if phrase.startswith(article):
            noun = phrase[len(article) :]
            head, sep, tail = noun.partition(" ")
            if head in ("string", "integer", "number", "boolean", "object", "array"):
                return head + "s" + sep + tail
            return noun
    return phrase


def _got(value: object) -> str:
    shown = repr(value) if isinstance(value, bool | int | float | str) or value is None else ""
    if isinstance(value, str) and len(shown) > 42:
        shown = shown[:40] + "...'"
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif value is None:
        return "null"
    return f"{json_type_name(value)} ({shown})" if shown else json_type_name(value)


# --------------------------------------------------------------------------------------------- strict hooks


def _structure_str(value: object, _: type) -> str:
    if isinstance(value, str):
        return value
    raise WireTypeError(f"expected a string, got {_got(value)}", _got(value))


def _structure_bool(value: object, _: type) -> bool:
    if isinstance(value, bool):
        return value
    raise WireTypeError(f"expected a boolean (true or false), got {_got(value)}", _got(value))


def _structure_int(value: object, _: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise WireTypeError(f"expected an integer within +/-{MAX_SAFE_INTEGER}, got {value}")
    if isinstance(value, float) and value.is_integer():
        raise WireTypeError(
            f"expected an integer, got {value!r} (written as a decimal); write it as {int(value)}"
        )
    raise WireTypeError(f"expected an integer, got {_got(value)}", _got(value))


def _structure_float(value: object, _: type) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        result = float(value)
        if math.isfinite(result):
            return result
    raise WireTypeError(f"expected a finite number, got {_got(value)}", _got(value))


def _structure_json_object(value: object, _: type) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    raise WireTypeError(f"expected an object, got {_got(value)}", _got(value))


def _structure_param_value(value: object, _: type) -> ParamValue:
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise WireTypeError(f"expected a string, number or boolean, got {_got(value)}")


def _literal_factory(tp: Any) -> Callable[[object, Any], Any]:
    allowed = get_args(tp)
    expected = describe_type(tp)

    def structure_literal(value: object, _: Any) -> Any:
        for option in allowed:
            if type(value) is type(option) and value == option:
                return option
        raise WireTypeError(f"expected {expected}, got {_got(value)}")

    return structure_literal


def _make_strict_list_factory(conv: cattrs.Converter) -> Callable[[Any], Callable[[object, Any], list[Any]]]:
    def factory(tp: Any) -> Callable[[object, Any], list[Any]]:
        inner = list_structure_factory(tp, conv)
        expected = describe_type(tp)

        def structure_list(value: object, _: Any) -> list[Any]:
            if not isinstance(value, list):
                raise WireTypeError(f"expected {expected}, got {_got(value)}", _got(value))
            return inner(value, tp)

        return structure_list

    return factory


def _make_strict_dict_factory(
    conv: cattrs.Converter,
) -> Callable[[Any], Callable[[object, Any], dict[Any, Any]]]:
    def factory(tp: Any) -> Callable[[object, Any], dict[Any, Any]]:
        inner = make_mapping_structure_fn(tp, conv)
        expected = describe_type(tp)

        def structure_dict(value: object, _: Any) -> dict[Any, Any]:
            if not isinstance(value, dict):
                raise WireTypeError(f"expected {expected}, got {_got(value)}", _got(value))
            return inner(value, tp)

        return structure_dict

    return factory


def _make_strict_attrs_factory(conv: cattrs.Converter) -> Callable[[type], Callable[[object, Any], Any]]:
    def factory(cls: type) -> Callable[[object, Any], Any]:
        inner: Callable[[Mapping[str, Any], Any], Any] = conv.gen_structure_attrs_fromdict(cls)
        name = _wire_name(cls)

        def structure_attrs(value: object, _: Any) -> Any:
            if not isinstance(value, dict):
                raise WireTypeError(f"{name} must be a JSON object, got {_got(value)}")
            return inner(value, cls)

        return structure_attrs

    return factory


def _is_literal(tp: Any) -> bool:
    # get_origin's overloads make mypy type the result as a ParamSpec; the runtime value is Literal's origin.
    origin: object = get_origin(tp)
    return origin is Literal


def _make_controlled_hook(conv: cattrs.Converter) -> Callable[[object, Any], ControlledAgents]:
    def structure_controlled(value: object, _: Any) -> ControlledAgents:
        if isinstance(value, list):
            return conv.structure(value, list[str])
        if value == "all":
            return "all"
        if isinstance(value, dict):
            return conv.structure(value, RoleSelector)
        raise WireTypeError(f'expected an array of agent ids, "all", or {{"role": ROLE}}, got {_got(value)}',
                            got=_got(value))

    return structure_controlled


def _make_npc_policy_hook(conv: cattrs.Converter) -> Callable[[object, Any], NpcPolicyValue]:
    def structure_npc_policy(value: object, _: Any) -> NpcPolicyValue:
        if isinstance(value, dict):
            return conv.structure(value, dict[str, str])
        if value in ("solution", "none"):
            return value
        raise WireTypeError(f"expected one of 'solution', 'none', or a team {{KEY: POLICY}} such as "
                            f'{{"courier": "solution", "*": "none"}}, got {_got(value)}', got=_got(value))

    return structure_npc_policy


def _is_generic_of(origin: type) -> Callable[[Any], bool]:
    return lambda tp: get_origin(tp) is origin and bool(get_args(tp))


def make_converter() -> cattrs.Converter:
    """Build the protocol's converter: strict JSON types, no unknown keys, detailed errors."""
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook_func(lambda tp: tp is dict or tp == dict[str, Any], _structure_json_object)
    conv.register_structure_hook_func(lambda tp: tp == ParamValue, _structure_param_value)
    conv.register_structure_hook_func(lambda tp: tp == ControlledAgents, _make_controlled_hook(conv))
    conv.register_structure_hook_func(lambda tp: tp == NpcPolicyValue, _make_npc_policy_hook(conv))
    conv.register_structure_hook_factory(_is_literal, _literal_factory)
    conv.register_structure_hook_factory(lambda tp: _is_generic_of(list)(tp), _make_strict_list_factory(conv))
    conv.register_structure_hook_factory(
        lambda tp: _is_generic_of(dict)(tp) and tp != dict[str, Any], _make_strict_dict_factory(conv)
    )
    conv.register_structure_hook_factory(
        lambda tp: isinstance(tp, type) and attrs.has(tp), _make_strict_attrs_factory(conv)
    )
    # Free-form JSON objects are already plain data: hand them through instead of copying them deeply.
    conv.register_unstructure_hook_func(lambda tp: tp is dict or tp == dict[str, Any], lambda value: value)
    # a run view's ``faults`` is left out while there are none (docs/faults.md) and ``forked_from`` from a run that
    # is no fork (docs/fork.md), as the server leaves them out: a view read and written again is the view it was
    conv.register_unstructure_hook(RunView, make_dict_unstructure_fn(RunView, conv,
                                                                     forked_from=override(omit_if_default=True),
                                                                     faults=override(omit_if_default=True)))
    return conv


converter = make_converter()


# --------------------------------------------------------------------------------------------- errors


def _collect(exc: BaseException, parts: list[str | int], expected: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(exc, ClassValidationError):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            _collect(sub, [*parts, note.name], note.type, out)
        for sub in without:
            _collect(sub, parts, None, out)
    elif isinstance(exc, IterableValidationError):
        with_notes_i, without_i = exc.group_exceptions()
        for sub, inote in with_notes_i:
            _collect(sub, [*parts, inote.index], inote.type, out)
        for sub in without_i:
            _collect(sub, parts, None, out)
    elif isinstance(exc, ForbiddenExtraKeysError):
        path = format_path(parts)
        unknown = sorted(exc.extra_fields)
        valid = ", ".join(sorted(a.name for a in attrs.fields(exc.cl)))
        noun = "field" if len(unknown) == 1 else "fields"
        where = _wire_name(exc.cl) + ("" if not parts else f" at {path}")
        out.append(
            (path, f"unknown {noun} {', '.join(repr(u) for u in unknown)} in {where}; valid fields: {valid}")
        )
    elif isinstance(exc, KeyError):
        path = format_path(parts)
        wanted = f" (expected {describe_type(expected)})" if expected is not None else ""
        out.append((path, f"{path}: required field missing{wanted}"))
    elif isinstance(exc, FieldValueError):
        path = format_path([*parts, exc.field])
        out.append((path, f"{path}: {exc.message}"))
    elif isinstance(exc, WireTypeError):
        path = format_path(parts)
        if exc.got is not None and expected is not None and type(None) in get_args(expected):
            out.append((path, f"{path}: expected {describe_type(expected)}, got {exc.got}"))
        else:
            out.append((path, f"{path}: {exc}"))
    else:
        path = format_path(parts)
        wanted = f"expected {describe_type(expected)}" if expected is not None else "invalid value"
        out.append((path, f"{path}: {wanted} ({type(exc).__name__}: {exc})"))


def structure_or_error(data: object, cls: type[T]) -> T:
    """Structure JSON data into ``cls`` or raise one :class:`WireError` that names every bad field.

    Field problems read ``$.pace: expected ...``; unknown keys read ``unknown field 'pase' in the run
    creation body; valid fields: ...``. Several problems are numbered in one message.
    """
    try:
        return converter.structure(data, cls)
    except (ClassValidationError, IterableValidationError, WireTypeError, FieldValueError) as exc:
        problems: list[tuple[str, str]] = []
        _collect(exc, [], cls, problems)
    if len(problems) == 1:
        message = problems[0][1]
    else:
        numbered = "; ".join(f"({i}) {text}" for i, (_, text) in enumerate(problems, 1))
        message = f"{len(problems)} problems in {_wire_name(cls)}: {numbered}"
    raise WireError(message, problems)
