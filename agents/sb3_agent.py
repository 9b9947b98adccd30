"""Stable-Baselines3 algorithms as online agents: they learn inside ``run_online``, regret from round 1."""

from __future__ import annotations

import functools
import importlib
import queue
import random
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tokenized_bandit_gym.adapters.sb3.callback import CumulativeRegretCallback, log_nowhere_unless_asked
from tokenized_bandit_gym.adapters.sb3.observation import TokenObservationEncoder
from tokenized_bandit_gym.adapters.sb3.proxy_env import ProxyClosed, SB3ProxyEnv
from tokenized_bandit_gym.core.validation import check_int, check_real
from tokenized_bandit_gym.task import Task

# algo name -> (module, class)
ALGORITHMS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO"),
    "recurrent_ppo": ("sb3_contrib", "RecurrentPPO"),
}

# Small defaults so a few hundred rounds take seconds on a CPU. gamma = 1: the reward comes at the
# end of the round and the bandit objective is that reward, so discounting would only push the
# policy towards shorter responses.
_PPO_DEFAULTS: dict[str, Any] = {
    "n_steps": 32,  # one update every 32 tokens (a few rounds): learning starts early
    "batch_size": 32,
    "n_epochs": 8,
    "learning_rate": 3e-3,
    "gamma": 1.0,
    "gae_lambda": 0.95,
    "ent_coef": 0.01,
}
DEFAULT_HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    "ppo": dict(_PPO_DEFAULTS),
    "maskable_ppo": dict(_PPO_DEFAULTS),
    "recurrent_ppo": dict(_PPO_DEFAULTS),
    "a2c": {"n_steps": 8, "learning_rate": 1e-3, "gamma": 1.0, "ent_coef": 0.01},
    "dqn": {
        "learning_starts": 64,  # random tokens first; they count as played rounds
        "buffer_size": 10_000,
        "batch_size": 32,
        "train_freq": 1,
        "target_update_interval": 64,
        "exploration_fraction": 0.3,  # of horizon * max_length steps
        "exploration_final_eps": 0.02,
        "learning_rate": 1e-3,
        "gamma": 1.0,
    },
}
DEFAULT_POLICY_KWARGS: dict[str, dict[str, Any]] = {
    "ppo": {"net_arch": [64, 64]},
    "maskable_ppo": {"net_arch": [64, 64]},
    "a2c": {"net_arch": [64, 64]},
    "dqn": {"net_arch": [64, 64]},
    "recurrent_ppo": {"net_arch": [64], "lstm_hidden_size": 32},
}

RandomState = tuple[Any, ...]

# Checks of the numeric SB3 hyperparameters (name -> (kind, low, high)), so a bad value fails when
# the agent is built (leaderboard spec validation) with a message naming it, not inside SB3's
# learner thread (where some checks are asserts that ``python -O`` removes).
_HYPERPARAMETER_CHECKS: dict[str, tuple[str, float | None, float | None]] = {
    "learning_rate": ("schedule", 0.0, None),
    "clip_range": ("schedule", 0.0, None),
    "n_steps": ("int", 1, None),
    "batch_size": ("int", 1, None),
    "n_epochs": ("int", 1, None),
    "buffer_size": ("int", 1, None),
    "learning_starts": ("int", 0, None),
    "target_update_interval": ("int", 1, None),
    "gamma": ("real", 0.0, 1.0),
    "gae_lambda": ("real", 0.0, 1.0),
    "tau": ("real", 0.0, 1.0),
    "exploration_fraction": ("real", 0.0, 1.0),
    "exploration_initial_eps": ("real", 0.0, 1.0),
    "exploration_final_eps": ("real", 0.0, 1.0),
    "ent_coef": ("real", 0.0, None),
    "vf_coef": ("real", 0.0, None),
    "max_grad_norm": ("real", 0.0, None),
}


