"""`rlvitals serve`'s live dashboard: the run list at `/` and a page per run (or several runs
overlaid) at `/run`, drawn in the browser with the vendored uPlot from the datasource's JSON API.
Served by `grafana/datasource/dashboard_page.py`; no request leaves rlvitals."""

from .i18n import LANGS, UI, UNITS
from .pages import CSP, STATIC, render_index, render_run

__all__ = ["CSP", "LANGS", "STATIC", "UI", "UNITS", "render_index", "render_run"]
