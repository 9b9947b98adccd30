"""The sequential loop (``gym.make`` + ``run_online`` + ``agents.make``) against plain NumPy loops (issue 16).

Each reference loop below is written independently of the package: it reads only the instance's
parameters (``theta``, the feature parameters and the query pool, from ``env.unwrapped.problem``)
and reimplements the dynamics, the exact optimum (a dynamic program over the response length), the
query/noise streams and the agent in NumPy. ``tests/benchmarks/test_sequential_reference.py`` checks that both
loops give the same per-round regret at small T; this script times them side by side, interleaved,
best of several repeats, on one thread, and prints the per-round costs and their ratio.

Run: ``python benchmarks/sequential_vs_numpy.py [--rounds 300] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np


# ---------------------------------------------------------------------- the env family (TLB / TMAB)
class ReferenceInstance:
    """The discounted family from its parameters: ``e(x, y:tau) = alpha e(x, y) + c g_tau unit(a_tau + q_x + p_j)``."""

    def __init__(self, problem: object, offset: float = 0.0, gain: float = 1.0) -> None:
        base = getattr(problem, "base", problem)  # TMAB: u = 0.5 + 0.5 u_base
        self.offset, self.gain = offset, gain
        self.alpha, self.c = float(base.alpha), float(base.scale)
        self.theta = base.theta.numpy()  # (d,)
        self.n, self.length, self.eos = base.vocab_size, base.max_length, base.eos_token_id
        a, q, p = base.token_vectors.numpy(), base.query_vectors.numpy(), base.position_vectors.numpy()
        raw = a[None, None] + q[:, None, None] + p[None, :, None]  # (Q, L, n, d)
        unit = raw / np.maximum(np.sqrt((raw * raw).sum(-1, keepdims=True)), 1e-12)
        self.phi = self.c * (unit * base.token_gains.numpy()[:, None])  # (Q, L, n, d) c * phi
        self.num_queries = self.phi.shape[0]
        self._optima: np.ndarray | None = None  # (Q,), on first use (the env computes its optima lazily too)

    @property
    def optimum(self) -> np.ndarray:
        """The best utility per query ``(Q,)``."""
        if self._optima is None:
            self._optima = np.array([self._optimum(x) for x in range(self.num_queries)])
        return self._optima

    def _optimum(self, query: int) -> float:
        """Best utility over complete responses: for each length m, the best non-EOS token per position."""
        scores = self.phi[query] @ self.theta  # (L, n) <theta, c phi(x, tau, j)>
        body = np.delete(scores, self.eos, axis=1).max(axis=1)  # (L,)
        best = max(
            sum(self.alpha ** (m - j) * body[j - 1] for j in range(1, m)) + scores[m - 1, self.eos]
            for m in range(1, self.length + 1)
        )
        return self.offset + self.gain * best

    def streams(self, seed: int) -> tuple[np.random.Generator, np.random.Generator]:
        """Query and noise generators: two children of ``SeedSequence(seed)``."""
        query_seq, noise_seq = np.random.SeedSequence(seed).spawn(2)
        return np.random.Generator(np.random.PCG64(query_seq)), np.random.Generator(np.random.PCG64(noise_seq))


Chooser = Callable[[np.ndarray, np.ndarray, int], int]  # (candidate embeddings (n, d) f32, mask (n,), length) -> token


def play(
    instance: ReferenceInstance,
    rounds: int,
    seed: int,
    choose: Chooser,
    learn: Callable[[np.ndarray, float], None],
    noise_scale: float = 0.1,
    start: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Play ``rounds`` rounds; returns the regret per round ``(T,)``.

    ``start``, if given, is told each round's query before its first token (agents that plan ahead).
    """
    query_rng, noise_rng = instance.streams(seed)
    regret = np.empty(rounds)
    everything, only_eos = np.ones(instance.n, bool), np.arange(instance.n) == instance.eos
    for t in range(rounds):
        x = int(query_rng.integers(instance.num_queries))
        noise = float(noise_rng.normal(0.0, 1.0) * noise_scale)
        if start is not None:
            start(x)
        e = np.zeros(instance.theta.shape[0])
        for j in range(instance.length):
            candidates = instance.alpha * e + instance.phi[x, j]  # (n, d)
            token = choose(candidates.astype(np.float32), only_eos if j == instance.length - 1 else everything, j)
            e = candidates[token]
            if token == instance.eos:
                break
        utility = instance.offset + instance.gain * float(e @ instance.theta)
        regret[t] = instance.optimum[x] - utility
        learn(e.astype(np.float32), utility + noise)
    return regret


