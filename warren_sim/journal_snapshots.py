"""Engine snapshots beside a headless run's trace, so that a fork near the end of a long run skips its replay.

``warren run ... --trace T --snapshots`` writes, besides ``T``, a directory ``T.snapshots/`` with a snapshot of
the run every few batches (when the records written since the last one reach ``WORLD_FACTOR`` times the world's
size, at least ``MIN_RECORDS``: a snapshot costs the world, so the runs that pay for one are long enough to
need it). ``warren fork T --cursor N`` then starts from the last snapshot at or before ``N`` instead of the
run's start: it restores the engine and its policies there (``warren_sim.engine.snapshot.restore``), walks the
journal's records from there to the fork point as any fork does (each record checked against the engine's,
unless the run's digests vouch for them: below), and copies the journal's bytes before the snapshot into the
fork's journal instead of writing them again.

The run also writes where each of its batches ended (``T.snapshots/boundaries``: one cursor per batch, 8 bytes
each, written when the run ends). With it the fork knows its batch boundary before walking, and walks exactly
the batches up to it. Without it (a run that crashed, an older directory), the walk cannot know whether the
batch the cursor falls in ends past it until it has walked it, so it walks that batch on a copy of the run
(``Simulation.fork``, policies and all: for 10,000 foragers about as long as the rest of the fork). A boundary
the walk does not meet (an edited file) sends the fork back to that copying walk: the index changes a fork's
cost, never its records.

The run's digests (``T.snapshots/digests``: the cursor, the journal's length and its SHA-256 at each snapshot
and at the run's end, written when it ends) let the walk trust the journal instead of checking it: when the
journal's bytes up to the first digest past the fork point are the ones the run wrote, the walk parses only
the commands it answers from and counts the engine's records instead of comparing each with the journal's
(``_fork_vouched``); without the digests, or with any doubt, it checks every record. The hashing runs in a
thread while the scenario and snapshot are unpickled, and the fork's head is copied into its journal by
another while the fork runs on (``JournalFork.write_head``).

A snapshot is used only when it is this journal's and this WARREN's: it holds the SHA-256 of the journal's bytes
up to its boundary, the digest of the engine's sources, and the policy the run was made with (a fork with
another ``--policy`` replays from the start, as without snapshots). Anything else (a missing, stale or
foreign snapshot) falls back to the replay, which gives the same fork: snapshots change a fork's cost, never
its records (tests/test_journal_snapshots.py). They are pickles read through an allow-list of classes (the
engine's state classes and the scenario's own policy classes), never an arbitrary pickle.
"""

from __future__ import annotations

import bisect
import contextlib
import copyreg
import functools
import hashlib
import io
import json
import mmap
import operator
import os
import pickle
import stat
import sys
import threading
from array import array
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import attrs
import orjson

from .engine import Simulation
from .engine import spec as spec_classes
from .engine.records import dumps_record, parse_records, with_cursor
from .engine.sim import ObjectiveState
from .engine.snapshot import restore, state_of
from .engine.world import Action, Agent, Item, Structure
from .fork import (
    Forked,
    ForkError,
    ForkPoint,
    _batches,
    _Bringer,
    _check_cursor,
    check_agents,
    expected_of,
    walk_to,
)
from .replay import journal_names, journal_origin
from .scenarios import LoadedScenario, ScenarioError
from .scenarios.loader import find_scenario, load_solution

__all__ = ["JournalFork", "SnapshotWriter", "fork_from_snapshots", "snapshots_dir"]

SUFFIX = ".snapshots"
BOUNDARIES = "boundaries"
DIGESTS = "digests"
DIGEST_ENTRY = 8 + 8 + 32  # a cursor, the journal's length in bytes after it, the SHA-256 of those bytes
SCENARIO = "scenario"  # (a pickle too, of the spec: not named *.pickle, which are the snapshots)
FORMAT = 2  # (1: one pickle, the state within; 2: what the snapshot is, then its state)
WORLD_FACTOR = 16
MIN_RECORDS = 20_000
ENGINE = Path(__file__).resolve().parent / "engine"
# What a snapshot may hold besides plain values: the engine's state classes, the RNG, and what pickle rebuilds
# objects with (the scenario's own policy classes come by name from its solution module: see _Unpickler).
ALLOWED = {("random", "Random"), ("copyreg", "__newobj__"), ("copyreg", "_reconstructor"), ("builtins", "object"),
           ("builtins", "set"), ("builtins", "frozenset"), ("warren_sim.engine.world", "Agent"),
           ("warren_sim.engine.world", "Item"), ("warren_sim.engine.world", "Structure"),
           ("warren_sim.engine.world", "Action"), ("warren_sim.engine.sim", "ObjectiveState"),
           ("warren_sim.engine.policy", "RandomPolicy"), ("warren_sim.engine.policy", "NoopPolicy")}


