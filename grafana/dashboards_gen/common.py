"""What every generated dashboard shares: uids, variables, tab links, annotations, layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder
from grafana_foundation_sdk.models import dashboard as dm

from . import queries
from .i18n import LANGS, words
from .sources import DASHBOARD_SOURCES, INFLUX

__all__ = ["PAGES", "SMOOTHING_CHOICES", "Grid", "Page", "dashboard_shell", "page_uid"]

SMOOTHING_CHOICES: tuple[int, ...] = (1, 5, 10, 20, 50, 100)
_DEFAULT_SMOOTHING = 10
_TAG = "rlvitals"


@dataclass(frozen=True)
class Page:
    """One generated dashboard: key (file and uid stem) and the interface word of its title."""

    key: str
    word: str


PAGES: tuple[Page, ...] = (
    Page("overview", "overview"),
    Page("policy", "policy"),
    Page("reward", "reward"),
    Page("generation", "generation"),
    Page("resources", "resources"),
    Page("compare", "compare"),
    Page("glossary", "glossary"),
)


def page_uid(key: str, lang: str) -> str:
    return f"rlvitals-{key}-{lang}"


class Grid:
    """Places panels left to right in 24 columns and numbers them; one per dashboard build."""

    def __init__(self) -> None:
        self._x = 0
        self._y = 0
        self._row_h = 0
        self._next_id = 1

    def next_id(self) -> int:
        n = self._next_id
        self._next_id += 1
        return n

    def row(self) -> dm.GridPos:
        self.newline()
        pos = dm.GridPos(h=1, w=24, x=0, y=self._y)
        self._y += 1
        return pos

    def place(self, w: int, h: int) -> dm.GridPos:
        if self._x + w > 24:
            self.newline()
        pos = dm.GridPos(h=h, w=w, x=self._x, y=self._y)
        self._x += w
        self._row_h = max(self._row_h, h)
        return pos

    def newline(self) -> None:
        if self._x:
            self._y += self._row_h
        self._x = 0
        self._row_h = 0


def _option(text: str, value: str, selected: bool) -> dm.VariableOption:
    return dm.VariableOption(selected=selected, text=text, value=value)


def _run_variable(name: str, label: str, multi: bool) -> db.QueryVariable:
    var = (
        db.QueryVariable(name)
        .label(label)
        .datasource(_influx_ref())
        .query(queries.run_matcher())
        .definition(queries.run_matcher())
        .refresh(dm.VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
    )
    return var.include_all(True) if multi else var


def _custom(
    name: str, label: str, pairs: Sequence[tuple[str, str]], default: str
) -> db.CustomVariable:
    opts = [_option(t, v, v == default) for t, v in pairs]
    current = next(o for o in opts if o.value == default)
    return (
        db.CustomVariable(name)
        .label(label)
        .values(",".join(t if t == v else f"{t} : {v}" for t, v in pairs))
        .options(opts)
        .current(current)
    )


def _influx_ref() -> dm.DataSourceRef:
    ref = INFLUX.variable_ref()
    return dm.DataSourceRef(type_val=ref["type"], uid=ref["uid"])


def _datasource_variables() -> list[builder.Builder[dm.VariableModel]]:
    """One `datasource` variable per datasource the panels use, defaulting to the provisioned one:
    imported into another Grafana, the dashboard is re-pointed by picking from these lists."""
    return [
        db.DatasourceVariable(src.variable)
        .label(src.name)
        .type(src.type)
        .current(_option(src.name, src.uid, True))
        for src in DASHBOARD_SOURCES
    ]


class _UnsyncedQueryVariable(db.QueryVariable):
    """A query variable kept out of the address (`skipUrlSync`, which the SDK's builder does
    not set)."""

    def build(self) -> dm.VariableModel:
        model = super().build()
        model.skip_url_sync = True
        return model


def _hidden_variable(name: str, label: str, query: str) -> db.QueryVariable:
    """A value InfluxDB computes from the selected runs, one value, derived, so hidden
    (`hide: 2`) and never in the address (`skipUrlSync`). Scenes applies a URL value before the
    query runs and keeps a current value that is still an option (@grafana/scenes
    MultiValueVariable.ts, `MultiValueUrlSyncHandler`), and links carry `$__all_variables`, which
    leaves out variables with skipUrlSync (AllVariablesMacro.ts): so a bucket chosen for a short
    run can no longer follow the user to a long one. Queried again when the runs or `step_from`
    change (it reads them) and on dashboard load."""
    return (
        _UnsyncedQueryVariable(name)
        .label(label)
        .datasource(_influx_ref())
        .query(query)
        .definition(query)
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.NUMERICAL_DESC)
        .multi(False)
        .include_all(False)
        .hide(dm.VariableHide.HIDE_VARIABLE)
    )


def _step_variables(lang: str, measurement: str) -> list[builder.Builder[dm.VariableModel]]:
    """What the charts' gates read (`queries` module docstring): runs with data, runs with
    64-step rollups, and the steps per drawn point."""
    w = words(lang)
    return [
        _hidden_variable("logged", w.runs_logged, queries.logged_query(measurement)),
        _hidden_variable("dense", w.runs_dense, queries.dense_query()),
        _hidden_variable("bucket", w.bucket, queries.bucket_query(measurement)),
    ]


def _variables(
    lang: str, focus: bool, steps: str | None
) -> list[builder.Builder[dm.VariableModel]]:
    w = words(lang)
    out: list[builder.Builder[dm.VariableModel]] = _datasource_variables()
    out.append(_run_variable("run", w.run, True))
    if focus:
        out.append(_run_variable("focus", w.focus, False))
    out += [
        _custom(
            "smoothing",
            w.smoothing,
            [(str(n), str(n)) for n in SMOOTHING_CHOICES],
            str(_DEFAULT_SMOOTHING),
        ),
        db.TextBoxVariable("step_from")
        .label(w.step_from)
        .default_value("0")
        .current(_option("0", "0", True)),
    ]
    if steps is not None:
        out += _step_variables(lang, steps)
    return out


def _links(key: str, lang: str) -> list[builder.Builder[dm.DashboardLink]]:
    w = words(lang)
    tabs: list[builder.Builder[dm.DashboardLink]] = [
        db.DashboardLink(getattr(w, page.word))
        .type(dm.DashboardLinkType.LINK)
        .url(f"/d/{page_uid(page.key, lang)}")
        .icon("dashboard")
        .tooltip("")
        .tags([])
        .as_dropdown(False)
        .target_blank(False)
        .include_vars(True)
        .keep_time(True)
        for page in PAGES
        if page.key != key
    ]
    other = next(lg for lg in LANGS if lg != lang)
    tabs.append(
        db.DashboardLink(w.language_link)
        .type(dm.DashboardLinkType.LINK)
        .url(f"/d/{page_uid(key, other)}")
        .icon("info")
        .tooltip("")
        .tags([])
        .as_dropdown(False)
        .target_blank(False)
        .include_vars(True)
        .keep_time(True)
    )
    return tabs


def _annotations() -> list[builder.Builder[dm.AnnotationQuery]]:
    """Only Grafana's built-in layer: the step-axis `trend` panel draws no annotations (its
    `setDataSupport({ annotations: true })` is commented out in
    public/app/plugins/panel/trend/module.tsx), so run events are the events table's alone."""
    builtin = (
        db.AnnotationQuery()
        .name("Annotations & Alerts")
        .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .enable(True)
        .hide(True)
        .icon_color("rgba(0, 211, 255, 1)")
        .type("dashboard")
        .built_in(1)
    )
    return [builtin]


def dashboard_shell(
    key: str, title: str, lang: str, *, steps: str | None, focus: bool = True
) -> db.Dashboard:
    """A dashboard with the common uid, tags, variables, tab links and annotations. `steps`:
    the measurement the `bucket` variable reads (`queries.step_measurement`); None for a page
    without charts."""
    dash = (
        db.Dashboard(title)
        .uid(page_uid(key, lang))
        .tags([_TAG, lang])
        .editable()
        .timezone("utc")
        # the time picker is wall-clock; these dashboards are in step space, driven by variables
        .time("now-24h", "now")
        .timepicker(db.TimePicker().hidden(True))
        .refresh("30s")
        .annotations(_annotations())
        .links(_links(key, lang))
    )
    for var in _variables(lang, focus, steps):
        dash = dash.with_variable(var)
    return dash
