"""Snapshots beside a journal (``warren run --trace T --snapshots``, warren_sim/journal_snapshots.py) change what a
``warren fork`` costs, never what it writes: the fork's journal is byte for byte the one the replay from the start
writes, at every cursor; a snapshot that is not this journal's (or this policy's) is not used; a snapshot file
is read through an allow-list, never as an arbitrary pickle."""

from __future__ import annotations

import io
import pickle
import shutil
from pathlib import Path

import orjson
import pytest

from warren_sim import journal_snapshots as js
from warren_sim.cli import main
from warren_sim.scenarios import list_scenarios


@pytest.fixture
def often(monkeypatch):
    """A snapshot every 15 records or so, so that the bundled scenarios' short runs get several."""
    monkeypatch.setattr(js, "MIN_RECORDS", 15)
    monkeypatch.setattr(js, "WORLD_FACTOR", 0)


def _run(tmp: Path, scenario: str, seed: int, policy: str, *extra: str) -> Path:
    trace = tmp / f"{scenario}-{seed}-{policy}.jsonl"
    params = ["--param", "agents=20"] if scenario == "warren" else []
    assert main(["run", scenario, "--seed", str(seed), "--policy", policy, *params, "--trace", str(trace), "--quiet",
                 *extra]) in (0, 1)
    return trace


def _fork(trace: Path, cursor: int, out: Path, policy: str, *extra: str) -> tuple[int, bytes]:
    code = main(["fork", str(trace), "--cursor", str(cursor), "--policy", policy, "--trace", str(out), *extra])
    return code, out.read_bytes() if out.exists() else b""


