"""Journal records as bytes: one JSON object per line, ``cursor`` first, keys in insertion order.

Headless traces and served journals both go through ``dumps_record``, so the same records give
the same bytes wherever they were produced.
"""

from __future__ import annotations

import json
from typing import Any


def with_cursor(cursor: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": cursor, **record}


def dumps_record(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
