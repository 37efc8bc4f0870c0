"""The glossary page: every term and metric, served by the rlvitals datasource."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from .common import Grid, dashboard_shell
from .i18n import words
from .panels import glossary_panel

__all__ = ["glossary_dashboard"]


def glossary_dashboard(lang: str) -> db.Dashboard:
    grid = Grid()
    dash = dashboard_shell("glossary", words(lang).glossary, lang, steps=None, focus=False)
    return dash.with_panel(glossary_panel(lang).id(grid.next_id()).grid_pos(grid.place(24, 24)))
