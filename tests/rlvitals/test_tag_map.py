"""Your own tag names (docs/registry.md "Your own tag names", whose commands
tests/test_docs_guides.py runs in order): a run logged through torch's `SummaryWriter`
under names no registry alias knows says so and offers mappings, on `evaluate`, `import` and
`/api/run`; with `--map TAG=METRIC` (or a user registry file's `map:`) its cards diagnose it;
a bad METRIC is refused by name (exit 2); no run crashes `evaluate`, and a folder with a run of
unknown tags beside a good run prints both rows."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

import registry
from grafana.datasource import DatasourceConfig, create_app
from rlvitals.cli import main

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "fixtures" / "runs" / "sb3_ppo_cartpole_healthy"

# The run's own names (as an actor-critic of its own logs them), and the word of each that a
# registry metric id carries: the suggestions must be core metrics whose id has that word. None is
# a spelling the registry has (registry/auto_map.py), so none is read as a metric by itself.
TAGS = {
    "perf/return_mean10": "return",
    "policy/entropy_mean": "entropy",
    "optim/kl": "kl",
    "optim/clip_share": "clip",
    "optim/value_fit_loss": "value_loss",
    "optim/grad_norm": "grad_norm",
}
STEPS = 60


def _value(tag: str, i: int) -> float:
    """A healthy-looking PPO run: return rising, entropy falling slowly, small KL."""
    t = i / STEPS
    return {
        "perf/return_mean10": 20.0 + 150.0 * t,
        "policy/entropy_mean": 0.69 - 0.2 * t,
        "optim/kl": 0.01 + 0.002 * math.sin(i),
        "optim/clip_share": 0.1 + 0.02 * math.cos(i),
        "optim/value_fit_loss": 30.0 * (1.0 - 0.5 * t),
        "optim/grad_norm": 0.5 + 0.05 * math.sin(i / 3),
    }[tag]


@pytest.fixture(scope="module")
def own_tags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real SummaryWriter run (one folder) logging only the names of TAGS."""
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path_factory.mktemp("runs") / "own_tags"
    writer = SummaryWriter(log_dir=str(run))
    for i in range(STEPS):
        for tag in TAGS:
            writer.add_scalar(tag, _value(tag, i), global_step=(i + 1) * 2048)
    writer.close()
    return run


def _maps() -> list[str]:
    """--map flags naming each tag's metric: a core id with the tag's word (from the registry)."""
    reg = registry.load()
    out = []
    for tag, word in TAGS.items():
        ids = sorted(m.id for m in reg.core_metrics() if word in m.id)
        # policy_kl over ref_kl: a PPO run's KL is to its old policy (no reference model)
        metric = "policy_kl" if word == "kl" else ids[0]
        out += ["--map", f"{tag}={metric}"]
    return out


def _row(out: str, run: str) -> str:
    (row,) = [line for line in out.splitlines() if line.startswith(f"| {run} |")]
    return row


def test_a_run_of_unknown_tags_gets_a_row_saying_none_was_recognised_with_suggestions(
    own_tags: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(own_tags)]) == 0  # no --expected: nothing disagrees
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    row = _row(out, "own_tags")
    assert f"no recognised tags ({len(TAGS)} names)" in row
    reg = registry.load()
    for tag, word in TAGS.items():
        core = {m.id for m in reg.core_metrics() if word in m.id}
        offered = row.split(f"`{tag}` looks like ", 1)[1].split(" (--map", 1)[0].split(" or ")
        assert set(offered) & core, (tag, offered, core)
        assert f"--map {tag}=" in row


