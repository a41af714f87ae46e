"""No import circle anywhere in warren_sim/: the module graph, lazy imports included, is acyclic.

A circle between two modules means neither can be read, tested or replaced without the other; the core's
shape (each part of a run, each layer of the engine) depends on there being none. The graph is grimp's (the
one import-linter builds from the source, every ``import`` statement including those inside functions and
``TYPE_CHECKING`` blocks); its strongly connected components with more than one module are the circles.
"""

from __future__ import annotations

import grimp


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (iterative: the graph is deep)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.find_modules_directly_imported_by(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.find_modules_directly_imported_by(nxt))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_module_graph_of_warren_sim_has_no_cycle():
    graph = grimp.build_graph("warren_sim", include_external_packages=False)
    assert _circles(graph) == []


def test_the_cycle_finder_sees_a_circle():
    """The finder is not vacuous: a graph with a -> b -> c -> a and d -> a has exactly the circle a, b, c."""
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=importer, imported=imported)
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]
