"""docs/client.md's examples run: the blocking and the trio client, each against a real server on loopback.

The code blocks in the doc are the files under docs/examples/ (checked here line for line), and those files are
imported and run: the SDK as a newcomer first sees it cannot drift from what works.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import trio

from warren_sim.http.server import start_server
from warren_sim.runtime.manager import ServerConfig

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "client.md"


def _shown_examples() -> dict[str, str]:
    """``<!-- example: PATH -->`` followed by a python block in the doc: {PATH: the block's code}."""
    found = re.findall(r"<!-- example: (\S+) -->\n```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return dict(found)


def _load(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(relative).stem, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_shows_each_example_file_exactly() -> None:
    """Both clients' examples are in client.md, verbatim."""
    shown = _shown_examples()
    assert set(shown) == {"docs/examples/client_blocking.py", "docs/examples/client_trio.py"}
    for path, code in shown.items():
        assert code == (ROOT / path).read_text(encoding="utf-8"), f"client.md's block differs from {path}"


async def test_the_blocking_and_trio_examples_run_against_a_real_server(tmp_path, capsys) -> None:
    """Each example claims engineer-1, reads its first observation, takes the toolbox: outcome accepted."""
    blocking, async_ = _load("docs/examples/client_blocking.py"), _load("docs/examples/client_trio.py")
    async with trio.open_nursery() as nursery:
        server = await nursery.start(start_server, ServerConfig(data_dir=tmp_path), "127.0.0.1", 0)
        try:
            assert await trio.to_thread.run_sync(blocking.drive, server.url) == "accepted"
            assert await async_.drive(server.url) == "accepted"
        finally:
            server.shutdown()
    out = capsys.readouterr().out.splitlines()
    assert out.count("engineer-1#0 0 0 start") == 2
    assert out.count("accepted accepted None") == 2
    assert sum(1 for line in out if line.startswith("[t=0s] You are Sam the engineer")) == 2