# What the kept scenario (``SCENARIO``) may hold besides plain values: the spec's own classes.
SPEC_CLASSES = [value for value in vars(spec_classes).values()
                if isinstance(value, type) and value.__module__ == spec_classes.__name__]
SPEC_ALLOWED = frozenset(("warren_sim.engine.spec", cls.__name__) for cls in SPEC_CLASSES)


def snapshots_dir(trace: Path) -> Path:
    return trace.with_name(trace.name + SUFFIX)


def scenario_digest(directory: Path) -> str:
    """The scenario's files, hashed: its kept spec stands for it only while they are the ones it was built from."""
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def engine_digest() -> str:
    """The engine's sources, hashed: a snapshot restores only into the engine that wrote it."""
    h = hashlib.sha256()
    for path in sorted(ENGINE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _by_constructor(cls: type) -> Callable[[Any], tuple[type, tuple[Any, ...]]]:
    """How a snapshot pickles ``cls`` (an engine state class): as a call of its constructor with its fields in
    order. Pickle's own way, for a class mypyc compiled, goes through ``copyreg`` in Python for every object
    and sets its attributes one by one when read back (for 10,000 foragers, a fifth more to write)."""
    get = operator.attrgetter(*(f.name for f in attrs.fields(cls)))
    return lambda obj: (cls, get(obj))


# (every field of these classes is a constructor argument, in order: tests/test_journal_snapshots.py)
BY_CONSTRUCTOR = (Agent, Item, Structure, Action, ObjectiveState)
_DISPATCH: dict[Any, Any] = {**copyreg.dispatch_table, **{cls: _by_constructor(cls) for cls in BY_CONSTRUCTOR}}
# (the spec's classes too, for the kept scenario: attrs's own way for a frozen class is Python per object, 20,000
# of them for 10,000 foragers; only the attrs classes, every field of which is a constructor argument)
_SPEC_DISPATCH: dict[Any, Any] = {**copyreg.dispatch_table, **{
    cls: _by_constructor(cls) for cls in SPEC_CLASSES
    if attrs.has(cls) and all(f.init for f in attrs.fields(cls))}}


def _pickled(obj: Any, dispatch: dict[Any, Any]) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = dispatch
    pickler.dump(obj)
    return out.getvalue()


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _dumps(obj: Any, solution: Any) -> bytes:
    """Pickle ``obj``; a scenario's own policy classes (its solution.py, loaded from its directory: not in
    ``sys.modules``) by their module's name, which is made findable for the while (pickle checks it)."""
    name = getattr(solution, "__name__", None)
    added = name is not None and name not in sys.modules
    if added:
        sys.modules[str(name)] = solution
    try:
        return _pickled(obj, _DISPATCH)
    finally:
        if added:
            sys.modules.pop(str(name), None)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, solution: Any, allowed: frozenset[tuple[str, str]] = frozenset()) -> None:
        super().__init__(file)
        self.solution = solution
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        solution = self.solution
        if solution is not None and module == solution.__name__:
            found: Any = solution
            for part in name.split("."):
                found = getattr(found, part, None)
            if isinstance(found, type) and found.__module__ == module:
                return found
        if (module, name) not in ALLOWED and (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"a snapshot may not hold {module}.{name}")
        return super().find_class(module, name)


