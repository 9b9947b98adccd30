"""The frozen configuration of a synthetic env: the instance's sizes, its family's dataclass and how rounds are played.

One value holds what a synthetic env is made of (as nanoGPT's ``GPTConfig`` and gymnax's
``EnvParams`` do): every default is written once, in the config class of the env kind, and
``gym.make``'s keywords become a config in one place (:meth:`SyntheticBanditConfig.from_keywords`).
The single env, the native vector env (``gym.make_vec(id, N, config=...)``) and pickling (the
env keeps its :attr:`~tokenized_bandit_gym.envs.TokenizedBanditEnv.config`) all take it.

>>> import gymnasium as gym
>>> import tokenized_bandit_gym
>>> from tokenized_bandit_gym.core.problem_factory import MeanPool
>>> from tokenized_bandit_gym.envs.synthetic_config import TokenizedLinearBanditConfig
>>> config = TokenizedLinearBanditConfig(vocab_size=8, family=MeanPool(theta_norm=0.5))
>>> env = gym.make("TokenizedLinearBandit-v0", config=config)
>>> env.unwrapped.config == TokenizedLinearBanditConfig.from_keywords(vocab_size=8, family="meanpool", theta_norm=0.5)
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch

from tokenized_bandit_gym.core.instance_sizes import InstanceSizes
from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.problem_factory import (
    FAMILIES,
    Discounted,
    Family,
    FamilyKind,
    build_linear_problem,
    build_multi_armed_problem,
    families_playing,
    family_name,
    family_option_names,
    with_options,
)
from tokenized_bandit_gym.core.tokenized_problem import TokenizedProblem
from tokenized_bandit_gym.core.validation import check_choice
from tokenized_bandit_gym.envs.pairwise_feedback import FeedbackChannel
from tokenized_bandit_gym.suggestions import did_you_mean

_Config = TypeVar("_Config", bound="SyntheticBanditConfig")


@dataclass(frozen=True)
class SyntheticBanditConfig:
    """What every synthetic env kind is made of; a kind's subclass sets its defaults and its own fields.

    Attributes:
        vocab_size: n, EOS included (EOS is id ``n - 1``).
        max_length: L.
        embedding_dim: d (of the hidden utility's features on the TMAB, never observed there).
        family: the family's own dataclass (a :class:`~tokenized_bandit_gym.core.problem_factory.Family`
            registered in ``FAMILIES`` that plays this kind), holding its options.
        instance_seed: fixes the instance.
        fixed_length: EOS only at position L.
        device: torch device of the instance.
        dtype: dtype of utilities (``"float32"``, ``"float64"`` or a torch dtype).
        noise: ``"gaussian"`` or ``"bounded"``.
        noise_scale: sigma >= 0; 0 for noise-free rewards.
        strict_actions: raise on a masked action instead of the forced EOS at position L.
    """

    family_kind: ClassVar[FamilyKind]

    vocab_size: int = 16
    max_length: int = 8
    embedding_dim: int = 16
    family: Family = field(default_factory=Discounted)
    instance_seed: int = 0
    fixed_length: bool = False
    device: str | torch.device = "cpu"
    dtype: str | torch.dtype = "float64"
    noise: str = NoiseModel.kind
    noise_scale: float = NoiseModel.scale
    strict_actions: bool = False

    def __post_init__(self) -> None:
        if not hasattr(type(self), "family_kind"):
            raise TypeError(
                "SyntheticBanditConfig is the kinds' base: use TokenizedLinearBanditConfig or "
                "TokenizedMultiArmedBanditConfig"
            )
        if not isinstance(self.family, Family):
            raise TypeError(
                f"family must be a Family dataclass (or a name, through from_keywords), got {self.family!r}"
            )
        check_choice("family", family_name(self.family), families_playing(self.family_kind))

    @classmethod
    def from_keywords(
        cls: type[_Config], config: _Config | None = None, /, family: str | None = None, **keywords: Any
    ) -> _Config:
        """The config ``gym.make``'s keywords describe: the one place an env turns its keywords into a config.

        Args:
            config: the config the keywords change (None: the kind's defaults).
            family: a family's name in ``FAMILIES`` that plays this kind (None: ``config``'s
                family, with its options). A family other than ``config``'s starts from its defaults.
            **keywords: the config's other fields, and the family's own options (``alpha``,
                ``theta_norm``, ...; None keeps the family's value).

        Raises:
            ValueError: ``family`` is not a family of this kind, or an option set for a family
                that does not take it (the message names the families that do).
            TypeError: a keyword that is neither a field nor an option of a family of this kind (the
                message suggests the closest).
        """
        base = cls() if config is None else config
        if not isinstance(base, cls):
            raise TypeError(f"config must be a {cls.__name__}, got {type(base).__name__}")
        chosen = base.family
        if family is not None:
            check_choice("family", family, families_playing(cls.family_kind))
            if type(chosen) is not FAMILIES[family]:
                chosen = FAMILIES[family]()
        accepted = cls.keyword_defaults()
        for name in keywords:
            if name not in accepted:
                raise TypeError(
                    f"{cls.__name__} got an unexpected keyword {name!r}{did_you_mean(name, accepted)}; "
                    f"it takes {sorted(accepted)} (and config)"
                )
        fields = cls.field_names()
        changes = {name: value for name, value in keywords.items() if name in fields}
        options = {name: value for name, value in keywords.items() if name not in fields}
        chosen = with_options(chosen, options)
        if not changes and chosen is base.family:
            return base
        return dataclasses.replace(base, family=chosen, **changes)

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The config's fields but ``family`` (``gym.make`` takes them by name)."""
        return frozenset(item.name for item in dataclasses.fields(cls) if item.name != "family")

    @classmethod
    def keyword_defaults(cls) -> dict[str, object]:
        """Every ``gym.make`` keyword of this kind with its default (a family option's: None, the family's own).

        The config's fields in order (``family`` as its name), then every option of the families
        that play this kind.
        """
        defaults: dict[str, object] = {}
        for item in dataclasses.fields(cls):
            if item.name == "family":
                defaults[item.name] = family_name(cls().family)
            else:
                defaults[item.name] = item.default
        plays = set(families_playing(cls.family_kind))
        for name, options in family_option_names().items():
            for option in options if name in plays else ():
                defaults.setdefault(option, None)
        return defaults

    def instance_sizes(self) -> InstanceSizes:
        """The :class:`~tokenized_bandit_gym.core.instance_sizes.InstanceSizes` the family is built at."""
        names = {item.name for item in dataclasses.fields(InstanceSizes)}
        present = {name: getattr(self, name) for name in names if hasattr(self, name)}
        return InstanceSizes(**{"num_queries": 1, "query_length": 1, **present})

    def feedback_channel(self) -> FeedbackChannel:
        """The feedback channel: scalar rewards (a kind with pairwise feedback has its fields)."""
        return FeedbackChannel()

    def build_problem(self) -> TokenizedProblem:
        """The instance this config describes (checked: sizes, device, dtype, memory, the family's values)."""
        raise NotImplementedError(f"{type(self).__name__} is not an env kind's config")


@dataclass(frozen=True)
class TokenizedLinearBanditConfig(SyntheticBanditConfig):
    """The configuration of ``TokenizedLinearBandit-v0`` and its family ids (the TLB).

    Attributes (besides :class:`SyntheticBanditConfig`'s):
        num_queries: Q, the query pool's size.
        query_length: the longest query.
        feedback: ``"scalar"`` or ``"pairwise"`` (two responses a round, reward a comparison).
        preference_temperature: tau > 0 of the Bradley-Terry comparison (pairwise).
    """

    family_kind: ClassVar[FamilyKind] = "linear"

    num_queries: int = 32
    query_length: int = 4
    feedback: str = FeedbackChannel.kind
    preference_temperature: float = FeedbackChannel.temperature

    def feedback_channel(self) -> FeedbackChannel:
        """The validated feedback channel of ``feedback`` and ``preference_temperature``."""
        return FeedbackChannel(self.feedback, self.preference_temperature)

    def build_problem(self) -> TokenizedProblem:
        """The TLB instance (:func:`~tokenized_bandit_gym.core.problem_factory.build_linear_problem`)."""
        return build_linear_problem(self.family, self.instance_sizes())


@dataclass(frozen=True)
class TokenizedMultiArmedBanditConfig(SyntheticBanditConfig):
    """The configuration of ``TokenizedMultiArmedBandit-v0`` and its family ids (the TMAB): one fixed query."""

    family_kind: ClassVar[FamilyKind] = "multi_armed"

    vocab_size: int = 8
    max_length: int = 6
    embedding_dim: int = 8

    def build_problem(self) -> TokenizedProblem:
        """The TMAB instance (:func:`~tokenized_bandit_gym.core.problem_factory.build_multi_armed_problem`)."""
        return build_multi_armed_problem(self.family, self.instance_sizes())