# Constructor arguments the agent passes itself (its own keywords or the proxy env).
_SET_BY_THE_AGENT = {
    "policy",
    "env",
    "policy_kwargs",
    "device",
    "verbose",
    "tensorboard_log",
    "seed",
    "_init_setup_model",
}


def check_hyperparameters(algo: str, hyperparameters: dict[str, Any]) -> None:
    """Raise naming the first hyperparameter that ``algo``'s constructor does not take or that has a bad value.

    Raises:
        TypeError: an unknown keyword, or a value of the wrong type (``learning_rate="x"``).
        ValueError: a value out of range (``gamma=2``).
    """
    import inspect

    module_name, class_name = ALGORITHMS[algo]
    signature = inspect.signature(getattr(importlib.import_module(module_name), class_name))
    accepted = set(signature.parameters) - _SET_BY_THE_AGENT
    for name, value in hyperparameters.items():
        if name not in accepted:
            raise TypeError(f"{class_name} takes no hyperparameter {name}={value!r}; it takes {sorted(accepted)}")
        if name not in _HYPERPARAMETER_CHECKS:
            continue
        kind, low, high = _HYPERPARAMETER_CHECKS[name]
        if kind == "schedule" and callable(value):
            continue
        if kind == "int":
            check_int(name, value, minimum=int(low) if low is not None else None)
        else:
            check_real(name, value, low=low, high=high)


