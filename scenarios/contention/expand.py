"""contention: one potter per ``potters``, ``pots`` pots each, ``tongs`` pairs of tongs on the rack."""

from __future__ import annotations

from typing import Any


def expand(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    potters, tongs, pots = params["potters"], params["tongs"], params["pots"]
    if tongs >= potters:
        raise ValueError(f"tongs ({tongs}) must be fewer than potters ({potters}): the tongs are the scarce "
                         "resource of this scenario")
    notes = ("Fire your pots in the kiln. Kiln etiquette: hang the tongs back on the rack (drop them at the "
             "kiln) after every firing, so the others get their turn.")
    data["agents"] = [{"id": f"potter-{i}", "role": "potter", "name": f"Potter {i}", "at": "wheels", "notes": notes}
                      for i in range(1, potters + 1)]
    items = [{"id": f"tongs-{t}", "kind": "tongs", "name": "a pair of kiln tongs", "at": "kiln"}
             for t in range(1, tongs + 1)]
    for i in range(1, potters + 1):
        items += [{"id": f"pot-{i}-{k}", "kind": "pot", "name": "an unfired pot", "at": f"potter-{i}"}
                  for k in range(1, pots + 1)]
    data["items"] = items
    data["objectives"][0]["target"] = potters * pots
    data["objectives"][0]["description"] = f"Fire all {potters * pots} pots in the kiln."
    return data
