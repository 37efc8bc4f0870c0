"""Every generated dashboard against the vendored Grafana JSON Schemas (with only the three
documented relaxations), and the rules the bundle promises about their content."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import registry
from grafana.dashboards_gen import dashboard_files
from grafana.dashboards_gen.common import PAGES, page_uid
from grafana.dashboards_gen.details import DETAIL_GROUPS
from grafana.dashboards_gen.overview import LAYERS
from grafana.dashboards_gen.panels import MIXED
from grafana.dashboards_gen.queries import bucket_query, event_marks_query, step_measurement
from grafana.dashboards_gen.sources import DASHBOARD_SOURCES, INFINITY, INFLUX, PROMETHEUS
from grafana.dashboards_gen.units import UNIT_IDS

ROOT = Path(__file__).parents[2]
SCHEMAS = ROOT / "tests" / "fixtures" / "schemas" / "grafana"
PANEL_SCHEMAS = {"trend": "trend", "stat": "stat", "table": "table", "timeseries": "timeseries"}


def _schema(name: str) -> dict[str, Any]:
    path = SCHEMAS / f"{name}.jsonschema.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@cache
def _dashboard_validator() -> jsonschema.Draft7Validator:
    schema = copy.deepcopy(_schema("dashboard"))
    defs = schema["definitions"]
    # the three documented false negatives of the generated schema (CUE "any" typed as object)
    defs["MatcherConfig"]["properties"]["options"] = {}
    defs["DynamicConfigValue"]["properties"]["value"] = {}
    defs["VariableModel"]["properties"]["query"] = {}
    return jsonschema.Draft7Validator(schema)


@cache
def _panel_validator(kind: str, part: str) -> jsonschema.Draft7Validator:
    schema = copy.deepcopy(_schema(PANEL_SCHEMAS[kind]))
    return jsonschema.Draft7Validator({**schema, "$ref": f"#/definitions/{part}"})


@pytest.fixture(scope="module")
def files(builtin: registry.Registry) -> dict[str, dict[str, Any]]:
    return {path: json.loads(text) for path, text in dashboard_files(builtin, ("en", "zh")).items()}


def _panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def test_every_dashboard_validates_against_the_dashboard_schema(files: dict[str, Any]) -> None:
    for path, dash in files.items():
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _dashboard_validator().iter_errors(dash)
        ]
        assert not errors, f"{path}: {errors[:5]}"


def test_every_panel_validates_against_its_panel_schema(files: dict[str, Any]) -> None:
    for path, dash in files.items():
        for panel in _panels(dash):
            kind = panel["type"]
            if kind == "row":
                continue
            assert kind in PANEL_SCHEMAS, f"{path}: unexpected panel type {kind}"
            for part, value in (
                ("Options", panel.get("options", {})),
                ("FieldConfig", panel["fieldConfig"]["defaults"].get("custom")),
            ):
                if value is None:
                    continue
                errors = [e.message for e in _panel_validator(kind, part).iter_errors(value)]
                assert not errors, f"{path} panel {panel['title']!r} {part}: {errors[:3]}"


def test_uids_are_fixed_distinct_per_language_and_short(files: dict[str, Any]) -> None:
    uids = [d["uid"] for d in files.values()]
    assert len(set(uids)) == len(uids) == len(PAGES) * 2
    assert all(8 <= len(u) <= 40 for u in uids)
    assert {page_uid("overview", "en"), page_uid("overview", "zh")} <= set(uids)


def test_panels_use_only_the_datasource_variables(files: dict[str, Any]) -> None:
    variables = {f"${{{s.variable}}}" for s in (INFLUX, PROMETHEUS, INFINITY)}
    for path, dash in files.items():
        for panel in _panels(dash):
            for target in panel.get("targets", []):
                assert target["datasource"]["uid"] in variables, path
        ids = [p["id"] for p in _panels(dash)]
        assert len(ids) == len(set(ids)), f"{path}: duplicate panel ids"


def test_metric_charts_plot_against_step_with_registry_units_and_tooltips(
    files: dict[str, Any], builtin: registry.Registry
) -> None:
    units = {UNIT_IDS[m.unit] for m in builtin.metrics}
    for path, dash in files.items():
        for panel in _panels(dash):
            if panel["type"] != "trend":
                continue
            assert panel["options"]["xField"] == "step"
            assert panel["fieldConfig"]["defaults"]["unit"] in units
            assert "/terms/" in panel["description"], f"{path}: {panel['title']} lacks a term link"
            for t in panel["targets"]:
                if "query" not in t:
                    continue  # the runs' colours (the rlvitals API)
                if t["query"] == event_marks_query():
                    continue  # the events as marks: their own steps, not buckets
                # the bucket's last step: of the raw points, or of the rollup blocks (`last:<id>`)
                assert re.search(r'max\("(step|last:[^"]+)"\) AS "step"', t["query"]), t["query"]
                assert "GROUP BY time(${bucket}s)" in t["query"]
                assert "$__interval" not in t["query"]
                assert "exponential_moving_average(" in t["query"] and "$smoothing" in t["query"]


def test_every_registry_unit_maps_to_a_grafana_unit(builtin: registry.Registry) -> None:
    assert {m.unit for m in builtin.metrics} <= set(UNIT_IDS)


def test_absolute_healthy_bands_are_drawn_as_threshold_areas(
    files: dict[str, Any], builtin: registry.Registry
) -> None:
    overview = files["grafana/dashboards/en/overview.json"]
    entropy = builtin.metric("policy_kl")
    assert entropy.bands is not None and entropy.bands.basis == "absolute"
    panel = next(
        p
        for p in _panels(overview)
        if p["type"] == "trend" and p["title"].startswith(entropy.title.en)
    )
    custom = panel["fieldConfig"]["defaults"]["custom"]
    assert custom["thresholdsStyle"]["mode"] == "area"
    steps = [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    band = entropy.bands.mid
    assert band is not None and band.high in steps


def test_overview_is_about_eight_charts_of_the_registrys_overview_metrics_each_once(
    files: dict[str, Any], builtin: registry.Registry
) -> None:
    for lang in ("en", "zh"):
        overview = files[f"grafana/dashboards/{lang}/overview.json"]
        rows = [p["title"] for p in overview["panels"] if p["type"] == "row"]
        assert len(rows) == len(LAYERS)
        charts = [p for p in _panels(overview) if p["type"] == "trend"]
        assert len(charts) <= 8
        for m in builtin.metrics:
            drawn = [
                c["title"]
                for c in charts
                if any(f'"{m.id} smoothed"' in t.get("query", "") for t in c["targets"])
            ]
            expected = 1 if m.display.overview and m.kind != "counter" else 0
            assert len(drawn) == expected, f"{lang}: {m.id} in {drawn}"
        cards = [
            p
            for p in _panels(overview)
            if p["type"] == "table" and p["datasource"]["uid"] == INFINITY.variable_ref()["uid"]
        ]
        assert len(cards) == 1  # one table of readings, not one per chart
        assert all(event_marks_query() in [t.get("query") for t in c["targets"]] for c in charts)


def test_every_registry_group_has_a_detail_page(builtin: registry.Registry) -> None:
    shown = {g for groups in DETAIL_GROUPS.values() for g in groups}
    assert {m.group for m in builtin.metrics} <= shown


def test_pages_link_to_each_other_like_tabs_and_to_the_other_language(
    files: dict[str, Any],
) -> None:
    for path, dash in files.items():
        urls = {link["url"] for link in dash["links"]}
        lang = dash["uid"].rsplit("-", 1)[1]
        other = "zh" if lang == "en" else "en"
        key = dash["uid"][len("rlvitals-") : -len(lang) - 1]
        assert {f"/d/{page_uid(p.key, lang)}" for p in PAGES if p.key != key} <= urls, path
        assert f"/d/{page_uid(key, other)}" in urls


def test_chinese_dashboards_carry_chinese_titles(
    files: dict[str, Any], builtin: registry.Registry
) -> None:
    zh = files["grafana/dashboards/zh/overview.json"]
    assert re.search(r"[\u4e00-\u9fff]", zh["title"])
    titles = " ".join(p.get("title", "") for p in _panels(zh))
    assert builtin.metric("policy_entropy").title.zh in titles


def test_variables_run_smoothing_bucket_and_datasources(
    files: dict[str, Any], builtin: registry.Registry
) -> None:
    for dash in files.values():
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        assert {"run", "smoothing", "step_from"} <= set(variables)
        assert variables["run"]["multi"] is True
        if any(p["type"] == "trend" for p in _panels(dash)):
            bucket = variables["bucket"]
            # derived: one measurement, so one value; hidden and never in the address
            assert bucket["query"] == bucket_query(step_measurement(builtin))
            assert bucket["skipUrlSync"] is True and bucket["hide"] == 2
        for src in DASHBOARD_SOURCES:
            var = variables[src.variable]
            assert var["type"] == "datasource" and var["query"] == src.type
            assert var["current"]["value"] == src.uid  # the provisioned one by default


def test_every_panel_and_query_points_at_a_datasource_variable(files: dict[str, Any]) -> None:
    """Imported into an existing Grafana, picking the datasources re-points every query."""
    wanted = {src.type: f"${{{src.variable}}}" for src in DASHBOARD_SOURCES}
    for path, dash in files.items():
        for panel in _panels(dash):
            for ref in [panel.get("datasource")] + [
                t["datasource"] for t in panel.get("targets", [])
            ]:
                if ref == MIXED:
                    continue  # a chart's: each of its queries names its own
                if ref is not None:
                    assert ref["uid"] == wanted[ref["type"]], (path, panel.get("title"), ref)


def test_no_annotation_layer_that_no_panel_draws(files: dict[str, Any]) -> None:
    """The trend panel draws no annotations (public/app/plugins/panel/trend/module.tsx leaves
    `setDataSupport({ annotations: true })` commented out); events live in the events table."""
    for dash in files.values():
        assert [a.get("builtIn") for a in dash["annotations"]["list"]] == [1]
        assert not any(p.get("type") == "timeseries" for p in _panels(dash))


def test_links_sit_above_the_dashboard(files: dict[str, Any]) -> None:
    """Grafana 13 shows above the panels only links with no `placement`; `inControlsMenu` ones go
    into the controls dropdown (public/app/features/dashboard-scene/scene/DashboardLinksControls.tsx
    `excludeControlMenuLinks`)."""
    for dash in files.values():
        assert dash["links"] and all("placement" not in link for link in dash["links"])


def test_chart_legends_are_tables_with_last_mean_and_max(files: dict[str, Any]) -> None:
    for path, dash in files.items():
        for panel in _panels(dash):
            if panel["type"] == "trend":
                legend = panel["options"]["legend"]
                assert legend["displayMode"] == "table", (path, panel["title"])
                assert legend["calcs"] == ["lastNotNull", "mean", "max"], (path, panel["title"])
