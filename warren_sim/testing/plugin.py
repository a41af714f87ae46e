"""The pytest plugin (entry point ``pytest11: warren``): fixtures ``warren_server``, ``warren_app``, ``warren_run``,
the ``warren`` marker and the ``warren_rate`` ini option.

Loading this module must cost a project that never uses WARREN nothing: it imports only pytest (already
loaded) and the standard library's ``typing``; each fixture imports the server code when a test first asks for
it. It never sets ``trio_mode``: ``warren_app`` is an async fixture for tests the user marks
``@pytest.mark.trio`` (or runs in their own trio mode).

Options, closest first: ``@pytest.mark.warren(rate=1000, lease_ttl=300, ...)`` (any ``warren serve`` setting:
the fields of :class:`warren_sim.runtime.manager.ServerConfig` but ``data_dir``), then the ini option
``warren_rate``, then rate 1 (real time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .inprocess import InProcessWarren
    from .served import WarrenServer

_APP_KEY = pytest.StashKey["InProcessWarren"]()
_SERVER_KEY = pytest.StashKey["WarrenServer"]()

MARKER = ("warren(rate=1, **options): settings of this test's WARREN server: rate (its clock runs RATE times "
          "faster: every timeout, lease TTL and decision deadline), and any `warren serve` setting such as "
          "lease_ttl=300, max_wait_s=60, faults=\"lost_reply=0.2\", fault_seed=7 (docs/faults.md)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("warren_rate", "clock rate of the warren_server fixture: every timeout passes RATE times faster "
                  "(default 1, real time); @pytest.mark.warren(rate=...) overrides it", default="1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("warren")
    options: dict[str, Any] = {}
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.warren takes keywords only (rate=1000, lease_ttl=300), got "
                                    f"{marker.args!r} on {request.node.nodeid}")
        options.update(marker.kwargs)
    if "rate" not in options:
        raw = request.config.getini("warren_rate")
        try:
            options["rate"] = float(raw)
        except ValueError:
            raise pytest.UsageError(f"ini option warren_rate must be a number (1 is real time), got {raw!r}") from None
    return options


@pytest.fixture
def warren_server(request: pytest.FixtureRequest) -> Iterator[WarrenServer]:
    """A real ``warren serve`` on 127.0.0.1:0 in a background thread, on its own warped clock and temporary
    data directory: ``.url``, ``.create_run(...)``, ``.journal(run)``, ``.sleep(s)``, ``.kill()``, ``.restart()``."""
    from .served import WarrenServer

    options = _options(request)
    server = WarrenServer.open(options.pop("rate"), **options)
    request.node.stash[_SERVER_KEY] = server
    try:
        yield server
    finally:
        server.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test whose server injected faults (``@pytest.mark.warren(faults=...)``) says which fault met which
    request, and with which seed it comes again: the first thing to read when an agent breaks under faults."""
    report = yield
    if report.when == "call" and report.failed:
        server = item.stash.get(_SERVER_KEY, None)
        lines = server.faults_met() if server is not None else []
        if lines:
            report.sections.append(("WARREN faults met", "\n".join(lines)))
    return report


@pytest.fixture
async def warren_app(request: pytest.FixtureRequest) -> AsyncIterator[InProcessWarren]:
    """The app in this trio test's run (use with pytest-trio's ``autojump_clock``): ``.client`` (the SDK's
    ``AsyncAgentClient``), ``.http``, ``await .create_run(...)``, ``await .journal(run)``."""
    from .inprocess import open_in_process

    async with open_in_process(**_options(request)) as warren:
        request.node.stash[_APP_KEY] = warren
        try:
            yield warren
        finally:
            del request.node.stash[_APP_KEY]


@pytest.fixture
def warren_run(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``warren_run(scenario, seed=0, controlled_agents=(), **options)``: a run on ``warren_app`` when the test
    uses it (then ``await`` the call), otherwise on ``warren_server`` (a blocking call)."""
    if "warren_app" in request.fixturenames:
        node = request.node

        async def create_in_process(scenario: str, seed: int = 0, controlled_agents: Any = (),
                                    **options: Any) -> Any:
            warren = node.stash.get(_APP_KEY, None)
            if warren is None:
                raise RuntimeError("warren_run in this test awaits warren_app, which is not set up: mark the test "
                                   "@pytest.mark.trio and request warren_app as one of its arguments")
            return await warren.create_run(scenario, seed, controlled_agents, **options)

        return create_in_process
    server: WarrenServer = request.getfixturevalue("warren_server")
    return server.create_run
