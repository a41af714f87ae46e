"""Plots of runs, from records only: ``warren report JOURNAL`` and ``warren eval --plot``.

:mod:`.data` turns journal records (and evaluation reports) into plain series, with no plotting
library; :mod:`.plots` draws them with matplotlib's Agg backend (the optional extra
``warren-sim[plot]``), imported only when a plot is drawn. This package never imports the engine, the
runtime or the server (an import-linter contract says so): a journal file is all it needs.
"""

from .data import ActionSpan, ObjectiveSeries, action_spans, objective_series, read_records

__all__ = ["ActionSpan", "ObjectiveSeries", "action_spans", "objective_series", "read_records"]
