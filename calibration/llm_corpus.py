"""Evaluate the diagnosis on the published LLM-RL runs of calibration/llm_corpus/expected.yaml.

    python calibration/llm_corpus.py FOLDER [--json] [--expected FILE]

`--expected calibration/sb3_console/expected.yaml`: the published Stable-Baselines3 console
runs instead, laid out and evaluated the same way.

FOLDER holds the published files, one per run, named after the run: `<run>.log` (a console log),
`<run>.tfevents` (a TensorBoard event file) or `<run>.trainer_state.json` (a Hugging Face
Trainer's state), downloaded from the addresses in the expected file (`source:`; most carry no
licence, so they are not in this repository). Each file is checked against its `sha256`; a
missing or changed file is named and left out. The runs are laid out one folder each and given
to `rlvitals evaluate --expected`, whose table is printed: what the engine says at every logged
step against what each run's publisher says. Runs marked `excerpt: true` (a few lines pasted
into an issue thread) get a table of their own: too few points for any history.

Runs in the folder that the expected file does not list (published runs whose publisher says
nothing of how they went) are evaluated too, without an expectation.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "llm_corpus" / "expected.yaml"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lay_out(folder: Path, into: Path, expected: Path = EXPECTED) -> tuple[list[Path], list[str]]:
    """One run folder per published file under `into`; (the run folders, problems)."""
    doc = yaml.safe_load(expected.read_text(encoding="utf-8"))
    runs = doc["runs"]
    problems = []
    out = []
    for path in sorted(folder.iterdir()):
        state = path.name.endswith(".trainer_state.json")
        if path.suffix not in (".log", ".tfevents") and not state:
            continue
        name = path.name.removesuffix(".trainer_state.json") if state else path.stem
        if (into / name).exists():
            continue  # the same run in another format: the first one read is kept
        entry = runs.get(name)
        if entry is not None and entry.get("sha256") != _sha256(path):
            problems.append(f"{path}: not the published file (sha256 differs); left out")
            continue
        run = into / name
        run.mkdir()
        if path.suffix == ".tfevents":
            shutil.copy(path, run / f"events.out.tfevents.{name}")
        elif state:
            shutil.copy(path, run / "trainer_state.json")
        else:
            shutil.copy(path, run / "console.log")
        out.append(run)
    laid = {run.name for run in out}
    for name in runs:
        if name not in laid:
            problems.append(f"{name}: not in {folder} (download it from its source: address)")
    return out, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the published files, <run>.log / <run>.tfevents")
    parser.add_argument("--json", action="store_true", help="evaluate's JSON instead of its table")
    parser.add_argument(
        "--quiet-missing", action="store_true", help="do not name the listed runs not in FOLDER"
    )
    parser.add_argument(
        "--expected", type=Path, default=EXPECTED, help="the corpus's expected verdicts"
    )
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"llm_corpus: {args.folder}: not a folder", file=sys.stderr)
        return 2
    from rlvitals.cli import main as rlvitals

    doc = yaml.safe_load(args.expected.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="llm-corpus-") as tmp:
        laid = Path(tmp) / "runs"
        laid.mkdir()
        runs, problems = lay_out(args.folder, laid, args.expected)
        for problem in problems:
            if not (args.quiet_missing and "not in" in problem):
                print(f"llm_corpus: {problem}", file=sys.stderr)
        status = 0
        for title, excerpt in (("runs", False), ("excerpts (a few pasted lines)", True)):
            group = [r for r in runs if bool(doc["runs"].get(r.name, {}).get("excerpt")) == excerpt]
            if not group:
                continue
            expected = Path(tmp) / f"expected-{int(excerpt)}.yaml"
            subset = {n: e for n, e in doc["runs"].items() if bool(e.get("excerpt")) == excerpt}
            expected.write_text(yaml.safe_dump({"runs": subset}), encoding="utf-8")
            if not args.json:
                print(f"\n### {title}\n", flush=True)
            command = ["evaluate", *map(str, group), "--expected", str(expected)]
            status = max(status, rlvitals([*command, "--json"] if args.json else command))
        return status


if __name__ == "__main__":
    sys.exit(main())
