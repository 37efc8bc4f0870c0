"""Measure what a uniformly random policy scores on every gymnasium task of the calibration corpus.

    python calibration/random_policy.py            # writes registry/random_returns.yaml

"Worse than random" and "never rose above random" in expected.yaml need a number: the mean
undiscounted episodic return of `action_space.sample()` over EPISODES episodes (episode i reset
with seed i, the action space seeded once with 0), with the task's own time limit. For the
discrete tasks it also records the constant-action returns (always action 0, always action 1 ...,
seeds as above): the floor a collapsed deterministic policy sits on; for Pendulum the two extreme
constant torques (always the action space's low, always its high), where a saturated actor sits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1")
CONSTANT = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1")  # also every / each extreme constant action
EPISODES = 100
# the registry reads it (registry/references.py): a run config's `env` names its random level
OUT = Path(__file__).resolve().parent.parent / "registry" / "random_returns.yaml"


def _returns(env_id: str, act: Callable[[Any], Any], episodes: int) -> list[float]:
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(0)
    out = []
    for i in range(episodes):
        env.reset(seed=i)
        total, done = 0.0, False
        while not done:
            _, reward, term, trunc, _ = env.step(act(env.action_space))
            total += float(reward)
            done = term or trunc
        out.append(total)
    env.close()
    return out


def _stats(values: list[float]) -> str:
    return (
        f"mean: {statistics.fmean(values):.2f}, std: {statistics.pstdev(values):.2f}, "
        f"min: {min(values):.2f}, max: {max(values):.2f}, episodes: {len(values)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=EPISODES)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import gymnasium as gym

    lines = [
        "# Mean undiscounted episodic return of a uniformly random policy (action_space.sample())",
        f"# on each gymnasium task of the calibration corpus: gymnasium {gym.__version__},",
        f"# {args.episodes} episodes per task, episode i reset with seed=i, the action space seeded",
        "# once with 0, the task's own time limit (max_episode_steps). `constant` holds the same",
        "# measurement for a policy that always takes one action (the floor a collapsed",
        "# deterministic policy sits on); std is the population standard deviation over episodes.",
        "# Written by: python calibration/random_policy.py",
    ]
    for env_id in ENVS:
        rand = _returns(env_id, lambda space: space.sample(), args.episodes)
        lines.append(f"{env_id}:")
        lines += [f"  {item}" for item in _stats(rand).split(", ")]
        lines.append(f"  max_episode_steps: {gym.spec(env_id).max_episode_steps}")
        if env_id in CONSTANT:
            lines.append("  constant:")
            space = gym.make(env_id).action_space
            if isinstance(space, gym.spaces.Discrete):
                fixed = {f"action_{a}": a for a in range(int(space.n))}
            else:
                fixed = {
                    f"action_low_{space.low[0]:g}": space.low,
                    f"action_high_{space.high[0]:g}": space.high,
                }
            for label, a in fixed.items():
                const = _returns(env_id, lambda _space, a=a: a, args.episodes)
                lines.append(f"    {label}: {{{_stats(const)}}}")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