class SnapshotWriter:
    """Writes the snapshots of one headless run beside its trace (``warren run --trace T --snapshots``).

    The trace is written as without snapshots (``stream``, a regular file's text stream); a snapshot names the
    journal's bytes before it by their SHA-256, taken when the snapshot is: the bytes written since the last
    one are read back from the file and hashed by a thread while the state is pickled (hashlib lets go of the
    GIL), so the run pays nothing per record for it."""

    def __init__(self, trace: Path, stream: TextIO, loaded: LoadedScenario, policy: str, sim: Simulation) -> None:
        if not stat.S_ISREG(os.fstat(stream.buffer.fileno()).st_mode):
            raise ValueError(f"{trace} is not a regular file: snapshots name the journal's bytes, read back from it")
        self.dir = snapshots_dir(trace)
        self.dir.mkdir(exist_ok=True)
        for old in [*self.dir.glob("*.pickle"), self.dir / BOUNDARIES, self.dir / DIGESTS, self.dir / SCENARIO]:
            old.unlink(missing_ok=True)  # (a run writing this trace again makes its old snapshots stale)
        self.stream = stream
        self.reader = open(trace, "rb")  # noqa: SIM115 (closed by close())
        self.sha, self.hashed = hashlib.sha256(), 0  # the journal's first ``hashed`` bytes, hashed
        self.loaded, self.policy = loaded, policy
        w = sim.world
        self.every = max(MIN_RECORDS, WORLD_FACTOR * (len(w.agents) + len(w.items) + len(w.structures)))
        self.next_at = self.every
        self.batches = 0
        self.digest = engine_digest()
        self.stopped = ""  # why no more snapshots are written (a policy that does not pickle)
        self.written = 0
        self.boundaries = array("q")  # the cursor of each batch's last record, in order
        self.digests = bytearray()  # at each snapshot and at the end: (cursor, length, SHA-256) of the journal

    def after_batch(self, sim: Simulation, policies: Mapping[str, Any], records: int) -> None:
        """Called after each batch, its records written (``records`` of them so far): a snapshot when due."""
        self.batches += 1
        self.boundaries.append(records - 1)
        if self.stopped or records < self.next_at or sim.ended:
            return
        self.next_at = records + self.every
        hashing, end = self._hash_in_thread()
        try:
            if not self.written:
                self._keep_scenario()
            state = _dumps({"state": state_of(sim), "policies": dict(policies)}, self.loaded.solution)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self.stopped = f"a policy does not pickle ({exc!r:.100}): no snapshots"
            return
        finally:
            hashing.join()
        if self.hashed != end:
            self.stopped = "the journal could not be read back to be hashed: no snapshots"
            return
        # (two pickles: what the snapshot is, read first (a snapshot of another format is read no further),
        # then the state)
        about = pickle.dumps({"format": FORMAT, "engine": self.digest, "policy": self.policy, "cursor": records - 1,
                              "batches": self.batches, "bytes": self.hashed, "sha256": self.sha.hexdigest()},
                             protocol=5)
        _replace(self.dir / f"{records - 1:012d}.pickle", about + state)
        self.written += 1
        self._digest(records - 1)

    def _hash_in_thread(self) -> tuple[threading.Thread, int]:
        """Hash the journal's bytes written since the last snapshot, in a thread (the caller joins it), and how
        long the journal is then (``hashed`` is that when the thread is done, unless the file could not be read)."""
        self.stream.flush()
        end = self.stream.buffer.tell()
        thread = threading.Thread(target=self._hash_to, args=(end,), daemon=True)
        thread.start()
        return thread, end

    def _hash_to(self, end: int) -> None:
        """(Through a map of the file, in one call: the GIL is let go of once, for all of it.)"""
        if end <= self.hashed:
            return
        try:
            with mmap.mmap(self.reader.fileno(), end, access=mmap.ACCESS_READ) as data:
                _sha256(data, self.hashed, end, self.sha)
        except (OSError, ValueError):  # (the file shorter than written: cut by someone else; the caller sees it)
            return
        self.hashed = end

    def _digest(self, cursor: int) -> None:
        self.digests += cursor.to_bytes(8, "little") + self.hashed.to_bytes(8, "little") + self.sha.digest()

    def _keep_scenario(self) -> None:
        """The run's scenario as built (``SCENARIO``), once: a fork from a snapshot then need not load and expand
        it again (for 10,000 foragers, a sixth of the fork), as long as its files are those it was built from."""
        loaded = self.loaded
        kept = {"format": FORMAT, "engine": self.digest, "files": scenario_digest(loaded.directory),
                "name": loaded.name, "params": dict(loaded.params), "spec": loaded.spec}
        _replace(self.dir / SCENARIO, _pickled(kept, _SPEC_DISPATCH))

    def close(self) -> None:
        """Called once the run has ended and its last records are written: the batch boundaries' index, and the
        journal's digests (at each snapshot, and now at its end)."""
        hashing, end = self._hash_in_thread()
        hashing.join()
        self.reader.close()
        if self.boundaries and self.hashed == end:
            self._digest(self.boundaries[-1])
        _replace(self.dir / DIGESTS, bytes(self.digests))
        _replace(self.dir / BOUNDARIES, self.boundaries.tobytes())


