"""Train one Stable-Baselines3 run of the calibration corpus and keep SB3's own TensorBoard file.

    python calibration/sb3_train.py --algo ppo --env CartPole-v1 --steps 40000 --out DIR \
        --set learning_rate=0.0003 --set n_steps=512

Nothing of rlvitals runs during training: SB3's logger writes its event file (the artefact a user
would hand to `rlvitals import`), and the diagnosis is judged on that file afterwards.
`--set KEY=VALUE` passes one constructor keyword (numbers, true/false, or `linear:X` for a learning
rate annealed linearly from X to 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _value(text: str) -> Any:
    if text.startswith("linear:"):
        start = float(text.split(":", 1)[1])

        def schedule(progress_remaining: float) -> float:
            return progress_remaining * start

        return schedule
    if text in ("true", "false"):
        return text == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=("ppo", "a2c", "sac"), required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True, help="folder for the event file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-envs", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    import torch
    from stable_baselines3 import A2C, PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)  # two shared cores: one run never takes both
    algos: dict[str, Callable[..., Any]] = {"ppo": PPO, "a2c": A2C, "sac": SAC}
    hyper = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    if "policy_kwargs" in hyper:
        hyper["policy_kwargs"] = json.loads(hyper["policy_kwargs"])
    env = make_vec_env(args.env, n_envs=args.n_envs, seed=args.seed)
    model = algos[args.algo]("MlpPolicy", env, seed=args.seed, verbose=0, **hyper)
    model.set_logger(configure(args.out, ["tensorboard"]))
    model.learn(total_timesteps=args.steps, log_interval=args.log_interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
