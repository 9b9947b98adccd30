"""Per-round cost of T-POP's own decoding loop against our ``tpop`` agent on the pairwise alignment env.

T-POP (Qu et al., arXiv 2509.24696; code QuZikun/T-POP, ``model.py``, ``MABRewardGenerator.generate``)
decodes its two responses in lockstep, and at every token of a round its loop runs:

1. a full forward of the LLM over each arm's whole sequence (query + response so far), with no
   KV cache carried from the previous token (two forwards a token);
2. the union of the two arms' top-k next tokens as the candidates;
3. for each arm, every candidate prefix (query + response + candidate) decoded to text with the
   tokenizer and re-tokenized and re-embedded by a second model (``AutoModel`` of the same
   weights by default: mean-pooled last hidden states, L2-normalised), one padded forward of the
   candidates per arm;
4. the reward head on each candidate's embedding, the exploit arm's ``p + w sigma(r)``, the
   exploration arm's ``p + w (sigma(r) + nu ||g - g_greedy||_{V^-1})`` forced to differ, and the
   diagonal ``V^-1`` update.

:func:`tpop_round` re-implements that loop on the same model and query as the env (the LLM's own
transformers forward, the embedding model is the same weights' base model, the reward head is
linear, as in our agent: the gap measured is the LLM side). Our side is one pairwise episode of
``TokenizedAlignment-v0`` (``feedback="pairwise"``, ``fixed_length=True``: 2L steps, each one
batched forward of the k candidates over the prefix KV cache, whose running sum gives every
candidate's mean-pooled embedding) played by :class:`~tokenized_bandit_gym.agents.tpop.TPOP`,
its Bradley-Terry refit included.

Timed interleaved (each repeat runs one round of each, in turn); medians over repeats, the ratio
the median of the per-repeat ratios with its range. Timings on a shared, loaded machine: quote the
ratio, not the milliseconds.

Run: ``PYTHONPATH=. python benchmarks/tpop_loop.py`` (``--help`` for the options).
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.script_arguments import parse_dataclass_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUERY = "Once upon a time, there was a little girl named Lily."


@dataclass
class Args:
    """Benchmark options."""

    model: str = "stories260K"
    """stories260K (shipped) or smollm2-135m-instruct (the packaged real instruct model)"""
    max_length: int = 30
    """L, tokens per response (the paper's fixed length)"""
    top_k: int = 15
    """k, candidates per step (T-POP's pre_screen_beam_width)"""
    repeats: int = 3
    """interleaved repeats (each: one T-POP round, one round of our agent on the env)"""
    threads: int = 1
    """torch CPU threads (1 avoids oversubscription on a shared 2-core machine)"""
    device: str = "cpu"
    """torch device"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Args from the command line (one ``--field-name`` flag per field)."""
    return parse_dataclass_arguments(Args, __doc__, argv)


class TPOPLoop:
    """T-POP's decoding loop as its code runs it, on ``model`` with a linear reward head of the embedding width.

    Args:
        model: the causal LM (its own transformers forward, no cache).
        tokenizer: its tokenizer (copied: the pad token is set to EOS, as T-POP does).
        top_k: candidates per arm and step.
        weight: T-POP's reward weight ``w``.
        nu: T-POP's exploration weight.
        lambda_: ``V^-1 = I / lambda`` at the start.
    """

    def __init__(
        self, model: Any, tokenizer: Any, top_k: int, weight: float = 1.0, nu: float = 1.0, lambda_: float = 1.0
    ) -> None:
        self.model = model
        self.embedder = model.base_model  # T-POP's BLLM: AutoModel of the LLM's own path by default
        self.tokenizer = copy.deepcopy(tokenizer)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.top_k = top_k
        self.weight, self.nu = weight, nu
        hidden = model.config.hidden_size
        self.head = torch.zeros(hidden + 1)  # (H + 1,) linear reward head [w : b]
        self.inverse_diagonal = torch.full((hidden + 1,), 1.0 / lambda_)  # (H + 1,) T-POP's diagonal V^-1

    def embed(self, texts: list[str]) -> torch.Tensor:
        """T-POP's ``get_sentence_embedding``: re-tokenize, one padded forward, masked mean-pool, L2-normalise."""
        encoded = self.tokenizer(texts, padding=True, return_tensors="pt")
        hidden = self.embedder(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"])
        states = hidden.last_hidden_state  # (n, T, H)
        mask = encoded["attention_mask"].unsqueeze(-1).to(states.dtype)  # (n, T, 1)
        pooled = (states * mask).sum(1) / mask.sum(1).clamp_min(1e-9)  # (n, H)
        return torch.nn.functional.normalize(pooled, dim=1)

    @torch.no_grad()
    def round(self, query_ids: list[int], max_length: int) -> tuple[list[int], list[int]]:
        """One T-POP round: two responses of ``max_length`` tokens decoded in lockstep; returns their new ids."""
        arms = [torch.tensor([query_ids]), torch.tensor([query_ids])]  # (1, T) each
        for _ in range(max_length):
            logits = [self.model(input_ids=arm, attention_mask=torch.ones_like(arm)).logits[:, -1] for arm in arms]
            candidates = torch.unique(torch.cat([logit.topk(self.top_k, dim=-1).indices[0] for logit in logits]))
            probabilities = [logit.softmax(-1)[0, candidates] for logit in logits]  # (U,) each
            features = []
            for arm in arms:
                sequences = torch.cat([arm.repeat(len(candidates), 1), candidates[:, None]], dim=1)  # (U, T + 1)
                texts = self.tokenizer.batch_decode(sequences, skip_special_tokens=True)
                embedded = self.embed(texts)  # (U, H)
                features.append(torch.cat([embedded, torch.ones(len(candidates), 1)], dim=1))  # (U, H + 1) g = [e : 1]
            rewards = [torch.sigmoid(feature @ self.head) for feature in features]  # (U,) each
            exploit = int(torch.argmax(probabilities[0] + self.weight * rewards[0]))
            greedy_gradient = features[0][exploit]  # (H + 1,)
            bonus = (((features[1] - greedy_gradient) ** 2) * self.inverse_diagonal).sum(1).clamp_min(1e-16).sqrt()
            scores = probabilities[1] + self.weight * (rewards[1] + self.nu * bonus)  # (U,)
            explore = int(torch.argmax(scores))
            if candidates[explore] == candidates[exploit]:  # forced to differ
                scores[explore] = -torch.inf
                explore = int(torch.argmax(scores))
            difference = features[0][exploit] - features[1][explore]
            self.inverse_diagonal = (self.inverse_diagonal + difference**2).clamp_min(1e-16)  # as T-POP's code
            arms = [
                torch.cat([arms[0], candidates[exploit].view(1, 1)], dim=1),
                torch.cat([arms[1], candidates[explore].view(1, 1)], dim=1),
            ]
        start = len(query_ids)
        return arms[0][0, start:].tolist(), arms[1][0, start:].tolist()


def play_env_round(env: Any, agent: Any, seed: int | None) -> dict[str, Any]:
    """One pairwise round of ``env`` played and learned by ``agent``; the last info."""
    observation, info = env.reset(seed=seed)
    terminated, reward = False, 0.0
    while not terminated:
        observation, reward, terminated, _, info = env.step(agent.act(observation, info))
    agent.update(observation, float(reward), info)
    return info


def benchmark(args: Args) -> str:
    """Time T-POP's loop and our agent on the env, interleaved; the markdown table."""
    from tokenized_bandit_gym.agents.tpop import TPOP
    from tokenized_bandit_gym.envs.tokenized_alignment_env import TokenizedAlignmentEnv
    from tokenized_bandit_gym.llm.load_language_model import load_language_model
    from tokenized_bandit_gym.task import Task

    model, tokenizer = load_language_model(args.model, device=args.device)
    env = TokenizedAlignmentEnv(
        model=model,
        tokenizer=tokenizer,
        queries=[QUERY],
        max_length=args.max_length,
        top_k=args.top_k,
        fixed_length=True,
        feedback="pairwise",
        noise_scale=0.0,
    )
    problem = env.problem
    query_ids = problem.query_tokens[0, : int(problem.query_lengths[0])].tolist()  # what the env conditions on
    agent = TPOP()
    agent.reset(Task.from_env(env, args.repeats + 1))
    loop = TPOPLoop(model, tokenizer, args.top_k)
    play_env_round(env, agent, seed=0)  # warm-up: the query's prefill, the oracle's benchmark
    loop.round(query_ids, 1)
    ours, theirs = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        play_env_round(env, agent, seed=None)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        loop.round(query_ids, args.max_length)
        theirs.append(time.perf_counter() - start)
    ratios = np.array(theirs) / np.array(ours)
    per_token = 1000 / (2 * args.max_length)  # ms per response token, from seconds per round
    return "\n".join(
        [
            f"model {args.model}, L = {args.max_length}, k = {args.top_k}, {args.repeats} interleaved repeats, "
            f"{args.threads} torch thread(s), {args.device}",
            "",
            "| method | ms per round (2 responses of L tokens) | ms per response token | ratio |",
            "|---|---:|---:|---|",
            f"| our tpop agent on the pairwise env | {1000 * np.median(ours):.1f} | "
            f"{per_token * np.median(ours):.2f} | 1 |",
            f"| T-POP's loop (no cache, re-decode + re-embed) | {1000 * np.median(theirs):.1f} | "
            f"{per_token * np.median(theirs):.2f} | **{np.median(ratios):.1f}x** "
            f"(range {ratios.min():.1f}-{ratios.max():.1f}) |",
        ]
    )


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark with the command line's options; print and return the table."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    table = benchmark(args)
    print(table)
    return table


if __name__ == "__main__":
    main()