#: How much of the parent's journal the fallback copy of :meth:`JournalFork.write_head` reads at once.
COPY_CHUNK = 8 << 20


@attrs.define
class JournalFork:
    """A fork made from a snapshot: ``forked.records`` are the records after its head, which holds
    ``head_records`` records: the fork's ``run`` record (``run_line``), then the parent journal's bytes
    ``span`` (up to the snapshot, and on to the fork point when the walk met the journal's records exactly, as
    a headless journal's are)."""

    forked: Forked
    run_line: bytes  # UTF-8, its newline included
    source: Path
    span: tuple[int, int]
    head_records: int
    checked: bool = True  # whether the walk checked each record (else the run's digests vouched for them)

    @property
    def head(self) -> bytes:
        """The head's bytes (tests; :meth:`write_head` writes them without holding them)."""
        start, end = self.span
        with open(self.source, "rb") as f:
            f.seek(start)
            return self.run_line + f.read(end - start)

    def write_head(self, out: TextIO) -> Callable[[], None]:
        """Write the head to ``out``, a text stream just opened, and return what to call before closing it (it
        raises the copy's ``OSError``, if any). The parent's bytes are copied by the kernel
        (``os.copy_file_range``) where it can, instead of through this process (50 MB for 10,000 foragers),
        and into a regular file by a thread, while the fork runs on and writes its own records after them (at
        the head's end: the file has a hole there until the copy fills it)."""
        out.flush()
        binary = out.buffer
        binary.write(self.run_line)
        binary.flush()
        start, end = self.span
        try:
            fd = binary.fileno()
            at = binary.tell() if stat.S_ISREG(os.fstat(fd).st_mode) else -1
        except (OSError, AttributeError, io.UnsupportedOperation):
            at = -1
        if at < 0 or end <= start:  # a pipe, a terminal (which the kernel does not copy into): in order, now
            with open(self.source, "rb") as src:
                _copy_plainly(src, binary, start, end)
            return _copied
        binary.seek(at + end - start)
        copier = _HeadCopier(self.source, fd, (start, end), at)
        copier.start()
        return copier.finish


def _copied() -> None:
    """(The head was copied in order: nothing to wait for.)"""


class _HeadCopier(threading.Thread):
    """Copies the parent's bytes ``span`` into the fork's journal at byte ``at`` (kernel copies, or reads and
    writes at offsets where it cannot), beside the fork's own run; ``finish`` waits and raises what failed."""

    def __init__(self, source: Path, fd: int, span: tuple[int, int], at: int) -> None:
        super().__init__(daemon=True)
        self.source, self.fd, self.span, self.at = source, fd, span, at
        self.error: OSError | None = None

    def run(self) -> None:
        start, end = self.span
        try:
            with open(self.source, "rb") as src:
                pos = start
                with contextlib.suppress(OSError):  # (then read and written, below)
                    while pos < end:
                        done = os.copy_file_range(src.fileno(), self.fd, end - pos, pos, self.at + pos - start)
                        if done <= 0:
                            break
                        pos += done
                while pos < end:
                    chunk = os.pread(src.fileno(), min(COPY_CHUNK, end - pos), pos)
                    if not chunk:
                        raise OSError(f"{self.source} ended at byte {pos}, before {end}: was it cut short while "
                                      "being read?")
                    pos += os.pwrite(self.fd, chunk, self.at + pos - start)
        except OSError as exc:
            self.error = exc

    def finish(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


def _copy_plainly(src: BinaryIO, out: BinaryIO, start: int, end: int) -> None:
    src.seek(start)
    while start < end:
        chunk = src.read(min(COPY_CHUNK, end - start))
        if not chunk:
            raise OSError(f"{src.name} ended at byte {start}, before {end}: was it cut short while being read?")
        out.write(chunk)
        start += len(chunk)
    out.flush()


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap | None]:
    """The journal's bytes, mapped (not read: most of them are only hashed, or copied by the kernel), or None."""
    with contextlib.ExitStack() as stack:
        try:
            f = stack.enter_context(open(path, "rb"))
            data = stack.enter_context(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError):  # unreadable, or empty (which mmap refuses)
            data = None
        yield data  # (what the caller raises goes on up: only opening is guarded)


