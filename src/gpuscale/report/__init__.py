"""Rendering only: results come in; rich tables, plotly figures and HTML go out.

One module per command family (``estimate``, ``fit``, ``planner`` for plan and scale,
``advise``), the HTML writer (``html``) and the one progress bar (``progress``). The CLI, the
HTML report and ``Result.figures()`` all draw with these; nothing here decides anything.
"""
