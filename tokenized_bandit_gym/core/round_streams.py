"""Per-round randomness: the query draw and the reward noise, from separate generators."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenized_bandit_gym.core.noise_model import NoiseModel


@dataclass
class RoundStreams:
    """Two independent generators seeded from one integer (common random numbers).

    The query of round t and its noise come from separate streams, both drawn when the round
    starts, so two agents run with the same seed see the same query and the same noise in every
    round whatever they do. The single env and the vector env both use this class.

    Attributes:
        query_rng: draws the query index of each round.
        noise_rng: draws the reward noise of each round.
    """

    query_rng: np.random.Generator
    noise_rng: np.random.Generator

    @classmethod
    def from_seed(cls, seed: int) -> RoundStreams:
        """Derive both streams from ``seed`` with ``np.random.SeedSequence.spawn``."""
        query_seq, noise_seq = np.random.SeedSequence(seed).spawn(2)
        return cls(np.random.Generator(np.random.PCG64(query_seq)), np.random.Generator(np.random.PCG64(noise_seq)))

    @classmethod
    def on_reset(cls, current: RoundStreams | None, seed: int | None, fallback: np.random.Generator) -> RoundStreams:
        """The streams an env uses after ``reset(seed=seed)``.

        A seed reseeds both streams; without one the current streams go on, and an env that has
        none yet seeds them from ``fallback`` (Gymnasium's ``np_random``).
        """
        if seed is not None:
            return cls.from_seed(seed)
        if current is None:
            return cls.from_seed(int(fallback.integers(2**63 - 1)))
        return current

    def draw(self, num_queries: int, noise: NoiseModel) -> tuple[int, float]:
        """Return the next round's query index in ``[0, num_queries)`` and its noise."""
        query = int(self.query_rng.integers(num_queries))
        return query, noise.sample(self.noise_rng)

    def draw_many(self, num_queries: int, noise: NoiseModel, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``count`` rounds at once: query indices ``(count,)`` int64 and noise ``(count,)``.

        Equal to ``count`` calls of :meth:`draw` (the two streams are separate, and NumPy's
        bounded integers, normals and uniforms come out the same one at a time or in a block),
        so the vector env's sub-env i replays exactly the rounds of a single env with its seed.
        """
        queries = self.query_rng.integers(num_queries, size=count).astype(np.int64)
        return queries, noise.sample_many(self.noise_rng, count)
