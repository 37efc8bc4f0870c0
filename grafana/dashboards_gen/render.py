"""Dashboards as files: Classic dashboard JSON, one file per page and language."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from registry import Registry

from .common import PAGES
from .details import DETAIL_GROUPS, compare_dashboard, detail_dashboard
from .glossary import glossary_dashboard
from .overview import overview_dashboard

__all__ = ["DASHBOARD_DIR", "dashboard_files", "dashboards", "encode"]

DASHBOARD_DIR = "grafana/dashboards"


def encode(dash: db.Dashboard) -> str:
    """Stable JSON text of a built dashboard (sorted keys, two-space indent, final newline)."""
    data = json.loads(JSONEncoder(sort_keys=True).encode(dash.build()))
    data["id"] = None  # provisioning keys dashboards by uid
    for link in data.get("links", []):
        # The SDK (0.0.21) gives every link `placement: inControlsMenu`; Grafana 13 shows above the
        # panels only links whose placement is undefined, the rest inside the controls dropdown
        # (public/app/features/dashboard-scene/scene/DashboardLinksControls.tsx).
        link.pop("placement", None)
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def dashboards(reg: Registry, lang: str) -> dict[str, db.Dashboard]:
    """Page key -> dashboard builder, for one language."""
    out: dict[str, db.Dashboard] = {}
    for page in PAGES:
        if page.key == "overview":
            out[page.key] = overview_dashboard(reg, lang)
        elif page.key == "compare":
            out[page.key] = compare_dashboard(reg, lang)
        elif page.key == "glossary":
            out[page.key] = glossary_dashboard(lang)
        elif page.key in DETAIL_GROUPS:
            out[page.key] = detail_dashboard(reg, page.key, lang)
    return out


def dashboard_files(reg: Registry, langs: Sequence[str]) -> Mapping[str, str]:
    """`grafana/dashboards/<lang>/<page>.json` for every page and language."""
    return {
        f"{DASHBOARD_DIR}/{lang}/{key}.json": encode(dash)
        for lang in langs
        for key, dash in dashboards(reg, lang).items()
    }
