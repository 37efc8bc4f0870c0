"""Train the calibration corpus: every run, one after another, into tests/fixtures/runs/<name>/.

    python calibration/corpus.py                 # all runs (about 15 CPU-minutes, one core)
    python calibration/corpus.py --only grpo_    # runs whose name starts with a prefix
    python calibration/corpus.py --out DIR       # into DIR/<name>/ instead (the tests do)

Each run is one trainer script of this folder with fixed seeds; the trainer itself writes its
TensorBoard event file (SB3's logger, torch's SummaryWriter in the CleanRL-style script, TRL's
TensorBoardCallback). The manifest (tests/fixtures/runs/manifest.json) records, per run, the exact
command, the hyperparameters that differ from the trainer's defaults, the package versions and
what the run was meant to test. The verdict each run *shows* is written separately, by a person
looking at the data (tests/fixtures/runs/expected.yaml), never by this script.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "fixtures" / "runs"

CARTPOLE_PPO = ["--set", "n_steps=512", "--set", "batch_size=64", "--set", "n_epochs=10"]
PENDULUM_PPO = [
    "--n-envs", "4", "--set", "n_steps=256", "--set", "batch_size=64", "--set", "n_epochs=10",
    "--set", "gamma=0.9", "--set", "gae_lambda=0.95", "--set", "use_sde=true",
    "--set", "sde_sample_freq=4",
]  # fmt: skip


@dataclass(frozen=True)
class Spec:
    name: str
    script: str
    args: tuple[str, ...]
    intent: str  # what the run was set up to test; the observed verdict lives in expected.yaml


def _sb3(algo: str, env: str, steps: int, *extra: str) -> tuple[str, ...]:
    return ("--algo", algo, "--env", env, "--steps", str(steps), *extra)


RUNS = [
    Spec("sb3_ppo_cartpole_healthy", "sb3_train.py",
         _sb3("ppo", "CartPole-v1", 40960, *CARTPOLE_PPO, "--set", "learning_rate=0.0003"),
         "SB3 PPO defaults on CartPole: healthy baseline"),
    Spec("sb3_ppo_cartpole_annealed", "sb3_train.py",
         _sb3("ppo", "CartPole-v1", 40960, *CARTPOLE_PPO, "--set", "learning_rate=linear:0.001"),
         "learning rate annealed linearly to 0: KL and clip fraction fade by construction"),
    Spec("sb3_ppo_cartpole_lr_high", "sb3_train.py",
         _sb3("ppo", "CartPole-v1", 40960, *CARTPOLE_PPO, "--set", "learning_rate=0.03"),
         "learning rate 100x too high"),
    Spec("sb3_ppo_cartpole_noclip", "sb3_train.py",
         _sb3("ppo", "CartPole-v1", 40960, "--set", "n_steps=512", "--set", "batch_size=64",
              "--set", "n_epochs=30", "--set", "clip_range=100", "--set", "learning_rate=0.003"),
         "clipping off (clip_range 100), 30 epochs per rollout, learning rate 10x"),
    Spec("sb3_a2c_cartpole_healthy", "sb3_train.py",
         _sb3("a2c", "CartPole-v1", 40000, "--log-interval", "100"),
         "SB3 A2C defaults on CartPole: healthy baseline"),
    Spec("sb3_a2c_cartpole_lr_high", "sb3_train.py",
         _sb3("a2c", "CartPole-v1", 40000, "--log-interval", "100", "--set", "learning_rate=0.05"),
         "learning rate 70x too high"),
    Spec("sb3_a2c_cartpole_ent0_lr", "sb3_train.py",
         _sb3("a2c", "CartPole-v1", 40000, "--log-interval", "100", "--set", "learning_rate=0.007",
              "--set", "ent_coef=0.0"),
         "ent_coef 0, constant learning rate 10x the default"),
    Spec("sb3_ppo_pendulum_healthy", "sb3_train.py",
         _sb3("ppo", "Pendulum-v1", 61440, *PENDULUM_PPO, "--set", "learning_rate=0.001"),
         "SB3 PPO on Pendulum (rl-zoo-like settings): healthy continuous baseline"),
    Spec("sb3_ppo_pendulum_lr_high", "sb3_train.py",
         _sb3("ppo", "Pendulum-v1", 61440, *PENDULUM_PPO, "--set", "learning_rate=0.05"),
         "learning rate 50x too high, continuous actions"),
    Spec("sb3_sac_pendulum_healthy", "sb3_train.py",
         _sb3("sac", "Pendulum-v1", 6000, "--set", "learning_rate=0.001",
              "--set", "learning_starts=600"),
         "SB3 SAC on Pendulum: healthy continuous baseline, one point per episode"),
    Spec("sb3_sac_pendulum_lr_high", "sb3_train.py",
         _sb3("sac", "Pendulum-v1", 6000, "--set", "learning_rate=0.05",
              "--set", "learning_starts=600"),
         "SAC with learning rate 50x too high"),
    Spec("cleanrl_ppo_healthy", "cleanrl_ppo.py", ("--total-timesteps", "40960"),
         "CleanRL-style PPO defaults (annealed learning rate): healthy baseline"),
    Spec("cleanrl_ppo_lr_high", "cleanrl_ppo.py",
         ("--total-timesteps", "40960", "--learning-rate", "0.05", "--anneal-lr", "false"),
         "learning rate 200x too high, not annealed"),
    Spec("cleanrl_ppo_noclip", "cleanrl_ppo.py",
         ("--total-timesteps", "40960", "--clip-coef", "100", "--update-epochs", "20",
          "--learning-rate", "0.0025", "--anneal-lr", "false", "--max-grad-norm", "100"),
         "clipping off (clip_coef 100), 20 epochs, learning rate 10x, no annealing"),
    Spec("cleanrl_ppo_ent0_const", "cleanrl_ppo.py",
         ("--total-timesteps", "40960", "--ent-coef", "0", "--anneal-lr", "false",
          "--learning-rate", "0.0025"),
         "ent_coef 0 without learning-rate annealing, learning rate 10x"),
    Spec("grpo_mu1_healthy", "grpo_tiny.py", ("--max-steps", "200", "--learning-rate", "0.0005"),
         "TRL GRPO, num_iterations 1 (clip ratio 0 by construction): healthy baseline"),
    Spec("grpo_mu2_healthy", "grpo_tiny.py",
         ("--max-steps", "200", "--learning-rate", "0.0005", "--num-iterations", "2"),
         "TRL GRPO, num_iterations 2: healthy baseline with a live clip ratio"),
    Spec("grpo_mu1_beta_healthy", "grpo_tiny.py",
         ("--max-steps", "200", "--learning-rate", "0.0005", "--beta", "0.04",
          "--lr-scheduler-type", "linear"),
         "KL penalty 0.04 against the reference, linear decay: healthy baseline with a ref KL"),
    Spec("grpo_mu1_lr_high", "grpo_tiny.py", ("--max-steps", "200", "--learning-rate", "0.03"),
         "learning rate 60x too high"),
    Spec("grpo_mu2_noclip_lr_high", "grpo_tiny.py",
         ("--max-steps", "200", "--learning-rate", "0.01", "--num-iterations", "2",
          "--epsilon", "100"),
         "num_iterations 2 with clipping off (epsilon 100) and learning rate 20x"),
    Spec("grpo_mu1_beta0_lr", "grpo_tiny.py",
         ("--max-steps", "200", "--learning-rate", "0.005", "--beta", "0.0"),
         "KL coefficient 0 with learning rate 10x: nothing holds the policy near the reference"),
    Spec("grpo_mu1_beta_lr", "grpo_tiny.py",
         ("--max-steps", "200", "--learning-rate", "0.005", "--beta", "0.04"),
         "KL coefficient 0.04 with learning rate 10x: the same push, held by the KL penalty"),
    Spec("grpo_mu1_lr_dead", "grpo_tiny.py", ("--max-steps", "120", "--learning-rate", "0.3"),
         "learning rate 600x too high: one update can make the policy deterministic"),
    Spec("grpo_mu2_lr_dead", "grpo_tiny.py",
         ("--max-steps", "120", "--learning-rate", "0.1", "--num-iterations", "2"),
         "num_iterations 2 with learning rate 200x too high"),
]  # fmt: skip


def _versions() -> dict[str, str]:
    names = ("torch", "stable-baselines3", "gymnasium", "transformers", "trl", "tokenizers")
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def _train(spec: Spec, out: Path) -> dict[str, object]:
    folder = out / spec.name
    shutil.rmtree(folder, ignore_errors=True)
    cmd = [sys.executable, str(HERE / spec.script), "--out", str(folder), *spec.args]
    started = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{spec.name} failed:\n{done.stderr[-3000:]}")
    shutil.rmtree(folder / "trainer", ignore_errors=True)  # TRL's output_dir: no checkpoints kept
    shown = ["python", f"calibration/{spec.script}", "--out", f"tests/fixtures/runs/{spec.name}"]
    return {
        "name": spec.name,
        "command": shlex.join([*shown, *spec.args]),
        "intent": spec.intent,
        "wall_seconds": round(time.time() - started, 1),
        "files": sorted(p.name for p in folder.iterdir()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="train only runs whose name starts with this")
    parser.add_argument(
        "--out", type=Path, default=OUT, help=f"folder of the runs and manifest (default {OUT})"
    )
    args = parser.parse_args()
    if not any(spec.name.startswith(args.only) for spec in RUNS):
        parser.error(f"--only {args.only!r} matches no run: {', '.join(s.name for s in RUNS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    manifest["versions"] = _versions()
    for spec in RUNS:
        if spec.name.startswith(args.only):
            entry = _train(spec, args.out)
            print(f"{spec.name}: {entry['wall_seconds']} s", flush=True)
            manifest["runs"][spec.name] = entry
            _write(path, manifest)  # after every run: a later failure keeps what was trained
    return 0


def _write(path: Path, manifest: dict[str, object]) -> None:
    runs = manifest["runs"]
    assert isinstance(runs, dict)
    manifest["runs"] = {s.name: runs[s.name] for s in RUNS if s.name in runs}
    path.write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
