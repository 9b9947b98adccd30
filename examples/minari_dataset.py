"""Record a Minari dataset of an agent learning online on a tokenized bandit, then read it back, offline.

Minari's ``DataCollector`` wraps the env as it is: every step's ``info`` has the same keys, dtypes and
shapes and no strings, so ``record_infos=True`` stores the whole round record (``regret``,
``utility``, ``response``...) next to observations, actions and rewards. An agent of the suite plays
through the collector with the ordinary online loop (``run_online``): one round is one episode.
One thing to know: ``DataCollector.reset()`` without a seed draws a fresh random seed for every
episode (Minari's autoseed), which would reseed the query and noise streams each round and break
common random numbers; ``ContinueStreams`` below passes ``minari_autoseed=False``, so the recorded
rounds are the ones ``run_online`` plays on the bare env with the same seed.

Read back, the dataset gives each round's regret from its last step's info, and the script ends with
the yardstick line: the recorded agent's cumulative regret beside Random's and EOFUL's over the same
rounds and seed (:mod:`tokenized_bandit_gym.evaluation.yardstick`). Recording EOFUL, its column and the
yardstick's EOFUL agree: the dataset holds exactly what was played.

Nothing is downloaded. Datasets go where Minari puts them: ``MINARI_DATASETS_PATH``, else
``~/.minari/datasets``; the script replaces its own dataset id there.

Run: ``python examples/minari_dataset.py`` (``pip install "tokenized-bandit-gym[minari]"``; seconds on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import minari
import numpy as np

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.evaluation.yardstick import yardstick_line
from tokenized_bandit_gym.registration import LLM_ENVS, make_agent
from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

SMALL_LLM = {"max_length": 4, "top_k": 4}  # the LLM ids at a small size: short answers, four candidates


class ContinueStreams(gym.Wrapper):
    """Resets without a seed continue the env's streams (Minari's ``DataCollector`` would reseed them)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """The wrapped env's reset, with Minari's autoseed off (a seed given is still used)."""
        return self.env.reset(seed=seed, options={"minari_autoseed": False, **(options or {})})


@dataclass
class Args:
    """Command-line arguments."""

    env_id: str = "TokenizedLinearBandit-v0"
    """a registered env id"""
    agent: str = "eoful"
    """the registered agent whose online play is recorded (e.g. eoful, random)"""
    rounds: int = 200
    """rounds (episodes) recorded"""
    seed: int = 0
    """seed of the env streams and the agent"""
    dataset_id: str = "tbg/tokenized-bandit-online-v0"
    """Minari dataset id (namespace/name-vN); an existing dataset of this id is replaced"""


def main(args: Args) -> dict[str, Any]:
    env_kwargs = SMALL_LLM if args.env_id in LLM_ENVS else {}
    collector = minari.DataCollector(gym.make(args.env_id, **env_kwargs), record_infos=True)
    played = run_online(ContinueStreams(collector), make_agent(args.agent), args.rounds, seed=args.seed)
    if args.dataset_id in minari.list_local_datasets():
        minari.delete_dataset(args.dataset_id)
    collector.create_dataset(
        dataset_id=args.dataset_id,
        algorithm_name=args.agent,
        description=f"{args.agent} learning online on {args.env_id} from round 1, seed {args.seed}; a round an episode",
    )
    collector.close()

    dataset = minari.load_dataset(args.dataset_id)  # read back from disk, as any offline user would
    regrets = np.array([episode.infos["regret"][-1] for episode in dataset.iterate_episodes()])  # (T,)
    rewards = np.array([episode.rewards.sum() for episode in dataset.iterate_episodes()])  # (T,)
    print(
        f"{args.dataset_id}: {dataset.total_episodes} episodes, {dataset.total_steps} steps; "
        f"mean reward {rewards.mean():.4f}, cumulative regret {regrets.sum():.2f} "
        f"(played online: {played.cumulative_regret[-1]:.2f})"
    )
    learner = f"{args.agent} (read back from Minari)"
    print(yardstick_line(learner, float(regrets.sum()), args.env_id, len(regrets), [args.seed], env_kwargs))
    return {
        "episodes": float(dataset.total_episodes),
        "recorded_cumulative_regret": float(regrets.sum()),
        "played_cumulative_regret": float(played.cumulative_regret[-1]),
    }


if __name__ == "__main__":
    main(parse_dataclass_arguments(Args, __doc__))