def test_with_map_flags_the_same_run_gets_statuses_for_the_mapped_metrics(
    own_tags: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(own_tags), *_maps(), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["tags"]["recognised"] == len(TAGS) and row["tags"]["unrecognised"] == []
    assert row["end"] in ("ok", "watch", "warning", "critical")


def test_a_user_registry_files_map_section_does_what_map_flags_do(
    own_tags: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = _maps()
    pairs = [flags[i + 1].split("=") for i in range(0, len(flags), 2)]
    mine = tmp_path / "my_tags.yaml"
    mine.write_text("map:\n" + "".join(f'  "{t}": {m}\n' for t, m in pairs))
    assert main(["validate", "--registry", str(mine)]) == 0
    assert main(["evaluate", str(own_tags), "--registry", str(mine), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert row["tags"]["recognised"] == len(TAGS)
    assert row["end"] in ("ok", "watch", "warning", "critical")


def test_a_folder_with_a_run_of_unknown_tags_and_a_good_run_prints_both_rows(
    own_tags: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mixed"
    shutil.copytree(own_tags, folder / "own_tags")
    shutil.copytree(GOOD, folder / GOOD.name)
    assert main(["evaluate", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert "no recognised tags" in _row(out, "own_tags")
    good = _row(out, GOOD.name)
    assert "no recognised tags" not in good and "logged names recognised" in good
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["evaluate", "import", "tail"])
def test_an_unknown_metric_in_map_is_refused_by_name_with_exit_2(
    own_tags: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    more = {"evaluate": [], "import": ["--store", str(tmp_path)], "tail": ["--no-follow"]}
    if command == "tail":
        more["tail"] += ["--store", str(tmp_path)]
    argv = [command, str(own_tags), "--map", "optim/kl=kl_divergence", *more[command]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'kl_divergence' is not a registry metric id" in err and "optim/kl" in err
    assert "Traceback" not in err


def test_validate_names_the_file_entry_and_field_of_a_map_entry_to_no_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "bad_map.yaml"
    mine.write_text("map:\n  - {key: optim/kl, metric: kl_divergence}\n")
    assert main(["validate", "--registry", str(mine)]) == 1
    out = capsys.readouterr().out
    assert str(mine) in out and "map[0] 'optim/kl'" in out and "field 'metric'" in out
    assert "kl_divergence" in out


def test_import_with_map_stores_the_metric_ids_and_api_cards_builds_their_cards(
    own_tags: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    reg = registry.load()
    assert main(["import", str(own_tags), "--store", str(store), "--run", "plain"]) == 0
    plain = capsys.readouterr().out
    assert f"0 of {len(TAGS)} logged names recognised; unrecognised: " in plain
    assert "looks like" in plain
    flags = _maps()
    argv = ["import", str(own_tags), "--store", str(store), "--run", "mapped", *flags]
    assert main(argv) == 0
    assert f"{len(TAGS)} of {len(TAGS)} logged names recognised" in capsys.readouterr().out
    client = create_app(DatasourceConfig(store=store), reg).test_client()
    mapped = dict(flags[i + 1].split("=") for i in range(0, len(flags), 2))
    info = client.get("/api/run?run=mapped").get_json()
    assert info["config"]["tag_map"] == mapped  # recorded: later readers know what was mapped
    assert (info["names"]["recognised"], info["names"]["total"]) == (len(TAGS), len(TAGS))
    assert client.get("/api/run?run=plain").get_json()["names"]["recognised"] == 0
    cards = client.get("/api/cards?run=mapped").get_json()["cards"]
    judged = {c["metric"]: c["status"] for c in cards if c.get("status") != "no_data"}
    assert set(mapped.values()) <= set(judged), judged


def test_a_mapping_beats_the_registrys_alias_in_both_translate_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = registry.load()
    alias = next(a for a in reg.metric("policy_kl").aliases if a.framework == "cleanrl")
    mapped = reg.with_map(registry.parse_map([f"{alias.key}=clip_fraction"], reg))
    assert mapped.resolve(alias.key, "cleanrl").metric == "clip_fraction"
    assert reg.resolve(alias.key, "cleanrl").metric == "policy_kl"
    # per-call rows (JSON Lines) and columnar blocks (event files) alike
    from torch.utils.tensorboard import SummaryWriter

    tb = tmp_path / "logs" / "tb"
    writer = SummaryWriter(log_dir=str(tb))
    for i in range(1, 21):
        writer.add_scalar(alias.key, 0.1, global_step=i)
    writer.close()
    jl = tmp_path / "logs" / "jl"
    jl.mkdir()
    lines = [json.dumps({"step": i, alias.key: 0.1}) for i in range(1, 21)]
    (jl / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    argv = ["import", str(tmp_path / "logs"), "--store", str(store)]
    assert main([*argv, "--map", f"{alias.key}=clip_fraction", "--framework", "cleanrl"]) == 0
    capsys.readouterr()
    client = create_app(DatasourceConfig(store=store), reg).test_client()
    for run in ("tb", "jl"):
        fields = {f["field"] for f in client.get(f"/api/fields?run={run}").get_json()["fields"]}
        assert "clip_fraction" in fields and "policy_kl" not in fields, (run, fields)


def test_values_outside_a_metrics_physical_limits_rule_it_out_of_the_suggestions() -> None:
    reg = registry.load()
    # a metric declared between two limits (a fraction): the registry's limits are the promise
    bounded = next(m for m in reg.core_metrics() if m.limits.min == 0 and m.limits.max == 1)
    word = bounded.id.split("_")[0]
    name = f"stats/{word}"
    fits = registry.suggest(reg, name, (0.0, 1.0))
    assert fits is not None and fits.metric == bounded.id and fits.values_fit
    above = (bounded.limits.max + 1.0, bounded.limits.max + 5.0)
    found = registry.suggest(reg, name, above)
    assert found is None or found.metric != bounded.id


def test_a_second_reading_of_a_logged_metric_is_named_as_such_and_never_offered_as_a_map() -> None:
    """TRL logs completions/min_length beside completions/mean_length: mapping the first onto
    the metric the second already fills would store two values per step in one field."""
    reg = registry.load()
    mean = "train/completions/mean_length"
    assert reg.resolve(mean, "trl").metric == "response_length_mean"
    alone = registry.recognise(reg, ["train/completions/min_length"], "trl")
    (offer,) = alone.suggestions
    assert not offer.already_logged and "--map" in offer.phrase()
    beside = registry.recognise(reg, [mean, "train/completions/min_length"], "trl")
    (offer,) = beside.suggestions
    assert offer.already_logged and offer.metric == alone.suggestions[0].metric
    assert "--map" not in offer.phrase() and "already logs" in offer.phrase()


def test_a_real_run_of_its_own_names_is_offered_no_metric_of_another_quantity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The corpus' own actor-critic (issue 35: its `policy/loss` was offered ref_kl): each name
    that states its quantity (`loss`, `lr`, `grad_norm`, `entropy`...) is offered metrics of
    that quantity only, and its policy loss the policy loss."""
    from registry.quantity import stated_quantity, words

    run = ROOT / "tests" / "fixtures" / "runs" / "custom_ac_cartpole_lr_high"
    assert main(["evaluate", str(run), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    reg = registry.load()
    offers = {s["name"]: (s["metric"], *s["also"]) for s in row["tags"]["suggestions"]}
    assert offers["policy/loss"] == ("policy_loss",)
    crossing = [
        (name, metric)
        for name, metrics in offers.items()
        if (said := stated_quantity(words(name))) is not None
        for metric in metrics
        if reg.metric(metric).quantity != said
    ]
    assert not crossing