def fork_from_snapshots(path: Path, cursor: int, policy: str, overrides: Mapping[str, dict[str, Any]] | None,
                        where: str) -> JournalFork | None:
    """The fork of ``path`` at ``cursor`` from its last usable snapshot at or before it, or None (no snapshot
    there, or none this journal's, this engine's and this policy's: the caller replays from the start)."""
    folder = snapshots_dir(path)
    if not folder.is_dir() or not isinstance(cursor, int) or cursor < 0:
        return None
    at = sorted((int(p.stem) for p in folder.glob("*.pickle") if p.stem.isdigit()), reverse=True)
    at = [c for c in at if c <= cursor]
    if not at:
        return None
    with _mapped(path) as data, contextlib.ExitStack() as stack:
        if data is None:
            return None
        digests = _digests(folder / DIGESTS)
        hashes = stack.enter_context(_PrefixHashes(data))
        latest = _batches_to(folder / BOUNDARIES, at[0], cursor)
        hashes.start(_stops(digests, at[0], latest))
        first = bytes(data[:data.find(b"\n") % (len(data) + 1)])  # (the other 50 MB stay put)
        run = _run_head(first, where)
        digest = engine_digest()
        loaded = _kept_scenario(folder, run, digest, where)
        if loaded is None:
            loaded, seed, parent = journal_origin(run, where)
        else:
            _, seed, parent, _ = journal_names(run, where)
        for c in at:
            snap = _load(folder / f"{c:012d}.pickle", loaded.solution)
            if snap is None or snap.get("engine") != digest or snap.get("policy") != policy or \
                    snap.get("cursor") != c:
                continue
            offset = int(snap["bytes"])
            if offset > len(data):
                continue
            if hashes.at(offset).hexdigest() != snap["sha256"]:
                continue
            again = functools.partial(_load, folder / f"{c:012d}.pickle", loaded.solution)
            batches = latest if c == at[0] else _batches_to(folder / BOUNDARIES, c, cursor)
            origin = (path, first, loaded, seed, parent)
            if batches is not None:
                vouched, walked = _fork_vouched(data, hashes, digests, snap, origin, cursor, overrides, where,
                                                batches)
                if vouched is not None:
                    return vouched
                if walked:  # (the snapshot's objects moved on with that walk)
                    fresh = again()
                    if fresh is None:
                        return None
                    snap = fresh
            return _fork_at(data, offset, snap, again, origin, cursor, overrides, where, batches)
    return None


