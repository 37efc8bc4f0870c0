"""A single-file PPO for discrete Gym tasks in the CleanRL style, written for the calibration corpus.

    python calibration/cleanrl_ppo.py --out DIR --total-timesteps 40000 --learning-rate 2.5e-4

It logs what CleanRL's `ppo.py` logs, under the same keys and at the same cadence (one point per
rollout of `num_envs * num_steps` env steps, the step being the env-step count), through torch's
`SummaryWriter`, with the `hyperparameters` text summary CleanRL writes first. The keys were taken
from CleanRL's documentation of its `ppo.py` logs; the code is our own.

`--clip-coef 0` turns clipping off (the surrogate is the plain importance-weighted advantage and
the value loss is unclipped); `--anneal-lr false` keeps the learning rate constant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Args:
    out: str
    env_id: str = "CartPole-v1"
    seed: int = 1
    total_timesteps: int = 40_000
    learning_rate: float = 2.5e-4
    num_envs: int = 4
    num_steps: int = 128
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


def _parse(argv: Sequence[str] | None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Args(out="")
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, type=lambda s: s == "true", default=value)
        else:
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
    np.random.seed(args.seed)
    writer = SummaryWriter(args.out)
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")

    envs = gym.vector.SyncVectorEnv([lambda: gym.make(args.env_id) for _ in range(args.num_envs)])
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    n_actions = int(envs.single_action_space.n)

    def layer(i: int, o: int, std: float = float(np.sqrt(2))) -> nn.Linear:
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.zeros_(lin.bias)
        return lin

    critic = nn.Sequential(
        layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0)
    )
    actor = nn.Sequential(
        layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, n_actions, 0.01)
    )
    params = list(critic.parameters()) + list(actor.parameters())
    optimizer = torch.optim.Adam(params, lr=args.learning_rate, eps=1e-5)

    batch = args.num_envs * args.num_steps
    minibatch = batch // args.num_minibatches
    updates = args.total_timesteps // batch
    obs_buf = torch.zeros((args.num_steps, args.num_envs, obs_dim))
    act_buf = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logp_buf = torch.zeros((args.num_steps, args.num_envs))
    rew_buf = torch.zeros((args.num_steps, args.num_envs))
    done_buf = torch.zeros((args.num_steps, args.num_envs))
    val_buf = torch.zeros((args.num_steps, args.num_envs))

    global_step = 0
    start = time.time()
    obs_np, _ = envs.reset(seed=args.seed)
    obs = torch.tensor(obs_np, dtype=torch.float32)
    done = torch.zeros(args.num_envs)
    for update in range(1, updates + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = (1.0 - (update - 1.0) / updates) * args.learning_rate
        for t in range(args.num_steps):
            global_step += args.num_envs
            obs_buf[t], done_buf[t] = obs, done
            with torch.no_grad():
                dist = Categorical(logits=actor(obs))
                action = dist.sample()
                logp_buf[t], val_buf[t] = dist.log_prob(action), critic(obs).squeeze(-1)
            act_buf[t] = action
            obs_np, reward, term, trunc, info = envs.step(action.numpy())
            rew_buf[t] = torch.tensor(reward, dtype=torch.float32)
            obs = torch.tensor(obs_np, dtype=torch.float32)
            done = torch.tensor(np.logical_or(term, trunc), dtype=torch.float32)
            if "episode" in info:
                for i in np.flatnonzero(info["_episode"]):
                    writer.add_scalar(
                        "charts/episodic_return", info["episode"]["r"][i], global_step
                    )
                    writer.add_scalar(
                        "charts/episodic_length", info["episode"]["l"][i], global_step
                    )

        with torch.no_grad():  # generalised advantage estimation, backwards through the rollout
            next_value = critic(obs).squeeze(-1)
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                not_done = 1.0 - (done if t == args.num_steps - 1 else done_buf[t + 1])
                nxt = next_value if t == args.num_steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + args.gamma * nxt * not_done - val_buf[t]
                last = delta + args.gamma * args.gae_lambda * not_done * last
                adv[t] = last
            ret = adv + val_buf

        b_obs, b_act = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1)
        b_logp, b_adv = logp_buf.reshape(-1), adv.reshape(-1)
        b_ret, b_val = ret.reshape(-1), val_buf.reshape(-1)
        clipfracs: list[float] = []
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch)
            for lo in range(0, batch, minibatch):
                mb = order[lo : lo + minibatch]
                dist = Categorical(logits=actor(b_obs[mb]))
                logratio = dist.log_prob(b_act[mb]) - b_logp[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    if args.clip_coef > 0:
                        clipfracs.append(
                            ((ratio - 1.0).abs() > args.clip_coef).float().mean().item()
                        )
                a = b_adv[mb]
                a = (a - a.mean()) / (a.std() + 1e-8)
                surrogate = -a * ratio
                value = critic(b_obs[mb]).squeeze(-1)
                if args.clip_coef > 0:
                    clipped = -a * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = torch.max(surrogate, clipped).mean()
                    v_clip = b_val[mb] + torch.clamp(
                        value - b_val[mb], -args.clip_coef, args.clip_coef
                    )
                    v_loss = (
                        0.5 * torch.max((value - b_ret[mb]) ** 2, (v_clip - b_ret[mb]) ** 2).mean()
                    )
                else:
                    pg_loss = surrogate.mean()
                    v_loss = 0.5 * ((value - b_ret[mb]) ** 2).mean()
                entropy = dist.entropy().mean()
                loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optimizer.step()

        var_y = float(b_ret.var())
        explained = float("nan") if var_y == 0 else 1.0 - float((b_ret - b_val).var()) / var_y
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar(
            "losses/clipfrac", float(np.mean(clipfracs)) if clipfracs else 0.0, global_step
        )
        writer.add_scalar("losses/explained_variance", explained, global_step)
        writer.add_scalar("charts/SPS", int(global_step / (time.time() - start)), global_step)
    envs.close()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
