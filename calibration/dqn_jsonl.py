"""A home-made DQN for discrete Gym tasks that logs JSON Lines under its own names.

    python calibration/dqn_jsonl.py --out DIR --total-steps 50000 --gamma 0.99

Written for the held-out families (docs/evaluate.md, "Families the engine never saw") as the kind
of loop a user writes without a framework or TensorBoard: an epsilon-greedy Q network, a replay
buffer, a target network copied every `target_every` steps, one Adam step on the Huber TD error
every `train_every` env steps. Every `log_every` env steps it appends one JSON object to
DIR/metrics.jsonl:

    step           env steps so far
    ep_return      mean undiscounted return of the last 10 finished episodes
    td_loss        mean Huber TD loss of the updates since the last line
    q_mean         mean Q value of the actions taken in the last update's batch
    eps            the exploration rate
    lr             the optimiser's learning rate (constant)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Args:
    out: str
    env_id: str = "CartPole-v1"
    seed: int = 1
    total_steps: int = 50_000
    learning_rate: float = 5e-4
    gamma: float = 0.99
    buffer_size: int = 20_000
    batch_size: int = 64
    learning_starts: int = 1_000
    train_every: int = 4
    target_every: int = 500
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.3
    log_every: int = 500


def _parse(argv: Sequence[str] | None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in asdict(Args(out="")).items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(value), default=value, required=name == "out")
    return Args(**vars(parser.parse_args(argv)))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)

    import gymnasium as gym
    import numpy as np
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(args), indent=2) + "\n")
    log = (out / "metrics.jsonl").open("w", encoding="utf-8")

    env = gym.make(args.env_id)
    obs_dim = int(np.prod(env.observation_space.shape))
    n_actions = int(env.action_space.n)

    def net() -> nn.Module:
        return nn.Sequential(
            nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
            nn.Linear(128, n_actions),
        )  # fmt: skip

    q, target = net(), net()
    target.load_state_dict(q.state_dict())
    optimizer = torch.optim.Adam(q.parameters(), lr=args.learning_rate)
    size = args.buffer_size
    b_obs = np.zeros((size, obs_dim), np.float32)
    b_next = np.zeros((size, obs_dim), np.float32)
    b_act = np.zeros(size, np.int64)
    b_rew = np.zeros(size, np.float32)
    b_done = np.zeros(size, np.float32)

    returns: deque[float] = deque(maxlen=10)
    losses: list[float] = []
    q_mean = 0.0
    obs, _ = env.reset(seed=args.seed)
    ep_ret = 0.0
    for step in range(1, args.total_steps + 1):
        frac = min(1.0, step / (args.eps_fraction * args.total_steps))
        eps = args.eps_start + frac * (args.eps_end - args.eps_start)
        if rng.random() < eps:
            action = int(rng.integers(n_actions))
        else:
            with torch.no_grad():
                action = int(q(torch.as_tensor(obs, dtype=torch.float32)).argmax())
        next_obs, reward, term, trunc, _ = env.step(action)
        i = (step - 1) % size  # a ring buffer: the oldest transition goes first
        b_obs[i], b_next[i], b_act[i], b_rew[i], b_done[i] = obs, next_obs, action, reward, term
        ep_ret += float(reward)
        obs = next_obs
        if term or trunc:
            returns.append(ep_ret)
            ep_ret = 0.0
            obs, _ = env.reset()

        if step > args.learning_starts and step % args.train_every == 0:
            idx = rng.integers(min(step, size), size=args.batch_size)
            o, n = torch.as_tensor(b_obs[idx]), torch.as_tensor(b_next[idx])
            with torch.no_grad():
                nxt = target(n).max(dim=1).values
                y = torch.as_tensor(b_rew[idx]) + args.gamma * nxt * (
                    1 - torch.as_tensor(b_done[idx])
                )
            taken = q(o).gather(1, torch.as_tensor(b_act[idx])[:, None]).squeeze(1)
            loss = nn.functional.smooth_l1_loss(taken, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            q_mean = taken.mean().item()
        if step % args.target_every == 0:
            target.load_state_dict(q.state_dict())

        if step % args.log_every == 0 and returns:
            line = {"step": step, "ep_return": float(np.mean(returns)), "eps": eps,
                    "lr": args.learning_rate}  # fmt: skip
            if losses:
                line |= {"td_loss": float(np.mean(losses)), "q_mean": q_mean}
                losses = []
            log.write(json.dumps(line) + "\n")
            log.flush()
    log.close()
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