class SB3Agent:
    """An SB3 algorithm (PPO, A2C, DQN, MaskablePPO, RecurrentPPO) learning online, one round per episode.

    The agent is scored on exactly the rounds it plays: there is no pre-training, the policy is
    untrained in round 1 and learns from the same stream of queries and noise as a bandit
    agent, so its cumulative regret is comparable with EOFUL's (docs/ENVIRONMENTS.md, "The info entries and regret").

    How it runs SB3 online: SB3's ``learn()`` drives its own env loop, so :meth:`reset` starts
    ``learn()`` in a worker thread on an :class:`~tokenized_bandit_gym.adapters.sb3.proxy_env.SB3ProxyEnv`, and
    :meth:`act` and :meth:`update` hand it the real observations, rewards and infos and take
    back its actions. The two threads run strictly in turn (one waits while the other works),
    so SB3's own rollout collection, buffers, ``train()`` schedule, exploration schedule and
    recurrent states are used unchanged. ``learn()`` is given ``total_timesteps = horizon *
    max_length`` (an upper bound on the tokens of ``horizon`` rounds; DQN's exploration
    schedule is a fraction of it), and the thread is stopped after ``task.horizon`` rounds,
    by :meth:`close`, or when the agent is garbage-collected. SB3 finishes processing a step
    (``num_timesteps``, callbacks) only once its env has been reset, that is when the next
    round's first observation arrives, so after the last round ``model.num_timesteps`` is one
    less than the tokens played and ``regret_callback`` holds every round but the last (the
    run loop's result holds them all). Playing more than ``task.horizon`` rounds raises.

    Observations are encoded by :class:`~tokenized_bandit_gym.adapters.sb3.TokenObservationEncoder`
    (one-hot tokens; a flat ``Box`` for ``MlpPolicy`` by default, or a one-level ``Dict`` for
    ``MultiInputPolicy`` with ``flatten=False``). MaskablePPO samples only allowed actions
    (the proxy env's ``action_masks()`` is the observation's ``action_mask``). The other
    algorithms sample all of ``Discrete(k)``; an action the mask forbids is replaced by the
    lowest allowed id (at position L that is EOS, what the env forces anyway) and counted in
    ``replaced_actions``, while SB3 learns from the action it chose. The reward of every step
    but the last is 0 (docs/ENVIRONMENTS.md, "Rounds, rewards and the forced EOS");
    :meth:`update` ends the episode as terminated.

    Determinism: SB3 draws from the process-global ``random``, NumPy and torch generators.
    The agent keeps its own copy of their states, seeded from ``seed`` in :meth:`reset`, swaps
    it in while the learner runs and restores the caller's states after, so the same seed gives
    the same actions bit for bit on one device, even when several agents play interleaved (the
    PettingZoo arena) and whatever the caller does with the global generators.

    Args:
        algo: one of :data:`ALGORITHMS`.
        policy: the SB3 policy; default ``"MlpPolicy"`` (``"MlpLstmPolicy"`` for RecurrentPPO),
            or the ``MultiInput`` variant when ``flatten=False``.
        observation_keys: observation keys the policy sees (default: all it can use).
        token_encoding: ``"one_hot"`` or ``"multi_discrete"`` (needs ``flatten=False``).
        flatten: feed one ``Box`` instead of a ``Dict``.
        policy_kwargs: SB3 ``policy_kwargs`` (default: small networks, see
            :data:`DEFAULT_POLICY_KWARGS`).
        device: torch device of the networks.
        verbose: SB3 verbosity.
        tensorboard_log: a folder for SB3's TensorBoard logs (cumulative regret is logged as
            ``regret/cumulative`` by :class:`CumulativeRegretCallback`). With neither (verbose 0),
            the model logs nowhere and creates no ``SB3-<date>`` folder in the temp dir.
        name: the agent's name in results (default: ``algo``).
        torch_threads: torch intra-op threads while the learner runs (the caller's setting is
            restored after each turn); 1 is fastest for these small networks, None leaves it.
        **hyperparameters: SB3 constructor keywords overriding :data:`DEFAULT_HYPERPARAMETERS`.

    Raises:
        ValueError: an unknown ``algo``.
    """

    def __init__(
        self,
        algo: str = "ppo",
        policy: str | None = None,
        observation_keys: Sequence[str] | None = None,
        token_encoding: str = "one_hot",
        flatten: bool = True,
        policy_kwargs: dict[str, Any] | None = None,
        device: str = "cpu",
        verbose: int = 0,
        tensorboard_log: str | None = None,
        name: str | None = None,
        torch_threads: int | None = 1,
        **hyperparameters: Any,
    ) -> None:
        if algo not in ALGORITHMS:
            raise ValueError(f"algo must be one of {sorted(ALGORITHMS)}, got {algo!r}")
        if not isinstance(flatten, bool):
            raise TypeError(f"flatten must be a bool, got {flatten!r}")
        self.algo = algo
        self.name = name if name is not None else algo
        if policy is None:
            lstm = "Lstm" if algo == "recurrent_ppo" else ""
            policy = f"Mlp{lstm}Policy" if flatten else f"MultiInput{lstm}Policy"
        self.policy = policy
        self.observation_keys = None if observation_keys is None else tuple(observation_keys)
        self.token_encoding = token_encoding
        self.flatten = flatten
        self.policy_kwargs = dict(DEFAULT_POLICY_KWARGS[algo] if policy_kwargs is None else policy_kwargs)
        self.device = device
        self.verbose = verbose
        self.tensorboard_log = tensorboard_log
        self.hyperparameters = {**DEFAULT_HYPERPARAMETERS[algo], **hyperparameters}
        check_hyperparameters(algo, self.hyperparameters)
        if torch_threads is not None and (
            isinstance(torch_threads, bool) or not isinstance(torch_threads, int) or torch_threads < 1
        ):
            raise ValueError(f"torch_threads must be None or a positive integer, got {torch_threads!r}")
        self.torch_threads = torch_threads
        self.model: Any = None
        self.regret_callback: CumulativeRegretCallback | None = None
        self.replaced_actions = 0
        self.rounds = 0
        self._task: Task | None = None
        self._encoder: TokenObservationEncoder | None = None
        self._to_learner: queue.Queue[tuple[str, Any]] | None = None
        self._from_learner: queue.Queue[tuple[str, Any]] | None = None
        self._thread: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None
        self._random_state: RandomState | None = None
        self._episode_started = False

    # ------------------------------------------------------------------ Agent protocol
    def reset(self, task: Task, seed: int | None = None) -> None:
        """Build a fresh SB3 model for ``task`` and start its ``learn()`` loop (waiting for round 1)."""
        self.close()
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._task = task
        self._encoder = TokenObservationEncoder(
            task.observation_space, self.observation_keys, self.token_encoding, self.flatten
        )
        self.rounds = 0
        self.replaced_actions = 0
        self._episode_started = False
        self.regret_callback = CumulativeRegretCallback()
        self._to_learner, self._from_learner = queue.Queue(), queue.Queue()
        proxy = SB3ProxyEnv(self._encoder.observation_space, task.action_space, self._to_learner, self._from_learner)
        module_name, class_name = ALGORITHMS[self.algo]
        algorithm = getattr(importlib.import_module(module_name), class_name)
        build = functools.partial(
            algorithm,
            self.policy,
            proxy,
            policy_kwargs=self.policy_kwargs,
            device=self.device,
            verbose=self.verbose,
            tensorboard_log=self.tensorboard_log,
            seed=seed,
            **self.hyperparameters,
        )
        holder: dict[str, Any] = {}
        threads = self.torch_threads if self.torch_threads is not None else torch.get_num_threads()
        self._thread = threading.Thread(
            target=_learn,
            args=(build, task.horizon * task.max_length, self.regret_callback, holder, self._from_learner, threads),
            name=f"sb3-{self.algo}",
            daemon=True,
        )
        self._finalizer = weakref.finalize(self, _stop_learner, self._to_learner, self._thread)
        self._random_state = _seeded_random_state(seed, self.device)
        kind, _ = self._exchange(None)
        self.model = holder.get("model")
        if kind != "ready":
            raise RuntimeError(f"the {self.algo} learner did not start (got {kind!r})")

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> int:
        """The SB3 policy's action for ``observation`` (it also stores the previous transition)."""
        encoder = self._require_running()
        encoded = encoder.encode(observation)
        mask = np.asarray(observation["action_mask"], dtype=bool)
        message: tuple[str, tuple[Any, ...]]
        if self._episode_started:
            message = ("step", (encoded, mask, 0.0, False, dict(info)))
        else:
            message = ("reset", (encoded, mask, dict(info)))
        kind, action = self._exchange(message)
        if kind != "action":
            raise RuntimeError(f"the {self.algo} learner answered {kind!r} instead of an action")
        self._episode_started = True
        if not mask[action]:
            self.replaced_actions += 1
            action = int(np.flatnonzero(mask)[0])
        return int(action)

    def update(self, observation: dict[str, Any], reward: float, info: dict[str, Any]) -> None:
        """Hand SB3 the round's last transition (reward ``reward``, terminated) and let it learn."""
        encoder = self._require_running()
        if not self._episode_started:
            raise ValueError("update() called before any act() in this round")
        mask = np.asarray(observation["action_mask"], dtype=bool)
        self._exchange(("step", (encoder.encode(observation), mask, float(reward), True, dict(info))))
        self._episode_started = False
        self.rounds += 1
        task = self._task
        if task is not None and self.rounds >= task.horizon:
            self.close()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the learner thread (the trained ``model`` stays available)."""
        if self._thread is None:
            return
        if self._thread.is_alive():
            self._exchange(("close", None))
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    # ------------------------------------------------------------------ helpers
    def _require_running(self) -> TokenObservationEncoder:
        """The encoder, if the learner is running; raises otherwise."""
        if self._encoder is None or self._thread is None:
            raise ValueError(
                f"{self.name}: the learner is not running: call reset(task) first (it stops after task.horizon rounds)"
            )
        return self._encoder

    def _exchange(self, message: tuple[str, Any] | None) -> tuple[str, Any]:
        """Send ``message`` (None: start the thread) and wait for the learner's answer.

        The learner runs only while this waits; it runs with the agent's own global random
        states, and the caller's are restored after.
        """
        if self._thread is None or self._to_learner is None or self._from_learner is None:
            raise ValueError("the learner is not running")
        if self._random_state is None:
            raise ValueError("the agent has no random state: call reset(task) first")
        caller_state = _capture_random_state(self.device)
        caller_threads = torch.get_num_threads()
        _restore_random_state(self._random_state, self.device)
        if self.torch_threads is not None:
            torch.set_num_threads(self.torch_threads)
        try:
            if message is None:
                self._thread.start()
            else:
                self._to_learner.put(message)
            kind, payload = self._from_learner.get()
        finally:
            self._random_state = _capture_random_state(self.device)
            _restore_random_state(caller_state, self.device)
            torch.set_num_threads(caller_threads)
        if kind == "error":
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"the {self.algo} learner failed: {payload!r}") from payload
        if kind == "closed":
            self._thread.join()
            self._thread = None
        return kind, payload


class PPOAgent(SB3Agent):
    """:class:`SB3Agent` with SB3's PPO (Schulman et al., 2017)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ppo", **kwargs)


