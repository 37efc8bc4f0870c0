"""Train the calibration corpus: every run, one after another, into tests/fixtures/runs/<name>/.

    python calibration/corpus.py                 # all runs (about 40 CPU-minutes, one core)
    python calibration/corpus.py --only grpo_    # runs whose name starts with a prefix
    python calibration/corpus.py --out DIR       # into DIR/<name>/ instead (the tests do)
    python calibration/corpus.py --heldout       # the held-out families, into tests/fixtures/heldout/

Each run is one trainer script of this folder with fixed seeds; the trainer itself writes its
TensorBoard event file (SB3's logger, torch's SummaryWriter in the CleanRL-style script and in the
home-made actor-critic, TRL's TensorBoardCallback). The manifest
(tests/fixtures/runs/manifest.json) records, per run, the exact command, the hyperparameters that
differ from the trainer's defaults, the package versions and what the run was meant to test. The
verdict each run *shows* is written separately, by a person looking at the data
(tests/fixtures/runs/expected.yaml), never by this script.
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
CARTPOLE_DQN = [  # rl-zoo's DQN CartPole-v1 settings
    "--set", "learning_rate=0.0023", "--set", "batch_size=64", "--set", "buffer_size=100000",
    "--set", "learning_starts=1000", "--set", "gamma=0.99", "--set", "target_update_interval=10",
    "--set", "train_freq=256", "--set", "gradient_steps=128", "--set", "exploration_fraction=0.16",
    "--set", "exploration_final_eps=0.04", "--set", 'policy_kwargs={"net_arch": [256, 256]}',
]  # fmt: skip
PENDULUM_TD3 = [  # rl-zoo's TD3/DDPG Pendulum-v1 settings, but learning from step 1000
    "--set", "buffer_size=200000", "--set", "learning_starts=1000",
    "--set", "action_noise=normal:0.1", "--set", 'policy_kwargs={"net_arch": [400, 300]}',
]  # fmt: skip
ACROBOT_A2C = ["--n-envs", "16", "--normalize", "--set", "ent_coef=0.0", "--log-interval", "20"]
GRPO_H64 = (
    "--max-steps", "200", "--learning-rate", "0.0005", "--hidden-size", "64", "--layers", "3",
)  # fmt: skip


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
    Spec("sb3_dqn_cartpole_healthy", "sb3_train.py",
         _sb3("dqn", "CartPole-v1", 50000, "--log-interval", "4", *CARTPOLE_DQN),
         "SB3 DQN with rl-zoo's CartPole settings: healthy value-based baseline"),
    Spec("sb3_dqn_cartpole_diverged", "sb3_train.py",
         _sb3("dqn", "CartPole-v1", 30000, "--log-interval", "10", *CARTPOLE_DQN,
              "--set", "learning_rate=0.01", "--set", "gamma=0.9999",
              "--set", "target_update_interval=1", "--set", "train_freq=1",
              "--set", "gradient_steps=1", "--set", "max_grad_norm=1e10"),
         "no target network (copied every step, one gradient step per env step), gamma 0.9999, "
         "learning rate 4x, no gradient clipping: bootstrapped Q values should diverge"),
    Spec("sb3_dqn_acrobot_healthy", "sb3_train.py",
         _sb3("dqn", "Acrobot-v1", 40000, "--log-interval", "2",
              "--set", "learning_rate=0.00063", "--set", "batch_size=128",
              "--set", "buffer_size=50000", "--set", "learning_starts=0", "--set", "gamma=0.99",
              "--set", "target_update_interval=250", "--set", "train_freq=4",
              "--set", "gradient_steps=-1", "--set", "exploration_fraction=0.12",
              "--set", "exploration_final_eps=0.1",
              "--set", 'policy_kwargs={"net_arch": [256, 256]}'),
         "SB3 DQN with rl-zoo's Acrobot settings: healthy baseline on a second discrete task"),
    Spec("sb3_td3_pendulum_healthy", "sb3_train.py",
         _sb3("td3", "Pendulum-v1", 10000, *PENDULUM_TD3, "--set", "learning_rate=0.001",
              "--set", "gamma=0.98"),
         "SB3 TD3 with rl-zoo's Pendulum settings: healthy baseline, one point per episode"),
    Spec("sb3_td3_pendulum_diverged", "sb3_train.py",
         _sb3("td3", "Pendulum-v1", 10000, *PENDULUM_TD3, "--set", "learning_rate=0.01",
              "--set", "gamma=0.9999", "--set", "tau=1.0"),
         "target networks copied every update (tau 1), gamma 0.9999, learning rate 10x: "
         "critic values should diverge"),
    Spec("sb3_ddpg_pendulum_healthy", "sb3_train.py",
         _sb3("ddpg", "Pendulum-v1", 10000, *PENDULUM_TD3, "--set", "learning_rate=0.001",
              "--set", "gamma=0.98"),
         "SB3 DDPG with rl-zoo's Pendulum settings: healthy baseline, one point per episode"),
    Spec("sb3_ddpg_pendulum_lr_high", "sb3_train.py",
         _sb3("ddpg", "Pendulum-v1", 10000, *PENDULUM_TD3, "--set", "learning_rate=0.02",
              "--set", "gamma=0.98"),
         "learning rate 20x too high"),
    Spec("sb3_ppo_pendulum_entpos", "sb3_train.py",
         _sb3("ppo", "Pendulum-v1", 61440, *PENDULUM_PPO, "--set", "learning_rate=0.001",
              "--set", "ent_coef=0.5"),
         "entropy bonus 0.5 (continuous actions): the action std should grow without bound"),
    Spec("sb3_ppo_pendulum_entneg", "sb3_train.py",
         _sb3("ppo", "Pendulum-v1", 61440, *PENDULUM_PPO, "--set", "learning_rate=0.001",
              "--set", "ent_coef=-0.5"),
         "entropy coefficient -0.5 (an entropy penalty): the action std should collapse"),
    Spec("sb3_ppo_cartpole_reward1e18", "sb3_train.py",
         _sb3("ppo", "CartPole-v1", 40960, *CARTPOLE_PPO, "--set", "learning_rate=0.0003",
              "--reward-scale", "1e18"),
         "rewards scaled by 1e18 (a unit error): squared returns overflow float32, the value "
         "loss is inf"),
    Spec("sb3_a2c_acrobot_healthy", "sb3_train.py",
         _sb3("a2c", "Acrobot-v1", 200000, *ACROBOT_A2C),
         "SB3 A2C with rl-zoo's Acrobot settings (16 envs, VecNormalize, ent_coef 0): healthy"),
    Spec("sb3_a2c_acrobot_lr_high", "sb3_train.py",
         _sb3("a2c", "Acrobot-v1", 200000, *ACROBOT_A2C, "--set", "learning_rate=0.02"),
         "learning rate 30x too high on Acrobot"),
    Spec("sb3_a2c_acrobot_8env", "sb3_train.py",
         _sb3("a2c", "Acrobot-v1", 100000, "--n-envs", "8", "--log-interval", "25"),
         "SB3 A2C defaults with 8 envs and no normalisation on Acrobot's sparse -1 reward"),
    Spec("grpo_h64_healthy", "grpo_tiny.py", GRPO_H64,
         "TRL GRPO on a larger tiny model (hidden 64, 3 layers), the usual reward: healthy"),
    Spec("grpo_h64_length_bonus", "grpo_tiny.py", (*GRPO_H64, "--reward", "task+length_bonus"),
         "the task reward plus a gameable 0.05 bonus per generated word: length hacking"),
    Spec("grpo_h64_long_list", "grpo_tiny.py", (*GRPO_H64, "--reward", "long_list"),
         "a task that legitimately asks for long answers (list up to 48 good words): healthy "
         "with long completions"),
    Spec("custom_ac_cartpole_healthy", "custom_ac.py", ("--total-steps", "100000"),
         "home-made actor-critic with its own tag names, defaults: healthy"),
    Spec("custom_ac_cartpole_lr_high", "custom_ac.py",
         ("--total-steps", "100000", "--learning-rate", "0.02"),
         "home-made actor-critic, learning rate 20x too high"),
    Spec("sb3_qrdqn_cartpole_healthy", "sb3_train.py",
         _sb3("qrdqn", "CartPole-v1", 50000, "--log-interval", "4", *CARTPOLE_DQN,
              "--set", 'policy_kwargs={"net_arch": [256, 256], "n_quantiles": 10}'),
         "sb3-contrib QR-DQN with the DQN run's CartPole settings and 10 quantiles: healthy "
         "distributional baseline"),
    Spec("sb3_qrdqn_cartpole_diverged", "sb3_train.py",
         _sb3("qrdqn", "CartPole-v1", 30000, "--log-interval", "10", *CARTPOLE_DQN,
              "--set", 'policy_kwargs={"net_arch": [256, 256], "n_quantiles": 10}',
              "--set", "learning_rate=0.01", "--set", "gamma=0.9999",
              "--set", "target_update_interval=1", "--set", "train_freq=1",
              "--set", "gradient_steps=1", "--set", "max_grad_norm=1e10"),
         "QR-DQN with the DQN divergence settings (target copied every step, gamma 0.9999, "
         "learning rate 4x, no gradient clipping): the quantiles should diverge"),
    Spec("rloo_mu1_healthy", "grpo_tiny.py",
         ("--trainer", "rloo", "--max-steps", "200", "--learning-rate", "0.0005",
          "--beta", "0.05"),
         "TRL RLOO (leave-one-out baseline, KL penalty 0.05 on the reward, TRL's default): "
         "healthy baseline"),
    Spec("rloo_mu1_lr_high", "grpo_tiny.py",
         ("--trainer", "rloo", "--max-steps", "200", "--learning-rate", "0.03", "--beta", "0.05"),
         "RLOO with learning rate 60x too high"),
    Spec("rloo_mu1_lr_dead", "grpo_tiny.py",
         ("--trainer", "rloo", "--max-steps", "120", "--learning-rate", "0.3", "--beta", "0.05"),
         "RLOO with learning rate 600x too high: one update can make the policy deterministic"),
]  # fmt: skip


# Held-out families (issue 35): never tuned on; their verdicts were written before the engine saw
# them (tests/fixtures/heldout/expected.yaml). `--heldout` trains these into tests/fixtures/heldout.
HELDOUT = [
    Spec("trpo_cartpole_healthy", "sb3_train.py", _sb3("trpo", "CartPole-v1", 61440),
         "sb3-contrib TRPO defaults on CartPole: healthy"),
    Spec("trpo_cartpole_frozen", "sb3_train.py",
         _sb3("trpo", "CartPole-v1", 61440, "--set", "target_kl=1e-7"),
         "target_kl 1e-7: the line search allows no policy change (return stays random)"),
    Spec("trpo_cartpole_kl_wide", "sb3_train.py",
         _sb3("trpo", "CartPole-v1", 61440, "--set", "target_kl=1.0"),
         "target_kl 1.0 (100x): steps far past any trust region"),
    Spec("ars_cartpole_healthy", "sb3_train.py",
         _sb3("ars", "CartPole-v1", 61440, "--policy", "LinearPolicy", "--log-interval", "1"),
         "sb3-contrib ARS defaults (linear policy) on CartPole: healthy"),
    Spec("ars_cartpole_lr0", "sb3_train.py",
         _sb3("ars", "CartPole-v1", 61440, "--policy", "LinearPolicy", "--log-interval", "1",
              "--set", "learning_rate=0.0"),
         "learning rate 0 from a zeroed linear policy: one constant action for the whole budget"),
    Spec("recurrent_ppo_cartpole_healthy", "sb3_train.py",
         _sb3("recurrent_ppo", "CartPole-v1", 20480, "--policy", "MlpLstmPolicy",
              "--set", "n_steps=512"),
         "sb3-contrib RecurrentPPO (LSTM policy) on CartPole: healthy"),
    Spec("recurrent_ppo_cartpole_entneg", "sb3_train.py",
         _sb3("recurrent_ppo", "CartPole-v1", 20480, "--policy", "MlpLstmPolicy",
              "--set", "n_steps=512", "--set", "ent_coef=-0.1"),
         "entropy coefficient -0.1 (an entropy penalty): the policy should determinise"),
    Spec("dqn_jsonl_cartpole_healthy", "dqn_jsonl.py", ("--total-steps", "50000"),
         "home-made DQN logging JSON Lines under its own names: healthy"),
    Spec("dqn_jsonl_cartpole_gamma_gt1", "dqn_jsonl.py",
         ("--total-steps", "50000", "--gamma", "1.05"),
         "discount 1.05: bootstrapped Q values should grow without bound"),
]  # fmt: skip
HELDOUT_OUT = HERE.parent / "tests" / "fixtures" / "heldout"


def _versions() -> dict[str, str]:
    names = (
        "torch", "stable-baselines3", "sb3-contrib", "gymnasium", "transformers", "trl",
        "tokenizers",
    )  # fmt: skip
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
    where = folder.relative_to(HERE.parent) if folder.is_relative_to(HERE.parent) else folder
    shown = ["python", f"calibration/{spec.script}", "--out", str(where)]
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
        "--heldout", action="store_true", help=f"train the held-out families into {HELDOUT_OUT}"
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help=f"folder of the runs and manifest (default {OUT})"
    )
    args = parser.parse_args()
    specs = HELDOUT if args.heldout else RUNS
    if args.heldout and args.out == OUT:
        args.out = HELDOUT_OUT
    if not any(spec.name.startswith(args.only) for spec in specs):
        parser.error(f"--only {args.only!r} matches no run: {', '.join(s.name for s in specs)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    manifest["versions"] = _versions()
    for spec in specs:
        if spec.name.startswith(args.only):
            entry = _train(spec, args.out)
            print(f"{spec.name}: {entry['wall_seconds']} s", flush=True)
            manifest["runs"][spec.name] = entry
            _write(path, manifest)  # after every run: a later failure keeps what was trained
    return 0


def _write(path: Path, manifest: dict[str, object]) -> None:
    runs = manifest["runs"]
    assert isinstance(runs, dict)
    manifest["runs"] = {s.name: runs[s.name] for s in [*RUNS, *HELDOUT] if s.name in runs}
    path.write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