def _kept_scenario(folder: Path, run: list[dict[str, Any]], digest: str, where: str) -> LoadedScenario | None:
    """The scenario the run was built from, as ``SnapshotWriter`` kept it, when it still stands for the scenario's
    files (the same files, engine and params); else None, and the caller loads it as a replay does."""
    scenario, _, _, params = journal_names(run, where)
    try:
        directory = find_scenario(scenario)
        kept = _Unpickler(io.BytesIO((folder / SCENARIO).read_bytes()), None, SPEC_ALLOWED).load()
    except (ScenarioError, OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or kept.get("engine") != digest or \
            kept.get("params") != params or not isinstance(kept.get("spec"), spec_classes.ScenarioSpec) or \
            kept.get("files") != scenario_digest(directory):
        return None
    return LoadedScenario(directory.name, directory, kept["spec"], dict(kept["params"]), load_solution(directory))


def _sha256(data: mmap.mmap, start: int, end: int, sha: Any = None) -> Any:
    """``sha`` (a new SHA-256 without it) updated with ``data[start:end]``, hashed through a view (not copied)."""
    sha = hashlib.sha256() if sha is None else sha
    with memoryview(data) as view, view[start:end] as part:
        sha.update(part)
    return sha


class _PrefixHashes:
    """SHA-256 of the journal's first ``stop`` bytes, for the few stops a fork checks (its snapshot's and its
    digest's). ``start`` takes them in a thread while the fork unpickles its scenario and snapshot: hashlib lets
    go of the GIL over a big buffer, so the 50 MB before a 10,000-forager snapshot are hashed beside that work
    instead of after it. ``at`` waits for the thread, then gives any prefix's hash, taking on from the longest
    prefix hashed below it. Use it as a context manager: the thread is joined before the journal's map closes."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.done: dict[int, Any] = {}
        self.thread: threading.Thread | None = None

    def start(self, stops: list[int]) -> None:
        self.thread = threading.Thread(target=self._take, args=(sorted(stops),), daemon=True)
        self.thread.start()

    def _take(self, stops: list[int]) -> None:
        sha, pos = hashlib.sha256(), 0
        for stop in stops:
            if not pos <= stop <= len(self.data):
                break
            _sha256(self.data, pos, stop, sha)
            self.done[stop], pos = sha.copy(), stop

    def at(self, stop: int) -> Any:
        self.join()
        base = max((s for s in self.done if s <= stop), default=0)
        sha = self.done[base].copy() if base in self.done else hashlib.sha256()
        _sha256(self.data, base, stop, sha)
        self.done[stop] = sha.copy()
        return sha

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def __enter__(self) -> _PrefixHashes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.join()


def _digests(path: Path) -> list[tuple[int, int, bytes]]:
    """The run's digests (``SnapshotWriter.close``): (cursor, length, SHA-256) at each snapshot and at the end,
    in order; none when there are none, or not whole entries."""
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    if len(raw) % DIGEST_ENTRY:
        return []
    return [(int.from_bytes(raw[i:i + 8], "little"), int.from_bytes(raw[i + 8:i + 16], "little"),
             raw[i + 16:i + DIGEST_ENTRY]) for i in range(0, len(raw), DIGEST_ENTRY)]


def _batches_to(path: Path, c: int, cursor: int) -> tuple[int, int] | None:
    """From the boundaries' index: how many batches end after the snapshot's boundary ``c`` and at or before
    ``cursor``, and the last of those boundaries; None without an index that shows the batch holding the cursor
    complete (a boundary past it), or that has ``c``."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    bounds = array("q")
    if len(raw) % bounds.itemsize:
        return None
    bounds.frombytes(raw)
    start, end = bisect.bisect_left(bounds, c), bisect.bisect_right(bounds, cursor)
    if start >= len(bounds) or bounds[start] != c or end >= len(bounds):
        return None
    return end - 1 - start, bounds[end - 1]


def _load(path: Path, solution: Any) -> dict[str, Any] | None:
    """A snapshot (what it is, then its state: ``SnapshotWriter.after_batch``), or None (unreadable, or not one)."""
    try:
        data = io.BytesIO(path.read_bytes())
        about = _Unpickler(data, solution).load()
        if not isinstance(about, dict) or about.get("format") != FORMAT:
            return None
        state = _Unpickler(data, solution).load()  # (an unpickler of its own: each pickle numbers its memo from 0)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
        return None
    return {**about, **state} if isinstance(state, dict) else None


def _records_after(data: mmap.mmap, offset: int, c: int, cursor: int, where: str) -> tuple[list[dict[str, Any]], int]:
    """The journal's records after the snapshot (cursor ``c``, ending at byte ``offset``) that a fork at ``cursor``
    needs: up to the first batch that begins after it (the walk stops there), and the journal's last cursor.

    A headless journal numbers its records in order, so the cursor's line is found by counting lines; the
    ``batch`` record after it by its bytes (``"kind":"batch"`` cannot occur inside a JSON string, where quotes are
    escaped). Any doubt (the records numbered otherwise) reads them all."""
    last = _last_cursor(data, c, where)
    pos = offset
    for _ in range(max(0, cursor - c)):
        pos = data.find(b"\n", pos) + 1
        if pos == 0:
            break
    end = data.find(b'"kind":"batch"', pos) if pos else -1
    end = len(data) if end < 0 else data.find(b"\n", end) + 1 or len(data)
    after = parse_records(data[offset:end].decode("utf-8"), where)
    if after and after[-1].get("cursor") != c + len(after):  # numbered otherwise: read them all
        after = parse_records(data[offset:].decode("utf-8"), where)
    return after, last


def _last_cursor(data: mmap.mmap, c: int, where: str) -> int:
    """The cursor of the journal's last record (``c`` when it names none)."""
    stop = len(data)
    while stop and data[stop - 1] == 0x0A:  # (data.rstrip would copy the whole journal)
        stop -= 1
    last_line = data[data.rfind(b"\n", 0, stop) + 1:stop]
    last = parse_records(last_line.decode("utf-8"), where)[-1].get("cursor") if last_line else c
    return int(last) if isinstance(last, int) else c


RUN_PREFIX = b'{"cursor":0,"kind":"run","t":0,"run_id":'  # (how every run record begins: records.dumps_record)
NAMES = ("kind", "scenario", "seed", "run_id", "params")  # what a fork reads of its parent's run record


def _json(value: Any) -> bytes:
    """``value`` as ``dumps_record`` writes it inside a record (json.dumps's compact bytes, whatever surrounds it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _run_head(first: bytes, where: str) -> list[dict[str, Any]]:
    """The parent's run record as a fork reads it (``NAMES``): from the bytes before its ``agents`` when they parse
    alone (for 10,000 foragers the record is 2 MB, nearly all of it the agents and the layout), else all of it. A
    cut inside a nested value or a string leaves no JSON object, so what parses is the record's own first keys."""
    cut = first.find(b',"agents":')
    if cut > 0:
        try:
            head = orjson.loads(first[:cut] + b"}")
        except orjson.JSONDecodeError:
            head = None
        if isinstance(head, dict) and head.get("kind") == "run" and all(k in head for k in NAMES):
            return [head]
    return parse_records(first.decode("utf-8", "replace"), where)


def _run_line(first: bytes, parent: str, run_id: str, point: ForkPoint, where: str) -> bytes:
    """The fork's ``run`` record (its first line): the parent's (``first``, its bytes), with the fork's id and
    where it forked. Spliced into the parent's bytes when they have the shape ``dumps_record`` gives them (the
    fork's id in place of the parent's, ``forked_from`` added last), else parsed and written again: the same bytes
    either way (tests/test_journal_snapshots.py compares forks from snapshots with forks replayed)."""
    old = RUN_PREFIX + _json(parent) + b","
    if first.startswith(old) and first.endswith(b"}") and b'"forked_from":' not in first:
        return (RUN_PREFIX + _json(run_id) + b"," + first[len(old):-1] + b',"forked_from":'
                + _json(point.as_dict()) + b"}\n")
    run = parse_records(first.decode("utf-8"), where)[0]
    run.pop("cursor", None)
    run["run_id"] = run_id
    run["forked_from"] = point.as_dict()
    return (dumps_record(with_cursor(0, run)) + "\n").encode("utf-8")


COMMAND_KEY = b'"kind":"command"'  # (a key and value: inside a JSON string its quotes would be escaped)


def _stops(digests: list[tuple[int, int, bytes]], c: int, batches: tuple[int, int] | None) -> list[int]:
    """Where a fork from snapshot ``c`` will hash the journal up to: the snapshot's digest, and the first digest
    at or after the fork point (``batches``, from ``_batches_to``), as far as the run's digests say."""
    mine = [d[1] for d in digests if d[0] == c]
    there = [d[1] for d in digests if batches is not None and d[0] >= batches[1]][:1]
    return mine + there if mine else []


def _restored(loaded: LoadedScenario, seed: int, run_id: str, snap: dict[str, Any]) -> Simulation:
    """The run as the snapshot holds it (its objects, not copies), under the fork's id."""
    return restore(Simulation(loaded.spec, seed, run_id=run_id, record=False, populate=False), snap["state"])


def _fork_vouched(data: mmap.mmap, hashes: _PrefixHashes, digests: list[tuple[int, int, bytes]],
                  snap: dict[str, Any], origin: tuple[Path, bytes, LoadedScenario, int, str], cursor: int,
                  overrides: Mapping[str, dict[str, Any]] | None, where: str,
                  batches: tuple[int, int]) -> tuple[JournalFork | None, bool]:
    """The fork from ``snap`` when the run's digests vouch for the journal's bytes up to the fork point, and
    whether the snapshot's objects were walked on (then the caller needs them again).

    The bytes from the snapshot to the fork point are the run's own when the journal's SHA-256 at the first digest
    after them (the next snapshot's, or the run's end) is the one the run wrote (``DIGESTS``, whose entry at the
    snapshot must be the snapshot's own): then the walk need not check each record the engine writes against the
    journal's, as ``_fork_at`` does. It answers from the journal's commands (the only records it parses), brings
    each policy along as every fork does, and counts the engine's records: a count other than the journal's
    lines there (a journal holding runtime records, which a fork leaves out, has fewer engine records than
    lines), or a policy that cannot be brought, returns (None, True), and the caller walks with every record
    checked. The same fork either way (tests/test_journal_snapshots.py)."""
    path, first, loaded, seed, parent = origin
    c, offset, n, boundary = int(snap["cursor"]), int(snap["bytes"]), batches[0], batches[1]
    if (c, offset, bytes.fromhex(snap["sha256"])) not in digests:
        return None, False
    _, stop, digest = next((d for d in digests if d[0] >= boundary), (0, -1, b""))
    if not offset <= stop <= len(data) or hashes.at(stop).digest() != digest:
        return None, False
    _check_cursor([{"cursor": _last_cursor(data, c, where)}], cursor, where)
    lines = data[offset:stop].split(b"\n", boundary - c)
    if len(lines) <= boundary - c:  # (fewer lines than the fork point needs)
        return None, False
    end = stop - len(lines.pop())  # where the fork point's boundary ends
    commands = parse_records(b"\n".join(line for line in lines if COMMAND_KEY in line).decode("utf-8"), where)
    check_agents(loaded.spec, list(overrides or {}))
    run_id = f"{parent}-fork"
    sim = _restored(loaded, seed, run_id, snap)
    bringer = _Bringer([r for r in commands if r["kind"] == "command"], sim, snap["policies"], where, [], check=False)
    try:
        for _ in range(n):
            bringer.batch()
    except ForkError:  # (a policy that cannot be brought: the checked walk says so, with the record)
        return None, True
    if bringer.engine_records != boundary - c:
        return None, True
    point = ForkPoint(parent, cursor, boundary, int(snap["batches"]) + n, sim.time)
    forked = Forked(sim, bringer.policies, point, [], dict(overrides or {}))
    newline = data.find(b"\n")
    return JournalFork(forked, _run_line(first, parent, run_id, point, where), path, (newline + 1, end),
                       boundary + 1, False), True


def _fork_at(data: mmap.mmap, offset: int, snap: dict[str, Any], again: Callable[[], dict[str, Any] | None],
             origin: tuple[Path, bytes, LoadedScenario, int, str], cursor: int,
             overrides: Mapping[str, dict[str, Any]] | None, where: str,
             batches: tuple[int, int] | None = None) -> JournalFork | None:
    path, first, loaded, seed, parent = origin  # the journal, its run record's bytes, what it was made from
    c = int(snap["cursor"])
    after, last = _records_after(data, offset, c, cursor, where)
    if after and after[0].get("cursor") != c + 1:
        return None
    _check_cursor([{"cursor": last}], cursor, where)
    check_agents(loaded.spec, list(overrides or {}))
    run_id = f"{parent}-fork"

    expected = expected_of(after, owned=True)  # (``after`` loses its cursors: they are in ``expected`` now)

    def restored(snap: dict[str, Any]) -> _Bringer:
        sim = _restored(loaded, seed, run_id, snap)
        return _Bringer(after, sim, snap["policies"], where, expected)

    bringer, limit = None, None
    if batches is not None:  # the index says where the fork point is: walk there, no copy (the module docstring)
        direct, _ = walk_to(restored(snap), cursor, batches[0], copy=False)
        if (direct.boundary if direct.got else c) == batches[1]:
            bringer = direct
        else:
            fresh = again()
            if fresh is None:
                return None
            snap = fresh
    if bringer is None:
        bringer, limit = walk_to(restored(snap), cursor, None)
    if limit is not None:
        snap_again = again()
        if snap_again is None:
            return None
        bringer, _ = walk_to(restored(snap_again), cursor, limit)
    boundary = bringer.boundary if bringer.got else c
    point = ForkPoint(parent, cursor, boundary, int(snap["batches"]) + _batches(bringer.got), bringer.sim.time)
    newline = data.find(b"\n")
    got, end, walked = bringer.got, offset, []
    if all(r == a for r, a in zip(got, after[:len(got)], strict=True)):  # the journal's own records (uncursored):
        for _ in got:  # copy their bytes
            end = data.find(b"\n", end) + 1
    else:
        walked = [dict(r) for r in got]
    forked = Forked(bringer.sim, bringer.policies, point, walked, dict(overrides or {}))
    return JournalFork(forked, _run_line(first, parent, run_id, point, where), path, (newline + 1, end), c + 1 + len(got) - len(walked))
