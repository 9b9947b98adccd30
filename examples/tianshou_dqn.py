"""Train a Tianshou DQN (or PPO) on a tokenized bandit env, with Tianshou's own collector, buffer and trainer.

The env goes in as Gymnasium made it: every step's ``info`` has the same keys and no strings,
so Tianshou's replay buffer stores it as it is. The one addition is the action mask under the
key Tianshou reads, ``obs.mask`` (``ActionMaskAlias``): with it the DQN's greedy and
epsilon-greedy actions are always allowed; without it masked tokens become the forced EOS at
position L. PPO's actor here ignores the mask (the forced EOS stands in).

It ends with the yardstick line: the learner's cumulative regret over the rounds it played (read
from Tianshou's buffer), beside Random's and EOFUL's over as many rounds on the same seed
(:mod:`tokenized_bandit_gym.evaluation.yardstick`).

Run: ``python examples/tianshou_dqn.py`` (``--algorithm ppo``; ``pip install "tokenized-bandit-gym[tianshou]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import DQN, PPO
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams
from tianshou.utils.net.common import ModuleWithVectorOutput
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.evaluation.yardstick import yardstick_line
from tokenized_bandit_gym.registration import LLM_ENVS
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments
from tokenized_bandit_gym.wrappers import ActionMaskAlias

SMALL_LLM = {"max_length": 4, "top_k": 4}  # the LLM ids at a small size: short answers, four candidates


@dataclass
class Args:
    """Command-line arguments."""

    env_id: str = "TokenizedLinearBandit-v0"
    """a registered env id"""
    algorithm: str = "dqn"
    """"dqn" or "ppo\""""
    steps: int = 2000
    """environment steps to train for"""
    num_envs: int = 4
    """environments in Tianshou's DummyVectorEnv"""
    mask: bool = True
    """add the action mask as obs.mask (what Tianshou's DQN masks with)"""
    seed: int = 0
    """seed of the envs and the networks"""


class RoundFeatures(ModuleWithVectorOutput):
    """A small MLP over what the observation says about the round: its allowed tokens and its length."""

    def __init__(self, num_actions: int, max_length: int, hidden: int = 64) -> None:
        super().__init__(hidden)
        self.max_length = max_length
        self.layers = torch.nn.Sequential(torch.nn.Linear(num_actions + max_length + 1, hidden), torch.nn.ReLU())

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        """``(B, hidden)`` features of Tianshou's observation batch, and the (unused) recurrent state."""
        mask = torch.as_tensor(np.asarray(obs.action_mask), dtype=torch.float32)  # (B, k)
        length = torch.as_tensor(np.asarray(obs.length), dtype=torch.int64).reshape(-1)  # (B,)
        position = torch.nn.functional.one_hot(length, self.max_length + 1).float()  # (B, L + 1)
        return self.layers(torch.cat([mask, position], dim=1)), state


def env_kwargs(args: Args) -> dict[str, int]:
    return SMALL_LLM if args.env_id in LLM_ENVS else {}


def make_env(args: Args) -> gym.Env:
    env = gym.make(args.env_id, **env_kwargs(args))
    return ActionMaskAlias(env) if args.mask else env


def main(args: Args) -> dict[str, float]:
    torch.manual_seed(args.seed)
    env = make_env(args)
    num_actions = int(env.action_space.n)
    features = RoundFeatures(num_actions, env.unwrapped.problem.max_length)
    envs = DummyVectorEnv([lambda: make_env(args) for _ in range(args.num_envs)])
    envs.seed(args.seed)
    optim = AdamOptimizerFactory(lr=1e-3)
    if args.algorithm == "dqn":
        q_network = DiscreteActor(preprocess_net=features, action_shape=num_actions, softmax_output=False)
        policy = DiscreteQLearningPolicy(model=q_network, action_space=env.action_space, eps_training=0.2)
        algorithm: DQN | PPO = DQN(policy=policy, optim=optim, gamma=1.0, target_update_freq=50)
    elif args.algorithm == "ppo":
        actor = DiscreteActor(preprocess_net=features, action_shape=num_actions)
        policy = DiscreteActorPolicy(
            actor=actor, dist_fn=torch.distributions.Categorical, action_space=env.action_space
        )
        algorithm = PPO(policy=policy, critic=DiscreteCritic(preprocess_net=features), optim=optim, gamma=1.0)
    else:
        raise ValueError(f"algorithm must be 'dqn' or 'ppo', got {args.algorithm!r}")
    collector = Collector[CollectStats](algorithm, envs, VectorReplayBuffer(max(args.steps, 512), args.num_envs))
    shared = {"training_collector": collector, "max_epochs": 1, "epoch_num_steps": args.steps, "show_progress": False}
    if args.algorithm == "dqn":
        params: Any = OffPolicyTrainerParams(
            **shared, collection_step_num_env_steps=16, batch_size=32, update_step_num_gradient_steps_per_sample=0.25
        )
    else:
        params = OnPolicyTrainerParams(**shared, collection_step_num_env_steps=256, batch_size=64)
    algorithm.run_training(params)
    stored = collector.buffer.info  # every step's info, as Tianshou stored it
    ended = np.asarray(stored.round_ended, dtype=bool)
    regrets = np.asarray(stored.regret)[ended]  # one per ended round
    summary = {
        "rounds": float(ended.sum()),
        "forced_eos": float(np.asarray(stored.forced_eos).sum()),
        "mean_regret": float(regrets.mean()),
        "cumulative_regret": float(regrets.sum()),
    }
    print(f"{args.env_id} {args.algorithm}: {summary}")
    learner = f"{args.algorithm.upper()} (Tianshou)"
    print(yardstick_line(learner, float(regrets.sum()), args.env_id, len(regrets), [args.seed], env_kwargs(args)))
    return summary


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
