"""The strict JSON reader refuses what warren-agent/0 does not accept, and says what, where and what is valid."""

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warren_sim.protocol.strict_json import (
    MAX_BODY_BYTES,
    MAX_SAFE_INTEGER,
    StrictJSONError,
    canonical_json,
    format_path,
    loads_strict,
)


def refuse(data: bytes | str, **kwargs: int) -> StrictJSONError:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(data, **kwargs)
    assert isinstance(info.value, ValueError)
    return info.value


def test_body_limit_constant() -> None:
    assert MAX_BODY_BYTES == 65536


@pytest.mark.parametrize(
    "text, value",
    [
        (
            '{"command_id": "c-1", "args": {"item": "toolbox-1"}}',
            {"command_id": "c-1", "args": {"item": "toolbox-1"}},
        ),
        ("[1, 2.5, -0, true, false, null]", [1, 2.5, 0, True, False, None]),
        ('"caf\\u00e9 \\ud83d\\ude00"', "caf\u00e9 \U0001f600"),
        (f"[{MAX_SAFE_INTEGER}, -{MAX_SAFE_INTEGER}]", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]),
        ("1e300", 1e300),
        ("  {}  \n", {}),
    ],
)
def test_valid_json_parses(text: str, value: object) -> None:
    assert loads_strict(text) == value
    assert loads_strict(text.encode("utf-8")) == value


def test_duplicate_key_is_refused_with_its_path() -> None:
    err = refuse(b'{"args": {"item": "a", "item": "b"}}')
    assert err.path == "$.args.item"
    assert 'duplicate key "item"' in str(err)
    assert "only once" in str(err)


def test_duplicate_key_deep_in_arrays_and_odd_keys() -> None:
    err = refuse('{"a b": {"c": [1, {"d": 1, "d": 2}]}}')
    assert err.path == '$["a b"].c[1].d'


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants_are_refused(constant: str) -> None:
    err = refuse(f'{{"args": {{"n": {constant}}}}}')
    assert err.path == "$.args.n"
    assert constant in str(err) and "finite" in str(err)


def test_float_overflow_is_refused() -> None:
    err = refuse('{"x": 1e400}')
    assert err.path == "$.x" and "1e400" in str(err)


@pytest.mark.parametrize("literal", [str(2**53), str(-(2**53)), "1" * 5000])
def test_unsafe_integers_are_refused(literal: str) -> None:
    err = refuse(f'{{"sleep_ms": {literal}}}')
    assert err.path == "$.sleep_ms"
    assert "2**53-1" in str(err)
    assert len(str(err)) < 400  # a 5000-digit literal is not echoed back in full


def test_malformed_json_reports_line_and_column() -> None:
    err = refuse('{\n  "a": 1,\n  "b": }')
    assert (err.line, err.column) == (3, 8)
    assert "line 3, column 8" in str(err)
    assert "RFC 8259" in str(err)


@pytest.mark.parametrize("text", ["{'a': 1}", '{"a": 1,}', "[1, 2] 3", '{"a": 1} // c', "tru"])
def test_not_json_at_all(text: str) -> None:
    err = refuse(text)
    assert err.line is not None and "malformed JSON" in str(err)


def test_empty_body() -> None:
    assert "empty" in str(refuse(b""))
    assert "empty" in str(refuse("  \n"))


def test_non_utf8_bytes_are_refused_with_offset() -> None:
    err = refuse(b'{"a": "\xff"}')
    assert "not valid UTF-8" in str(err)
    assert "offset 7" in str(err)
    assert (err.line, err.column) == (1, 8)


def test_utf16_is_not_auto_detected() -> None:
    refuse('{"a": 1}'.encode("utf-16"))


def test_byte_order_mark_is_refused() -> None:
    assert "byte order mark" in str(refuse(b"\xef\xbb\xbf{}"))


def test_unpaired_surrogates_are_refused() -> None:
    err = refuse('{"a": ["ok", "\\ud800"]}')
    assert err.path == "$.a[1]" and "surrogate" in str(err)
    err = refuse('{"\\udc00": 1}')
    assert "surrogate" in str(err)
    assert "surrogate" in str(refuse('"\ud800"'))  # a str that is not valid Unicode


def test_depth_limit() -> None:
    ok = "[" * 64 + "]" * 64
    assert loads_strict(ok) is not None
    err = refuse("[" * 65 + "]" * 65)
    assert "64" in str(err) and (err.line, err.column) == (1, 65)
    assert "level 4" in str(refuse('{"a": {"b": [[]]}}', max_depth=3))


