"""Zero glue for the RL libraries people use: each brings a registered id the way its own docs say.

Tianshou's trainers store every step's info in their replay buffer and Minari records every
step's info: both need the info schema (the same keys, dtypes and shapes in every step, no
strings). TorchRL's ``GymWrapper`` takes the native vector env (and Gymnasium's ``SyncVectorEnv``) in both
autoreset modes it accepts, ``DISABLED`` and ``SAME_STEP``, with ``categorical_action_encoding=True``.
Each library's test is skipped where it is not installed (``.[tianshou]``, ``.[minari]``,
``.[torchrl]``); the trainers and the TorchRL example are slow and run in ``.ci/run``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import tokenized_bandit_gym
from tokenized_bandit_gym.registration import LLM_ENVS
from tokenized_bandit_gym.wrappers import ActionMaskAlias

ENV_IDS = tokenized_bandit_gym.registered_ids()
SMALL_LLM = {"max_length": 4, "top_k": 4}


def env_kwargs(env_id: str) -> dict[str, Any]:
    return dict(SMALL_LLM) if env_id in LLM_ENVS else {}


YARDSTICK = re.compile(
    r"^yardstick, (?P<env_id>\S+), (?P<rounds>\d+) rounds, seed (?P<seed>\d+): cumulative regret (?P<learner>.+) "
    r"(?P<regret>-?[\d.]+) \| Random (?P<random>-?[\d.]+) \| (?P<reference>EOFUL|GreedyETC|UCT) (?P<eoful>-?[\d.]+)"
)


def check_yardstick(printed: str, summary: dict[str, float], env_id: str, seed: int = 0) -> None:
    """The script's last line is the yardstick over the rounds it played, with its own regret in it."""
    found = YARDSTICK.match(printed.strip().splitlines()[-1])
    assert found is not None, printed.strip().splitlines()[-1]
    assert (found["env_id"], int(found["seed"])) == (env_id, seed)
    assert int(found["rounds"]) == summary["rounds"] > 0
    assert float(found["regret"]) == pytest.approx(summary["cumulative_regret"], abs=0.005)
    assert found["reference"] == {"TokenizedDecoding-v0": "UCT"}.get(
        env_id, "GreedyETC" if "MultiArmed" in env_id else "EOFUL"
    )


