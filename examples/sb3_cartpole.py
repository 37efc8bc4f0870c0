"""Train PPO on CartPole-v1 with Stable-Baselines3 and watch it with rlvitals.

    pip install -e '.[integrations]'        # stable-baselines3, gymnasium and torch (CPU is fine)
    python examples/sb3_cartpole.py --steps 50000
    rlvitals report --run sb3-cartpole --out cartpole.html

Everything SB3's logger dumps (`train/approx_kl`, `train/entropy_loss`, `rollout/ep_rew_mean`,
...) goes through `RlvitalsCallback` to the exporter, which translates SB3's names into the
registry's ids (`policy_kl`, `policy_entropy` with the sign flipped, `episodic_return`, ...) and
writes them to the embedded store under RLVITALS_STORE, or to InfluxDB when RLVITALS_INFLUX_URL
is set. The step is SB3's `num_timesteps`. 50k steps took 2 min 13 s of CPU time here (one torch
thread; `--threads` sets more).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import exporter
from exporter.integrations.sb3 import RlvitalsCallback


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=50_000, help="environment steps (default 50000)"
    )
    parser.add_argument("--run", default="sb3-cartpole", help="run name (default sb3-cartpole)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: fastest here)"
    )
    args = parser.parse_args(argv)

    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError:
        print("this example needs: pip install -e '.[integrations]'", file=sys.stderr)
        return 2
    # A 64-unit MLP gains nothing from many threads; uncapped, torch starts one per core and
    # they contend with the environment loop (8 min instead of well under one on 2 cores).
    torch.set_num_threads(args.threads)

    hyper = {"learning_rate": 3e-4, "n_steps": 1024, "batch_size": 64, "n_epochs": 10}
    config = {**hyper, "clip_epsilon": 0.2, "n_actions": 2, "env": "CartPole-v1", "seed": args.seed}
    run = exporter.init(args.run, project="cartpole", config=config, framework="sb3")
    with run:  # flushes and closes the run even if training fails
        model = PPO("MlpPolicy", "CartPole-v1", clip_range=0.2, seed=args.seed, verbose=0, **hyper)
        model.learn(total_timesteps=args.steps, callback=RlvitalsCallback(run))
        run.event(int(model.num_timesteps), "checkpoint", "training finished")
    print(f"logged {run.stats.accepted} values; now: rlvitals report --run {run.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