def test_brackets_inside_strings_do_not_count() -> None:
    text = '{"a": "' + "[{" * 200 + '\\"[[["}'
    assert loads_strict(text) == {"a": "[{" * 200 + '"[[['}


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_pathological_depth_never_raises_recursion_error(opener: str) -> None:
    err = refuse(opener * 200_000)
    assert "nests deeper than 64" in str(err)


def test_huge_max_depth_still_does_not_leak_recursion_error() -> None:
    refuse("[" * 200_000 + "]" * 200_000, max_depth=10**9)


def test_format_path() -> None:
    assert format_path([]) == "$"
    assert format_path(["args", "item"]) == "$.args.item"
    assert format_path(["agents", 0, "engineer-1"]) == '$.agents[0]["engineer-1"]'


def test_canonical_json_is_sorted_compact_utf8() -> None:
    data = {"b": [1, 2.5], "a": "caf\u00e9", "c": {"z": None, "y": True}}
    out = canonical_json(data)
    assert out == '{"a":"caf\u00e9","b":[1,2.5],"c":{"y":true,"z":null}}'.encode()
    assert canonical_json(json.loads(out)) == out
    assert (
        hashlib.sha256(out).hexdigest()
        == hashlib.sha256(canonical_json(dict(reversed(data.items())))).hexdigest()
    )


def test_canonical_json_refuses_non_finite() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(database=None)
@given(json_values)
def test_round_trip_of_any_valid_value(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert loads_strict(text.encode("utf-8")) == value
    assert loads_strict(canonical_json(value)) == value


@settings(database=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_give_a_value_or_strict_json_error(data: bytes) -> None:
    try:
        loads_strict(data)
    except StrictJSONError:
        pass


def _nest(n: int) -> list[object]:
    out: list[object] = []
    for _ in range(n - 1):
        out = [out]
    return out


# -- the orjson fast path (_loads_fast) accepts and refuses what the slow parser does --------------------
@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a" : 2}',  # a duplicate whose colon follows whitespace
        '{"a":1,"b":{"c":2,"c":3}}',  # nested duplicate
        '[{"k": 1}, {"k": 2, "k": 3}]',  # duplicates in an array's objects
        '{"a": "x\\":", "a": 1}',  # a key-colon inside a string, and a duplicate
        '{"n": 123456789012345678901234}',  # beyond 64 bits: orjson reads it as a float
        '{"n": 9007199254740992}',  # 2**53
        '[-9007199254740992]',
        "9007199254740993",  # a bare unsafe integer at the top
        "[" * 65 + "]" * 65,  # one level past MAX_DEPTH, no text between
        '{"x": NaN}',
        '{"x": 1e400}',
        '"\\ud800"',
    ],
)
def test_fast_path_refuses_what_the_slow_parser_refuses(text: str) -> None:
    refuse(text)


@pytest.mark.parametrize(
    "text, value",
    [
        ('{"s": "a\\": b", "t": ": c"}', {"s": 'a": b', "t": ": c"}),  # key-like text inside strings
        ('{"x": 1.5, "y": -0.0}', {"x": 1.5, "y": -0.0}),  # floats (the slow parser reads them)
        ("[" * 64 + "]" * 64, _nest(64)),  # exactly MAX_DEPTH
        ('{"commands": [{"run_id": "r", "command": {"sleep_ms": 1000}}]}',
         {"commands": [{"run_id": "r", "command": {"sleep_ms": 1000}}]}),
        ("  42 ", 42),
        ('{"a" :1 , "b":\n 2}', {"a": 1, "b": 2}),
    ],
)
def test_fast_path_reads_what_the_slow_parser_reads(text: str, value: object) -> None:
    assert loads_strict(text) == value


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
                    max_leaves=20),
       st.sampled_from(["", " ", "\n "]))
@settings(max_examples=300, deadline=None)
def test_fast_and_slow_agree_on_json_the_server_may_receive(value: object, space: str) -> None:
    """Any document, and the same one with a key repeated: both parsers give the same value or refuse."""
    text = json.dumps(value, separators=("," + space, ":" + space))
    safe = json.loads(text)  # what a reader that takes everything sees
    try:
        got = loads_strict(text)
    except StrictJSONError:
        assert _has_unsafe_int(safe)
    else:
        assert got == safe and not _has_unsafe_int(safe)
    if isinstance(value, dict) and value:
        key = next(iter(value))
        doubled = "{" + json.dumps(key) + ":" + space + "0," + space + text[1:]
        refuse(doubled)


def _has_unsafe_int(value: object) -> bool:
    if isinstance(value, dict):
        return any(_has_unsafe_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unsafe_int(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER
