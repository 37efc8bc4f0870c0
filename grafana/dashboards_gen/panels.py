"""Panel builders: step-axis trend charts, diagnosis cards, live stats, event and glossary tables."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import stat, table, trend
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

from exporter.store.run_colors import PALETTE
from registry import Metric
from registry.diagnosis.card import STATUSES

from . import queries
from .describe import band_steps, description, not_logged, term_url
from .i18n import words
from .queries import Series, series_alias
from .sources import INFINITY, INFLUX
from .targets import Target
from .units import grafana_unit

__all__ = [
    "CHART_TRANSFORMATIONS",
    "LEGEND_CALCS",
    "MIXED",
    "RAW_COLOUR",
    "RUN_NAME",
    "Chart",
    "axis_label",
    "card_panel",
    "cards_panel",
    "chart_panel",
    "events_panel",
    "glossary_panel",
    "line_names",
    "state_stat_panel",
]

# smoothed line widths by emphasis; raw is always 1 (thinner than any smoothed line)
_WIDTH = {"primary": 3, "secondary": 2, "thin": 2}
RAW_COLOUR = "#8E8E8E"
"""Every raw line's colour: a grey, which Grafana's classic palette (the 64 colours a run's
colour is picked from: `getClassicPalette`, packages/grafana-data/src/themes/
createVisualizationColors.ts) does not hold, so no run's smoothed line can be drawn in it; it
keeps a contrast of 3 or more on both themes' panel backgrounds."""
RUN_NAME = "${__field.labels.run}"
"""A run series' display name starts with its run (`line_names` adds the metric and line)."""
MIXED = {"type": "datasource", "uid": "-- Mixed --"}
"""A chart's datasource: Grafana's Mixed, each query naming its own (InfluxDB for the series,
the rlvitals API for the runs' colours)."""
_LINE_STYLES: tuple[dict[str, Any], ...] = (
    {"fill": "solid"},
    {"fill": "dash", "dash": [10, 10]},
    {"fill": "dot", "dash": [0, 10]},
)
"""How the metrics of one chart are told apart, all in their run's colour: 1st solid, 2nd dashed,
3rd dotted (`custom.lineStyle`)."""
_STATUS_COLORS = {
    "ok": "green",
    "watch": "yellow",
    "warning": "orange",
    "critical": "red",
    "no_data": "text",
}


@dataclass(frozen=True)
class Chart:
    """A step-axis chart: which series it draws and an optional title (else the first metric's)."""

    series: tuple[Series, ...]
    title: str | None = None
    events: bool = False
    """Also mark the runs' events at their steps (the overview's core charts)."""


LEGEND_CALCS: tuple[str, ...] = ("lastNotNull", "mean", "max")


def _legend() -> cb.VizLegendOptions:
    """A table legend: one row per drawn series (metric, kind and run) with last, mean and max."""
    return (
        cb.VizLegendOptions()
        .show_legend(True)
        .display_mode(cm.LegendDisplayMode.TABLE)
        .placement(cm.LegendPlacement.BOTTOM)
        .calcs(list(LEGEND_CALCS))
    )


def _tooltip() -> cb.VizTooltipOptions:
    return cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.NONE)


def _prop(prop_id: str, value: object) -> dm.DynamicConfigValue:
    return dm.DynamicConfigValue(id_val=prop_id, value=value)


def _ref(ref: dict[str, str]) -> dm.DataSourceRef:
    return dm.DataSourceRef(type_val=ref["type"], uid=ref["uid"])


def _fixed(color: str) -> dict[str, str]:
    return {"mode": "fixed", "fixedColor": color}


def axis_label(m: Metric, lang: str) -> str:
    """A y axis' label: the metric it belongs to and its unit (the registry's)."""
    return f"{m.title.get(lang)} ({m.unit})"


_NO_SOFT_RANGE = (_prop("custom.axisSoftMin", None), _prop("custom.axisSoftMax", None))
"""Overrides removing the chart's soft axis range (its first metric's band) from a scale of
another unit: an override whose value is null unsets the property (`setDynamicConfigValue` in
packages/grafana-data/src/field/fieldOverrides.ts)."""


