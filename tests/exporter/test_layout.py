"""The exporter's layout is its map: imports go one way between its stages, and the stored
schema's names are spelled in `exporter/schema.py` alone (docs/architecture.md, issue 20).

Read from the source files themselves (every `import`, also those inside functions), so a
shortcut taken in a hurry (the store importing translation, a stage importing the demo) fails
here with the file and line, not later as an import cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SHARED = frozenset(
    {"config", "errors", "counts", "schema", "lifecycle", "lease", "processes", "job"}
)

# Which stage may import which (besides itself and the shared modules). `api` is the package's
# own `__init__` (the public names), which may import any stage.
ALLOWED: dict[str, frozenset[str]] = {
    "shared": frozenset(),
    "sources": frozenset(),
    "translate": frozenset({"sources"}),  # the ScalarBlock it translates a column at a time
    "store": frozenset(),
    "influx": frozenset({"store", "translate", "sources"}),  # sends the store; direct import
    "prometheus": frozenset({"store"}),  # live alert states read the outbox
    # a log reader's `ScalarBlock`, which `Run.log_block` takes
    "run": frozenset({"translate", "store", "influx", "prometheus", "sources"}),
    "integrations": frozenset({"api"}),  # the SummaryWriter drop-in calls `exporter.init`
    "ingest": frozenset({"sources", "translate", "store", "influx", "prometheus", "run"}),
}

# The measurement and rollup names of exporter/schema.py, as they are stored.
_NAMES = ("run_config", "spread", "unregistered", "rlvitals_rollups")
_ROLLUP_PREFIX = "rlvitals_rollup_"
# Modules where a bare "events" string is the InfluxDB measurement (elsewhere it is also the
# outbox's sqlite table and a key of the JSON API and the pages).
_INFLUX_SIDES = ("exporter/influx/", "grafana/datasource/history/", "grafana/dashboards_gen/")
# A string that spells a name and is not the stored name: the live page's field group of the
# JSON API (`run.js` groups core / registered / unregistered fields).
_NOT_A_MEASUREMENT = {("grafana/datasource/run_fields.py", "unregistered")}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _sources(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from . import x` imports the submodule x
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}" if not node.module else target


_PARTS = {p.stem for p in (ROOT / "exporter").iterdir() if p.suffix == ".py" or p.is_dir()}


def _unit(module: str) -> str | None:
    """The exporter stage a module belongs to, or None outside the exporter."""
    parts = module.split(".")
    if parts[0] != "exporter":
        return None
    if len(parts) == 1 or parts[1] not in _PARTS or parts[1] == "__init__":
        return "api"  # the package itself, or a name it exports (`from .. import init`)
    if parts[1] in _SHARED:
        return "shared"
    return parts[1]


def test_every_exporter_module_belongs_to_a_declared_stage() -> None:
    units = {_unit(_module(p)) for p in _sources("exporter")}
    assert units - {"api"} <= set(ALLOWED), sorted(units - {"api"} - set(ALLOWED))


def test_imports_between_the_exporters_stages_go_one_way() -> None:
    wrong = []
    for path in _sources("exporter"):
        unit = _unit(_module(path))
        assert unit is not None
        for line, target in _imports(path):
            to = _unit(target)
            if to is None or unit == "api" or to in (unit, "shared"):
                continue
            if to not in ALLOWED[unit]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {unit} imports {target} ({to})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("exporter", ("grafana", "rlvitals")),  # the demo and the replay use the exporter
        ("registry", ("exporter", "grafana", "rlvitals")),  # the registry is read by all
    ],
)
def test_lower_components_never_import_the_ones_built_on_them(
    folder: str, forbidden: tuple[str, ...]
) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for path in _sources(folder)
        for line, target in _imports(path)
        if target.split(".")[0] in forbidden
    ]
    assert not wrong, "\n".join(wrong)


def test_every_exporter_package_says_what_it_holds_and_may_import() -> None:
    missing = []
    for init in _sources("exporter"):
        if init.name != "__init__.py" or init.parent == ROOT / "exporter":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "May import" not in doc and "may import" not in doc:
            missing.append(str(init.relative_to(ROOT)))
    assert not missing, missing


def _spells_a_name(rel: str, text: str) -> str | None:
    for name in _NAMES:
        if (rel, name) in _NOT_A_MEASUREMENT:
            continue
        if text == name or f"'{name}'" in text or f'"{name}"' in text:
            return name
    if _ROLLUP_PREFIX in text or "rlvitals_rollups" in text:
        return _ROLLUP_PREFIX
    if rel.startswith(_INFLUX_SIDES) and (text == "events" or '"events"' in text):
        return "events"
    return None


def test_measurement_and_rollup_names_are_spelled_only_in_the_schema_module() -> None:
    schema = ROOT / "exporter" / "schema.py"
    spelled = []
    for path in _sources("exporter", "grafana", "rlvitals"):
        if path == schema:
            continue
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        slots = {
            id(c)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
            for c in ast.walk(node.value)
        }  # attribute names, not stored ones
        for node in ast.walk(tree):
            if id(node) in slots:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = _spells_a_name(rel, node.value)
                if name is not None:
                    spelled.append(f"{rel}:{node.lineno}: {name!r}")
    assert not spelled, "import it from exporter.schema instead:\n" + "\n".join(spelled)


def test_the_schema_module_declares_every_name_the_check_looks_for() -> None:
    # the check above is only as good as its list: each name must be what schema.py stores
    from exporter import schema

    stored = {schema.RUN_CONFIG, schema.SPREAD, schema.UNREGISTERED, schema.ROLLUP_MARKER}
    assert stored == set(_NAMES)
    assert schema.EVENTS == "events"
    assert all(schema.rollup_measurement(level).startswith(_ROLLUP_PREFIX) for level in (64, 4096))
