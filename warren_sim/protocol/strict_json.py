"""A strict JSON reader for everything that arrives over the wire, and the canonical writer for hashes.

Why not plain ``json.loads``: Python's reader is lenient where warren-agent/0 must not be. It accepts
``NaN``/``Infinity`` (not JSON), silently keeps the *last* of duplicate keys (so a client and the server can
disagree about what a body said), turns ``1e400`` into ``inf``, accepts integers that no JavaScript or Go
client can represent exactly, auto-detects UTF-16/32 byte input, and on deep nesting raises
``RecursionError`` (a 5xx waiting to happen). :func:`loads_strict` refuses all of these with a
:class:`StrictJSONError` whose message teaches: what was wrong, where (a JSON path such as ``$.args.item`` or a
line/column), and what would be valid.

How it stays cheap and safe:

* Nesting depth is checked *before* parsing, by a regex scan of brackets outside strings (skipped entirely
  when the text does not even contain ``max_depth`` opening brackets), so the stdlib parser never recurses
  deeper than ``max_depth`` and ``RecursionError`` cannot surface.
* The stdlib parser runs with hooks that never raise: a bad number, a non-finite constant or an object with a
  duplicate key is replaced by a marker. Only when a marker was produced (or a surrogate escape appears in the
  text) is the parsed tree walked, iteratively, to find the first problem and its JSON path. The common, valid
  case pays for the hooks and nothing else.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

import orjson

from warren_sim.engine.command import json_type_name

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "StrictJSONError",
    "canonical_json",
    "format_path",
    "json_type_name",
    "loads_strict",
]

#: Largest request body the server reads (the HTTP layer answers 413 above it).
MAX_BODY_BYTES = 64 * 1024
#: Default limit on nested objects/arrays: ``{}`` is depth 1, ``{"a": []}`` depth 2.
MAX_DEPTH = 64
#: Integers must survive a round trip through an IEEE double (JavaScript's Number.MAX_SAFE_INTEGER).
MAX_SAFE_INTEGER = 2**53 - 1

_MAX_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A JSON string (unrolled loop, so long strings cost one regex step per run of plain characters) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# An escaped UTF-16 surrogate: the only way a valid UTF-8 text can still decode to an unpaired surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class StrictJSONError(ValueError):
    """The input is not JSON that warren-agent/0 accepts; ``str(err)`` says what, where and what is valid.

    ``path`` is a JSON path (``$.args.item``) when the problem is inside a parsed value, ``line``/``column``
    (1-based) when it is a position in the text; either may be ``None``.
    """

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, column: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column


def format_path(parts: Iterable[str | int]) -> str:
    """Render a location as a JSON path: ``$``, ``$.args.item``, ``$.agents[0]``, ``$.params["a b"]``.

    Keys that are not plain identifiers use a bracketed JSON string so the path is never ambiguous.
    """
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(part, ensure_ascii=False)}]")
    return "".join(out)


def canonical_json(obj: Any) -> bytes:
    """The one byte form used for content hashes (e.g. a briefing's ``content_hash``).

    Sorted keys, no whitespace, UTF-8 without ``\\u`` escapes for non-ASCII, non-finite floats refused.
    Keys sort by code point (Python's order), not by UTF-16 unit as RFC 8785 does; that only matters for
    keys outside the Basic Multilingual Plane, and the hash is only ever computed by this function.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


# --------------------------------------------------------------------------------------------- internals


class _Bad:
    """Stands in the parsed tree for a value the hooks refused; the walk reports it with its path."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


class _DupDict(dict[str, Any]):
    """A parsed object that had a duplicate key; remembers which key came twice."""

    __slots__ = ("dup_key",)
    dup_key: str


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _snippet(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _decode(data: bytes | bytearray | memoryview | str) -> str:
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as exc:
            line, col = _line_col(data, exc.start)
            raise StrictJSONError(
                f"the text contains an unpaired UTF-16 surrogate (U+{ord(data[exc.start]):04X}) at line {line}, "
                f"column {col}; JSON text must be valid Unicode",
                line=line,
                column=col,
            ) from None
        text = data
    else:
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
            raise StrictJSONError(
                f"the body is not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                f"(line {line}, column {col}) {exc.reason}; send JSON encoded as UTF-8",
                line=line,
                column=col,
            ) from None
    if text.startswith("\ufeff"):
        raise StrictJSONError(
            "the body starts with a byte order mark (U+FEFF); send UTF-8 JSON without a BOM", line=1, column=1
        )
    return text


def _check_depth(text: str, max_depth: int) -> None:
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot possibly nest deeper: skip the scan
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > max_depth:
                line, col = _line_col(text, match.start())
                raise StrictJSONError(
                    f"JSON nests deeper than {max_depth} levels (the object or array opening at line {line}, "
                    f"column {col} is level {depth}); objects and arrays may nest at most {max_depth} levels deep",
                    line=line,
                    column=col,
                )
        elif token == "]" or token == "}":
            depth -= 1  # unbalanced text is left for the parser to report


def _find_problem(root: object, check_strings: bool) -> tuple[list[str | int], str] | None:
    """Depth-first, document-order search for the first refused value. Iterative: no recursion limit."""
    stack: list[tuple[list[str | int], object]] = [([], root)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _Bad):
            return path, node.what
        if isinstance(node, dict):
            if isinstance(node, _DupDict):
                return path + [node.dup_key], (
                    f"duplicate key {json.dumps(node.dup_key, ensure_ascii=False)}: "
                    "each key may appear only once in an object"
                )
            items = list(node.items())
            for key, value in reversed(items):
                if check_strings and not _is_valid_unicode(key):
                    return path, (
                        f"the key {json.dumps(key)} contains an unpaired surrogate escape; "
                        "a \\uD800-\\uDFFF escape must be half of a valid surrogate pair"
                    )
                stack.append((path + [key], value))
        elif isinstance(node, list):
            for index in range(len(node) - 1, -1, -1):
                stack.append((path + [index], node[index]))
        elif check_strings and isinstance(node, str) and not _is_valid_unicode(node):
            return path, (
                "the string contains an unpaired surrogate escape; a \\uD800-\\uDFFF escape must be half "
                "of a valid surrogate pair"
            )
    return None


def _is_valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_SLOW = object()
_KEY_END = re.compile(r'"\s*:')  # the end of every key (and of nothing else, or of more: see _loads_fast)
_NESTED = (dict, list)


def _loads_fast(text: str, max_depth: int) -> object:
    """The document when it is plainly valid, parsed by orjson; ``_SLOW`` when anything needs a closer look.

    orjson refuses malformed JSON, NaN/Infinity, numbers that overflow a double and unpaired surrogates by
    itself; what it would let through is checked here: nesting deeper than ``max_depth`` and integers beyond
    +/-(2**53-1) (one walk over the parsed values), and duplicate keys, which orjson merges silently. For
    those: every key ends with ``"`` and optional whitespace before ``:``, and outside strings nothing else
    does, so the matches of ``"\\s*:`` in the text are at least the keys written (more if a string holds one);
    a duplicate leaves the parsed objects with fewer keys than were written, so equal counts mean no
    duplicate. Whatever is not plainly valid goes to the slow parser, which words the refusal, so both paths
    accept and refuse the same documents with the same errors (tests/test_strict_json.py). ~10x faster on a
    64-command ``agent.submit_many`` frame (bench/results/r4-perf-wire.md).
    """
    if _SURROGATE_ESCAPE.search(text) is not None:
        return _SLOW
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _SLOW
    kind = type(value)
    if kind is not dict and kind is not list:
        return value if _plain_scalar(value) else _SLOW
    keys = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return _SLOW
        if type(node) is dict:
            keys += len(node)
            node = node.values()
        for child in node:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif (kind is int or kind is float) and not _plain_scalar(child):
                return _SLOW
    if len(_KEY_END.findall(text)) != keys:
        return _SLOW
    return value


def _plain_scalar(value: object) -> bool:
    """No float (orjson reads an integer literal beyond 64 bits as one: the slow parser refuses it) and no
    integer beyond +/-(2**53-1)."""
    if type(value) is float:
        return False
    return type(value) is not int or -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def loads_strict(data: bytes | bytearray | memoryview | str, *, max_depth: int = MAX_DEPTH) -> object:
    """Parse one JSON document, refusing anything warren-agent/0 does not accept.

    Refused, each with a :class:`StrictJSONError` that says what, where and what is valid: non-UTF-8 bytes
    (and a leading BOM), malformed JSON, nesting deeper than ``max_depth``, duplicate object keys,
    ``NaN``/``Infinity``/``-Infinity``, numbers that overflow a double, integers outside
    +/-(2**53-1), and strings with unpaired surrogate escapes. The body size limit
    (:data:`MAX_BODY_BYTES`) is the HTTP layer's job (it answers 413, not 400).
    """
    text = _decode(data)
    if not text.strip():
        raise StrictJSONError(
            "the body is empty; send exactly one JSON value (for example an object)", line=1, column=1
        )
    fast = _loads_fast(text, max_depth)
    if fast is not _SLOW:
        return fast
    _check_depth(text, max_depth)
    problems = 0

    def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal problems
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        problems += 1
        seen: set[str] = set()
        marked = _DupDict(pairs)
        for key, _ in pairs:
            if key in seen:
                marked.dup_key = key
                break
            seen.add(key)
        return marked

    def constant(name: str) -> _Bad:
        nonlocal problems
        problems += 1
        return _Bad(
            f"{name} is not a JSON value: JSON numbers must be finite; use null or a string for a missing "
            "or special value"
        )

    def integer(literal: str) -> int | _Bad:
        nonlocal problems
        digits = len(literal) - (literal[0] == "-")
        if digits <= _MAX_SAFE_DIGITS:
            value = int(literal)
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return value
        problems += 1
        return _Bad(
            f"the integer {_snippet(literal)} is out of range: integers must lie between "
            f"-{MAX_SAFE_INTEGER} and {MAX_SAFE_INTEGER} (2**53-1) so that every client reads them exactly; "
            "send larger identifiers as strings"
        )

    def real(literal: str) -> float | _Bad:
        nonlocal problems
        value = float(literal)
        if math.isfinite(value):
            return value
        problems += 1
        return _Bad(
            f"the number {_snippet(literal)} overflows a 64-bit float; numbers must be finite doubles"
        )

    try:
        result = json.loads(
            text, object_pairs_hook=object_pairs, parse_constant=constant, parse_int=integer, parse_float=real
        )
    except json.JSONDecodeError as exc:
        what = exc.msg[0].lower() + exc.msg[1:] if exc.msg else "invalid JSON"
        raise StrictJSONError(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {what}; send exactly one JSON value "
            "(RFC 8259: double-quoted keys and strings, no trailing commas, no comments)",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:  # only reachable when a caller raises max_depth near the interpreter's limit
        raise StrictJSONError(
            f"JSON nests too deeply for this server; objects and arrays may nest at most {max_depth} levels"
        ) from None

    check_strings = _SURROGATE_ESCAPE.search(text) is not None
    if problems or check_strings:
        found = _find_problem(result, check_strings)
        if found is not None:
            parts, what = found
            path = format_path(parts)
            raise StrictJSONError(f"invalid JSON at {path}: {what}", path=path)
    return result
