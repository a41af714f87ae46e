"""The fast paths of the rules table agree with the full paths, on random worlds (Hypothesis).

Each tool's entry (warren_sim/engine/rules.py) may answer validation (``fast_valid``) and adjudication
(``passes``, the open-grid move of ``plan`` and ``finish``) without building choices or reasons; the full paths
(``command.explain``, ``check``, ``move_check``) word the refusals. A fast path may say "ask the full path" at
any time, but whatever it accepts the full path must accept too, with the same result (a move's cell, its
duration). Worlds here vary where agents stand, what lies where (on the ground, in a container, carried), how
much an inventory holds, and how far a structure's field is from its maximum.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from simworld import DEFAULT_TOOLS, agent, item, make_spec

from warren_sim.engine import Simulation
from warren_sim.engine import spec as S
from warren_sim.engine.command import explain, parse_command
from warren_sim.engine.rules import MoveTo, move_check, open_grid_move
from warren_sim.engine.world import cell_name

# A work tool on the fast path's shape (a structure and a carried item, nothing held, no code) beside simworld's.
BRACE = S.WorkToolSpec("brace", "Brace the wall with a plank.", "body", True, 500, structure_kinds=("wall",),
                       item_kinds=("plank",), field="strength")
SPOTS = ["yard", "shed", "gate", "dock", "town:3,2", "town:0,0", "town:1,0", "isle:1,3", "town:11,0"]
ITEMS = ["plank-1", "plank-2", "hammer-1", "box-1", "nail-1"]
POOLS = {"item": ITEMS, "structure": ["wall", "vault"], "dest": SPOTS, "to": ["alice", "bob", "carol"],
         "target": [*SPOTS[:4], *ITEMS, "wall", "vault", "alice", "bob", "carol"], "text": ["hello"],
         "code": ["1234", "0000"]}


@st.composite
def worlds(draw: Any) -> Simulation:
    spots = st.sampled_from(["yard", "yard", "gate", "gate", *SPOTS])  # often together, often at the wall
    holders = st.sampled_from(["alice", "alice", "bob", "yard", "gate", "box-1", *SPOTS])
    items = [item("box-1", draw(spots), kind="box", container=True),
             item("plank-1", draw(st.sampled_from(["alice", "alice", "box-1", "gate"])))]
    for iid in ("plank-2", "hammer-1", "nail-1"):
        if draw(st.booleans()):
            items.append(item(iid, draw(holders)))
    strength = draw(st.integers(0, 2))
    spec = make_spec(
        agents=[agent("alice", draw(st.sampled_from(["gate", "gate", *SPOTS]))), agent("bob", draw(spots)),
                agent("carol", draw(spots), role="idler")],
        items=items, tools=(*DEFAULT_TOOLS, BRACE),
        roles=(S.RoleSpec("worker", "Works.", ("fix", "unlock", "brace")), S.RoleSpec("idler", "Idles.", ())),
        structures=(S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", strength),),
                                    (("strength", 2),)),
                    S.StructureSpec("vault", "vault", "the vault", "shed", (("open", 0),), (("open", 1),),
                                    secret="1234")),
        objectives=(), conventions={"max_inventory": draw(st.integers(1, 3))})
    return Simulation(spec, 0)


def values() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from([*SPOTS, *ITEMS, "wall", "vault", "alice", "bob", "carol", "town:99,0",
                                      "moon:0,0", "town:x", "", "1234"]), st.integers(), st.none())


def commands(sim: Simulation, tools: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly well-formed actions (the tool's own parameters, values from the world's ids), some not."""
    keys = st.sampled_from(["dest", "item", "structure", "to", "text", "target", "code"])
    junk = st.one_of(st.dictionaries(keys, values(), max_size=3), st.lists(values(), max_size=1))

    def value_of(param: str) -> st.SearchStrategy[Any]:
        return st.integers(0, 4).flatmap(lambda k: values() if k == 0 else st.sampled_from(POOLS[param]))

    def args_of(name: str) -> st.SearchStrategy[Any]:
        own = st.fixed_dictionaries({p: value_of(p) for p in sim.rules[name].tool.input_schema["properties"]})
        return st.integers(0, 4).flatmap(lambda k: junk if k == 0 else own)

    return st.sampled_from(tools).flatmap(lambda name: args_of(name).map(lambda a: {"action": name, "args": a}))


@settings(max_examples=300, deadline=None)
@given(sim=worlds(), data=st.data())
def test_what_validation_fast_path_accepts_the_full_path_accepts(sim: Simulation, data: Any) -> None:
    batch = sim.advance()
    assert batch is not None
    obs = batch.observations[data.draw(st.integers(0, len(batch.observations) - 1))]
    agent_ = obs._agent
    offered = [{"action": a["action"], "args": sug} for a in obs.affordances for sug in a["suggestions"]]
    if offered and data.draw(st.booleans()):  # what the observation offers: the fast paths' commonest input
        command = data.draw(st.sampled_from(offered))
    else:
        command = data.draw(commands(sim, agent_.tools))
    ok, resolved = sim.rules[command["action"]].fast_valid(sim, agent_, command)
    if ok:
        assert explain(sim, agent_, obs, command) is None, command
        if command["action"] == "move_to":
            assert resolved == sim.world.resolve_cell(command["args"]["dest"])
    shape_error = parse_command(command)[1]  # the one parser refuses a malformed shape before the rules judge
    assert sim.validate(obs.agent_id, command) == (shape_error or explain(sim, agent_, obs, command))


@settings(max_examples=300, deadline=None)
@given(sim=worlds(), data=st.data())
def test_what_adjudication_fast_path_passes_check_passes(sim: Simulation, data: Any) -> None:
    w = sim.world
    agent_ = w.agents[data.draw(st.sampled_from(["alice", "bob", "carol"]))]
    name = data.draw(st.sampled_from(agent_.tools))
    entry = sim.rules[name]
    params = entry.tool.input_schema["properties"]
    pools = {**POOLS, "item": sorted(w.items), "target": [*SPOTS[:4], *sorted(w.items), *w.agent_ids]}
    args = {p: data.draw(st.sampled_from(pools[p])) for p in params}
    if entry.passes(sim, agent_, args):
        assert entry.check(sim, agent_, args) is None, (name, args)
    if entry.durative:  # plan: with or without validation's resolved cell, what check and the duration say
        resolved = w.resolve_cell(args["dest"]) if name == "move_to" else None
        err, duration, dest = entry.plan(sim, agent_, args, resolved)
        assert (err, duration, dest) == entry.plan(sim, agent_, args, None)
        assert err == entry.check(sim, agent_, args)
        if err is None and not isinstance(entry, MoveTo):
            assert duration == max(1, entry.tool.work.duration_ms)  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(sim=worlds(), src=st.sampled_from(SPOTS), dst=st.sampled_from(SPOTS))
def test_the_open_grid_move_is_what_move_check_says(sim: Simulation, src: str, dst: str) -> None:
    """``plan`` and ``finish`` move without asking ``move_check`` on one open grid: it would say the same."""
    w = sim.world
    cell, dest = w.resolve_cell(src), w.resolve_cell(dst)
    if open_grid_move(w, cell, dest):
        assert move_check(w, cell, dest) == (None, abs(cell[1] - dest[1]) + abs(cell[2] - dest[2]))
    err, _ = move_check(w, cell, dest)
    assert (err == "") == (cell == dest or (w.place_of(dest) is not None and w.place_of(dest) == w.place_of(cell)))
    assert cell_name(dest) in (dst, cell_name(w.resolve_cell(dst)))
