"""Smoke test: the SB3-vs-EOFUL example runs with a tiny budget and writes its plot."""

from __future__ import annotations


def test_example_runs_and_skips_unregistered_agents(load_script, tmp_path, capsys):
    example = load_script("examples/sb3_vs_eoful.py")
    plot = tmp_path / "regret.png"
    args = example.parse_args(
        [
            "--rounds",
            "6",
            "--tlb-agents",
            "ppo,maskable_ppo,dqn,no_such_agent,random",
            "--tmab-agents",
            "maskable_ppo,oracle_greedy",
            "--plot",
            str(plot),
        ]
    )
    results = example.main(args)
    printed = capsys.readouterr().out
    assert "skipping agent 'no_such_agent'" in printed
    assert sorted(results["TokenizedLinearBandit-v0"]) == ["dqn", "maskable_ppo", "ppo", "random"]
    assert all(result.rounds == 6 for by_agent in results.values() for result in by_agent.values())
    assert plot.stat().st_size > 0
    yardsticks = [line for line in printed.splitlines() if line.startswith("yardstick, ")]
    assert len(yardsticks) == 3 + 1  # every SB3 learner on the TLB, maskable_ppo on the TMAB
    assert all("| Random " in line for line in yardsticks)
    assert all("| EOFUL " in line for line in yardsticks if "TokenizedLinearBandit-v0" in line)
    assert "GreedyETC" in yardsticks[-1]  # EOFUL cannot play the TMAB


def test_example_arena_mode(load_script, tmp_path):
    example = load_script("examples/sb3_vs_eoful.py")
    args = example.parse_args(
        ["--rounds", "4", "--arena", "--tlb-agents", "ppo,random", "--tmab-agents", "", "--plot", ""]
    )
    results = example.main(args)
    assert list(results) == ["TokenizedLinearBandit-v0"]