def _series_style(
    s: Series, position: int, right: bool, lang: str
) -> list[tuple[str, list[dm.DynamicConfigValue]]]:
    """Overrides for one metric's columns, by kind: raw thin and grey, smoothed in its run's
    colour (line style by the metric's position in the chart), bucket max as points, slope
    dashed on the right axis.

    Each override also sets the display name (`line_names`: the run, then the metric and which
    of its lines): after that a field no longer carries its column name, and Grafana's `byRegexp` matcher tests only the display name
    (packages/grafana-data/src/transformations/matchers/nameMatcher.ts), so each field must be
    matched, and named, by the one override of its own column. After `partitionByValues` a
    column's display name is `<column> <run>`; `byRegexp` anchors a pattern given without
    slashes (`stringToJsRegex`, packages/grafana-data/src/text/string.ts), so the patterns are
    written `/^<column>( |$)/`.

    Legend: one row per run and metric, its smoothed line (its last, mean, max); every other
    series is hidden from the legend (`custom.hideFrom.legend`, read by PlotLegend.tsx), raw also
    from the tooltip, where its grey would repeat its smoothed line's row."""
    m = s.metric
    width = _WIDTH.get(m.display.emphasis, 2)
    # a name family (reward components) draws each member of each run: its series keep their
    # own names, so each (run, member) pair has a colour; every other series is its run's
    family = m.pattern is not None
    common: list[dm.DynamicConfigValue] = []
    if right:
        common += [
            _prop("custom.axisPlacement", "right"),
            _prop("custom.axisLabel", axis_label(m, lang)),
            _prop("unit", grafana_unit(m)),
            _prop("custom.thresholdsStyle", {"mode": "off"}),
            *_NO_SOFT_RANGE,
        ]
    if m.display.log_scale:
        common.append(_prop("custom.scaleDistribution", {"type": "log", "log": 10}))
    hidden = {"legend": True, "tooltip": False, "viz": False}
    named = {} if family else line_names(m, lang)
    styles = {
        "raw": [
            _prop("custom.lineWidth", 1),
            _prop("color", _fixed(RAW_COLOUR)),
            _prop("custom.hideFrom", {"legend": True, "tooltip": True, "viz": False}),
        ],
        "smoothed": [
            _prop("custom.lineWidth", width),
            _prop("custom.lineStyle", _LINE_STYLES[position % len(_LINE_STYLES)]),
        ],
        "max": [
            _prop("custom.lineWidth", 0),
            _prop("custom.drawStyle", "points"),
            _prop("custom.pointSize", 4),
            _prop("custom.hideFrom", hidden),
        ],
        "slope": [
            _prop("custom.lineWidth", 1),
            _prop("custom.lineStyle", {"fill": "dash", "dash": [4, 6]}),
            # a scale of its own with no axis drawn: a chart draws at most two y axes (its
            # metric's, and a right-axis partner's), each labelled with its unit
            _prop("custom.axisPlacement", "hidden"),
            _prop("unit", "none"),
            _prop("custom.thresholdsStyle", {"mode": "off"}),
            *_NO_SOFT_RANGE,
            _prop("custom.hideFrom", hidden),
        ],
    }
    out = []
    for kind in s.kinds():
        extra = [p for p in common if kind != "slope" or p.id_val != "unit"]
        if kind in named:
            extra = [_prop("displayName", named[kind]), *extra]
        # a name family's columns are named by InfluxQL (`mean_<id>/<name>`), so match those
        pattern = (
            f"/^{_literal(queries.FAMILY_COLUMNS[kind] + '_' + m.id)}\\//"
            if m.pattern is not None
            else f"/^{_literal(series_alias(m.id, kind))}( |$)/"
        )
        out.append((pattern, extra + styles[kind]))
    return out


def line_names(m: Metric, lang: str) -> dict[str, str]:
    """Each line's display name (its legend and tooltip row), by kind: the run, then the metric
    and which of its lines, so no two rows of a tooltip read alike (a chart may draw two metrics
    per run, each with its bucket max and slope). Raw lines are in neither legend nor tooltip
    and are named after the run."""
    w = words(lang)
    title = m.title.get(lang)
    return {
        "raw": RUN_NAME,
        "smoothed": f"{RUN_NAME} · {title}",
        "max": f"{RUN_NAME} · {title}, {w.spikes}",
        "slope": f"{RUN_NAME} · {title}, {w.slope}",
    }


def _literal(text: str) -> str:
    """`text` as a JavaScript regex literal's body (spaces need no escape there)."""
    return re.escape(text).replace("\\ ", " ")


def _thresholds(steps: Sequence[tuple[float | None, str]]) -> db.ThresholdsConfig:
    return (
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=v, color=c) for v, c in steps])
    )


_SERIES_FRAMES = {"id": "byRefId", "options": "/^[A-Z]/"}
"""The InfluxDB queries' frames (refIds A, B64, ...), not the run colours' (`RUN_COLOURS_REF`)."""
_NOT_STEPS = {"id": "byRefId", "options": f"/^(?!{queries.STEPS_REF}$)/"}
"""Every frame but the empty step column's (`queries.steps_target`)."""


def _family_names() -> dict[str, Any]:
    """A `renameByRegex` giving a name family's member one display name from either source:
    `<function>_<id>/<member> {color="<colour>", run="<run>"}`.

    The series of a family keep the names InfluxQL gives their columns (`_series_style`), which
    differ by source: `mean_<id>/<member>` from the raw points, `mean_mean:<id>/<member>` from
    the rollups (`queries.FAMILY_ROLLUP_STATS`); and where the chart's one answering query is
    the family's, the frame's name, its measurement (`reward` or a rollup level's), comes
    in as a `name` label too (`joinDataFrames`, packages/grafana-data/src/transformations/
    transformers/joinDataFrames.ts, on the run join and the step join). Both would change the
    legend's rows and, by name, the members' colours as the range crossed 64 steps per point.
    So, last (after the partition has made each field's display name its `config.displayName`:
    partitionByValues.ts; a rename before it is undone there, as it takes a field's
    `displayNameFromDS` first), this drops the rollup statistic and the `name` label from the
    display name of a field whose column names a member (a `/` in it; no plain metric's does).
    `renameByRegex` (renameByRegex.ts) tests and rewrites the display name and sets it as the
    field's `displayName`, which the overrides then match (`/^mean_<id>\\//`, `_series_style`).
    The replacement uses named groups (`$<fn>`): Scenes interpolates a transformation's options
    as a template (`$1` would be read as a variable named `1`, and left as it is only while no
    such variable exists; `$<` is no variable's syntax)."""
    functions = "|".join(sorted(set(queries.FAMILY_COLUMNS.values())))
    stats = "|".join(re.escape(s) for s in queries.FAMILY_ROLLUP_STATS)
    regex = (
        f"/^(?<fn>{functions})_(?:{stats})?"
        '(?<series>[^ ]*\\/[^ ]* \\{(?:color="[^"]*", )?)(?:name="[^"]*", )?/'
    )
    return {"id": "renameByRegex", "options": {"regex": regex, "renamePattern": "$<fn>_$<series>"}}


_FAMILY_NAMES = _family_names()

