"""Read the registry YAML files, validate structure (JSON Schema) and meaning, build the Registry.

Every problem in every file is collected before anything is raised, so a user fixing a registry
sees the whole list at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry as SchemaRegistry
from referencing import Resource

from .catalog import Registry
from .errors import Problem, RegistryInvalid
from .model import (
    IDENTITY,
    Alert,
    Alias,
    Band,
    Bands,
    BookkeepingKey,
    Condition,
    Derivation,
    Display,
    Formula,
    Limits,
    Metric,
    NamePattern,
    Rule,
    Scenario,
    Stages,
    Term,
    Text,
    Timing,
    Transform,
)
from .semantics import check_meaning
from .user_metric import complete_user_bookkeeping, complete_user_metric

__all__ = ["BUILTIN_DIR", "load", "map_entry"]

BUILTIN_DIR = Path(__file__).resolve().parent
_SCHEMA_DIR = BUILTIN_DIR / "schema"
_SECTIONS = {
    "metrics": "metrics.schema.json",
    "terms": "terms.schema.json",
    "rules": "rules.schema.json",
    "bookkeeping": "bookkeeping.schema.json",
    "map": "map.schema.json",
}
_FILES = {"metrics": "metrics.yaml", "terms": "terms.yaml", "rules": "rules.yaml"}
# A registry folder may have it; the built-in one does (tests/registry/test_shipped.py).
_OPTIONAL_FILES = {"bookkeeping": "bookkeeping.yaml"}
_TOP_LEVEL = "metrics:, terms:, rules:, bookkeeping: or map:"
# libyaml's parser where PyYAML has it (its wheels do): the shipped registry parses in about a
# seventh of the pure-Python parser's time (0.24 s of CPU instead of 1.6 s), which every command
# and test that loads the registry paid; the same SafeConstructor builds the same objects.
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: str | Path | None = None, extensions: Iterable[str | Path] = ()) -> Registry:
    """Load the registry in `path` (a folder with metrics.yaml, terms.yaml, rules.yaml and
    optionally bookkeeping.yaml; the built-in one by default), extended by user files that add
    metrics, terms, rules or bookkeeping keys.

    A user file's metric needs only id, title and unit (aliases to be found under a framework's
    name); the rest is defaulted (`user_metric.USER_DEFAULTS`), and its texts may be English
    only. The folder's metrics declare every field, with Chinese.

    Raises RegistryInvalid listing every problem found, each naming file, entry and field.
    """
    base = Path(path) if path is not None else BUILTIN_DIR
    problems: list[Problem] = []
    docs: list[tuple[str, dict[str, Any]]] = []
    written: list[dict[str, Any]] = []
    for section, filename in _FILES.items():
        file = base / filename
        doc = _read(file, problems)
        if doc is not None:
            _validate(file, doc, (section,), problems, require=True)
            docs.append((str(file), doc))
            written.append(doc)
    for section, filename in _OPTIONAL_FILES.items():
        file = base / filename
        if file.exists():
            doc = _read(file, problems)
            if doc is not None:
                _validate(file, doc, (section,), problems, require=True)
                docs.append((str(file), doc))
                written.append(doc)
    for ext in extensions:
        file = Path(ext)
        doc = _read(file, problems)
        if doc is None:
            continue
        present = tuple(s for s in _SECTIONS if s in doc)
        extra = sorted(set(doc) - set(_SECTIONS) - {"version"})
        if not present:
            problems.append(Problem(str(file), "", "", f"has none of the sections {_TOP_LEVEL}"))
        for key in extra:
            problems.append(
                Problem(str(file), "", key, f"unknown top-level section; use {_TOP_LEVEL}")
            )
        completed = _complete(doc)
        _validate(file, completed, present, problems, require=False)
        docs.append((str(file), completed))
        written.append(doc)
    if problems:
        raise RegistryInvalid(problems)
    problems.extend(check_meaning(docs, written))
    if problems:
        raise RegistryInvalid(problems)
    return _build(docs)


def _complete(doc: dict[str, Any]) -> dict[str, Any]:
    """A user file with each metric's omitted fields filled with their defaults (and English
    texts standing for the Chinese they leave out)."""
    out = dict(doc)
    if isinstance(doc.get("metrics"), list):
        out["metrics"] = [complete_user_metric(m) for m in doc["metrics"]]
    if isinstance(doc.get("bookkeeping"), list):
        out["bookkeeping"] = [complete_user_bookkeeping(b) for b in doc["bookkeeping"]]
    if isinstance(doc.get("map"), Mapping):
        # the short form {TAG: metric_id} is the list form's key and metric
        out["map"] = [{"key": str(k), "metric": v} for k, v in doc["map"].items()]
    return out


def _parse(text: str) -> Any:
    """The YAML document; on a syntax error, the pure-Python parser's error (the words and
    marks users of the registry were shown), raised by parsing it again."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return yaml.safe_load(text)


