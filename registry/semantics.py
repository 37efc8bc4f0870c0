"""Meaning checks the JSON Schema cannot express: references, duplicates, threshold order, language."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .errors import Problem

__all__ = ["check_meaning"]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

Doc = Mapping[str, Any]


def check_meaning(
    docs: Sequence[tuple[str, Doc]], written: Sequence[Doc] | None = None
) -> list[Problem]:
    """Every meaning problem across all files (already schema-valid), in file order.

    `written[i]` is file i as written, before a user metric's defaults were filled in (an
    English text copied into an omitted `zh`): its texts are the ones checked for Chinese.
    """
    problems: list[Problem] = []
    metric_ids = _collect_ids(docs, "metrics", problems)
    term_ids = _collect_ids(docs, "terms", problems)
    _collect_ids(docs, "rules", problems)
    claimed: dict[tuple[str, str], str] = {}
    for index, (file, doc) in enumerate(docs):
        as_written = written[index] if written is not None else doc
        stages = doc.get("stages")
        if stages and stages["early_end"] >= stages["mid_end"]:
            problems.append(Problem(file, "stages", "mid_end", "must be greater than early_end"))
        for i, m in enumerate(doc.get("metrics", ())):
            entry = f"metrics[{i}] '{m['id']}'"
            problems += [
                Problem(file, entry, f, msg) for f, msg in _metric_problems(m, metric_ids, claimed)
            ]
            problems += [
                Problem(file, entry, f, msg)
                for f, msg in _language_problems(as_written.get("metrics", [])[i])
            ]
        for i, t in enumerate(doc.get("terms", ())):
            entry = f"terms[{i}] '{t['id']}'"
            for j, ref in enumerate(t["explains"]):
                if ref not in metric_ids:
                    problems.append(
                        Problem(file, entry, f"explains[{j}]", f"unknown metric id {ref!r}")
                    )
            for j, ref in enumerate(t.get("related_terms", ())):
                if ref not in term_ids:
                    problems.append(
                        Problem(file, entry, f"related_terms[{j}]", f"unknown term id {ref!r}")
                    )
            problems += [Problem(file, entry, f, msg) for f, msg in _language_problems(t)]
        for i, r in enumerate(doc.get("rules", ())):
            entry = f"rules[{i}] '{r['id']}'"
            for j, cond in enumerate(r["all"]):
                if cond["metric"] not in metric_ids:
                    problems.append(
                        Problem(
                            file, entry, f"all[{j}].metric", f"unknown metric id {cond['metric']!r}"
                        )
                    )
            if r.get("min_points", 2) > r["window"]:
                problems.append(Problem(file, entry, "min_points", "cannot exceed window"))
            problems += [Problem(file, entry, f, msg) for f, msg in _language_problems(r)]
    problems += _bookkeeping_problems(docs, written or [doc for _, doc in docs], claimed)
    for file, doc in docs:
        for i, e in enumerate(doc.get("map", ())):
            if e["metric"] not in metric_ids:
                close = difflib.get_close_matches(e["metric"], sorted(metric_ids), n=3, cutoff=0.6)
                hint = (
                    f"; close ids: {', '.join(close)}"
                    if close
                    else "; registry/metrics.yaml lists them"
                )
                problems.append(
                    Problem(
                        file,
                        f"map[{i}] '{e['key']}'",
                        "metric",
                        f"unknown metric id {e['metric']!r}{hint}",
                    )
                )
    return problems


def _bookkeeping_problems(
    docs: Sequence[tuple[str, Doc]],
    written: Sequence[Doc],
    claimed: Mapping[tuple[str, str], str],
) -> list[Problem]:
    """A bookkeeping key declared twice for one framework, or one that is a metric's alias or id
    (a throughput or learning rate stays a metric)."""
    problems: list[Problem] = []
    metric_ids = {m["id"] for _, doc in docs for m in doc.get("metrics", ())}
    aliased = {key for key, _framework in claimed}
    seen: dict[tuple[str, str], str] = {}
    for (file, doc), as_written in zip(docs, written, strict=True):
        for i, group in enumerate(doc.get("bookkeeping", ())):
            framework = group["framework"]
            for j, item in enumerate(group["keys"]):
                key = item["key"]
                entry = f"bookkeeping[{i}] '{framework}'"
                where = f"keys[{j}].key"
                if (key, framework) in seen:
                    problems.append(
                        Problem(
                            file,
                            entry,
                            where,
                            f"{key!r} is already declared in {seen[key, framework]}",
                        )
                    )
                seen.setdefault((key, framework), file)
                problems += [
                    Problem(file, entry, f"keys[{j}].{f}", msg)
                    for f, msg in _language_problems(
                        as_written["bookkeeping"][i]["keys"][j]["meaning"], "meaning"
                    )
                ]
                if key in metric_ids or key in aliased:
                    problems.append(
                        Problem(
                            file,
                            entry,
                            where,
                            f"{key!r} is a metric id or alias in metrics.yaml; a metric is not "
                            "bookkeeping: remove it from bookkeeping",
                        )
                    )
    return problems


def _collect_ids(
    docs: Sequence[tuple[str, Doc]], section: str, problems: list[Problem]
) -> set[str]:
    seen: dict[str, str] = {}
    for file, doc in docs:
        for i, item in enumerate(doc.get(section, ())):
            ident = item["id"]
            if ident in seen:
                problems.append(
                    Problem(
                        file,
                        f"{section}[{i}] '{ident}'",
                        "id",
                        f"duplicate id, already defined in {seen[ident]}",
                    )
                )
            else:
                seen[ident] = file
    return set(seen)


def _metric_problems(
    m: Doc, metric_ids: set[str], claimed: dict[tuple[str, str], str]
) -> Iterator[tuple[str, str]]:
    for j, ref in enumerate(m["related"]):
        if ref not in metric_ids:
            yield f"related[{j}]", f"unknown metric id {ref!r}"
        elif ref == m["id"]:
            yield f"related[{j}]", "a metric cannot be related to itself"
    for j, ref in enumerate(m.get("display", {}).get("panel_with", ())):
        if ref not in metric_ids:
            yield f"display.panel_with[{j}]", f"unknown metric id {ref!r}"
    derived = m.get("derived")
    for j, ref in enumerate(derived["of"] if derived else ()):
        if ref not in metric_ids:
            yield f"derived.of[{j}]", f"unknown metric id {ref!r}"
    if (m.get("kind") == "derived") != bool(derived):
        yield "derived", "kind: derived and a derived: block go together (give both or neither)"
    yield from _alias_problems(m, claimed)
    yield from _number_problems(m)


def _alias_problems(m: Doc, claimed: dict[tuple[str, str], str]) -> Iterator[tuple[str, str]]:
    pattern = m.get("pattern")
    for j, a in enumerate(m.get("aliases", ())):
        key = (a["key"], a["framework"])
        owner = claimed.get(key)
        if owner is not None:
            where = "this metric" if owner == m["id"] else f"metric {owner!r}"
            yield (
                f"aliases[{j}].key",
                f"{a['key']!r} for {a['framework']} is already claimed by {where}",
            )
        else:
            claimed[key] = m["id"]
        holes = _PLACEHOLDER.findall(a["key"])
        if pattern and pattern["placeholder"] not in holes and "name" not in holes:
            yield (
                f"aliases[{j}].key",
                f"a pattern metric's alias must capture {{{pattern['placeholder']}}}",
            )


def _number_problems(m: Doc) -> Iterator[tuple[str, str]]:
    limits = m["limits"]
    lo, hi = limits.get("min"), limits.get("max")
    if lo is not None and hi is not None and lo > hi:
        yield "limits", f"min {lo} is greater than max {hi}"
    bands = m.get("bands")
    absolute = bands is None or bands["basis"] == "absolute"
    for stage in ("early", "mid", "late"):
        band = (bands or {}).get(stage)
        if not band:
            continue
        b_lo, b_hi = band.get("low"), band.get("high")
        if b_lo is None and b_hi is None:
            yield f"bands.{stage}", "a band needs low, high or both"
        if b_lo is not None and b_hi is not None and b_lo > b_hi:
            yield f"bands.{stage}", f"low {b_lo} is greater than high {b_hi}"
        if absolute:
            for edge, value in (("low", b_lo), ("high", b_hi)):
                if value is not None and not _within(value, lo, hi):
                    yield (
                        f"bands.{stage}.{edge}",
                        f"{value} lies outside the physical limits [{lo}, {hi}]",
                    )
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for j, a in enumerate(m.get("alerts", ())):
        by_key.setdefault((a["condition"], a.get("basis", "absolute")), {})[a["severity"]] = a[
            "threshold"
        ]
        if (
            a.get("basis", "absolute") == "absolute"
            and a["condition"] != "abs_above"
            and not _within(a["threshold"], lo, hi)
        ):
            yield (
                f"alerts[{j}].threshold",
                f"{a['threshold']} lies outside the physical limits [{lo}, {hi}]",
            )
    for (condition, _basis), sev in by_key.items():
        if "warning" in sev and "critical" in sev:
            warn, crit = sev["warning"], sev["critical"]
            if condition in ("above", "abs_above") and warn > crit:
                yield (
                    "alerts",
                    f"'{condition}' warning threshold {warn} must not exceed the critical one {crit}",
                )
            if condition == "below" and warn < crit:
                yield (
                    "alerts",
                    f"'below' warning threshold {warn} must not be under the critical one {crit}",
                )


def _within(value: float, lo: float | None, hi: float | None) -> bool:
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _language_problems(item: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every {en, zh} pair must carry real Chinese, not an empty or copied string."""
    if isinstance(item, Mapping):
        if set(item) == {"en", "zh"}:
            zh = item["zh"]
            if not _CJK.search(zh):
                yield (
                    (path or "text") + ".zh",
                    "Chinese text is missing (no Chinese characters found)",
                )
            return
        for k, v in item.items():
            yield from _language_problems(v, f"{path}.{k}" if path else str(k))
    elif isinstance(item, list):
        for i, v in enumerate(item):
            yield from _language_problems(v, f"{path}[{i}]")
