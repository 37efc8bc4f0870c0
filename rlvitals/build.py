"""`rlvitals build`: every generated file, computed from the registry, written only when it changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from grafana.dashboards_gen import alert_files, dashboard_files, datasource_files
from registry import Registry
from registry.docs import render_metrics_markdown

__all__ = ["build_all", "generated_files"]

Generator = Callable[[Registry, Sequence[str]], Mapping[str, str]]


def _docs(reg: Registry, langs: Sequence[str]) -> Mapping[str, str]:
    names = {"en": "docs/metrics.md", "zh": "docs/metrics.zh.md"}
    return {names[lang]: render_metrics_markdown(reg, lang) for lang in langs}


_GENERATORS: tuple[Generator, ...] = (_docs, dashboard_files, alert_files, datasource_files)


def generated_files(reg: Registry, langs: Sequence[str] = ("en", "zh")) -> dict[str, str]:
    """Relative path -> content of every generated file."""
    out: dict[str, str] = {}
    for gen in _GENERATORS:
        out.update(gen(reg, langs))
    return out


def build_all(
    reg: Registry, root: Path, langs: Sequence[str] = ("en", "zh"), check: bool = False
) -> list[Path]:
    """Write what differs under `root`; return the paths that changed (or would, with check)."""
    changed: list[Path] = []
    for rel, content in sorted(generated_files(reg, langs).items()):
        path = root / rel
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == content:
            continue
        changed.append(path)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    return changed
