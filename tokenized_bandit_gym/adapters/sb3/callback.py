"""A Stable-Baselines3 callback that logs cumulative regret (stdout, TensorBoard, CSV via SB3's logger).

And :func:`log_nowhere_unless_asked`, which keeps a model that logs nothing from creating an empty log folder.
"""

from __future__ import annotations

from typing import TypeVar

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger

Model = TypeVar("Model", bound=BaseAlgorithm)


def log_nowhere_unless_asked(model: Model) -> Model:
    """Give ``model`` a logger that writes nowhere when it was asked for no logs (``verbose=0``, no TensorBoard).

    Without a logger set, every ``learn()`` calls SB3's ``configure_logger``, which creates an empty
    ``tempfile.gettempdir()/SB3-<date>`` folder even when nothing is logged. A logger set with ``set_logger`` is
    kept by every later ``learn()`` (SB3's ``_setup_learn`` configures one only while none is set). A model that
    logs (``verbose >= 1`` or a ``tensorboard_log``) is left as SB3 made it.

    Args:
        model: an SB3 model (any algorithm).

    Returns:
        ``model``.
    """
    if not model.verbose and model.tensorboard_log is None:
        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


class CumulativeRegretCallback(BaseCallback):
    """Count the regret of every round an SB3 model plays and log it through ``model.logger``.

    Every finished episode's ``info`` from a tokenized bandit env holds ``regret``,
    ``utility`` and ``optimal_utility`` (docs/ENVIRONMENTS.md, "The info entries and regret");
    this callback reads them from
    ``self.locals["infos"]`` at each step (every env of a ``VecEnv`` counts), keeps the running
    sums, and records ``regret/cumulative``, ``regret/mean``, ``regret/last`` and
    ``regret/rounds`` into SB3's logger, so they appear wherever the model logs (stdout with
    ``verbose=1``, TensorBoard with ``tensorboard_log=...``) at SB3's own dump points. With
    ``log_every_rounds`` set, it also dumps the logger itself every that many rounds.

    Args:
        log_every_rounds: dump the logger every this many rounds (None: leave dumping to SB3).
        verbose: 1 prints a line at each own dump.

    Attributes:
        rounds: rounds finished so far.
        cumulative_regret: sum of their regrets.
        regrets: each round's regret, in order.
    """

    def __init__(self, log_every_rounds: int | None = None, verbose: int = 0) -> None:
        super().__init__(verbose)
        if log_every_rounds is not None and (
            isinstance(log_every_rounds, bool) or not isinstance(log_every_rounds, int) or log_every_rounds < 1
        ):
            raise ValueError(f"log_every_rounds must be None or a positive integer, got {log_every_rounds!r}")
        self.log_every_rounds = log_every_rounds
        self.rounds = 0
        self.cumulative_regret = 0.0
        self.cumulative_utility = 0.0
        self.regrets: list[float] = []

    def _on_step(self) -> bool:
        """Add the regret of every episode that ended at this step."""
        for info in self.locals.get("infos", ()):
            if not info.get("round_ended", False):  # every step's info has "regret": 0 until the round ends
                continue
            regret = float(info["regret"])
            self.rounds += 1
            self.cumulative_regret += regret
            self.cumulative_utility += float(info["utility"])
            self.regrets.append(regret)
            self.logger.record("regret/cumulative", self.cumulative_regret)
            self.logger.record("regret/mean", self.cumulative_regret / self.rounds)
            self.logger.record("regret/last", regret)
            self.logger.record("regret/rounds", self.rounds)
            if self.log_every_rounds is not None and self.rounds % self.log_every_rounds == 0:
                if self.verbose >= 1:
                    print(f"round {self.rounds}: cumulative regret {self.cumulative_regret:.4f}")
                self.logger.dump(self.num_timesteps)
        return True
