"""``dumps_record`` writes exactly what json.dumps (compact, ``ensure_ascii=False``) writes, for any record.

It takes orjson's bytes only where they cannot differ (engine/records.py ``_orjson_safe``): a record with a float
below 1e-4 or from 1e16 up, NaN or an infinity, and what orjson refuses, go to json.dumps.
tests/test_trace_digests.py checks the bundled scenarios' traces byte for byte; this checks the corners.
"""

from __future__ import annotations

import json
import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from warren_sim.engine.records import dumps_record


def reference(record: dict[str, object]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


FLOATS = [0.0, -0.0, 1.0, 0.1, 1e-4, 9.9e-5, 1e-5, 1e-7, 1e15, 1e16, 1.5e16, 1e22, 1e300, 5e-324, 1 / 3,
          1764557820.123, 2.5e-8, -3.4e17, math.nan, math.inf, -math.inf]


def test_floats_json_writes_differently_are_written_by_json() -> None:
    for x in FLOATS:
        record = {"kind": "x", "v": x, "wall": {"unix": x}}
        assert dumps_record(record) == reference(record), x


def test_what_orjson_refuses_is_written_by_json() -> None:
    for record in ({"kind": "x", 1: "int key"}, {"kind": "x", "n": 2**70}, {"kind": "x", "s": "\ud800"},
                   {"kind": "x", "n": None, "t": (1, 2)}):
        assert dumps_record(record) == reference(record)  # type: ignore[arg-type]


@given(st.integers(0, 2**64 - 1))
@settings(max_examples=500, deadline=None)
def test_any_double(bits: int) -> None:
    (x,) = struct.unpack("<d", struct.pack("<Q", bits))
    record = {"kind": "x", "v": x}
    assert dumps_record(record) == reference(record)


@given(st.dictionaries(st.text(max_size=6), st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats() | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=12), max_size=6))
@settings(max_examples=500, deadline=None)
def test_any_record(record: dict[str, object]) -> None:
    assert dumps_record(record) == reference(record)


def test_floats_at_the_edges_of_the_plain_range() -> None:
    for edge in (1e-4, 1e16):  # each edge and its neighbours, one ulp apart
        for x in (math.nextafter(edge, 0), edge, math.nextafter(edge, math.inf)):
            for v in (x, -x):
                record = {"kind": "x", "v": v}
                assert dumps_record(record) == reference(record), v