def _cursors(trace: Path, snaps: list[int]) -> list[int]:
    """The first and last cursors, and cursors around a few snapshots (the first two, a middle one, the last)."""
    last = trace.read_bytes().count(b"\n") - 1
    some = {*snaps[:2], snaps[len(snaps) // 2], snaps[-1]}
    around = {c + d for c in some for d in (-1, 0, 1, 2, 7)}
    return sorted({0, 1, last - 1, last, *around} & set(range(last + 1)))


@pytest.mark.parametrize("scenario", list_scenarios())
@pytest.mark.parametrize(("seed", "policy"), [(0, "solution"), (1, "random")])
def test_a_fork_from_a_snapshot_is_the_fork_from_the_start(often, tmp_path, capsys, scenario, seed, policy):
    trace = _run(tmp_path, scenario, seed, policy, "--snapshots")
    folder = js.snapshots_dir(trace)
    snaps = sorted(int(p.stem) for p in folder.glob("*.pickle"))
    assert len(snaps) >= 2, "the run wrote too few snapshots to test them"
    aside = tmp_path / "aside"
    for cursor in _cursors(trace, snaps):
        used = js.fork_from_snapshots(trace, cursor, policy, {}, str(trace))
        assert (used is not None) == (cursor >= snaps[0]), cursor
        snapped = _fork(trace, cursor, tmp_path / "a.jsonl", policy)
        folder.rename(aside)
        replayed = _fork(trace, cursor, tmp_path / "b.jsonl", policy)
        aside.rename(folder)
        assert snapped == replayed, (scenario, seed, policy, cursor)
    override = ["--override", f"{_first_agent(trace)}={{\"noop\": true}}"]
    snapped = _fork(trace, snaps[-1] + 3, tmp_path / "a.jsonl", policy, *override)
    shutil.rmtree(folder)
    assert snapped == _fork(trace, snaps[-1] + 3, tmp_path / "b.jsonl", policy, *override)


def _first_agent(trace: Path) -> str:
    import json

    return json.loads(trace.read_text().splitlines()[0])["agents"][0]


def test_a_snapshot_of_another_journal_or_policy_is_not_used(often, tmp_path, capsys):
    trace = _run(tmp_path, "bridge_repair", 3, "solution", "--snapshots")
    snaps = sorted(int(p.stem) for p in js.snapshots_dir(trace).glob("*.pickle"))
    cursor = snaps[-1] + 2
    assert js.fork_from_snapshots(trace, cursor, "solution", {}, "t") is not None
    assert js.fork_from_snapshots(trace, cursor, "random", {}, "t") is None  # another policy: replay
    expected = _fork(trace, cursor, tmp_path / "a.jsonl", "solution")
    # the journal rewritten by another run (another seed) under the same name: its old snapshots are stale
    other = _run(tmp_path, "bridge_repair", 4, "solution")
    data = trace.read_bytes()
    trace.write_bytes(other.read_bytes())
    assert js.fork_from_snapshots(trace, cursor, "solution", {}, "t") is None
    trace.write_bytes(data)
    assert _fork(trace, cursor, tmp_path / "b.jsonl", "solution") == expected


def test_the_boundaries_index_changes_the_cost_never_the_fork(often, tmp_path, capsys):
    """With the run's batch boundaries (``T.snapshots/boundaries``) the fork walks straight to its boundary and
    copies the journal's bytes up to it; without the index, or with one that does not fit the journal, the fork
    walks as before (the batch the cursor falls in on a copy of the run): the same bytes every way."""
    from array import array

    trace = _run(tmp_path, "warren", 2, "solution", "--snapshots")
    folder = js.snapshots_dir(trace)
    index = folder / js.BOUNDARIES
    bounds = array("q", index.read_bytes())
    assert len(bounds) > 10 and list(bounds) == sorted(bounds)
    snaps = sorted(int(p.stem) for p in folder.glob("*.pickle"))
    for cursor in (snaps[-1], snaps[-1] + 1, bounds[-3], bounds[-3] + 1, bounds[-2] - 1):
        used = js.fork_from_snapshots(trace, cursor, "solution", {}, "t")
        assert used is not None and used.forked.records == [], cursor  # walked by the index, bytes copied
        assert used.forked.point.batch_cursor == max(b for b in bounds if b <= cursor)
        expected = _fork(trace, cursor, tmp_path / "a.jsonl", "solution")
        shifted = array("q", [b + 1 for b in bounds]).tobytes()  # the snapshot's own boundary is not in it
        moved = array("q", [b + (b not in snaps) for b in bounds]).tobytes()  # the walk does not meet its boundary
        for broken in (b"", shifted, moved, b"odd"):
            index.write_bytes(broken)
            assert _fork(trace, cursor, tmp_path / "b.jsonl", "solution") == expected, (cursor, broken[:8])
        index.write_bytes(bounds.tobytes())
        folder.rename(tmp_path / "aside")
        assert _fork(trace, cursor, tmp_path / "c.jsonl", "solution") == expected  # replayed from the start
        (tmp_path / "aside").rename(folder)


def test_the_digests_vouch_for_the_walk_and_anything_else_checks_every_record(often, tmp_path, capsys):
    """With the run's digests (``T.snapshots/digests``: the journal's SHA-256 at each snapshot and at its end) the
    walk from the snapshot to the fork point parses only the journal's commands and counts the engine's records
    instead of checking each one; without them, with digests that do not fit, or with the journal's bytes
    changed after the snapshot, every record is checked as before. The same fork every way, and an edit the
    digests catch is still refused."""
    trace = _run(tmp_path, "warren", 2, "solution", "--snapshots")
    folder = js.snapshots_dir(trace)
    digests = folder / js.DIGESTS
    entries = digests.read_bytes()
    snaps = sorted(int(p.stem) for p in folder.glob("*.pickle"))
    assert len(entries) == js.DIGEST_ENTRY * (len(snaps) + 1)  # (one at each snapshot, one at the end)
    last = trace.read_bytes().count(b"\n") - 1
    for cursor in (snaps[0], snaps[-1], snaps[-1] + 1, snaps[-1] + 9, last - 30):
        used = js.fork_from_snapshots(trace, cursor, "solution", {}, "t")
        assert used is not None and not used.checked, cursor
        expected = _fork(trace, cursor, tmp_path / "a.jsonl", "solution")
        flipped = bytearray(entries)
        for at in range(0, len(entries), js.DIGEST_ENTRY):
            flipped[at + js.DIGEST_ENTRY - 1] ^= 1
        for broken in (b"", entries[:-1], bytes(flipped)):
            digests.write_bytes(broken)
            again = js.fork_from_snapshots(trace, cursor, "solution", {}, "t")
            assert again is not None and again.checked, (cursor, len(broken))
            assert _fork(trace, cursor, tmp_path / "b.jsonl", "solution") == expected
        digests.write_bytes(entries)
        folder.rename(tmp_path / "aside")
        assert _fork(trace, cursor, tmp_path / "c.jsonl", "solution") == expected  # replayed from the start
        (tmp_path / "aside").rename(folder)
    # an engine record between the last snapshot and the fork point, edited: the digests no longer vouch, and the
    # checked walk refuses the journal as it always did
    cursor = next(c for c in range(last - 30, 0, -1)
                  if js.fork_from_snapshots(trace, c, "solution", {}, "t").forked.point.batch_cursor
                  > max(s for s in snaps if s <= c))
    lines = trace.read_bytes().split(b"\n")
    edit = max(s for s in snaps if s <= cursor) + 1  # (the first record the walk meets)
    lines[edit] = lines[edit].replace(b'"t":', b'"t":1', 1)
    trace.write_bytes(b"\n".join(lines))
    capsys.readouterr()
    assert _fork(trace, cursor, tmp_path / "d.jsonl", "solution")[0] == 2
    assert "does not replay" in capsys.readouterr().err


def test_the_state_classes_a_snapshot_writes_by_constructor_take_every_field_in_order():
    import attrs

    from warren_sim.scenarios import instantiate, load_scenario

    for cls in js.BY_CONSTRUCTOR:
        assert all(f.init for f in attrs.fields(cls)), cls
    sim, policies = instantiate(load_scenario("bridge_repair"), 0, "solution", record=False)
    from warren_sim.engine import run_headless

    run_headless(sim, policies, max_batches=20)
    state = js.state_of(sim)
    back = pickle.loads(js._dumps(state, None))
    for old, new in ((sim.world.agents, back["world"]["agents"]), (sim.world.items, back["world"]["items"]),
                     (sim.world.structures, back["world"]["structures"])):
        assert old.keys() == new.keys()
        for key in old:
            assert type(new[key]) is type(old[key])
            assert attrs.asdict(new[key]) == attrs.asdict(old[key]), key


def test_a_snapshot_file_is_read_through_an_allow_list(tmp_path):
    class Evil:
        def __reduce__(self):
            return (shutil.rmtree, (str(tmp_path / "victim"),))

    (tmp_path / "victim").mkdir()
    path = tmp_path / "000000000001.pickle"
    path.write_bytes(pickle.dumps({"format": js.FORMAT, "state": Evil()}))
    assert js._load(path, None) is None
    assert (tmp_path / "victim").is_dir()
    with pytest.raises(pickle.UnpicklingError, match="may not hold"):
        js._Unpickler(io.BytesIO(path.read_bytes()), None).load()


def test_snapshots_need_a_trace_and_bad_cursors_stay_errors(often, tmp_path, capsys):
    assert main(["run", "bridge_repair", "--snapshots", "--quiet"]) == 2
    assert "--snapshots needs --trace" in capsys.readouterr().err
    assert main(["run", "bridge_repair", "--snapshots", "--trace", "/dev/null", "--quiet"]) == 2  # (read back)
    assert "is not a regular file" in capsys.readouterr().err
    trace = _run(tmp_path, "bridge_repair", 3, "solution", "--snapshots")
    last = trace.read_bytes().count(b"\n") - 1
    assert _fork(trace, last + 1, tmp_path / "past.jsonl", "solution")[0] == 2
    assert "past the end" in capsys.readouterr().err
    assert _fork(trace, -1, tmp_path / "neg.jsonl", "solution")[0] == 2


def test_the_head_is_the_same_bytes_copied_by_the_kernel_or_read_and_written(often, tmp_path, capsys, monkeypatch):
    # the fork's head (its run record, then the parent's bytes up to the fork point) is copied by the kernel where
    # it can (into a regular file by a thread, while the fork writes on after it); where it cannot (a pipe, another
    # file system: EXDEV), it is read and written, to the same bytes
    trace = _run(tmp_path, "bridge_repair", 0, "solution", "--snapshots")
    cursor = trace.read_bytes().count(b"\n") - 3
    code, kernel = _fork(trace, cursor, tmp_path / "kernel.jsonl", "solution")
    assert code == 0 and kernel.startswith(js.fork_from_snapshots(trace, cursor, "solution", {}, "t").head)

    def refuse(*args):
        raise OSError(18, "Invalid cross-device link")

    # a pipe (here a FIFO, read by a thread): no thread copies beside the run, the head goes first, in order
    import os
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    piped: list[bytes] = []
    reader = threading.Thread(target=lambda: piped.append(fifo.read_bytes()))
    reader.start()
    assert main(["fork", str(trace), "--cursor", str(cursor), "--policy", "solution", "--trace", str(fifo)]) == 0
    reader.join()
    assert piped == [kernel]

    monkeypatch.setattr(js.os, "copy_file_range", refuse)
    code, plain = _fork(trace, cursor, tmp_path / "plain.jsonl", "solution")
    assert code == 0 and plain == kernel
    shutil.rmtree(js.snapshots_dir(trace))
    assert _fork(trace, cursor, tmp_path / "replayed.jsonl", "solution") == (0, kernel)  # the fork from the start


def test_a_fork_refuses_to_write_over_its_own_journal(often, tmp_path, capsys):
    trace = _run(tmp_path, "bridge_repair", 0, "solution", "--snapshots")
    before = trace.read_bytes()
    assert main(["fork", str(trace), "--cursor", "40", "--trace", str(trace)]) == 2
    assert "is the journal being forked" in capsys.readouterr().err
    assert trace.read_bytes() == before


def _first_record(trace: Path) -> list:
    with open(trace, "rb") as f:
        return [orjson.loads(f.readline())]


def test_the_kept_scenario_stands_for_its_files_only_while_they_are_unchanged(often, tmp_path, capsys,
                                                                               monkeypatch):
    # the fork takes the scenario as the run built it (T.snapshots/scenario), not loading and expanding it again,
    # while its files, the engine and the params are the run's; an edited scenario is loaded afresh (the replay's
    # way), and the fork is the same bytes either way
    from warren_sim.scenarios import load_scenario

    scenarios = tmp_path / "scenarios"
    shutil.copytree(Path(js.__file__).resolve().parents[1] / "scenarios" / "warren", scenarios / "warren",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("WARREN_SCENARIOS", str(scenarios))
    trace = _run(tmp_path, "warren", 0, "solution", "--snapshots")
    folder = js.snapshots_dir(trace)
    run = _first_record(trace)
    kept = js._kept_scenario(folder, run, js.engine_digest(), "t")
    assert kept is not None and kept.spec == load_scenario("warren", {"agents": 20}).spec
    cursor = trace.read_bytes().count(b"\n") - 5
    code, from_kept = _fork(trace, cursor, tmp_path / "kept.jsonl", "solution")
    assert code == 0
    toml = scenarios / "warren" / "scenario.toml"
    toml.write_text(toml.read_text() + "\n# edited\n")
    assert js._kept_scenario(folder, run, js.engine_digest(), "t") is None  # its files changed: load them
    assert js.fork_from_snapshots(trace, cursor, "solution", {}, "t") is not None  # snapshots still serve
    assert _fork(trace, cursor, tmp_path / "loaded.jsonl", "solution") == (0, from_kept)
    assert js._kept_scenario(folder, [{**run[0], "params": {"agents": 21, "layout": 0}}], js.engine_digest(),
                             "t") is None  # other params


def test_the_kept_scenario_is_read_through_an_allow_list(tmp_path):
    class Evil:
        def __reduce__(self):
            return (shutil.rmtree, (str(tmp_path / "victim"),))

    (tmp_path / "victim").mkdir()
    (tmp_path / js.SCENARIO).write_bytes(pickle.dumps({"format": js.FORMAT, "spec": Evil()}))
    run = [{"kind": "run", "scenario": "bridge_repair", "seed": 0, "run_id": "headless", "params": {}}]
    assert js._kept_scenario(tmp_path, run, js.engine_digest(), "t") is None
    assert (tmp_path / "victim").is_dir()
