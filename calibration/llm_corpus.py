"""Evaluate the diagnosis on the published LLM-RL runs of calibration/llm_corpus/expected.yaml.

    python calibration/llm_corpus.py FOLDER [--json] [--first-pass-engine ...]

FOLDER holds the published files, one per run, named after the run: `<run>.log` (a console log)
or `<run>.tfevents` (a TensorBoard event file), downloaded from the addresses in the expected
file (`source:`; most carry no licence, so they are not in this repository). Each file is
checked against its `sha256`; a missing or changed file is named and left out. The runs are
laid out one folder each and given to `rlvitals evaluate --expected`, whose table is printed:
what the engine says at every logged step against what each run's publisher says.

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


def lay_out(folder: Path, into: Path) -> tuple[list[Path], list[str]]:
    """One run folder per published file under `into`; (the run folders, problems)."""
    doc = yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))
    runs = doc["runs"]
    problems = []
    out = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".log", ".tfevents"):
            continue
        name = path.stem
        entry = runs.get(name)
        if entry is not None and entry.get("sha256") != _sha256(path):
            problems.append(f"{path}: not the published file (sha256 differs); left out")
            continue
        run = into / name
        run.mkdir()
        if path.suffix == ".tfevents":
            shutil.copy(path, run / f"events.out.tfevents.{name}")
        else:
            shutil.copy(path, run / "console.log")
        out.append(run)
    for name in runs:
        if not (folder / f"{name}.log").exists() and not (folder / f"{name}.tfevents").exists():
            problems.append(f"{name}: not in {folder} (download it from its source: address)")
    return out, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the published files, <run>.log / <run>.tfevents")
    parser.add_argument("--json", action="store_true", help="evaluate's JSON instead of its table")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"llm_corpus: {args.folder}: not a folder", file=sys.stderr)
        return 2
    from rlvitals.cli import main as rlvitals

    with tempfile.TemporaryDirectory(prefix="llm-corpus-") as tmp:
        runs, problems = lay_out(args.folder, Path(tmp))
        for problem in problems:
            print(f"llm_corpus: {problem}", file=sys.stderr)
        if not runs:
            return 2
        command = ["evaluate", *map(str, runs), "--expected", str(EXPECTED)]
        return rlvitals([*command, "--json"] if args.json else command)


if __name__ == "__main__":
    sys.exit(main())