def test_action_mask_alias_copies_the_mask_under_tianshous_key() -> None:
    env = ActionMaskAlias(gym.make("TokenizedLinearBandit-v0"))
    observation, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert observation in env.observation_space
        np.testing.assert_array_equal(observation["mask"], observation["action_mask"])
        observation["mask"][:] = 0  # a copy: the env's own mask is untouched
        observation, _, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
        if terminated:
            observation, _ = env.reset()
    with pytest.raises(ValueError, match="action_mask"):
        ActionMaskAlias(env, key="action_mask")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["dqn", "ppo"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_tianshou_trainers_run_on_every_id_with_no_wrapper(
    load_script: Callable[[str], ModuleType], env_id: str, algorithm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tianshou", reason="Tianshou is not installed (pip install '.[tianshou]')")
    example = load_script("examples/tianshou_dqn.py")
    args = example.Args(env_id=env_id, algorithm=algorithm, steps=64, num_envs=2, mask=False)
    summary = example.main(args)  # the trainer raises MalformedBufferError on a NaN or a missing entry
    assert summary["rounds"] > 0 and np.isfinite(summary["mean_regret"])
    check_yardstick(capsys.readouterr().out, summary, env_id)


@pytest.mark.slow
def test_tianshou_dqn_plays_only_allowed_tokens_with_the_mask_alias(load_script: Callable[[str], ModuleType]) -> None:
    pytest.importorskip("tianshou", reason="Tianshou is not installed (pip install '.[tianshou]')")
    example = load_script("examples/tianshou_dqn.py")
    masked = example.main(example.Args(steps=256, num_envs=2, mask=True))
    unmasked = example.main(example.Args(steps=256, num_envs=2, mask=False))
    assert masked["rounds"] > 0 and masked["forced_eos"] == 0
    assert unmasked["forced_eos"] > 0  # without obs.mask Tianshou's DQN plays masked tokens


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_minari_records_every_step_info(env_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minari = pytest.importorskip("minari", reason="Minari is not installed (pip install '.[minari]')")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make(env_id, **env_kwargs(env_id)), record_infos=True)
    rng = np.random.default_rng(0)
    final_regrets = []
    observation, _ = env.reset(seed=0)
    for _ in range(3):
        terminated = False
        while not terminated:
            action = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            observation, _, terminated, _, info = env.step(action)
        final_regrets.append(info["regret"])
        observation, _ = env.reset()
    dataset_id = f"tbg/{env_id.split('-')[0].lower()}-v0"
    env.create_dataset(dataset_id=dataset_id, algorithm_name="random")
    episodes = list(minari.load_dataset(dataset_id).iterate_episodes())
    assert len(episodes) == 3
    for episode, regret in zip(episodes, final_regrets, strict=True):
        steps = len(episode.rewards)
        assert episode.infos["round_ended"].tolist() == [False] * steps + [True]  # reset's info first
        assert episode.infos["regret"][-1] == regret and not episode.infos["regret"][:-1].any()
        assert episode.infos["response"].shape == (steps + 1, env.unwrapped.problem.max_length)


def check_torchrl_wraps(vector_env: gym.vector.VectorEnv) -> None:
    """``GymWrapper`` + ``check_env_specs`` + a rollout of the first allowed token: rounds end and restart."""
    pytest.importorskip("torchrl", reason="TorchRL is not installed (pip install '.[torchrl]')")
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    env = GymWrapper(vector_env, categorical_action_encoding=True)  # SAME_STEP: also checks specs as it wraps
    check_env_specs(env)
    env.set_seed(0)
    max_length = vector_env.single_observation_space["length"].n - 1

    def first_allowed(tensordict: Any) -> Any:  # an allowed token per sub-env: the first one
        return tensordict.set("action", tensordict["action_mask"].argmax(-1))

    rollout = env.rollout(3 * max_length, policy=first_allowed, break_when_any_done=False)  # (N, T)
    done = rollout["next", "done"].squeeze(-1)
    rewards = rollout["next", "reward"].squeeze(-1)
    assert done.sum(dim=1).min() >= 2  # every sub-env ended rounds and was reset (by TorchRL or by itself)
    assert not rewards[~done].any()  # the reward comes at a round's last step only
    assert (rewards[done] != 0).any()


@pytest.mark.parametrize("mode", [AutoresetMode.DISABLED, AutoresetMode.SAME_STEP])  # what TorchRL accepts
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_torchrl_gym_wrapper_takes_the_native_vector_env(env_id: str, mode: AutoresetMode) -> None:
    check_torchrl_wraps(gym.make_vec(env_id, 3, autoreset_mode=mode, **env_kwargs(env_id)))


@pytest.mark.parametrize("env_id", [env_id for env_id in ENV_IDS if env_id not in LLM_ENVS])
def test_torchrl_gym_wrapper_takes_gymnasiums_sync_vector_env_under_same_step(env_id: str) -> None:
    mode = AutoresetMode.SAME_STEP
    check_torchrl_wraps(gym.make_vec(env_id, 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}))


def test_torchrl_one_hot_encoding_under_same_step_fails_on_any_discrete_observation_entry() -> None:
    """Why ``categorical_action_encoding=True`` is needed under SAME_STEP (TorchRL 0.11's ``terminal_obs_reader``).

    With one-hot encoding a ``Discrete`` entry of a ``Dict`` observation (our ``length`` and ``query_length``)
    becomes a ``OneHot`` spec, and the reader of ``info["final_obs"]`` fills ``("final", key)`` with
    ``spec.zero()`` (all zeros, not a one-hot) where no round ended and writes the raw integer where one did,
    so ``check_env_specs`` fails "at root". Any env with a ``Discrete`` entry fails the same way: a toy one
    does here; CartPole passes only because it has none. When this starts passing, TorchRL fixed its reader.
    """
    pytest.importorskip("torchrl", reason="TorchRL is not installed (pip install '.[torchrl]')")
    from torchrl.envs import GymWrapper

    class DiscreteEntry(gym.Env[dict[str, Any], int]):
        observation_space = gym.spaces.Dict({"count": gym.spaces.Discrete(4)})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
            self.count = 0
            return {"count": 0}, {}

        def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
            self.count += 1
            return {"count": self.count}, 1.0, self.count == 3, False, {}

    toy = gym.vector.SyncVectorEnv([DiscreteEntry] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    ours = gym.make_vec("TokenizedLinearBandit-v0", 2, autoreset_mode=AutoresetMode.SAME_STEP)
    for vector_env in (toy, ours):
        with pytest.raises(AssertionError, match="spec check failed at root"):
            GymWrapper(vector_env)  # one-hot encoding (the default)
        GymWrapper(vector_env, categorical_action_encoding=True)  # indices: fine


def test_cleanrl_style_ppo_example_never_plays_a_masked_token(
    load_script: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_script("examples/cleanrl_ppo.py")
    summary = example.main(example.Args(num_envs=4, num_steps=16, num_updates=2))
    assert summary["forced_eos"] == 0 and np.isfinite(summary["last_mean_reward"])
    check_yardstick(capsys.readouterr().out, summary, example.Args.env_id)


@pytest.mark.parametrize(
    ("env_id", "agent"), [("TokenizedLinearBandit-v0", "eoful"), ("TokenizedMultiArmedBanditRandomTable-v0", "random")]
)
def test_minari_example_reads_back_exactly_what_the_agent_played(
    load_script: Callable[[str], ModuleType],
    env_id: str,
    agent: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("minari", reason="Minari is not installed (pip install '.[minari]')")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    example = load_script("examples/minari_dataset.py")
    args = example.Args(env_id=env_id, agent=agent, rounds=12, seed=2)
    for _ in range(2):  # the second run replaces the first's dataset
        summary = example.main(args)
    assert summary["episodes"] == 12
    assert summary["recorded_cumulative_regret"] == pytest.approx(summary["played_cumulative_regret"], rel=1e-12)
    printed = capsys.readouterr().out
    found = YARDSTICK.match(printed.strip().splitlines()[-1])
    assert found is not None and int(found["rounds"]) == 12 and found["learner"] == f"{agent} (read back from Minari)"
    same_agent = found["random"] if agent == "random" else found["eoful"]
    assert found["regret"] == same_agent  # the reference agent replayed on the same seed played the same rounds


@pytest.mark.slow
def test_torchrl_ppo_example_trains_on_the_native_vector_env(
    load_script: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torchrl", reason="TorchRL is not installed (pip install '.[torchrl]')")
    example = load_script("examples/torchrl_ppo.py")
    summary = example.main(example.Args(num_envs=4, frames_per_batch=128, total_frames=256))
    assert summary["batches"] == 2 and np.isfinite(summary["last_mean_reward"])
    check_yardstick(capsys.readouterr().out, summary, example.Args.env_id)
