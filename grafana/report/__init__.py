"""`rlvitals report`: one self-contained HTML file for sharing a run (core curves, healthy bands,
events, diagnosis cards, registry tooltips, English and Chinese), optionally a PNG of it.

`render_report(store, registry, run)` returns the HTML; `write_report(config, registry, run,
path)` reads the store the datasource config names (embedded outbox or InfluxDB) and writes it.
The datasource serves the same page at `GET /report?run=R` (`grafana/datasource/report_page.py`).
"""

from .build import langs_for, render_report, write_report
from .data import ChartData, ReportData, SeriesData, chart_groups, gather
from .render import card_html, render_html, tooltip_html

__all__ = [
    "ChartData",
    "ReportData",
    "SeriesData",
    "card_html",
    "chart_groups",
    "gather",
    "langs_for",
    "render_html",
    "render_report",
    "tooltip_html",
    "write_report",
]