# ---------------------------------------------------------------------- the agents
def random_loop(instance: ReferenceInstance, rounds: int, seed: int) -> np.ndarray:
    """Uniform over the allowed tokens (``Generator.choice`` of the agent's own stream)."""
    rng = np.random.default_rng(seed)
    return play(instance, rounds, seed, lambda e, mask, j: int(rng.choice(np.flatnonzero(mask))), lambda y, r: None)


class RidgeState:
    """``Sigma``, ``Sigma^-1`` (Sherman-Morrison) and ``b = sum r y``; ``theta_hat = Sigma^-1 b``."""

    def __init__(self, d: int, length: int, sigma: float = 0.1, delta: float = 0.05) -> None:
        self.inverse, self.b, self.theta_hat, self.t = np.eye(d), np.zeros(d), np.zeros(d), 0
        self.d, self.length, self.sigma, self.delta = d, length, sigma, delta

    def beta(self) -> float:
        """``beta_t = sigma^2 (2 + 4 d log(1 + t L / d) + 8 log(4 / delta))`` for the current round ``t``."""
        t, d = self.t + 1, self.d
        return self.sigma**2 * (2 + 4 * d * math.log(1 + t * self.length / d) + 8 * math.log(4 / self.delta))

    def learn(self, y: np.ndarray, reward: float) -> None:
        """Sherman-Morrison: ``Sigma^-1 -= (Sigma^-1 y)(Sigma^-1 y)^T / (1 + y^T Sigma^-1 y)``."""
        y = y.astype(np.float64)
        u = self.inverse @ y
        self.inverse -= np.outer(u, u) / (1.0 + y @ u)
        self.b += reward * y
        self.theta_hat = self.inverse @ self.b
        self.t += 1


def eoful_loop(instance: ReferenceInstance, rounds: int, seed: int) -> np.ndarray:
    """EOFUL: the allowed token maximising ``<theta_hat, e> + sqrt(beta_t) ||e||_{Sigma^-1}`` (0 radius in round 1)."""
    ridge = RidgeState(instance.theta.shape[0], instance.length)

    def choose(e: np.ndarray, mask: np.ndarray, j: int) -> int:
        e = e.astype(np.float64)
        scores = e @ ridge.theta_hat
        if ridge.t > 0:
            scores = scores + math.sqrt(ridge.beta()) * np.sqrt(np.maximum(((e @ ridge.inverse) * e).sum(1), 0.0))
        return int(np.argmax(np.where(mask, scores, -np.inf)))

    return play(instance, rounds, seed, choose, ridge.learn)


def lin_ts_loop(
    instance: ReferenceInstance, rounds: int, seed: int, standard_normal: Callable[[int], np.ndarray] | None = None
) -> np.ndarray:
    """Linear Thompson sampling: ``theta~ = theta_hat + 0.1 chol(Sigma^-1) z`` once per round, greedy on it."""
    ridge = RidgeState(instance.theta.shape[0], instance.length)
    normal = standard_normal or np.random.default_rng(seed).standard_normal
    sample: list[np.ndarray] = []

    def choose(e: np.ndarray, mask: np.ndarray, j: int) -> int:
        if j == 0:
            factor = np.linalg.cholesky((ridge.inverse + ridge.inverse.T) / 2)
            sample[:] = [ridge.theta_hat + 0.1 * (factor @ normal(ridge.d))]
        return int(np.argmax(np.where(mask, e.astype(np.float64) @ sample[0], -np.inf)))

    return play(instance, rounds, seed, choose, ridge.learn)