CHART_TRANSFORMATIONS: tuple[dict[str, Any], ...] = (
    {
        "id": "filterByValue",
        "options": {
            "type": "exclude",
            "match": "any",
            "filters": [{"fieldName": "step", "config": {"id": "isNull", "options": {}}}],
        },
        "filter": {"id": "byRefId", "options": queries.STEPS_REF},
    },
    {"id": "merge", "options": {}, "filter": _SERIES_FRAMES},
    {
        "id": "joinByField",
        "options": {"byField": "run", "mode": "outerTabular"},
        "filter": _NOT_STEPS,
    },
    {
        "id": "filterByValue",
        "options": {
            "filters": [{"fieldName": "step", "config": {"id": "isNull", "options": {}}}],
            "type": "exclude",
            "match": "any",
        },
    },
    {
        "id": "partitionByValues",
        "options": {"fields": ["run", "color"], "keepFields": False, "naming": {"asLabels": True}},
        "filter": _NOT_STEPS,
    },
    {"id": "joinByField", "options": {"byField": "step", "mode": "outer"}},
    _FAMILY_NAMES,
)
"""The chain every chart runs (see docs/grafana.md). `filterByValue`, on the empty step column
only (its `filter`), drops its one row: a `step` field of no values. `merge` makes one table of
the InfluxDB frames only (rows of one run and step become one row; the other frames pass by,
`transformDataFrame` in packages/grafana-data/src/transformations/transformDataFrame.ts);
`joinByField` on `run`, `outerTabular` (`joinTabular` in joinDataFrames.ts: every row of a run,
and a run the colour list lacks keeps its rows), gives each row its run's `color`;
`filterByValue` drops the row with no step a selected run that logs none of the chart's metrics
gets from that join (its colour alone: kept, it made the step axis start at null, so uPlot drew
no line at all, and gave that run a legend row with no line; seen drawn on imported runs);
`partitionByValues`, which reads only the first frame, splits it into one frame per run, run and
colour as labels; `joinByField` outer-joins those and the empty step column on `step` into the
single frame, ascending in step, that the trend panel needs. Those two steps leave the step
column out (it has no `run`, and a join drops a frame without its field: joinDataFrames.ts);
the last join adds no row for it. When no query answered, the last join has only it to join:
one frame, a `step` field of length 0, so the trend panel shows the chart's `noValue` (see
`chart_panel`) instead of "Unable to find field: step". Last, `renameByRegex` names a name
family's members alike whether the raw points or the rollups answered (`_family_names`)."""


def _with_marks_gate(chart: Chart) -> tuple[dict[str, Any], ...]:
    """`CHART_TRANSFORMATIONS`, and for a chart with event marks a gate after the join on run:
    the rows are kept only when some selected run logs one of the chart's metrics, so a chart
    with nothing else to draw shows why (its `noValue`) rather than the runs' events alone.

    `filterByValue`, `include`, `any`: a row is kept when one filter matches, and a filter
    naming a field the table does not have matches no row
    (packages/grafana-data/src/transformations/transformers/filterByValue.ts,
    `createFilterValueMatchers`). A metric's column tested both `isNull` and `isNotNull`
    matches every row when the column is there, none when no run answered it. A run that logs
    none of the chart's metrics beside one that does keeps its marks (a filter tests rows, not a
    run's rows together); its all-null columns are hidden (see `chart_panel`)."""
    if not chart.events or any(s.metric.pattern is not None for s in chart.series):
        return CHART_TRANSFORMATIONS
    column = [series_alias(s.metric.id, s.kinds()[0]) for s in chart.series]
    gate = {
        "id": "filterByValue",
        "options": {
            "type": "include",
            "match": "any",
            "filters": [
                {"fieldName": name, "config": {"id": test, "options": {}}}
                for name in column
                for test in ("isNull", "isNotNull")
            ],
        },
    }
    at = 4  # after the join on `run` and the drop of step-less rows, before the partition
    assert CHART_TRANSFORMATIONS[at]["id"] == "partitionByValues"
    return (*CHART_TRANSFORMATIONS[:at], gate, *CHART_TRANSFORMATIONS[at:])


def _run_colour_pattern(colour: str) -> str:
    """A run series drawn in `colour`: after the partition its display name is
    `<column> {color="<colour>", run="<run>"}` (labels sorted by key: `formatLabels`,
    packages/grafana-data/src/utils/labels.ts; a chart whose one query answered also carries
    the frame's `name`, which the join on step adds: joinDataFrames.ts). A name family's
    columns (`mean_<id>/<member>`) are left out: each (run, member) keeps a colour of its own,
    by name."""
    return f'/^[^/{{]+ \\{{color="{colour}"[,}}]/'


def _run_colour_overrides() -> list[tuple[str, list[dm.DynamicConfigValue]]]:
    """One override per palette colour (exporter.store.run_colors.PALETTE), before any override
    that renames a series (a matcher tests the display name as it is when it runs:
    applyFieldOverrides in packages/grafana-data/src/field/fieldOverrides.ts); a fixed colour
    does not depend on the theme."""
    return [(_run_colour_pattern(c), [_prop("color", _fixed(c))]) for c in PALETTE]


