"""A home-made advantage actor-critic for discrete Gym tasks, logging under its own tag names.

    python calibration/custom_ac.py --out DIR --total-steps 100000 --learning-rate 1e-3

Written for the calibration corpus as the kind of script a user writes without a framework:
synchronous envs, n-step rollouts with GAE, one Adam step per rollout on
policy loss + value_coef * value loss - ent_coef * entropy, gradient norm clipped. It logs through
torch's `SummaryWriter`, one point per `log_every` rollouts, the step being the env-step count,
under names that are neither SB3's, CleanRL's nor TRL's:

    perf/return_mean10   mean undiscounted return of the last 10 finished episodes
    perf/episode_len     mean length of the same 10 episodes
    policy/entropy       mean entropy of the action distribution over the rollout (nats)
    policy/loss          -mean(log pi(a|s) * advantage), advantages normalised per rollout
    value/loss           mean squared error of the value head against the GAE returns
    optim/lr             the optimiser's learning rate (constant)
    optim/grad_norm      total gradient norm before clipping

The values are those of the last rollout before the point (no averaging over the `log_every`
rollouts), except the two perf/ tags, which average finished episodes.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Args:
    out: str
    env_id: str = "CartPole-v1"
    seed: int = 1
    total_steps: int = 100_000
    learning_rate: float = 1e-3
    num_envs: int = 8
    num_steps: int = 16
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    value_coef: float = 0.5
    max_grad_norm: float = 0.5
    log_every: int = 4


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
    from torch.distributions import Categorical
    from torch.utils.tensorboard import SummaryWriter

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    writer = SummaryWriter(args.out)
    writer.add_text("config", "\n".join(f"{k}: {v}" for k, v in asdict(args).items()))

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(args.env_id) for _ in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    n_actions = int(envs.single_action_space.n)
    actor = nn.Sequential(
        nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_actions)
    )
    critic = nn.Sequential(
        nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
    )
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=args.learning_rate)

    returns: deque[float] = deque(maxlen=10)
    lengths: deque[int] = deque(maxlen=10)
    ep_ret = np.zeros(args.num_envs)
    ep_len = np.zeros(args.num_envs, dtype=int)
    obs = torch.tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
    steps, rollout = 0, 0
    while steps < args.total_steps:
        logps, values, ents, rewards, dones = [], [], [], [], []
        for _ in range(args.num_steps):
            dist = Categorical(logits=actor(obs))
            action = dist.sample()
            logps.append(dist.log_prob(action))
            ents.append(dist.entropy())
            values.append(critic(obs).squeeze(-1))
            next_obs, reward, term, trunc, _ = envs.step(action.numpy())
            steps += args.num_envs
            ep_ret += reward
            ep_len += 1
            for i in np.flatnonzero(term | trunc):
                returns.append(float(ep_ret[i]))
                lengths.append(int(ep_len[i]))
                ep_ret[i], ep_len[i] = 0.0, 0
            rewards.append(torch.tensor(reward, dtype=torch.float32))
            # a time-limit truncation ends the return like a termination (a simplification
            # many own scripts make); the env resets in the same step (autoreset SAME_STEP)
            dones.append(torch.tensor(term | trunc, dtype=torch.float32))
            obs = torch.tensor(next_obs, dtype=torch.float32)

        with torch.no_grad():  # generalised advantage estimation, backwards through the rollout
            nxt = critic(obs).squeeze(-1)
            adv = torch.zeros(args.num_steps, args.num_envs)
            last = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                live = 1.0 - dones[t]
                delta = rewards[t] + args.gamma * nxt * live - values[t]
                last = delta + args.gamma * args.gae_lambda * live * last
                adv[t], nxt = last, values[t]
            target = adv + torch.stack(values)
        logp, value, entropy = torch.stack(logps), torch.stack(values), torch.stack(ents).mean()
        norm_adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = -(logp * norm_adv).mean()
        value_loss = ((value - target) ** 2).mean()
        loss = policy_loss + args.value_coef * value_loss - args.ent_coef * entropy
        optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(params, args.max_grad_norm)
        optimizer.step()

        rollout += 1
        if rollout % args.log_every == 0:
            if returns:
                writer.add_scalar("perf/return_mean10", float(np.mean(returns)), steps)
                writer.add_scalar("perf/episode_len", float(np.mean(lengths)), steps)
            writer.add_scalar("policy/entropy", entropy.item(), steps)
            writer.add_scalar("policy/loss", policy_loss.item(), steps)
            writer.add_scalar("value/loss", value_loss.item(), steps)
            writer.add_scalar("optim/lr", optimizer.param_groups[0]["lr"], steps)
            writer.add_scalar("optim/grad_norm", float(grad_norm), steps)
    envs.close()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