def greedy_etc_loop(instance: ReferenceInstance, rounds: int, seed: int) -> np.ndarray:
    """GreedyETC (Algorithm 2): explore each ``y:t:EOS`` N times per level, commit to the best mean."""
    explore = max(1, math.ceil(rounds ** (2 / 3) * math.log(rounds) ** (1 / 3)))
    prefix: list[int] = []
    state = {"arm": 0, "sums": np.zeros(instance.n), "counts": np.zeros(instance.n), "done": instance.length == 1}

    def choose(e: np.ndarray, mask: np.ndarray, j: int) -> int:
        if j < len(prefix):
            return prefix[j]
        if j == len(prefix) and not state["done"]:
            return int(np.flatnonzero(mask)[state["arm"]])
        return instance.eos

    def learn(y: np.ndarray, reward: float) -> None:
        if state["done"]:
            return
        arm = state["arm"]
        state["sums"][arm] += reward
        state["counts"][arm] += 1
        if state["counts"][arm] < explore:
            return
        state["arm"] += 1
        if state["arm"] < instance.n:  # every token is allowed below position L
            return
        prefix.append(int(np.argmax(state["sums"] / state["counts"])))
        if prefix[-1] == instance.eos or len(prefix) == instance.length - 1:
            state["done"] = True
        state.update(arm=0, sums=np.zeros(instance.n), counts=np.zeros(instance.n))

    return play(instance, rounds, seed, choose, learn)


REFERENCES = {
    "eoful": eoful_loop,
    "tokenized_lin_ts": lin_ts_loop,
    "random": random_loop,
    "greedy_etc": greedy_etc_loop,
}
CASES = (  # (env id, agent name)
    ("TokenizedLinearBandit-v0", "eoful"),
    ("TokenizedLinearBandit-v0", "tokenized_lin_ts"),
    ("TokenizedLinearBandit-v0", "random"),
    ("TokenizedMultiArmedBandit-v0", "greedy_etc"),
)


def reference_instance(env: object) -> ReferenceInstance:
    """The NumPy instance of an env's problem (TMAB: ``0.5 + 0.5 u_base``)."""
    problem = env.unwrapped.problem  # type: ignore[attr-defined]
    multi_armed = hasattr(problem, "base")
    return ReferenceInstance(problem, offset=0.5 if multi_armed else 0.0, gain=0.5 if multi_armed else 1.0)


def main(argv: list[str] | None = None) -> dict[tuple[str, str], tuple[float, float]]:
    """Time every case; returns ``(env id, agent) -> (package, numpy)`` seconds per round (best of the repeats)."""
    import gymnasium as gym
    import torch

    import tokenized_bandit_gym  # noqa: F401  (registers the ids)
    from tokenized_bandit_gym import agents
    from tokenized_bandit_gym.evaluation import run_online

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    best = {(case, side): math.inf for case in CASES for side in ("package", "numpy")}
    for repeat in range(args.repeats):
        for case in CASES:
            env_id, name = case
            # A fresh env and instance per run (built untimed): nothing the env memoises carries over.
            env = gym.make(env_id)
            instance = reference_instance(env)
            for side in ("package", "numpy") if repeat % 2 == 0 else ("numpy", "package"):
                start = time.perf_counter()
                if side == "package":
                    run_online(env, agents.make(name), args.rounds, seed=repeat)
                else:
                    REFERENCES[name](instance, args.rounds, repeat)
                best[case, side] = min(best[case, side], (time.perf_counter() - start) / args.rounds)
    print(f"{'env':<30} {'agent':<18} {'package ms/round':>17} {'numpy ms/round':>15} {'ratio':>7}")
    for case in CASES:
        package, reference = best[case, "package"] * 1e3, best[case, "numpy"] * 1e3
        print(f"{case[0]:<30} {case[1]:<18} {package:>17.3f} {reference:>15.3f} {package / reference:>6.1f}x")
    return {case: (best[case, "package"], best[case, "numpy"]) for case in CASES}


if __name__ == "__main__":
    main()