def chart_panel(chart: Chart, lang: str) -> trend.Panel:
    """A trend panel over the `step` field with one InfluxQL query per metric."""
    first = chart.series[0].metric
    title = chart.title or " · ".join(s.metric.title.get(lang) for s in chart.series)
    panel = (
        trend.Panel()
        .title(title)
        .description(
            description(
                [s.metric for s in chart.series],
                lang,
                [s.kinds() for s in chart.series],
                chart.events,
            )
        )
        .datasource(_ref(MIXED))
        .x_field("step")
        .unit(grafana_unit(first))
        .axis_label(axis_label(first, lang))
        .legend(_legend())
        .tooltip(_tooltip())
        .line_width(1)
        .fill_opacity(0)
        .show_points(cm.VisibilityMode.NEVER)
        .span_nulls(True)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.PALETTE_CLASSIC_BY_NAME))
        # after the join the step field's display name carries a run (`step <run>`); `byName`
        # also tests a field's own name (nameMatcher.ts), so this finds it. The step is a
        # count: without its own unit, axis label and decimals it takes the chart's defaults
        # (an x axis labelled "nats" with ticks in nats, step 100 of a chart in seconds read
        # "1.67 mins" in the tooltip: seen drawn, tests/grafana/test_dashboards_drawn_browser.py)
        .override_by_name(
            "step",
            [
                _prop("displayName", "step"),
                _prop("unit", "none"),
                _prop("decimals", 0),
                _prop("custom.axisLabel", "step"),
            ],
        )
    )
    # no selected run logs the chart's metrics: the trend panel, given one frame whose `step` has
    # no values, has no graphable field and shows `fieldConfig.defaults.noValue` (TrendPanel.tsx,
    # PanelDataErrorView.tsx getMessageFor). A field's own `noValue` is what it shows for a null
    # (legend calcs, tooltip rows: @grafana/ui VizTooltip utils), so every number field drops it
    panel = panel.no_value(
        not_logged([s.metric for s in chart.series], lang)
    ).override_by_field_type("number", [dm.DynamicConfigValue(id_val="noValue")])
    band = band_steps(first)
    if band is not None:
        panel = panel.thresholds(_thresholds(band.steps)).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.AREA)
        )
        # the axis always spans the band: a run flat at one value (a normalised advantage's
        # mean at 0) otherwise gets uPlot's fallback range 0-100 (UPlotScaleBuilder.ts in
        # @grafana/ui, when the range's ends are equal), painting the chart in the outside colour
        if band.low is not None:
            panel = panel.axis_soft_min(band.low)
        if band.high is not None:
            panel = panel.axis_soft_max(band.high)
    else:
        panel = panel.thresholds(_thresholds([(None, "transparent")])).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.OFF)
        )
    for pattern, props in _run_colour_overrides():
        panel = panel.override_by_regexp(pattern, props)
    for i, s in enumerate(chart.series):
        ref = chr(ord("A") + i)
        # one target per source (raw points, each rollup level), one of them open at a time
        for source, query in queries.metric_targets(s):
            suffix = "" if source == queries.RAW else source
            panel = panel.with_target(Target(queries.influx_target(ref + suffix, query)))
        right = i > 0 and s.metric.display.axis == "right"
        for pattern, props in _series_style(s, i, right, lang):
            panel = panel.override_by_regexp(pattern, props)
    if chart.events:
        ref = chr(ord("A") + len(chart.series))
        panel = panel.with_target(Target(queries.influx_target(ref, queries.event_marks_query())))
        panel = panel.override_by_regexp(f"/^{queries.EVENT_MARKS}( |$)/", _EVENT_MARK_STYLE)
    # last, so it wins: a field with no value at all is drawn by no one. A run that logs one
    # metric of the chart but not another gets the other's column all null (the chart's
    # queries are merged into one table before the partition by run, see
    # `CHART_TRANSFORMATIONS`), which would be a legend row with no line. `byValue` reduces
    # each field (fieldValueMatcher.ts in packages/grafana-data/src/transformations/matchers:
    # a boolean reducer such as `allIsNull` matches when it is true)
    panel = panel.with_override(
        dm.MatcherConfig(
            id_val="byValue", options={"reducer": "allIsNull", "op": "eq", "value": 0}
        ),
        [_prop("custom.hideFrom", {"legend": True, "tooltip": True, "viz": True})],
    )
    panel = panel.with_target(Target(queries.run_colours_target()))
    panel = panel.with_target(Target(queries.steps_target()))
    for t in _with_marks_gate(chart):
        frames = t.get("filter")
        panel = panel.with_transformation(
            dm.DataTransformerConfig(
                id_val=t["id"],
                options=t["options"],
                filter_val=None if frames is None else dm.MatcherConfig(**_matcher(frames)),
            )
        )
    return panel


