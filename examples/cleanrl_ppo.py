"""A CleanRL-style single-file PPO (torch only) on the native vector env of a tokenized bandit.

What a CleanRL script needs to change for these envs, and nothing more:

* ``autoreset_mode=SAME_STEP``: a sub-env whose round ends starts the next one in the same step,
  so every stored transition is a real one (under ``NEXT_STEP`` a script would also train on
  the autoreset steps, whose action is ignored);
* the policy masks its logits with ``observation["action_mask"]`` (int8, 1 = allowed), so it
  never plays a masked token (which at position L would silently become the forced EOS);
* the ``Dict`` observation is read by key (here the mask and the one-hot length), instead of
  ``FlattenObservation``.

It ends with the yardstick line: PPO's cumulative regret over the rounds it played, beside Random's
and EOFUL's over as many rounds on the same seed (:mod:`tokenized_bandit_gym.evaluation.yardstick`).

Run: ``python examples/cleanrl_ppo.py`` (a minute on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.evaluation.yardstick import yardstick_line
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments


@dataclass
class Args:
    """Command-line arguments."""

    env_id: str = "TokenizedLinearBandit-v0"
    """a registered env id"""
    num_envs: int = 8
    """sub-envs of the native vector env"""
    num_steps: int = 32
    """steps per sub-env per update"""
    num_updates: int = 30
    """PPO updates"""
    learning_rate: float = 3e-3
    """Adam's learning rate"""
    seed: int = 0
    """seed of the env streams and the networks"""


class Agent(torch.nn.Module):
    """Actor and critic over the round's allowed tokens and its one-hot length; masked tokens get logit -inf."""

    def __init__(self, num_actions: int, max_length: int, hidden: int = 64) -> None:
        super().__init__()
        self.max_length = max_length
        inputs = num_actions + max_length + 1
        self.actor = torch.nn.Sequential(
            torch.nn.Linear(inputs, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, num_actions)
        )
        self.critic = torch.nn.Sequential(torch.nn.Linear(inputs, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def features(self, mask: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """``(B, k + L + 1)``: the mask ``(B, k)`` and the one-hot length ``(B,)``."""
        return torch.cat([mask.float(), torch.nn.functional.one_hot(length, self.max_length + 1).float()], dim=-1)

    def act(self, mask: torch.Tensor, length: torch.Tensor, action: torch.Tensor | None = None) -> tuple:
        """(action, log-prob, entropy, value) for ``mask`` ``(B, k)`` int8 and ``length`` ``(B,)``."""
        x = self.features(mask, length)
        logits = self.actor(x).masked_fill(mask == 0, -torch.inf)
        distribution = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = distribution.sample()
        return action, distribution.log_prob(action), distribution.entropy(), self.critic(x).squeeze(-1)


def main(args: Args) -> dict[str, float]:
    torch.manual_seed(args.seed)
    envs = gym.make_vec(args.env_id, args.num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    num_actions, max_length = int(envs.single_action_space.n), envs.unwrapped.problem.max_length
    agent = Agent(num_actions, max_length)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate)
    shape = (args.num_steps, args.num_envs)
    masks = torch.zeros((*shape, num_actions), dtype=torch.int8)
    lengths, actions = torch.zeros(shape, dtype=torch.int64), torch.zeros(shape, dtype=torch.int64)
    log_probs, rewards, dones, values = (torch.zeros(shape) for _ in range(4))
    observation, _ = envs.reset(seed=args.seed)
    mean_rewards, forced, regrets = [], 0, []  # regrets: one per ended round, in the order they end
    for _ in range(args.num_updates):
        for step in range(args.num_steps):
            masks[step] = torch.as_tensor(observation["action_mask"])
            lengths[step] = torch.as_tensor(observation["length"])
            with torch.no_grad():
                actions[step], log_probs[step], _, values[step] = agent.act(masks[step], lengths[step])
            observation, reward, terminated, truncated, info = envs.step(actions[step].numpy())
            if "final_info" in info:  # the rounds that ended in this step (SAME_STEP: their info is final_info)
                ended = terminated | truncated
                forced += int(info["final_info"]["forced_eos"][ended].sum())
                regrets.extend(info["final_info"]["regret"][ended].tolist())
            forced += int(info["forced_eos"].sum())
            rewards[step], dones[step] = (
                torch.as_tensor(reward, dtype=torch.float32),
                torch.as_tensor(terminated | truncated),
            )
        # Returns: a round's reward comes at its last step; no discount (gamma = 1), no bootstrap past a round.
        returns = torch.zeros(shape)
        with torch.no_grad():
            _, _, _, next_value = agent.act(
                torch.as_tensor(observation["action_mask"]), torch.as_tensor(observation["length"])
            )
        running = next_value
        for step in reversed(range(args.num_steps)):
            running = rewards[step] + (1.0 - dones[step]) * running
            returns[step] = running
        advantages = returns - values
        mean_rewards.append(float(rewards[dones.bool()].mean()))
        flat = [
            tensor.reshape(-1, *tensor.shape[2:])
            for tensor in (masks, lengths, actions, log_probs, advantages, returns)
        ]
        for _ in range(4):
            for index in torch.randperm(args.num_steps * args.num_envs).split(64):
                mask, length, action, old_log_prob, advantage, target = (tensor[index] for tensor in flat)
                _, log_prob, entropy, value = agent.act(mask, length, action)
                ratio = (log_prob - old_log_prob).exp()
                advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
                policy_loss = torch.max(-advantage * ratio, -advantage * ratio.clamp(0.8, 1.2)).mean()
                loss = policy_loss + 0.5 * ((value - target) ** 2).mean() - 0.01 * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        print(f"{args.env_id}: mean reward per round {mean_rewards[-1]:.4f}")
    envs.close()
    print(yardstick_line("PPO (CleanRL-style)", sum(regrets), args.env_id, rounds=len(regrets), seeds=[args.seed]))
    return {
        "first_mean_reward": mean_rewards[0],
        "last_mean_reward": mean_rewards[-1],
        "forced_eos": float(forced),
        "rounds": float(len(regrets)),
        "cumulative_regret": float(sum(regrets)),
    }


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
