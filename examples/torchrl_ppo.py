"""Train a TorchRL PPO agent on the native vector env, with TorchRL's collector, GAE and clipped PPO loss.

``gym.make_vec(env_id, N, autoreset_mode=AutoresetMode.DISABLED)`` is what TorchRL's
``GymWrapper`` wants from a Gymnasium vector env (TorchRL resets the finished sub-envs itself,
through ``reset(options={"reset_mask": ...})``), so the native vector env's speed is kept;
``categorical_action_encoding=True`` keeps actions (and ``length``) as indices; ``SAME_STEP`` works too
with it (with TorchRL's default one-hot encoding, its reader of ``final_obs`` cannot one-hot the
``Discrete`` entries ``length`` and ``query_length``, and ``check_env_specs`` fails "at root"). The
env's ``action_mask`` is ``MultiBinary`` int8, Gymnasium's convention; TorchRL's
``MaskedCategorical`` wants a bool mask, which is the one-line cast ``action_mask.bool()``
below. With the mask, PPO samples only allowed tokens and never triggers the forced EOS.
Each round's ``regret`` is read from the step's info (``set_info_dict_reader``), and the script
ends with the yardstick line: PPO's cumulative regret over the rounds it played, beside Random's and
EOFUL's over as many rounds on the same seed (:mod:`tokenized_bandit_gym.evaluation.yardstick`).

Run: ``python examples/torchrl_ppo.py`` (``pip install "tokenized-bandit-gym[torchrl]"``).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.collectors import Collector
from torchrl.data import Unbounded
from torchrl.envs import GymWrapper
from torchrl.envs.libs.gym import default_info_dict_reader
from torchrl.modules import MaskedCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

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
    frames_per_batch: int = 256
    """environment steps per PPO update"""
    total_frames: int = 4096
    """environment steps to train for"""
    seed: int = 0
    """seed of the env streams and the networks"""


class RoundFeatures(torch.nn.Module):
    """A small MLP over the round's allowed tokens ``(..., k)`` and its length ``(...,)``, one-hot encoded."""

    def __init__(self, num_actions: int, max_length: int, outputs: int, hidden: int = 64) -> None:
        super().__init__()
        self.max_length = max_length
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(num_actions + max_length + 1, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, outputs)
        )

    def forward(self, action_mask: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """``(..., outputs)`` from the mask ``(..., k)`` and the length ``(...,)``."""
        position = torch.nn.functional.one_hot(length, self.max_length + 1).float()
        return self.layers(torch.cat([action_mask.float(), position], dim=-1))


def main(args: Args) -> dict[str, float]:
    torch.manual_seed(args.seed)
    vector_env = gym.make_vec(args.env_id, args.num_envs, autoreset_mode=AutoresetMode.DISABLED)
    num_actions = int(vector_env.single_action_space.n)
    max_length = vector_env.unwrapped.problem.max_length
    env = GymWrapper(vector_env, categorical_action_encoding=True)
    regret_spec = Unbounded(shape=(args.num_envs,), dtype=torch.float64)  # info["regret"], one per sub-env
    env = env.set_info_dict_reader(default_info_dict_reader(["regret"], spec={"regret": regret_spec}))
    env.set_seed(args.seed)
    bool_mask = TensorDictModule(lambda mask: mask.bool(), in_keys=["action_mask"], out_keys=["mask"])  # int8 -> bool
    logits = TensorDictModule(
        RoundFeatures(num_actions, max_length, num_actions), in_keys=["action_mask", "length"], out_keys=["logits"]
    )
    actor = ProbabilisticActor(
        TensorDictSequential(bool_mask, logits),
        in_keys=["logits", "mask"],
        out_keys=["action"],
        distribution_class=MaskedCategorical,
        return_log_prob=True,
    )
    critic = ValueOperator(RoundFeatures(num_actions, max_length, 1), in_keys=["action_mask", "length"])
    advantage = GAE(gamma=1.0, lmbda=0.95, value_network=critic)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-3)
    collector = Collector(
        env,
        actor,
        frames_per_batch=args.frames_per_batch,
        total_frames=args.total_frames,
        auto_register_policy_transforms=False,
    )
    mean_rewards, regrets = [], []  # regrets: one per ended round
    for batch in collector:  # (N, frames_per_batch / N) steps
        done = batch["next", "done"].squeeze(-1)  # (N, T)
        mean_rewards.append(float(batch["next", "reward"].squeeze(-1)[done].mean()))
        regrets.extend(batch["next", "regret"][done].tolist())
        with torch.no_grad():
            advantage(batch)
        flat = batch.reshape(-1)
        for _ in range(4):
            for index in torch.randperm(flat.numel()).split(64):
                losses = loss(flat[index])
                total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optimizer.zero_grad()
                total.backward()
                optimizer.step()
        chosen_allowed = batch["mask"].gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)  # (N, T)
        if not bool(chosen_allowed.all()):
            raise RuntimeError("the masked policy sampled a masked token")
        print(f"{args.env_id}: mean reward per round {mean_rewards[-1]:.4f}")
    collector.shutdown()
    print(yardstick_line("PPO (TorchRL)", sum(regrets), args.env_id, rounds=len(regrets), seeds=[args.seed]))
    return {
        "first_mean_reward": mean_rewards[0],
        "last_mean_reward": mean_rewards[-1],
        "batches": len(mean_rewards),
        "rounds": float(len(regrets)),
        "cumulative_regret": float(sum(regrets)),
    }


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