def _matcher(m: dict[str, Any]) -> dict[str, Any]:
    return {"id_val": m["id"], "options": m["options"]}


_EVENT_MARK_STYLE = [
    _prop("displayName", RUN_NAME),
    _prop("custom.drawStyle", "points"),
    _prop("custom.pointSize", 9),
    _prop("custom.lineWidth", 0),
    # a hidden axis has a scale of its own (its key includes the placement:
    # packages/grafana-ui/src/components/uPlot/internal.ts), pinned so every mark sits on top
    _prop("custom.axisPlacement", "hidden"),
    _prop("min", 0),
    _prop("max", 1),
    # a soft limit (the band the chart's defaults give its own metric) would unpin the scale:
    # a hard limit holds only where no soft one is set (UPlotScaleBuilder.ts, `hardMinOnly`)
    *_NO_SOFT_RANGE,
    # Grafana draws one threshold area per scale, from the first field on it that asks for one
    # (public/app/core/components/TimeSeries/utils.ts preparePlotConfigBuilder; addThresholds in
    # packages/grafana-ui/src/components/uPlot/config/UPlotConfigBuilder.ts): the marks would
    # inherit the chart's healthy band and paint it over their own [0, 1] scale
    _prop("custom.thresholdsStyle", {"mode": "off"}),
    _prop("custom.hideFrom", {"legend": True, "tooltip": True, "viz": False}),
]


def _card_columns(lang: str) -> list[dict[str, str]]:
    w = words(lang)
    return [
        {"selector": "status", "text": w.status, "type": "string"},
        {"selector": "value", "text": w.value, "type": "number"},
        {"selector": "deviation_pct", "text": w.deviation, "type": "number"},
        {"selector": "step", "text": "step", "type": "number"},
        {"selector": "reading", "text": w.reading, "type": "string"},
    ]


def _cards_table(title: str, target: dict[str, Any], lang: str) -> table.Panel:
    """A table of diagnosis cards from the rlvitals API, its status cells coloured by status."""
    w = words(lang)
    mapping = dm.ValueMap(
        options={
            s: dm.ValueMappingResult(color=_STATUS_COLORS.get(s, "text"), index=i)
            for i, s in enumerate(STATUSES)
        }
    )
    return (
        table.Panel()
        .title(title)
        .datasource(_ref(INFINITY.variable_ref()))
        .with_target(Target(target))
        .show_header(True)
        .frame_index(0)
        .cell_height(cm.TableCellHeight.SM)
        .align(cm.FieldTextAlignment.AUTO)
        .inspect(False)
        .override_by_name(
            w.status,
            [
                _prop("mappings", [mapping.to_json()]),
                _prop("custom.cellOptions", {"type": "color-background", "mode": "basic"}),
                _prop("custom.width", 90),
            ],
        )
        .override_by_name(
            w.reading, [_prop("custom.cellOptions", {"type": "auto", "wrapText": True})]
        )
    )


def card_panel(metric_id: str, title: str, lang: str) -> table.Panel:
    """The diagnosis card of one metric for the focused run, coloured by its status."""
    w = words(lang)
    target = queries.cards_target(metric_id, lang, _card_columns(lang))
    return _cards_table(f"{w.card} · {title}", target, lang).description(
        f"[{w.term_page}]({term_url(metric_id, lang)})"
    )


