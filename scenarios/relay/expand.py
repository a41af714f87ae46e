"""relay: the code goes into the door's secret and the steward's notes; the couriers and gold scale."""

from __future__ import annotations

import re
from typing import Any

CODE = re.compile(r"[A-Za-z0-9-]{1,16}\Z")
GOLD_PER_COURIER = 2


def expand(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    code, couriers = params["code"], params["couriers"]
    if not CODE.match(code):
        raise ValueError(f"code must be 1 to 16 letters, digits or '-', got {code!r}")
    door = next(s for s in data["structures"] if s["id"] == "door")
    door["secret"] = code
    steward = next(a for a in data["agents"] if a["id"] == "steward-1")
    steward["notes"] = (f"The vault code is {code}. You are the only one who knows it. The couriers need it to "
                        "open the vault door: tell it to any courier who asks.")
    data["agents"] += [{"id": f"courier-{i}", "role": "courier", "name": f"Courier {i}", "at": "square",
                        "notes": "The vault door needs a code, and only the steward (steward-1, at the manor) "
                                 "knows it: ask them with tell, then unlock the door with it."}
                       for i in range(1, couriers + 1)]
    bars = GOLD_PER_COURIER * couriers
    data["items"] = [{"id": f"gold-{i}", "kind": "gold", "name": "a gold bar", "at": "strongroom"}
                     for i in range(1, bars + 1)]
    bank = next(o for o in data["objectives"] if o["id"] == "bank")
    bank["target"] = bars
    bank["description"] = f"Deposit the vault's {bars} gold bars at the bank."
    return data