class A2CAgent(SB3Agent):
    """:class:`SB3Agent` with SB3's A2C (Mnih et al., 2016)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("a2c", **kwargs)


class DQNAgent(SB3Agent):
    """:class:`SB3Agent` with SB3's DQN (Mnih et al., 2015)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("dqn", **kwargs)


class MaskablePPOAgent(SB3Agent):
    """:class:`SB3Agent` with sb3-contrib's MaskablePPO (PPO sampling only allowed tokens)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("maskable_ppo", **kwargs)


class RecurrentPPOAgent(SB3Agent):
    """:class:`SB3Agent` with sb3-contrib's RecurrentPPO (an LSTM policy)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("recurrent_ppo", **kwargs)


def _learn(
    build: Any,
    total_timesteps: int,
    callback: CumulativeRegretCallback,
    holder: dict[str, Any],
    outbox: queue.Queue[tuple[str, Any]],
    threads: int,
) -> None:
    """Worker thread: build the model and run ``learn()`` until the agent closes it.

    ``threads`` is set in this thread first: OpenMP and MKL keep their thread count per thread,
    and a new thread starts from the process's start-up value (``OMP_NUM_THREADS``), so without
    it the learner's numbers would depend on how the process was started.
    """
    try:
        torch.set_num_threads(threads)
        model = log_nowhere_unless_asked(build())  # else each learn() leaves an empty tempdir/SB3-<date>
        holder["model"] = model
        model.learn(total_timesteps=total_timesteps, callback=callback)
    except ProxyClosed:
        outbox.put(("closed", None))
    except BaseException as error:  # noqa: BLE001 - handed to the player thread, which raises it
        outbox.put(("error", error))
    else:
        outbox.put(("closed", None))


