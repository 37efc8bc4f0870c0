"""Train one Stable-Baselines3 run of the calibration corpus and keep SB3's own TensorBoard file.
(QR-DQN, TRPO, ARS and RecurrentPPO come from sb3-contrib, the SB3 team's package of further
algorithms; `--policy` names the policy class, MlpPolicy unless given.)

    python calibration/sb3_train.py --algo ppo --env CartPole-v1 --steps 40000 --out DIR \
        --set learning_rate=0.0003 --set n_steps=512

Nothing of rlvitals runs during training: SB3's logger writes its event file (the artefact a user
would hand to `rlvitals import`), and the diagnosis is judged on that file afterwards.
`--set KEY=VALUE` passes one constructor keyword (numbers, true/false, or `linear:X` for a learning
rate annealed linearly from X to 0; `policy_kwargs` as JSON). For TD3 and DDPG,
`--set action_noise=normal:0.1` adds Gaussian exploration noise of that standard deviation to every
action dimension (`ou:0.1` for Ornstein-Uhlenbeck noise), as rl-zoo's `noise_type`/`noise_std` do.
`--reward-scale X` multiplies every reward the agent learns from by X (a `TransformReward` wrapper
outside SB3's `Monitor`, so the logged `rollout/ep_rew_mean` stays the task's own, unscaled return).
`--normalize` wraps the envs in SB3's `VecNormalize` (running observation and return scaling, as
rl-zoo's `normalize: true`); `rollout/ep_rew_mean` is again the unscaled return.
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


def _action_noise(text: str, env: Any) -> Any:
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    kind, _, std = text.partition(":")
    kinds = {"normal": NormalActionNoise, "ou": OrnsteinUhlenbeckActionNoise}
    dim = env.action_space.shape[-1]
    return kinds[kind](mean=np.zeros(dim), sigma=float(std) * np.ones(dim))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--algo",
        choices=(
            "ppo",
            "a2c",
            "sac",
            "dqn",
            "qrdqn",
            "td3",
            "ddpg",
            "trpo",
            "ars",
            "recurrent_ppo",
        ),
        required=True,
    )
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True, help="folder for the event file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="MlpPolicy")
    parser.add_argument("--n-envs", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=1)
    parser.add_argument("--reward-scale", type=float, default=1.0)
    parser.add_argument("--normalize", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    import torch
    from gymnasium.wrappers import TransformReward
    from sb3_contrib import ARS, QRDQN, TRPO, RecurrentPPO
    from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)  # two shared cores: one run never takes both
    algos: dict[str, Callable[..., Any]] = {
        "ppo": PPO, "a2c": A2C, "sac": SAC, "dqn": DQN, "qrdqn": QRDQN, "td3": TD3, "ddpg": DDPG,
        "trpo": TRPO, "ars": ARS, "recurrent_ppo": RecurrentPPO,
    }  # fmt: skip
    hyper = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    if "policy_kwargs" in hyper:
        hyper["policy_kwargs"] = json.loads(hyper["policy_kwargs"])
    scale = args.reward_scale
    wrap = None if scale == 1.0 else (lambda e: TransformReward(e, lambda r: r * scale))
    env = make_vec_env(args.env, n_envs=args.n_envs, seed=args.seed, wrapper_class=wrap)
    if args.normalize:
        env = VecNormalize(env)
    if "action_noise" in hyper:
        hyper["action_noise"] = _action_noise(str(hyper["action_noise"]), env)
    model = algos[args.algo](args.policy, env, seed=args.seed, verbose=0, **hyper)
    model.set_logger(configure(args.out, ["tensorboard"]))
    model.learn(total_timesteps=args.steps, log_interval=args.log_interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
