"""Where a step of the Figure-2 rows goes: the runs of ``examples/reproduce_regret.py`` as rows, profiled.

A random Llama with SmolLM2-135M-Instruct's shapes (30 layers, hidden 576, 9 heads, 3 KV heads, MLP 1536)
and the shipped stories260K tokenizer (so its vocabulary, 512 tokens, and no chat template) stands in for
the real model: the shapes set the cost of a step, the weights do not. ``--rows`` runs (agent x seed) are
the rows of one native vector env, as ``reproduce_regret.py --runs-per-forward`` plays them, with the
same agents (EOFUL recording Assumption 4's ratios, WrongTheta, Misaligned greedy). Prints the seconds a
round after a warm-up round and cProfile's top functions by own time::

    PYTHONPATH=. python benchmarks/llm_rows_step_profile.py --device cuda --rows 9 --rounds 4
    PYTHONPATH=. python benchmarks/llm_rows_step_profile.py --model smollm2-135m-instruct   # the real model
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

SMOLLM2_SHAPES = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 2048,
}


def random_smollm2_shaped(directory: Path) -> Path:
    """Save a random Llama of SmolLM2's shapes with the stories260K tokenizer to ``directory``; return it."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("stories260K"))
    config = LlamaConfig(vocab_size=len(tokenizer), tie_word_embeddings=True, **SMOLLM2_SHAPES)
    LlamaForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=9, help="runs as rows: a multiple of the 3 agents")
    parser.add_argument("--rounds", type=int, default=4, help="profiled rounds after one warm-up round")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--model",
        default="",
        help="a real model instead of the random one (smollm2-135m-instruct: its agents part as the real runs do, "
        "so the rows that share a prefix group as in the Figure-2 run)",
    )
    options = parser.parse_args(argv)
    from tokenized_bandit_gym.evaluation import alignment_regret

    directory = Path(tempfile.mkdtemp())
    try:
        model = options.model or str(random_smollm2_shaped(directory))
        seeds = ",".join(str(seed) for seed in range(options.rows // 3))
        args = alignment_regret.parse_options(
            ["--paper", "--model", model, "--device", options.device, "--seeds", seeds, "--out-dir", ""]
        )
        runs = [(name, seed) for seed in range(options.rows // 3) for name in alignment_regret.AGENT_LABELS]
        for rounds, profiled in ((1, False), (options.rounds, True)):
            args.rounds = rounds
            env = alignment_regret.make_env(args, len(runs))
            profiler = cProfile.Profile()
            start = time.perf_counter()
            if profiled:
                profiler.enable()
            alignment_regret.play_rows(env, runs, args)
            profiler.disable()
            seconds = time.perf_counter() - start
            print(
                f"{'profiled' if profiled else 'warm-up'}: {rounds} rounds of {len(runs)} rows, L = {args.max_length}, "
                f"top-{args.top_k}, {options.device}: {seconds / rounds:.3f} s a round, "
                f"{seconds / rounds / args.max_length * 1e3:.1f} ms a step"
            )
        pstats.Stats(profiler).sort_stats("tottime").print_stats(options.top)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