def _read(file: Path, problems: list[Problem]) -> dict[str, Any] | None:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(Problem(str(file), "", "", "file not found"))
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(file), "", "", f"cannot read: {exc}"))
        return None
    try:
        doc = _parse(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = " ".join(
            str(x) for x in (getattr(exc, "context", None), getattr(exc, "problem", None)) if x
        )
        problems.append(Problem(str(file), "", "", f"YAML syntax error{where}: {what or exc}"))
        return None
    if not isinstance(doc, dict):
        problems.append(
            Problem(str(file), "", "", f"must be a YAML mapping with a {_TOP_LEVEL} list")
        )
        return None
    return doc


@cache
def _validators() -> dict[str, jsonschema.protocols.Validator]:
    schemas = {
        p.name: json.loads(p.read_text(encoding="utf-8")) for p in _SCHEMA_DIR.glob("*.json")
    }
    resources = [(name, Resource.from_contents(s)) for name, s in schemas.items()]
    resources += [(s["$id"], Resource.from_contents(s)) for s in schemas.values()]
    store: SchemaRegistry[Any] = SchemaRegistry().with_resources(resources)
    return {
        section: jsonschema.Draft202012Validator(schemas[filename], registry=store)
        for section, filename in _SECTIONS.items()
    }


def _validate(
    file: Path,
    doc: Mapping[str, Any],
    sections: Sequence[str],
    problems: list[Problem],
    require: bool,
) -> None:
    for section in sections:
        part = {k: v for k, v in doc.items() if k in (section, "version", "stages")}
        if section != "metrics":
            part.pop("stages", None)
        if require and section not in doc:
            problems.append(
                Problem(str(file), "", section, f"missing the top-level {section}: list")
            )
            continue
        if not require:
            part.pop("stages", None)
        for err in sorted(
            _validators()[section].iter_errors(part), key=lambda e: list(e.absolute_path)
        ):
            problems.append(_schema_problem(str(file), part, err))


def _schema_problem(file: str, doc: Mapping[str, Any], err: jsonschema.ValidationError) -> Problem:
    path = list(err.absolute_path)
    entry = ""
    if len(path) >= 2 and isinstance(path[1], int):
        items = doc.get(str(path[0]), [])
        item = items[path[1]] if isinstance(items, list) and path[1] < len(items) else None
        ident = item.get("id") if isinstance(item, dict) else None
        entry = f"{path[0]}[{path[1]}]" + (f" '{ident}'" if ident else "")
        rest = path[2:]
    else:
        rest = path
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    message = err.message
    if err.validator == "additionalProperties":
        message += " (check the spelling against registry/schema)"
    elif err.validator == "oneOf":
        message = f"{err.instance!r} is not a valid value here"
    return Problem(file, entry, field, message[:300])


def _text(raw: Mapping[str, str]) -> Text:
    return Text(en=raw["en"], zh=raw["zh"])


def _texts(raw: Iterable[Mapping[str, str]] | None) -> tuple[Text, ...]:
    return tuple(_text(t) for t in raw or ())


def _transform(raw: Any) -> Transform:
    if raw in (None, "identity"):
        return Transform()
    if raw == "negate":
        return Transform("negate")
    if "scale" in raw:
        return Transform("scale", float(raw["scale"]))
    return Transform("reciprocal", float(raw["reciprocal"]))


def _band(raw: Mapping[str, Any] | None) -> Band | None:
    if raw is None:
        return None
    return Band(
        low=raw.get("low"), high=raw.get("high"), reason=raw["reason"], source=raw.get("source")
    )


def _metric(raw: Mapping[str, Any]) -> Metric:
    mid = raw["id"]
    aliases = tuple(
        Alias(
            key=a["key"],
            framework=a["framework"],
            metric=mid,
            transform=_transform(a.get("transform")),
            estimator=a.get("estimator"),
            reduction=a.get("reduction"),
            clip_definition=a.get("clip_definition"),
            condition=a.get("condition"),
            note=a.get("note"),
            precedence=i,
        )
        for i, a in enumerate(raw.get("aliases", ()))
    )
    bands = raw.get("bands")
    display = raw.get("display", {})
    formula = raw["formula"]
    limits = raw["limits"]
    derived = raw.get("derived")
    pattern = raw.get("pattern")
    return Metric(
        id=mid,
        title=_text(raw["title"]),
        short=_text(raw["short"]) if raw.get("short") else None,
        definition=_text(raw["definition"]),
        formula=Formula(
            expr=formula["expr"],
            over=formula["over"],
            note=_text(formula["note"]) if formula.get("note") else None,
        ),
        unit=raw["unit"],
        quantity=raw["quantity"],
        group=raw["group"],
        layer=raw["layer"],
        sampling=raw["sampling"],
        aggregation=raw["aggregation"],
        kind=raw.get("kind", "measured"),
        core=bool(raw.get("core", False)),
        direction=raw["direction"],
        limits=Limits(
            min=limits.get("min"),
            max=limits.get("max"),
            reason=limits["reason"],
            source=limits.get("source"),
            undefined_when_constant=bool(limits.get("undefined_when_constant", False)),
        ),
        bands=_bands(bands) if bands else None,
        bands_by_space={
            space: _bands(b) for space, b in (raw.get("bands_by_action_space") or {}).items()
        },
        alerts=tuple(
            Alert(
                severity=a["severity"],
                condition=a["condition"],
                threshold=float(a["threshold"]),
                for_steps=a["for_steps"],
                reason=a["reason"],
                basis=a.get("basis", "absolute"),
                source=a.get("source"),
                action_space=_spaces(a.get("action_space")),
                corroborate=a.get("corroborate", True),
            )
            for a in raw.get("alerts", ())
        ),
        aliases=aliases,
        applies_to=tuple(raw["applies_to"]),
        failure_scenarios=tuple(
            Scenario(
                symptom=_text(s["symptom"]),
                causes=_texts(s["causes"]),
                check=_texts(s["check"]),
                change=_texts(s["change"]),
                direction=s.get("direction"),
            )
            for s in raw["failure_scenarios"]
        ),
        verification=_texts(raw["verification"]),
        confusions=_texts(raw["confusions"]),
        related=tuple(raw["related"]),
        display=Display(
            axis=display.get("axis", "left"),
            emphasis=display.get("emphasis", "primary"),
            panel_with=tuple(display.get("panel_with", ())),
            color=display.get("color"),
            log_scale=bool(display.get("log_scale", False)),
            health_slope=bool(display.get("health_slope", False)),
            overview=bool(display.get("overview", False)),
        ),
        derived=Derivation(
            method=derived["method"],
            of=tuple(derived["of"]),
            config=derived.get("config"),
            window=derived.get("window"),
        )
        if derived
        else None,
        pattern=NamePattern(
            placeholder=pattern["placeholder"],
            example=pattern["example"],
            weight_config=pattern.get("weight_config"),
        )
        if pattern
        else None,
    )


def _term(raw: Mapping[str, Any]) -> Term:
    return Term(
        id=raw["id"],
        title=_text(raw["title"]),
        definition=_text(raw["definition"]),
        formula=raw.get("formula"),
        why_it_matters=_text(raw["why_it_matters"]) if raw.get("why_it_matters") else None,
        confusions=_texts(raw.get("confusions")),
        explains=tuple(raw["explains"]),
        related_terms=tuple(raw.get("related_terms", ())),
    )


def _bands(raw: Mapping[str, Any]) -> Bands:
    return Bands(
        basis=raw["basis"],
        early=_band(raw.get("early")),
        mid=_band(raw.get("mid")),
        late=_band(raw.get("late")),
    )


def _spaces(raw: Any) -> tuple[str, ...] | None:
    if raw is None:
        return None
    return (raw,) if isinstance(raw, str) else tuple(raw)


def _rule(raw: Mapping[str, Any]) -> Rule:
    return Rule(
        id=raw["id"],
        title=_text(raw["title"]),
        severity=raw["severity"],
        window=raw["window"],
        min_points=raw.get("min_points", max(4, raw["window"] // 4)),
        for_steps=raw.get("for_steps", 1),
        conditions=tuple(
            Condition(
                metric=c["metric"],
                stat=c["stat"],
                op=c["op"],
                value=float(c["value"]),
                level=None if c.get("level") is None else float(c["level"]),
            )
            for c in raw["all"]
        ),
        reading=_text(raw["reading"]),
        actions=_texts(raw["actions"]),
        reason=raw["reason"],
        source=raw.get("source"),
        sentinel=raw.get("sentinel"),
    )


def _build(docs: Sequence[tuple[str, Mapping[str, Any]]]) -> Registry:
    metrics: list[Metric] = []
    terms: list[Term] = []
    rules: list[Rule] = []
    bookkeeping: list[BookkeepingKey] = []
    mapped: list[Alias] = []
    stages: Stages | None = None
    timing: Timing | None = None
    for _file, doc in docs:
        metrics += [_metric(m) for m in doc.get("metrics", ())]
        terms += [_term(t) for t in doc.get("terms", ())]
        rules += [_rule(r) for r in doc.get("rules", ())]
        bookkeeping += [
            BookkeepingKey(
                key=k["key"],
                framework=g["framework"],
                meaning=_text(k["meaning"]),
                source=g["source"],
            )
            for g in doc.get("bookkeeping", ())
            for k in g["keys"]
        ]
        mapped += [
            map_entry(e["key"], e["metric"], e.get("framework"), e.get("transform"))
            for e in doc.get("map", ())
        ]
        if stages is None and "stages" in doc:
            s = doc["stages"]
            stages = Stages(
                early_end=s["early_end"],
                mid_end=s["mid_end"],
                reason=s["reason"],
                source=s.get("source"),
            )
            t = s.get("timing")
            if t:
                timing = Timing(
                    early_fraction=float(t["early_fraction"]),
                    mid_fraction=float(t["mid_fraction"]),
                    early_points=t["early_points"],
                    mid_points=t["mid_points"],
                    warmup_points=t["warmup_points"],
                    baseline_points=t["baseline_points"],
                    cv_points=t.get("cv_points", Timing.cv_points),
                    trend_points=t.get("trend_points", Timing.trend_points),
                    reason=t["reason"],
                )
    return Registry(
        metrics=tuple(metrics),
        terms=tuple(terms),
        rules=tuple(rules),
        stages=stages or Stages(early_end=2000, mid_end=20000),
        timing=timing or Timing(),
        sources=tuple(f for f, _ in docs),
        bookkeeping=tuple(bookkeeping),
        mapped=tuple(mapped),
    )


def map_entry(key: str, metric: str, framework: str | None = None, transform: Any = None) -> Alias:
    """A tag mapping as the resolver holds it: an alias of `metric` that beats the registry's
    (`transform` as a metrics.yaml alias writes it)."""
    return Alias(
        key=key,
        framework=framework or "generic",
        metric=metric,
        transform=IDENTITY if transform is None else _transform(transform),
        note="mapped",
    )
