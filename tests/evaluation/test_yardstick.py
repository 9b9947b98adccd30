"""The yardstick every RL example ends with: Random and EOFUL over the learner's rounds and seeds."""

from __future__ import annotations

import gymnasium as gym
import pytest

import tokenized_bandit_gym  # noqa: F401  (registers the env ids)
from tokenized_bandit_gym.evaluation.run_online import run_online
from tokenized_bandit_gym.evaluation.yardstick import measure_yardstick, yardstick_line
from tokenized_bandit_gym.registration import make_agent

TLB_KWARGS = {"vocab_size": 4, "max_length": 3, "embedding_dim": 3}


def test_the_reference_regret_is_each_agents_online_regret_on_the_same_seeds() -> None:
    yardstick = measure_yardstick("TokenizedLinearBandit-v0", 12, [0, 3], TLB_KWARGS)
    assert list(yardstick.regret) == ["random", "eoful"] and yardstick.stand_ins == {}
    for name, regret in yardstick.regret.items():
        finals = [
            run_online(
                gym.make("TokenizedLinearBandit-v0", **TLB_KWARGS), make_agent(name), 12, seed=seed
            ).cumulative_regret[-1]
            for seed in (0, 3)
        ]
        assert regret == pytest.approx(sum(finals) / 2, rel=1e-12)


def test_greedy_etc_stands_in_for_eoful_where_eoful_cannot_play_and_the_line_says_so() -> None:
    yardstick = measure_yardstick("TokenizedMultiArmedBanditRandomTable-v0", 10, [1])
    assert yardstick.stand_ins == {"eoful": "greedy_etc"} and list(yardstick.regret) == ["random", "greedy_etc"]
    line = yardstick.line("PPO", 1.234)
    assert line.startswith("yardstick, TokenizedMultiArmedBanditRandomTable-v0, 10 rounds, seed 1: cumulative regret")
    assert "PPO 1.23 | Random " in line and "GreedyETC" in line and "for EOFUL, which cannot play" in line


def test_the_line_names_the_learner_and_both_references() -> None:
    line = yardstick_line("DQN (Tianshou)", 5.0, "TokenizedLinearBandit-v0", 6, [0, 1], TLB_KWARGS)
    assert "\n" not in line and "6 rounds, seeds [0, 1]" in line
    assert "DQN (Tianshou) 5.00 | Random " in line and " | EOFUL " in line


@pytest.mark.parametrize(("rounds", "seeds"), [(0, [0]), (True, [0]), (5, []), (5, [-1]), (5, [0.5])])
def test_bad_rounds_or_seeds_are_refused(rounds: object, seeds: list[object]) -> None:
    with pytest.raises(ValueError, match="rounds must be|seeds must be"):
        measure_yardstick("TokenizedLinearBandit-v0", rounds, seeds)  # type: ignore[arg-type]
