"""The published LLM-RL runs through `rlvitals evaluate` and through rlwatch 0.5.1, side by side.

    pip install -e '.[bench]'                          # rlwatch==0.5.1
    python bench/llm_corpus_vs_rlwatch.py FOLDER       # FOLDER: as calibration/llm_corpus.py's

Each run is read as `rlvitals import` reads it (`load_run`), and rlwatch is fed the same values
per logged step as `bench/corpus_vs_rlwatch.py` feeds it (its `DetectorSuite` with its default
config). Prints a Markdown table: expected, rlvitals' first warning / critical and end, whether
that is as expected, rlwatch's first warning / critical; and the totals of both over the runs
with a publisher's verdict (excerpts apart).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "calibration"))

from corpus_vs_rlwatch import _fmt, rlwatch_first
from llm_corpus import EXPECTED, lay_out

import registry
from rlvitals.evaluate.expected import given, read_expected
from rlvitals.evaluate.replay import load_run, verdict


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    reg = registry.load()
    expected = read_expected(EXPECTED)
    import yaml

    excerpts = {
        n for n, e in yaml.safe_load(EXPECTED.read_text())["runs"].items() if e.get("excerpt")
    }
    rows = [
        "| run | expected | failure step | rlvitals first warning | rlvitals first critical | rlvitals end | rlvitals as expected | rlwatch first warning | rlwatch first critical |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    tally = {"rv": 0, "rw_quiet": 0, "rw_flagged": 0, "healthy": 0, "bad": 0, "all": 0}
    with tempfile.TemporaryDirectory(prefix="llm-rlwatch-") as tmp:
        runs, problems = lay_out(Path(args[0]), Path(tmp))
        for problem in problems:
            if "not in" not in problem:
                print(f"llm_corpus_vs_rlwatch: {problem}", file=sys.stderr)
        for folder in runs:
            entry = expected.get(folder.name)
            if entry is None or folder.name in excerpts:
                continue
            run_reg, config = given(reg, {}, entry)
            run = load_run(folder, run_reg, None, config)
            v = verdict(run_reg, run, entry.expected)
            rw = rlwatch_first(run)
            exp = entry.expected
            tally["all"] += 1
            tally["rv"] += v.passed
            if exp.verdict == "healthy":
                tally["healthy"] += 1
                tally["rw_quiet"] += rw["warning"] is None
            else:
                tally["bad"] += 1
                tally["rw_flagged"] += rw["warning"] is not None
            w, c = v.first["warning"], v.first["critical"]
            rows.append(
                f"| {folder.name} | {exp.verdict + (', dead at end' if exp.dead_at_end else '')} |"
                f" {'–' if exp.failure_step is None else f'{exp.failure_step:,} {exp.failure}'} |"
                f" {'–' if w is None else f'{w:,}'} | {'–' if c is None else f'{c:,}'} |"
                f" {v.end_status} | {'yes' if v.passed else 'no: ' + '; '.join(v.problems)} |"
                f" {_fmt(rw['warning'])} | {_fmt(rw['critical'])} |"
            )
    print("\n".join(rows))
    print(
        f"\nrlvitals: {tally['rv']}/{tally['all']} runs as expected. rlwatch 0.5.1 (defaults): "
        f"{tally['rw_quiet']}/{tally['healthy']} healthy runs without a warning, "
        f"{tally['rw_flagged']}/{tally['bad']} destabilised runs with one."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