def cards_panel(lang: str) -> table.Panel:
    """Every core metric's diagnosis card for the focused run, one row each, coloured by its
    status: the overview's one table of readings (the term pages hold the rest)."""
    w = words(lang)
    columns = [{"selector": "title", "text": w.metric, "type": "string"}, *_card_columns(lang)]
    return _cards_table(w.cards, queries.all_cards_target(lang, columns), lang)


def state_stat_panel(
    title: str,
    desc: str,
    column: str,
    unit: str,
    thresholds: Sequence[tuple[float | None, str]],
    lang: str,
) -> stat.Panel:
    """One of the focused run's vital numbers from the datasource (`/api/run_state`): as of now
    while it runs, as of its end once it ended, titled with the run and its status word (in
    "all values" mode Grafana names a row's stat by the row's text fields: `getFieldDisplayValues`
    in packages/grafana-data/src/field/fieldDisplay.ts)."""
    columns = [
        {"selector": "run", "text": "run", "type": "string"},
        {"selector": "status_label", "text": "status", "type": "string"},
        {"selector": column, "text": title, "type": "number"},
    ]
    return (
        stat.Panel()
        .title(title)
        .description(desc)
        .datasource(_ref(INFINITY.variable_ref()))
        .with_target(Target(queries.run_state_target(lang, columns)))
        .unit(unit)
        .thresholds(_thresholds(thresholds))
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .justify_mode(cm.BigValueJustifyMode.AUTO)
        .text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
        .wide_layout(True)
        .show_percent_change(False)
        .percent_change_color_mode(cm.PercentChangeColorMode.STANDARD)
        .orientation(cm.VizOrientation.AUTO)
        .reduce_options(
            cb.ReduceDataOptions().values(True).calcs([]).fields(f"/^{re.escape(title)}$/")
        )
    )


def events_panel(lang: str) -> table.Panel:
    """The runs' events in the step range (checkpoints, resumes, alert onsets, NaN reports)."""
    w = words(lang)
    return (
        table.Panel()
        .title(w.events)
        .datasource(_ref(INFLUX.variable_ref()))
        .with_target(Target(queries.influx_target("A", queries.events_query())))
        .show_header(True)
        .frame_index(0)
        .cell_height(cm.TableCellHeight.SM)
        .align(cm.FieldTextAlignment.AUTO)
        .inspect(False)
        .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
        # the point's time IS its step (a 1970 date as a time): the step field says it, once
        .with_transformation(
            dm.DataTransformerConfig(
                id_val="organize",
                options={"excludeByName": {"Time": True}},
            )
        )
        .override_by_name("step", [_prop("unit", "none"), _prop("decimals", 0)])
    )


def _glossary_columns(lang: str) -> list[dict[str, str]]:
    w = words(lang)
    return [
        {"selector": "title", "text": w.term, "type": "string"},
        {"selector": "kind", "text": w.kind, "type": "string"},
        {"selector": "definition", "text": w.definition, "type": "string"},
        {"selector": "id", "text": "id", "type": "string"},
    ]


def glossary_panel(lang: str) -> table.Panel:
    """Every term and metric from the datasource, each title linking to its term page."""
    w = words(lang)
    link: dict[str, Any] = {
        "title": w.term_page,
        "url": term_url("${__data.fields.id}", lang),
        "targetBlank": True,
    }
    return (
        table.Panel()
        .title(w.glossary)
        .datasource(_ref(INFINITY.variable_ref()))
        .with_target(Target(queries.terms_target(lang, _glossary_columns(lang))))
        .show_header(True)
        .frame_index(0)
        .cell_height(cm.TableCellHeight.MD)
        .align(cm.FieldTextAlignment.AUTO)
        .inspect(False)
        .filterable(True)
        .override_by_name(w.term, [_prop("links", [link]), _prop("custom.width", 260)])
        .override_by_name(
            w.definition, [_prop("custom.cellOptions", {"type": "auto", "wrapText": True})]
        )
    )
