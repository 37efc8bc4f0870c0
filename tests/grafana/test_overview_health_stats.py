"""The Overview's four health stats read a finished run as of its end, with its status word
(issue 36: they read Prometheus, which holds only what live processes serve, so every finished,
imported or demo run read "No data").

Each generated stat panel's Infinity request is answered by the real datasource app on a real
store; its rows become the table Infinity's backend parser builds (one field per column, named by
the column's `text`, typed by its `type`), and the panel's own reduce options and field config go
through Grafana's @grafana/data `getFieldDisplayValues` in Node (tests/grafana/node/
stat_display.cjs), which is what the stat panel renders."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from grafana_data_path import NODE_DIR, require_node

import exporter
import registry
from grafana.dashboards_gen import dashboard_files
from grafana.datasource.app import create_app
from grafana.datasource.config import DatasourceConfig

RUN = "ppo-done"
LAST = 199
NAN_STEPS = 5


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builtin: registry.Registry) -> Path:
    path = tmp_path_factory.mktemp("health-stats")
    settings = exporter.ExporterSettings(store=path, policy="warn", prometheus_port=None)
    run = exporter.init(RUN, registry=builtin, settings=settings, config={})
    for step in range(LAST + 1):
        kl = float("nan") if step >= LAST + 1 - NAN_STEPS else 0.01
        run.log(step, {"policy_kl": kl, "clip_fraction": 0.1, "policy_entropy": 1.0})
    run.finish(30)
    return path


def _stat_panels(reg: registry.Registry, lang: str) -> list[dict[str, Any]]:
    overview = json.loads(dashboard_files(reg, (lang,))[f"grafana/dashboards/{lang}/overview.json"])
    return [p for p in overview["panels"] if p.get("type") == "stat"]


def _frames(client: Any, target: dict[str, Any]) -> list[dict[str, Any]]:
    params = {
        p["key"]: p["value"].replace("${focus}", RUN) for p in target["url_options"]["params"]
    }
    answer = client.get(target["url"], query_string=params)
    assert answer.status_code == 200, answer.data
    rows = answer.get_json()[target["root_selector"]]
    fields = [
        {"name": c["text"], "type": c["type"], "values": [r[c["selector"]] for r in rows]}
        for c in target["columns"]
    ]
    return [{"name": None, "refId": target["refId"], "fields": fields}]


@pytest.mark.parametrize(("lang", "word"), [("en", "finished"), ("zh", "已完成")])
def test_the_health_stats_read_a_finished_run_as_of_its_end_with_its_status_word(
    store: Path, builtin: registry.Registry, lang: str, word: str
) -> None:
    node = require_node()
    client = create_app(DatasourceConfig(store=store), builtin).test_client()
    panels = _stat_panels(builtin, lang)
    assert len(panels) == 4
    inputs = [
        {
            "key": p["title"],
            "frames": _frames(client, p["targets"][0]),
            "reduceOptions": p["options"]["reduceOptions"],
            "fieldConfig": p["fieldConfig"],
        }
        for p in panels
    ]
    done = subprocess.run(
        [node, str(NODE_DIR / "stat_display.cjs")],
        input=json.dumps({"panels": inputs}).encode(),
        capture_output=True,
        cwd=NODE_DIR,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    shown = {p["key"]: p for p in json.loads(done.stdout)["panels"]}
    for title, result in shown.items():
        assert "error" not in result, result
        assert len(result["values"]) == 1, (title, result)
        value = result["values"][0]
        assert value["title"] == f"{RUN} {word}", (title, value)  # not "No data"
    step, rate, nonfinite, alerts = (shown[p["title"]]["values"][0]["numeric"] for p in panels)
    assert step == LAST
    assert rate > 0  # the trainer's own steps per second over its last stretch
    assert nonfinite == NAN_STEPS  # the NaN policy_kl values it logged
    assert alerts >= 1  # a non-finite KL at its last steps: its card is critical