def _stop_learner(inbox: queue.Queue[tuple[str, Any]], thread: threading.Thread) -> None:
    """Finalizer: unblock a learner thread whose agent was dropped without :meth:`SB3Agent.close`."""
    if thread.is_alive():
        inbox.put(("close", None))


def _uses_cuda(device: str) -> bool:
    """Whether ``device`` names a CUDA device."""
    return torch.device(device).type == "cuda"


def _capture_random_state(device: str) -> RandomState:
    """The global ``random``, NumPy and torch generator states."""
    cuda = torch.cuda.get_rng_state_all() if _uses_cuda(device) else None
    return (random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)


def _restore_random_state(state: RandomState, device: str) -> None:
    """Set the global generator states captured by :func:`_capture_random_state`."""
    python_state, numpy_state, torch_state, cuda_state = state
    random.setstate(python_state)
    np.random.set_state(numpy_state)
    torch.set_rng_state(torch_state)
    if cuda_state is not None and _uses_cuda(device):
        torch.cuda.set_rng_state_all(cuda_state)


def _seeded_random_state(seed: int, device: str) -> RandomState:
    """Global generator states seeded from ``seed``, without touching the caller's."""
    caller_state = _capture_random_state(device)
    try:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        return _capture_random_state(device)
    finally:
        _restore_random_state(caller_state, device)
