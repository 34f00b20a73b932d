"""BaseAlgorithm: the LightningModule every lit_sb3 algorithm derives from.

The env comes from an :class:`~lit_sb3.datamodule.RLEnvDataModule` given to :meth:`RLTrainer.fit
<lit_sb3.trainer.RLTrainer.fit>` (or ``learn(env=...)``), or, as in SB3, from the algorithm's constructor
(``PPO("MlpPolicy", env)``: the networks are built at once). Without an env the model builds its networks lazily,
once the spaces are known. Logging is buffered: scalars are kept as tensors/numbers and sent to every
logger in ``trainer.loggers`` once per log interval with ``step = num_timesteps`` (env steps).
"""

from __future__ import annotations

import copy
import io
import pathlib
import pickle
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Literal, TypeVar

import lightning as L
import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms import archive
from lit_sb3.algorithms.fit_context import FitContext
from lit_sb3.algorithms.seed_dim import SeedState, predict_stacked, seeds_from_archive
from lit_sb3.callbacks.base import BaseCallback, CallbackList, ConvertCallback
from lit_sb3.core.logger import send_dump
from lit_sb3.core.preprocessing import check_for_nested_spaces, get_device
from lit_sb3.core.schedules import get_schedule_fn
from lit_sb3.core.types import GymEnv, MaybeCallback, Schedule
from lit_sb3.lightning_compat import (
    attached_trainer,
    count_completed_cycle,
    runs_under_fabric,
    set_reported_device,
)
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.registry import resolve_policy_class
from lit_sb3.utils.checkpoint_io import local_copy
from lit_sb3.utils.files import torch_load_error
from lit_sb3.utils.serialization import (
    BadFileError,
    encode_value,
    space_to_dict,
)
from lit_sb3.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize
from lit_sb3.vec_env.env_util import wrap_env

SelfBaseAlgorithm = TypeVar("SelfBaseAlgorithm", bound="BaseAlgorithm")

__all__ = ["BaseAlgorithm"]


class BaseAlgorithm(L.LightningModule):
    """Base class of the RL algorithms (SB3's ``BaseAlgorithm`` as a LightningModule).

    Args:
        policy: policy class or alias (``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"``).
        learning_rate: learning rate, constant or a schedule of ``progress_remaining``.
        policy_kwargs: extra arguments for the policy.
        stats_window_size: episodes averaged for ``rollout/ep_rew_mean`` and ``rollout/success_rate``.
        verbose: 0 silent, 1 info, 2 debug.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        support_multi_env: whether several envs can be used at once.
        monitor_wrapper: wrap a plain env in a Monitor.
        seed: random seed (python, numpy, torch, action space and env).
        use_sde: generalised state-dependent exploration.
        sde_sample_freq: resample the gSDE noise matrix every n steps (-1: only at rollout start).
        supported_action_spaces: action spaces the algorithm accepts (None: the class's metadata).

    Class metadata (what an algorithm says about itself; the registry, ``bench`` and the tuner read it, see
    ``docs/adding_an_algorithm.md``):
        zoo_name: the zoo/bench name (``"ppo"``), the key of its line in ``lit_sb3.algorithms.registry``.
        supported_action_spaces: action-space classes it can act in.
        supported_observation_spaces: observation-space classes its policies can read.
        policy_aliases: ``"MlpPolicy"``-style names of its policy classes.
        default_run_name: ``learn()``'s default ``tb_log_name`` (SB3's: ``"PPO"``, ``"SAC"``, ...).
        search_space: name of its ``bench tune`` search space (a key of the suite's ``SEARCH_SPACES``), or None.
        seed_batching: its class trains K > 1 seeds itself (``SeedBatch(cls, seeds=[...])``, docs/seed_batching.md).
    """

    zoo_name: ClassVar[str] = ""
    supported_action_spaces: ClassVar[tuple[type[spaces.Space], ...]] = ()
    supported_observation_spaces: ClassVar[tuple[type[spaces.Space], ...]] = (
        spaces.Box,
        spaces.Discrete,
        spaces.MultiDiscrete,
        spaces.MultiBinary,
        spaces.Dict,
    )
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {}
    default_run_name: ClassVar[str] = "run"
    search_space: ClassVar[str | None] = None
    seed_batching: ClassVar[bool] = False
    automatic_optimization = False
    # constructor arguments that are not stored in saved archives
    _excluded_save_params: ClassVar[tuple[str, ...]] = ("device", "env", "_init_setup_model")
    # SB3's TensorBoard folder of learn() (the algorithms' constructors set it)
    tensorboard_log: str | None = None
    # what an archive holds besides the constructor arguments, which ``load(custom_objects=...)`` may replace as
    # SB3's does: the learning-rate schedule and the counters (the families add their schedules)
    _loaded_attributes: ClassVar[tuple[str, ...]] = (
        "lr_schedule",
        "num_timesteps",
        "_total_timesteps",
        "_episode_num",
        "_n_updates",
        "_current_progress_remaining",
    )

    policy: BasePolicy
    # the per-seed state of a model of K > 1 seeds (set_seeds); None for a single seed
    _seed_state: SeedState | None = None
    # a training_step runs collect/update cycles until at least this many env steps were collected (the families
    # raise it: Lightning costs ~0.3-1 ms per training_step)
    min_env_steps_per_training_step: ClassVar[int] = 1
    # plain (non-tensor) counters written every env step: set without nn.Module.__setattr__'s checks (~7 us -> 0.3 us)
    _PLAIN_HOT_ATTRIBUTES: ClassVar[frozenset[str]] = frozenset(
        {
            "num_timesteps",
            "_last_obs",
            "_last_original_obs",
            "_last_episode_starts",
            "_current_progress_remaining",
            "_episode_num",
            "_n_updates",
        }
    )

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._PLAIN_HOT_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def __init__(
        self,
        policy: str | type[BasePolicy],
        learning_rate: float | Schedule,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        verbose: int = 0,
        device: th.device | str = "auto",
        support_multi_env: bool = False,
        monitor_wrapper: bool = True,
        seed: int | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        supported_action_spaces: tuple[type[spaces.Space], ...] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(policy, str):
            self.policy_class = resolve_policy_class(self.policy_aliases, policy, type(self).__name__)
        else:
            self.policy_class = policy
        self.policy_alias = policy if isinstance(policy, str) else None
        set_reported_device(self, get_device(device))
        self.requested_device = str(device)
        if verbose >= 1:
            print(f"Using {self.device} device")
        self.verbose = verbose
        self.policy_kwargs = {} if policy_kwargs is None else dict(policy_kwargs)
        self.learning_rate = learning_rate
        self.stats_window_size = stats_window_size
        self.seed = seed
        # the seed dimension K (docs/seed_batching.md): one seed unless SeedBatch made this model hold several
        self._seeds: list[int] | None = None
        self.failed: dict[int, str] = {}
        self.use_sde = use_sde
        self.sde_sample_freq = sde_sample_freq
        self.monitor_wrapper = monitor_wrapper
        self._support_multi_env = support_multi_env
        if supported_action_spaces is None:
            supported_action_spaces = type(self).supported_action_spaces or None
        self._supported_action_spaces = supported_action_spaces

        self.env: VecEnv | None = None
        self._vec_normalize_env: VecNormalize | None = None
        self.n_envs: int
        self.observation_space: spaces.Space
        self.action_space: spaces.Space

        self.num_timesteps = 0
        self._total_timesteps = 0
        self._num_timesteps_at_start = 0
        self._episode_num = 0
        self._n_updates = 0
        self.start_time = 0
        self._current_progress_remaining = 1.0
        self._last_obs: np.ndarray | dict[str, np.ndarray] | None = None
        self._last_episode_starts: np.ndarray | None = None
        self._last_original_obs: np.ndarray | dict[str, np.ndarray] | None = None
        self.ep_info_buffer: deque | None = None
        self.ep_success_buffer: deque | None = None
        self.lr_schedule: Schedule
        # key -> (value, env step when recorded, output formats excluded)
        self._log_buffer: dict[str, tuple[Any, int, tuple[str, ...]]] = {}
        # key -> number of values averaged by record_mean since the last flush
        self._log_counts: dict[str, int] = {}
        self.last_logged: dict[str, float] = {}
        self._rl_callback: BaseCallback | None = None
        self._log_interval = 1
        self.fit_context: FitContext | None = None
        self._pending_rl_state: dict[str, Any] | None = None

        if use_sde and supported_action_spaces is not None and spaces.Box not in supported_action_spaces:
            raise ValueError("generalized State-Dependent Exploration (gSDE) can only be used with continuous actions.")

    # ------------------------------------------------------------------
    # Env handling
    # ------------------------------------------------------------------

    def _wrap_env(self, env: GymEnv | str, n_envs: int = 1) -> VecEnv:
        return wrap_env(env, n_envs=n_envs, monitor_wrapper=self.monitor_wrapper, verbose=self.verbose)

    def _init_env_metadata(
        self,
        env: GymEnv | str,
        supported_action_spaces: tuple[type[spaces.Space], ...] | None = None,
        support_multi_env: bool | None = None,
    ) -> None:
        """Wrap ``env`` as a VecEnv, check its spaces and attach it (spaces must match a loaded model's); K > 1
        seeds: one env per seed (:meth:`SeedState.attach_envs`)."""
        if self._seed_state is not None:
            self._seed_state.attach_envs(env)
            return
        supported_action_spaces = supported_action_spaces or self._supported_action_spaces
        support_multi_env = self._support_multi_env if support_multi_env is None else support_multi_env
        vec_env = self._wrap_env(env)
        check_for_nested_spaces(vec_env.observation_space)
        alias = self.policy_alias
        if isinstance(vec_env.observation_space, spaces.Dict) and alias and not alias.startswith("MultiInput"):
            # SB3's check and message (a Dict observation cannot reach an MLP or a CNN), as soon as the env is known
            multi_input = [name for name in type(self).policy_aliases if name.startswith("MultiInput")]
            if multi_input:
                raise ValueError(
                    f"You must use `{multi_input[0]}` when working with dict observation space, not {alias}"
                )
        if not isinstance(vec_env.observation_space, type(self).supported_observation_spaces):
            allowed = ", ".join(cls.__name__ for cls in type(self).supported_observation_spaces)
            raise NotImplementedError(  # SB3's exception type for an observation space it cannot read
                f"The observation space {vec_env.observation_space} is not supported by {type(self).__name__}; "
                f"supported: {allowed}."
            )
        if supported_action_spaces is not None and not isinstance(vec_env.action_space, supported_action_spaces):
            allowed = ", ".join(cls.__name__ for cls in supported_action_spaces)
            raise ValueError(
                f"{type(self).__name__} does not support the action space {vec_env.action_space} "
                f"({type(vec_env.action_space).__name__}); supported: {allowed}."
            )
        if not support_multi_env and vec_env.num_envs > 1:
            raise ValueError(
                f"{type(self).__name__} does not support multiple envs (got {vec_env.num_envs}); use a single env."
            )
        if self.use_sde and not isinstance(vec_env.action_space, spaces.Box):
            raise ValueError("generalized State-Dependent Exploration (gSDE) can only be used with continuous actions.")
        if isinstance(vec_env.action_space, spaces.Box):
            if not (np.all(np.isfinite(vec_env.action_space.low)) and np.all(np.isfinite(vec_env.action_space.high))):
                raise ValueError("Continuous action space must have a finite lower and upper bound")
        if getattr(self, "observation_space", None) is not None and hasattr(self, "policy"):
            self._check_spaces_match(vec_env)
        if self.env is not None and vec_env is not self.env:
            # a different env: its first observation must come from a reset, even when training continues
            self._last_obs = None
        self.observation_space = vec_env.observation_space
        self.action_space = vec_env.action_space
        self.n_envs = vec_env.num_envs
        self.env = vec_env
        self._vec_normalize_env = unwrap_vec_normalize(vec_env)

    def _init_env_and_model(self, env: GymEnv | str | None, init_setup_model: bool) -> None:
        """The end of an algorithm's constructor (SB3's): attach ``env`` (wrapped as SB3 does: Monitor, VecEnv,
        VecTransposeImage for channel-last images) and, with ``init_setup_model``, build the networks at once.

        Without an env nothing happens: the networks are built once a fit gives the spaces. A subclass of a
        concrete algorithm passes ``_init_setup_model=False`` (and no env) to its parent and calls this at the end
        of its own constructor.

        Args:
            env: the training env (id, gym env, callable returning one, or VecEnv), or None.
            init_setup_model: build the policy (and buffers) now (SB3's ``_init_setup_model``).
        """
        if env is None:
            return
        if isinstance(env, (int, float, np.number)) and not isinstance(env, bool):
            raise TypeError(
                f"{type(self).__name__}'s second argument is the env, as in SB3 ({type(self).__name__}(policy, env, "
                f"learning_rate, ...)), got the number {env!r}: pass an env id, a gymnasium.Env, a callable or a "
                "VecEnv, or give the number by keyword (learning_rate=...)."
            )
        self._init_env_metadata(env)
        if init_setup_model:
            self._setup_model()

    def _check_spaces_match(self, env: VecEnv) -> None:
        if env.observation_space != self.observation_space:
            raise ValueError(
                f"Observation spaces do not match: the model expects {self.observation_space}, the env has "
                f"{env.observation_space}."
            )
        if env.action_space != self.action_space:
            raise ValueError(
                f"Action spaces do not match: the model expects {self.action_space}, the env has {env.action_space}."
            )

    def set_env(self, env: GymEnv | str, force_reset: bool = True) -> None:
        """Attach a new env (same spaces and, once the networks are built, the same number of envs, as SB3
        requires); ``force_reset`` discards the last observation.

        Args:
            env: the env (id, gym env, callable or VecEnv).
            force_reset: start from a reset of the new env.
        """
        if self._seed_state is not None:  # one env per seed
            self._seed_state.set_env(env, force_reset)
            return
        vec_env = self._wrap_env(env)
        n_envs = getattr(self, "n_envs", None)
        if self.policy_ready and n_envs is not None and vec_env.num_envs != n_envs:
            raise ValueError(
                "The number of environments to be set is different from the number of environments in the model: "
                f"({vec_env.num_envs} != {n_envs}), whereas `set_env` requires them to be the same. To load a model "
                f"with a different number of environments, you must use `{type(self).__name__}.load(path, env)` "
                "instead"
            )
        self._init_env_metadata(vec_env)
        if force_reset:
            self._last_obs = None

    def get_env(self) -> VecEnv | None:
        """The current training env (None for K > 1 seeds: their envs are :attr:`envs`)."""
        return self.env

    def get_vec_normalize_env(self) -> VecNormalize | None:
        """The VecNormalize wrapper of the training env, if any."""
        return self._vec_normalize_env

    @property
    def policy_ready(self) -> bool:
        """Whether the networks are built (K > 1 seeds: the members' stacked)."""
        if self._seed_state is not None:
            return self._seed_state.built
        return isinstance(getattr(self, "policy", None), th.nn.Module)

    @property
    def device(self) -> th.device:
        """The device of the model's tensors (Lightning's); assigning one moves the model there, as SB3 allows
        ``model.device = "cpu"`` (``"auto"`` picks CUDA when available)."""
        return L.LightningModule.device.fget(self)  # type: ignore[attr-defined]

    @device.setter
    def device(self, value: th.device | str) -> None:
        self.to(get_device(value))

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _setup_model(self) -> None:
        """Build the policy (and buffers) once the spaces are known."""
        raise NotImplementedError

    def _setup_lr_schedule(self) -> None:
        self.lr_schedule = get_schedule_fn(self.learning_rate)

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        self._current_progress_remaining = 1.0 - float(num_timesteps) / float(max(total_timesteps, 1))

    def _update_learning_rate(self, optimizers: th.optim.Optimizer | Iterable[th.optim.Optimizer]) -> None:
        """Set every optimizer's learning rate from the schedule and record it."""
        lr = self.lr_schedule(self._current_progress_remaining)
        self.record("train/learning_rate", lr)
        if isinstance(optimizers, th.optim.Optimizer) or hasattr(optimizers, "param_groups"):
            optimizers = [optimizers]  # type: ignore[list-item]
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                group["lr"] = lr

    def set_random_seed(self, seed: int | None = None) -> None:
        """Seed python, numpy, torch, the action space and the env.

        Args:
            seed: the seed (nothing happens for ``None``).
        """
        if seed is None:
            return
        random.seed(seed)
        np.random.seed(seed)
        th.manual_seed(seed)
        if th.cuda.is_available():
            th.cuda.manual_seed_all(seed)
        if getattr(self, "action_space", None) is not None:
            self.action_space.seed(seed)
        if self.env is not None:
            self.env.seed(seed)

    # ------------------------------------------------------------------
    # Seeds: every model holds K >= 1 seeds (K = 1 unless built by SeedBatch); seed *index* i names one
    # ------------------------------------------------------------------

    @property
    def seeds(self) -> list[int | None]:
        """The seeds this model trains (``[seed]`` for a single-seed model); seed index ``i`` is a position here."""
        return [self.seed] if self._seeds is None else list(self._seeds)

    @property
    def n_seeds(self) -> int:
        """K, the number of seeds trained together (1 for a single-seed model)."""
        return 1 if self._seeds is None else len(self._seeds)

    @property
    def active_seeds(self) -> list[int]:
        """Indices of the seeds still training."""
        return [i for i in range(self.n_seeds) if i not in self.failed]

    def _check_seed_index(self, i: int) -> None:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n_seeds:
            raise IndexError(f"seed index must be in [0, {self.n_seeds}), got {i!r} (seeds: {self.seeds}).")

    def member(self, i: int) -> BaseAlgorithm:
        """Seed index ``i`` as an ordinary single-seed model with its current weights, optimiser state and counters
        (for ``evaluate_policy``, ``predict``, ``save``); a single-seed model is its own member 0.

        Args:
            i: seed index (position in :attr:`seeds`).
        """
        self._check_seed_index(i)
        return self if self._seed_state is None else self._seed_state.member(i)

    @property
    def members(self) -> list[BaseAlgorithm]:
        """The K single-seed models (``[self]`` for a single seed): their envs, spaces and exploration; their weights
        only once :meth:`member` made and synced them (the stacked policy holds the seeds' weights)."""
        return [self] if self._seed_state is None else self._seed_state.members

    @property
    def envs(self) -> list[VecEnv]:
        """One training VecEnv per seed (``[env]`` for a single seed)."""
        if self._seed_state is None:
            return [] if self.env is None else [self.env]
        return self._seed_state.envs

    @property
    def seed_generators(self) -> list[th.Generator] | None:
        """Seed i's own torch random stream (K > 1), None for a single seed (torch's global generator)."""
        return None if self._seed_state is None else self._seed_state.generators

    def set_seeds(self, seeds: Sequence[int], policy: Any, kwargs: dict[str, Any]) -> None:
        """Make this model train ``seeds`` (K > 1) — what :func:`~lit_sb3.algorithms.seeds.SeedBatch` does.

        Args:
            seeds: distinct integer seeds (this model was built with ``seed=seeds[0]``).
            policy: the policy alias or class the model was built with.
            kwargs: the other constructor arguments (each member gets its own deep copy: an action noise object
                is never shared between seeds).
        """
        if self.policy_ready:
            raise RuntimeError("set_seeds must be called before the networks are built.")
        self._check_seed_batchable()
        # the members: ordinary single-seed models (validating every argument now, before any work)
        members = [type(self)(policy, seed=int(s), **copy.deepcopy(kwargs)) for s in seeds]
        self._seeds = [int(s) for s in seeds]
        self._seed_state = SeedState(self, members)
        self.failed = {}

    def _check_seed_batchable(self) -> None:
        """Hook: raise ``NotImplementedError`` naming an option this family cannot batch over K > 1 seeds yet."""

    def _setup_member(self, member: BaseAlgorithm) -> None:
        """Hook: build member's networks as its separate run would (``member._setup_model()``)."""
        member._setup_model()

    def _seeds_sit_out(self) -> bool:
        """Hook: whether a live seed can sit out an update (its own update schedule): per-seed optimisers."""
        return False

    def _sync_member_state(self, i: int, member: BaseAlgorithm) -> None:
        """Hook: copy other per-seed state (exploration, noise) into member i."""

    def fail_seed(self, i: int, reason: str) -> None:
        """Mask seed index ``i`` out: its parameters stop moving and its env stops stepping while the other seeds go
        on; when every seed has failed (always, for a single seed), the fit ends.

        Args:
            i: seed index.
            reason: one line saying why (kept in :attr:`failed`; the first reason wins).
        """
        self._check_seed_index(i)
        if i in self.failed:
            return
        self.failed[int(i)] = " ".join(str(reason).split())
        if self._seed_state is not None:
            self._seed_state.freeze(i)
        if self.verbose >= 1:
            print(f"seed index {i} (seed {self.seeds[i]}) masked out: {self.failed[i]}")
        if not self.active_seeds:
            self._stop_requested = True

    def _step_seed_env(self, i: int, env: VecEnv, actions: np.ndarray, at: int) -> tuple[Any, ...] | None:
        """Step seed index ``i``'s env; with K > 1 seeds, an exception from it fails that seed alone (None is
        returned: the caller leaves the seed's step out) and the others go on, as a seed with a non-finite reward
        does. A single seed's run raises it, as SB3 does.

        Args:
            i: seed index.
            env: its VecEnv.
            actions: its actions.
            at: the env step counted for the message.
        """
        if self.n_seeds == 1:
            return env.step(actions)
        try:
            return env.step(actions)
        except Exception as exc:  # an env's own error: this seed's failure, whatever it is
            self.fail_seed(i, f"env raised at step {at}: {type(exc).__name__}: {' '.join(str(exc).split())}"[:500])
            return None

    def _step_envs(self, env: VecEnv | None, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, list[Any]]:
        """One env step: ``env.step(actions)`` (SB3's); K > 1 seeds: :meth:`SeedState.step_envs` (env is None)."""
        if self._seed_state is not None:
            return self._seed_state.step_envs(actions)
        assert env is not None
        return env.step(actions)

    def _update_seed_info(self, infos: list[Any], dones: np.ndarray) -> None:
        """Episode statistics of this step: SB3's ``_update_info_buffer``; K > 1: :meth:`SeedState.update_info`."""
        if self._seed_state is not None:
            self._seed_state.update_info(infos, dones)
        else:
            self._update_info_buffer(infos, dones)

    @property
    def _ep_info_buffers(self) -> list[deque]:
        """Each seed's episode statistics (``[ep_info_buffer]`` for a single seed)."""
        state = self._seed_state
        return [self.ep_info_buffer] if state is None else state.ep_info_buffers  # type: ignore[list-item]

    @property
    def _ep_success_buffers(self) -> list[deque]:
        """Each seed's episode successes (``[ep_success_buffer]`` for a single seed)."""
        state = self._seed_state
        return [self.ep_success_buffer] if state is None else state.ep_success_buffers  # type: ignore[list-item]

    def _count_episode(self, i: int) -> int:
        """Count one more finished episode of seed index i; returns its episode count (SB3's ``_episode_num``).

        Args:
            i: seed index.
        """
        if self._seed_state is None:
            self._episode_num += 1
            return self._episode_num
        self._seed_state.episode_nums[i] += 1
        return self._seed_state.episode_nums[i]

    # ------------------------------------------------------------------
    # Updates over K >= 1 seeds: masks, delayed steps and non-finite values
    # ------------------------------------------------------------------

    def _active_mask(self, due: np.ndarray | None = None) -> th.Tensor | None:
        """``[K]`` bool of the seeds that take this update: live, and not sitting it out (None when every seed
        takes it: no masking work).

        Args:
            due: only these seeds (a host ``[K]`` bool, from :meth:`_due`): a step that seeds on their own update
                counts take at different updates (TD3's and CrossQ's delayed actor step).
        """
        update = None if self._seed_state is None else self._seed_state.update_mask
        if not self.failed and update is None and due is None:
            return None
        mask = th.ones(self.n_seeds, dtype=th.bool) if due is None else th.as_tensor(due, dtype=th.bool)
        for i in self.failed:
            mask[i] = False
        mask = mask.to(self.device)
        return mask if update is None else mask & update

    def _updating_seeds(self) -> np.ndarray | None:
        """Host ``[K]`` bool of the seeds taking the current update while others sit it out (their own update
        schedules), None when every seed takes it (or K = 1)."""
        return None if self._seed_state is None else self._seed_state.update_seeds

    def _due(self, every: int) -> tuple[bool, np.ndarray | None]:
        """Whether a step taken every ``every`` updates (TD3's and CrossQ's ``policy_delay``) is due at this update
        (``_n_updates`` already counts it), and which seeds take it: None (every seed that takes the update), or,
        when seeds keep their own update counts (``train_freq`` in episodes, ``_n_updates`` a ``[K]`` array), the
        host ``[K]`` bool of the seeds taking this update whose own count is a multiple of ``every`` (each seed's
        delayed steps follow its separate run's count).

        Args:
            every: the period in updates.
        """
        n_updates = self._n_updates
        if not isinstance(n_updates, np.ndarray):
            return n_updates % every == 0, None
        due = n_updates % every == 0
        updating = self._updating_seeds()
        if updating is not None:
            due &= updating
        return bool(due.any()), due

    def _record_due_steps(self, key: str, values: list[th.Tensor], dues: list[np.ndarray]) -> None:
        """K > 1 seeds: each seed's mean over the delayed steps it took (:meth:`SeedState.record_due_steps`)."""
        assert self._seed_state is not None
        self._seed_state.record_due_steps(key, values, dues)

    def _check_finite(self, name: str, per_seed: th.Tensor) -> None:
        """K > 1 seeds: note the seeds whose values are not finite (:meth:`SeedState.check_finite`)."""
        if self._seed_state is not None:
            self._seed_state.check_finite(name, per_seed)

    def _apply_finite_checks(self) -> None:
        """K > 1 seeds: mask the seeds noted by :meth:`_check_finite`."""
        if self._seed_state is not None:
            self._seed_state.apply_finite_checks()

    def _restore_failed(self) -> None:
        """K > 1 seeds: undo any optimiser movement of the masked seeds."""
        if self._seed_state is not None:
            self._seed_state.restore_failed()

    # ------------------------------------------------------------------
    # Learning set-up shared by on- and off-policy algorithms
    # ------------------------------------------------------------------

    def setup_fit(self, env: GymEnv | str, context: FitContext) -> BaseCallback:
        """Prepare one fit (called by ``RLTrainer.fit`` before Lightning's loop starts).

        Attaches ``env`` (its spaces are checked), builds the networks when needed, sets the env-step counters
        (reset or continued, per ``context.reset_num_timesteps``), builds the SB3 callback and keeps ``context``
        as :attr:`fit_context`. ``context.target_timesteps`` is set here.

        Args:
            env: the training env (a VecEnv from the datamodule, a gym env or an env id).
            context: the fit context built by the trainer.

        Returns:
            The SB3-style callback of this fit (the trainer attaches it so that its Lightning hooks run).
        """
        if self._seed_state is not None and len(self.failed) == self.n_seeds:
            raise RuntimeError(f"every seed of the model has failed: {self.failed}")
        self._init_env_metadata(env)
        if not self.policy_ready:
            self._setup_model()
        self.fit_context = context
        total_timesteps, callback = self._setup_learn(
            context.total_timesteps,
            context.callback,
            context.run_name,
            reset_num_timesteps=context.reset_num_timesteps,
            progress_bar=context.progress_bar,
        )
        context.target_timesteps = int(total_timesteps)
        context.start_timesteps = self.num_timesteps
        context.update(self.num_timesteps)
        self._rl_callback = callback
        self._log_interval = (
            context.log_interval if context.log_interval is not None else self._default_log_every_n_steps
        )
        self._prepare_fit()
        return callback

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        run_name: str = "run",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        """Reset counters (unless continuing), reset the env and build the callback (SB3's ``_setup_learn``); K > 1
        seeds: each seed's episodes and envs (:meth:`SeedState.reset_episodes`)."""
        self.start_time = time.time_ns()
        if reset_num_timesteps:
            self.num_timesteps = 0
            self._episode_num = 0
        else:
            total_timesteps += self.num_timesteps
        self._total_timesteps = total_timesteps
        self._num_timesteps_at_start = self.num_timesteps
        if self._seed_state is not None:
            self._seed_state.reset_episodes(reset_num_timesteps)
            return total_timesteps, self._init_callback(callback, progress_bar)
        if self.ep_info_buffer is None or reset_num_timesteps:
            self.ep_info_buffer = deque(maxlen=self.stats_window_size)
            self.ep_success_buffer = deque(maxlen=self.stats_window_size)
        if reset_num_timesteps or self._last_obs is None:
            assert self.env is not None
            self._last_obs = self.env.reset()  # type: ignore[assignment]
            self._last_episode_starts = np.ones((self.env.num_envs,), dtype=bool)
            if self._vec_normalize_env is not None:
                self._last_original_obs = self._vec_normalize_env.get_original_obs()
        callback = self._init_callback(callback, progress_bar)
        return total_timesteps, callback

    def _init_callback(self, callback: MaybeCallback, progress_bar: bool = False) -> BaseCallback:
        if isinstance(callback, list):
            callback = CallbackList([c if isinstance(c, BaseCallback) else ConvertCallback(c) for c in callback])
        if not isinstance(callback, BaseCallback):
            callback = ConvertCallback(callback)
        if progress_bar:
            from lit_sb3.callbacks.progress import ProgressBarCallback

            callback = CallbackList([callback, ProgressBarCallback()])
        callback.init_callback(self)
        return callback

    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: np.ndarray | None = None) -> None:
        assert self.ep_info_buffer is not None and self.ep_success_buffer is not None
        if dones is None:
            dones = np.array([False] * len(infos))
        for idx, info in enumerate(infos):
            maybe_ep_info = info.get("episode")
            maybe_is_success = info.get("is_success")
            if maybe_ep_info is not None:
                self.ep_info_buffer.extend([maybe_ep_info])
            if maybe_is_success is not None and dones[idx]:
                self.ep_success_buffer.append(maybe_is_success)

    def _has_reached_rl_budget(self) -> bool:
        """Whether the env-step budget of the current fit is reached (reported to the fit context)."""
        context = self.fit_context
        if context is not None:
            return context.update(self.num_timesteps)
        return self.num_timesteps >= self._total_timesteps

    # ------------------------------------------------------------------
    # Family hooks of the fit contract (see lit_sb3.algorithms.fit_context)
    # ------------------------------------------------------------------

    @property
    def _default_log_every_n_steps(self) -> int:
        return 1

    def _prepare_fit(self) -> None:
        """Hook: per-fit work once the counters and the callback are set (default: nothing)."""

    def _end_cycle(self) -> None:
        """Count one completed collect/update cycle: Lightning's ``global_step`` (checkpoint cadences) advances."""
        trainer = attached_trainer(self)
        if trainer is not None:
            count_completed_cycle(trainer)

    def _should_end_training_step(self, collected: int) -> bool:
        """Whether the current ``training_step`` must return after a completed cycle.

        Args:
            collected: env steps collected in this ``training_step`` so far.
        """
        context = self.fit_context
        if self._has_reached_rl_budget() or collected >= self.min_env_steps_per_training_step:
            return True
        if context is None:
            return False
        trainer = attached_trainer(self)
        return context.boundary_requested or context.at_cycle_boundary(trainer.global_step if trainer else 0)

    def train_dataloader(self):
        """An endless stream of tokens: each one is one ``training_step`` (a collect/update cycle)."""
        from torch.utils.data import DataLoader

        from lit_sb3.data.replay import InfiniteReplayBufferDataset

        # A private generator: creating the loader's iterator must not draw from the global torch RNG,
        # or a run resumed from a checkpoint would diverge from the uninterrupted one.
        return DataLoader(InfiniteReplayBufferDataset(), batch_size=None, num_workers=0, generator=th.Generator())

    def on_fit_start(self) -> None:
        self._match_input_dtype()
        self._on_device_ready()
        self._apply_pending_rl_state()
        if self.fit_context is not None:
            self.fit_context.start_timesteps = self.num_timesteps
            self.fit_context.update(self.num_timesteps)

    def _on_device_ready(self) -> None:
        """Hook: Lightning has placed the module on its device (buffers can follow)."""

    def _match_input_dtype(self) -> None:
        """Let float32 observations and actions reach networks in another dtype (``precision="64-true"`` or
        ``"bf16-true"`` convert the parameters, while envs and buffers stay float32): every features extractor
        of the policy casts its floating inputs to the policy's dtype. Installed once, only when the dtype is not
        float32 (the default path pays nothing)."""
        from lit_sb3.policies.torch_layers import BaseFeaturesExtractor

        if getattr(self, "_input_cast_installed", False) or next(self.policy.parameters()).dtype == th.float32:
            return
        policy = self.policy

        def cast(module: th.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            dtype = next(policy.parameters()).dtype

            def one(x: Any) -> Any:
                if isinstance(x, th.Tensor) and x.is_floating_point() and x.dtype != dtype:
                    return x.to(dtype)
                if isinstance(x, dict):
                    return {k: one(v) for k, v in x.items()}
                return x

            return tuple(one(a) for a in args)

        for module in policy.modules():
            if isinstance(module, BaseFeaturesExtractor):
                module.register_forward_pre_hook(cast)
        self._input_cast_installed = True

    def on_train_start(self) -> None:
        self._stop_requested = False
        self._backward_impl = self._select_backward()

    def _select_backward(self) -> Callable[..., None]:
        """``loss.backward`` when Lightning's ``manual_backward`` would add nothing, else ``manual_backward``.

        With a single-device strategy, the default 32-bit precision plugin, no profiler, and no callback or
        module overriding ``backward``/``on_before_backward``/``on_after_backward``, ``manual_backward`` only
        calls empty hooks around ``loss.backward()`` (tens of us per gradient step). Any other set-up (mixed
        precision, DDP/FSDP, a profiler, a backward hook) keeps ``manual_backward``. Chosen once per fit.
        """
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import Callback
        from lightning.pytorch.plugins.precision import Precision
        from lightning.pytorch.profilers import PassThroughProfiler
        from lightning.pytorch.strategies import SingleDeviceStrategy

        trainer = attached_trainer(self)
        if trainer is None or runs_under_fabric(self):
            return _plain_backward if trainer is None else self.manual_backward
        cls, module_cls = type(self), pl.LightningModule
        plain = (
            type(trainer.strategy) is SingleDeviceStrategy
            and type(trainer.strategy.precision_plugin) is Precision
            and isinstance(trainer.profiler, PassThroughProfiler)
            and cls.backward is module_cls.backward
            and cls.on_before_backward is module_cls.on_before_backward
            and cls.on_after_backward is module_cls.on_after_backward
            and all(
                type(cb).on_before_backward is Callback.on_before_backward
                and type(cb).on_after_backward is Callback.on_after_backward
                for cb in trainer.callbacks
            )
        )
        return _plain_backward if plain else self.manual_backward

    def _backward(self, loss: th.Tensor, inputs: list[th.Tensor] | None = None) -> None:
        """Backward of ``loss`` (``inputs``: accumulate gradients into these tensors only)."""
        impl = getattr(self, "_backward_impl", None) or _plain_backward
        if inputs is None:
            impl(loss)
        else:
            impl(loss, inputs=inputs)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._has_reached_rl_budget() or getattr(self, "_stop_requested", False):
            self.trainer.should_stop = True
        context = self.fit_context
        if context is not None:  # the trainer's callbacks (checkpoints) have seen this step's boundary
            context.boundary_requested = False
            context.evaluated = False

    def on_train_end(self) -> None:
        if self._rl_callback is not None:
            self._rl_callback.on_training_end()

    # ------------------------------------------------------------------
    # Logging (buffered; sent to trainer.loggers with step = env steps)
    # ------------------------------------------------------------------

    def record(
        self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None, *, seeds: np.ndarray | None = None
    ) -> None:
        """Buffer one scalar until the next dump (a number or a 0-d tensor: converted only when dumped). K > 1
        seeds: a ``[K]`` tensor (or length-K list) is one value per seed, anything else the same value for every
        seed; each seed logs it as ``seed{i}/<key>`` (:meth:`SeedState.record`).

        Args:
            key: the metric name (SB3 keys: ``train/actor_loss``, ...).
            value: the value; the latest one recorded before a dump is sent, at the dump's env step (SB3's).
            exclude: output formats that must not receive it (SB3's ``exclude``): a name or tuple of names matched
                against the logger class names, e.g. ``"tensorboard"``, ``"csv"``, ``"mlflow"``, ``"wandb"``.
            seeds: K > 1: the seeds (host ``[K]`` bool) whose value this is; the others keep their last one. None:
                the seeds taking the current update (all outside an update some seeds sit out).
        """
        if self._seed_state is not None:
            self._seed_state.record(key, value, seeds)
            return
        formats = () if exclude is None else (exclude,) if isinstance(exclude, str) else tuple(exclude)
        self._log_buffer[key] = (value, self.num_timesteps, formats)

    def record_mean(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        """Buffer the running mean of the values recorded under ``key`` since the last flush (SB3's
        ``logger.record_mean``; tensors stay tensors, ``None`` is skipped).

        Args:
            key: the metric name.
            value: one more value.
            exclude: output formats that must not receive it (see :meth:`record`).
        """
        if value is None:
            return
        count = self._log_counts.get(key, 0)
        if count and key in self._log_buffer:
            old = self._log_buffer[key][0]
            value = old * (count / (count + 1)) + value / (count + 1)
        self._log_counts[key] = count + 1
        self.record(key, value, exclude)

    def dump_records(self, step: int) -> None:
        """Send everything buffered to the loggers at env step ``step`` (SB3's ``logger.dump(step)``, reached
        from a callback's ``self.logger.dump``).

        Args:
            step: the x-axis value of every buffered value.
        """
        if self._log_buffer:
            self.log_metrics({}, step=step)

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None, console: bool = True) -> None:
        """One dump, as SB3's ``logger.dump(step)``: ``metrics`` and everything buffered go to every Lightning
        logger at the one env step ``step`` (default ``num_timesteps``), and to ``trainer.callback_metrics`` (so
        that ``ModelCheckpoint(monitor="eval/mean_reward")`` sees them); with ``verbose >= 1`` the dump is printed
        as SB3's console table.

        Args:
            metrics: values of this dump (on top of the buffered ones).
            step: the env step of every value of the dump.
            console: print the table when ``verbose >= 1`` (the flush at the end of a fit does not: SB3 prints
                only its dumps).
        """
        step = self.num_timesteps if step is None else step
        entries = {k: (v, f) for k, (v, _, f) in self._log_buffer.items()}
        entries.update({k: (v, ()) for k, v in metrics.items()})
        self._log_buffer = {}
        self._log_counts = {}
        if entries:
            self.last_logged.update(send_dump(entries, step, attached_trainer(self), console and self.verbose >= 1))

    def flush_logs(self) -> None:
        """Send whatever is still buffered, at the current env step (not printed: SB3 prints only its dumps)."""
        if self._seed_state is not None:
            self._seed_state.flush_logs()
        elif self._log_buffer:
            self.log_metrics({}, console=False)

    def hyperparameters_for_logging(self) -> dict[str, Any]:
        """The constructor arguments, flattened to strings/numbers for loggers (K > 1 seeds: each member's as
        ``seed{i}/<name>``, :meth:`SeedState.hyperparameters`)."""
        if self._seed_state is not None:
            return self._seed_state.hyperparameters()
        params = {}
        for key, value in self._constructor_params().items():
            try:
                params[key] = (
                    value if isinstance(value, (int, float, str, bool)) or value is None else str(encode_value(value))
                )
            except TypeError:
                params[key] = repr(value)
        params["algo"] = type(self).__name__
        return params

    # ------------------------------------------------------------------
    # Inference
    # ------------------------------------------------------------------

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Action(s) for ``observation`` (SB3 semantics: numpy in, numpy out).

        Args:
            observation: one observation or a batch of them.
            state: recurrent state (unused by these policies).
            episode_start: episode starts (for recurrent policies).
            deterministic: return the mode instead of a sample.

        K > 1 seeds: ``observation`` is ``[K, ...]`` (one observation or batch per seed), the actions ``[K, ...]``;
        a recurrent policy's ``state`` and ``episode_start`` are one per seed (:meth:`SeedState.predict`).
        """
        if self._seed_state is not None:
            return self._seed_state.predict(observation, state, episode_start, deterministic)
        if not self.policy_ready:
            raise RuntimeError(f"{type(self).__name__} has no policy yet: train it (fit/learn) or load one first.")
        return self.policy.predict(observation, state, episode_start, deterministic)

    def predict_stacked(self, observation: Any, deterministic: bool = True) -> np.ndarray:
        """Actions ``[K, n_envs, ...]`` of the K seeds for observations ``[K, n_envs, ...]`` in one call of the
        stacked policy (:func:`~lit_sb3.algorithms.seed_dim.predict_stacked`)."""
        return predict_stacked(self, observation, deterministic)

    # ------------------------------------------------------------------
    # Trainer creation and SB3's learn()
    # ------------------------------------------------------------------

    def create_trainer(
        self,
        max_steps: int,
        callback: MaybeCallback = None,
        log_every_n_steps: int | None = None,
        run_name: str = "run",
        reset_num_timesteps: bool = True,
        enable_progress_bar: bool = False,
        default_root_dir: str | pathlib.Path | None = None,
        logger: Any = None,
    ):
        """An :class:`RLTrainer` on this model's device (used by :meth:`learn`)."""
        from lit_sb3.trainer import RLTrainer

        trainer = RLTrainer(
            max_steps=max_steps,
            rl_callback=callback,
            run_name=run_name,
            accelerator="gpu" if self.device.type == "cuda" else "cpu",
            devices=1,
            log_every_n_steps=log_every_n_steps,
            enable_progress_bar=enable_progress_bar,
            default_root_dir=default_root_dir,
            logger=logger,
        )
        trainer.reset_num_timesteps = reset_num_timesteps
        return trainer

    def learn(
        self: SelfBaseAlgorithm,
        total_timesteps: int,
        env: GymEnv | str | None = None,
        callback: MaybeCallback = None,
        log_every_n_steps: int | None = None,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        default_root_dir: str | pathlib.Path | None = None,
        log_interval: int | None | Literal["default"] = "default",
    ) -> SelfBaseAlgorithm:
        """Train for ``total_timesteps`` env steps (SB3 API; delegates to :meth:`RLTrainer.fit`).

        SB3's calls run unchanged: ``PPO("MlpPolicy", env).learn(10_000, callback, log_interval=1)`` (a callback
        given in the second position, where SB3 has it, is taken as the callback).

        Where the logs go (SB3's ``tensorboard_log``): with the constructor's ``tensorboard_log`` folder, TensorBoard
        events under ``<tensorboard_log>/<tb_log_name>_<n>`` (SB3's numbering: one more than the highest existing
        ``<tb_log_name>_<n>``, the same folder when ``reset_num_timesteps=False``); else, with
        ``default_root_dir``, RLTrainer's default logger (``<default_root_dir>/lightning_logs/<tb_log_name>_<n>``);
        else no log folder at all.

        Args:
            total_timesteps: env steps to collect.
            env: the training env (id, gym env, callable or VecEnv); defaults to the constructor's env (or the one
                attached by the last fit).
            callback: SB3-style callback(s): a ``BaseCallback``, a list of them, or a function
                ``f(locals, globals) -> bool``.
            log_every_n_steps: log interval of the seed's API (episodes off-policy, iterations on-policy; None:
                the algorithm's default).
            tb_log_name: run name of the TensorBoard folder (None: the class's ``default_run_name``, SB3's
                ``"PPO"``, ``"SAC"``, ...); a plain folder name.
            reset_num_timesteps: reset the step counter (False continues it).
            progress_bar: show a progress bar over env steps.
            default_root_dir: folder for Lightning's default logger and checkpoints.
            log_interval: SB3's name: dump the logs every ``log_interval`` episodes (off-policy) or iterations
                (on-policy); ``None`` turns the automatic dump off (a callback can still ``self.logger.dump``);
                ``"default"``: ``log_every_n_steps``.
        """
        from lit_sb3.datamodule import RLEnvDataModule

        if callback is None and _is_callback(env):  # SB3's positional form: learn(total_timesteps, callback)
            env, callback = None, env
        _check_learn_callback(callback)
        interval = _learn_log_interval(log_interval, log_every_n_steps)
        run_name = type(self).default_run_name if tb_log_name is None else tb_log_name
        _check_run_name(run_name)
        if env is None:
            env = self.env if self.n_seeds == 1 else (list(self.envs) or None)
        if env is None:
            raise TypeError(
                f"learn() needs an env: give it to the constructor ({type(self).__name__}(policy, env)) or to "
                "learn(env=...) (an env id, a gymnasium.Env, a callable or a VecEnv)."
            )
        dm = RLEnvDataModule(train_env=env, verbose=self.verbose)
        trainer = self.create_trainer(
            max_steps=total_timesteps,
            callback=callback,
            log_every_n_steps=interval,
            run_name=run_name,
            reset_num_timesteps=reset_num_timesteps,
            enable_progress_bar=progress_bar,
            default_root_dir=default_root_dir,
            logger=self._learn_logger(run_name, reset_num_timesteps, default_root_dir),
        )
        return trainer.fit(self, datamodule=dm)  # type: ignore[return-value]

    def _learn_logger(
        self, run_name: str, reset_num_timesteps: bool, default_root_dir: str | pathlib.Path | None
    ) -> Any:
        """The logger of :meth:`learn`: TensorBoard under ``tensorboard_log`` (SB3's folder and numbering), else
        RLTrainer's default logger when ``default_root_dir`` is given (None), else none (False)."""
        if self.tensorboard_log is None:
            return None if default_root_dir is not None else False
        from lightning.pytorch.loggers import TensorBoardLogger

        from lit_sb3.utils.system import get_latest_run_id

        # SB3's configure_logger: the next number, or the latest folder again when training continues
        run_id = get_latest_run_id(self.tensorboard_log, run_name) + (1 if reset_num_timesteps else 0)
        logger = TensorBoardLogger(
            save_dir=str(self.tensorboard_log), name="", version=f"{run_name}_{run_id}", default_hp_metric=False
        )
        if self.verbose >= 1:
            print(f"Logging to {logger.log_dir}")
        return logger

    # ------------------------------------------------------------------
    # Lightning checkpoints: everything needed to continue a run exactly
    # ------------------------------------------------------------------

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        """Hook: algorithm-specific state for Lightning checkpoints (tensors/numbers only)."""
        return {}

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Hook: restore :meth:`_extra_checkpoint_state`."""

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        from lit_sb3.utils.env_state import capture_vec_env_state

        def _obs(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, dict):
                return {k: th.as_tensor(np.asarray(v)) for k, v in value.items()}
            return th.as_tensor(np.asarray(value))

        np_state = np.random.get_state(legacy=False)
        np_state["state"]["key"] = np_state["state"]["key"].astype(np.int64).tolist()
        state = {
            "num_timesteps": self.num_timesteps,
            "total_timesteps": self._total_timesteps,
            "episode_num": self._episode_num,
            "n_updates": self._n_updates,
            "progress_remaining": self._current_progress_remaining,
            "last_obs": _obs(self._last_obs),
            "last_original_obs": _obs(self._last_original_obs),
            "last_episode_starts": _obs(self._last_episode_starts),
            "ep_info_buffer": [dict(info) for info in (self.ep_info_buffer or [])],
            "ep_success_buffer": [bool(x) for x in (self.ep_success_buffer or [])],
            "rng": {
                "python": list(random.getstate()[1]) + [random.getstate()[0], random.getstate()[2]],
                "numpy": np_state,
                "torch": th.get_rng_state(),
                "action_space": self.action_space.np_random.bit_generator.state,
            },
            "vec_normalize": self._vec_normalize_env.state_dict() if self._vec_normalize_env is not None else None,
            "env_state": capture_vec_env_state(self.env) if self.env is not None else None,
            "extra": self._extra_checkpoint_state(),
            "spaces": {
                "observation": space_to_dict(self.observation_space),
                "action": space_to_dict(self.action_space),
            },
        }
        checkpoint["lit_sb3"] = _to_checkpoint_safe(state)
        if self._seed_state is not None:  # each seed's own state
            checkpoint["lit_sb3_seeds"] = self._seed_state.checkpoint_state()

    @classmethod
    def load_from_checkpoint(  # type: ignore[override]
        cls: type[SelfBaseAlgorithm],
        checkpoint_path: str | pathlib.Path | io.IOBase,
        map_location: Any = None,
        hparams_file: str | pathlib.Path | None = None,
        strict: bool | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> SelfBaseAlgorithm:
        """Lightning's ``load_from_checkpoint``, always through the safe loader: a local path, an http(s) or
        fsspec URL (fetched into a bounded private copy, never torch's hub cache) or a buffer, read with
        ``weights_only=True`` whatever the source (Lightning reads remote files with ``weights_only=False``
        when it is not given).

        Args:
            checkpoint_path: the checkpoint: a path, URL or readable buffer.
            map_location: torch's ``map_location``.
            hparams_file: as Lightning's.
            strict: as Lightning's.
            weights_only: ``None`` or ``True``; ``False`` is refused (it would let the file run code).
            kwargs: constructor arguments overriding the saved hyperparameters.
        """
        if weights_only is False:
            raise ValueError(
                f"{cls.__name__}.load_from_checkpoint() loads only with torch's safe loader (weights_only=True): "
                "weights_only=False is refused because it lets the checkpoint run code."
            )
        load = super().load_from_checkpoint
        where = str(getattr(checkpoint_path, "name", checkpoint_path))

        def safely(source: Any) -> SelfBaseAlgorithm:
            try:
                return load(source, map_location=map_location, hparams_file=hparams_file, strict=strict,
                            weights_only=True, **kwargs)  # fmt: skip
            except pickle.UnpicklingError as exc:
                raise BadFileError(
                    f"{where}: checkpoint cannot be loaded safely (weights_only=True): {torch_load_error(exc)}"
                ) from None

        if isinstance(checkpoint_path, (str, pathlib.Path)):
            with local_copy(checkpoint_path) as local:
                return safely(local)
        return safely(checkpoint_path)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Lightning restores weights and optimizers itself, after this hook: what it would load is checked first
        # (archive.check_checkpoint); the RL state is applied when fit starts (after the env has been reset), see
        # :meth:`_apply_pending_rl_state`.
        archive.check_checkpoint(self, checkpoint, _checkpoint_where(self))
        self._pending_rl_state = checkpoint.get("lit_sb3")
        if self._seed_state is not None:
            self._seed_state.load_checkpoint(checkpoint, _checkpoint_where(self))

    def _live_part(self, param: th.Tensor, value: th.Tensor, failed: Iterable[int]) -> th.Tensor:
        """The part of ``value`` (shaped like ``param``: an optimiser moment) of the seeds not in ``failed``: all of
        it for a single model (K > 1 seeds: the live seeds' rows of a stacked one, :meth:`SeedState.live_part`).

        Args:
            param: the parameter.
            value: a tensor shaped like it.
            failed: the failed seed indices.
        """
        dead = {int(i) for i in failed}
        live = None if self._seed_state is None or not dead else self._seed_state.live_part(param, value, dead)
        return value if live is None else live

    def _lightning_optimizers(self) -> list[th.optim.Optimizer]:
        """The optimisers Lightning restores a checkpoint's ``optimizer_states`` into, in order
        (:meth:`configure_optimizers`: none, one, or a list)."""
        configured = self.configure_optimizers()
        if configured is None:
            return []
        if isinstance(configured, th.optim.Optimizer):
            return [configured]
        return [opt for opt in configured if isinstance(opt, th.optim.Optimizer)]

    def _apply_pending_rl_state(self) -> None:
        from lit_sb3.utils.env_state import restore_vec_env_state

        state = self._pending_rl_state
        if state is None:
            return
        self._pending_rl_state = None
        self.num_timesteps = int(state["num_timesteps"])
        self._num_timesteps_at_start = self.num_timesteps
        self._episode_num = int(state["episode_num"])
        n_updates = state["n_updates"]  # one count per seed when seeds update on their own schedules
        is_array = isinstance(n_updates, th.Tensor) and n_updates.dim() > 0
        self._n_updates = n_updates.numpy().astype(np.int64) if is_array else int(n_updates)
        self._current_progress_remaining = float(state["progress_remaining"])

        def _np(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, dict):
                return {k: v.numpy() for k, v in value.items()}
            return value.numpy()

        self._last_obs = _np(state["last_obs"])
        self._last_original_obs = _np(state["last_original_obs"])
        self._last_episode_starts = _np(state["last_episode_starts"])
        self.ep_info_buffer = deque(state["ep_info_buffer"], maxlen=self.stats_window_size)
        self.ep_success_buffer = deque(state["ep_success_buffer"], maxlen=self.stats_window_size)
        rng = state["rng"]
        py = rng["python"]
        random.setstate((py[-2], tuple(py[:-2]), py[-1]))
        np_state = dict(rng["numpy"])
        np_state["state"] = {**np_state["state"], "key": np.asarray(np_state["state"]["key"], dtype=np.uint32)}
        np.random.set_state(np_state)
        th.set_rng_state(rng["torch"])
        self.action_space.np_random.bit_generator.state = rng["action_space"]
        if state["vec_normalize"] is not None and self._vec_normalize_env is not None:
            self._vec_normalize_env.load_state_dict(state["vec_normalize"])
        if state["env_state"] is not None and self.env is not None:
            try:
                restore_vec_env_state(self.env, state["env_state"])
            except ValueError as exc:  # an entry the capture side never writes: refused, nothing of it set
                raise BadFileError(f"{_checkpoint_where(self)}: env state: {' '.join(str(exc).split())}") from None
        self._load_extra_checkpoint_state(state["extra"])
        if self._seed_state is not None:  # each seed's own state (after the envs were reset)
            self._seed_state.apply_checkpoint()

    # ------------------------------------------------------------------
    # Save / load (safe zip archive)
    # ------------------------------------------------------------------

    def _constructor_params(self) -> dict[str, Any]:
        import inspect

        params = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name in ("self", "args", "kwargs") or name in self._excluded_save_params:
                continue
            if name == "policy":
                params[name] = self.policy_alias if self.policy_alias is not None else self.policy_class
            elif hasattr(self, name):
                params[name] = getattr(self, name)
        return params

    def _optimizers_to_save(self) -> dict[str, th.optim.Optimizer]:
        """Hook: named optimizers stored in archives (``get_parameters``)."""
        optimizer = getattr(self.policy, "optimizer", None)
        return {"policy.optimizer": optimizer} if optimizer is not None else {}

    def save(
        self,
        path: str | pathlib.Path | io.BufferedIOBase,
        exclude: Iterable[str] | None = None,
        include: Iterable[str] | None = None,
    ) -> None:
        """Save the model to a zip archive (JSON + tensors; loading it never runs code from it).

        As in SB3, ``include`` wins over ``exclude``; a loaded model gets the constructor's default for each
        argument not stored. Names that are not constructor arguments are ignored, the policy class is always
        stored (SB3 keeps it apart too) and the device never is (``load(device=...)`` chooses it).

        Args:
            path: file path (``.zip`` added when missing) or a writable buffer.
            exclude: constructor arguments not to store.
            include: arguments to store even when they are in ``exclude``.
        """
        archive.save_model(self, path, exclude, include)

    def _extra_save_data(self) -> dict[str, Any]:
        """Hook: more JSON data stored in archives."""
        return {}

    def _load_extra_save_data(self, data: dict[str, Any]) -> None:
        """Hook: restore :meth:`_extra_save_data`."""

    def _seed_save_data(self) -> dict[str, Any]:
        """The seeds of a K > 1 model (:meth:`SeedState.save_data`); nothing at K = 1, so single archives are
        unchanged."""
        return {} if self._seed_state is None else self._seed_state.save_data()

    def _restore_seeds(self, data: dict[str, Any], params: dict[str, Any], where: str) -> None:
        """Make this freshly built model the archive's K > 1 seeds (before :meth:`load` builds the networks).

        Args:
            data: the archive's ``data.json``.
            params: the decoded constructor arguments (``policy``, ``seed``, ``device``, ...).
            where: the file name, for messages.
        """
        if "seeds" not in data:
            return
        seeds, episode_nums, failed = seeds_from_archive(data, params, where)
        self.set_seeds(seeds, params["policy"], {k: v for k, v in params.items() if k not in ("policy", "seed")})
        assert self._seed_state is not None
        self._seed_state.episode_nums = episode_nums
        self.failed = failed

    @classmethod
    def load(
        cls: type[SelfBaseAlgorithm],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | str | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfBaseAlgorithm:
        """Load a model saved with :meth:`save`.

        Args:
            path: archive path or readable buffer.
            env: env to attach (its spaces must match the saved ones).
            device: device for the model.
            custom_objects: values replacing what the archive holds, as in SB3: stored constructor arguments
                (``learning_rate``, ``clip_range``, ...) and the other stored values (``lr_schedule``, the counters,
                DQN's ``exploration_schedule``); keys the archive does not hold are ignored (the RL Zoo passes the
                same keys for every algorithm).
            print_system_info: print the versions stored in the archive and the current ones (as SB3 does).
            force_reset: reset the env before further training.
            kwargs: constructor arguments or stored values to set (``policy_kwargs`` must equal the stored ones,
                as in SB3); an unknown name is an error.
        """
        return archive.load_model(cls, path, env, device, custom_objects, print_system_info, force_reset, **kwargs)

    def get_parameters(self) -> dict[str, dict]:
        """``{"policy": state_dict, "<name>.optimizer": state_dict, ...}``."""
        return archive.get_parameters(self)

    def set_parameters(
        self,
        load_path_or_dict: str | pathlib.Path | dict[str, Any],
        exact_match: bool = True,
        device: th.device | str = "auto",
    ) -> None:
        """Load parameters from :meth:`get_parameters` output or from an archive (SB3's ``set_parameters``).

        Args:
            load_path_or_dict: a dict like :meth:`get_parameters` returns (``"policy"``, ``"policy.optimizer"``,
                ...), or an archive path.
            exact_match: every object (and every tensor of the policy) must be given; ``False`` loads what is
                given and leaves the rest as it is (tensor shapes must still match).
            device: unused (tensors go to the model's device).
        """
        archive.set_parameters(self, load_path_or_dict, exact_match)


def _checkpoint_where(model: Any) -> str:
    """The checkpoint a model is resuming from (its trainer's ``ckpt_path``), for messages."""
    return str(getattr(attached_trainer(model), "ckpt_path", None) or "the checkpoint")


def _is_callback(value: Any) -> bool:
    """Whether ``value`` is a callback object or a non-empty list of them (never an env)."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(item, BaseCallback) for item in value)
    return isinstance(value, BaseCallback)


def _check_learn_callback(callback: Any) -> None:
    """One-line error for a ``learn()`` callback that SB3 would not accept either (checked before any work)."""
    items = callback if isinstance(callback, list) else [callback]
    for item in items:
        if item is not None and not isinstance(item, BaseCallback) and not callable(item):
            raise TypeError(
                f"learn()'s callback must be a BaseCallback, a list of them or a function f(locals, globals) -> bool, "
                f"got {type(item).__name__} {item!r} (learn's positional order is total_timesteps, env, callback, "
                "...: give log_interval and the others by keyword)."
            )


def _learn_log_interval(log_interval: Any, log_every_n_steps: int | None) -> int | None:
    """The log interval ``learn()`` hands to RLTrainer: None (the algorithm's default), 0 (no automatic dump,
    SB3's ``log_interval=None``) or a positive number of episodes/iterations."""
    if isinstance(log_interval, str) and log_interval == "default":
        return log_every_n_steps
    if log_every_n_steps is not None:
        raise ValueError(
            "learn() takes log_interval (SB3's name) or log_every_n_steps (the same interval), not both: got "
            f"log_interval={log_interval!r} and log_every_n_steps={log_every_n_steps!r}."
        )
    if log_interval is None:
        return 0
    if isinstance(log_interval, bool) or not isinstance(log_interval, (int, np.integer)) or log_interval < 1:
        raise ValueError(
            "learn()'s log_interval must be a positive integer (episodes off-policy, iterations on-policy) or None "
            f"(no automatic dump), got {log_interval!r}."
        )
    return int(log_interval)


def _check_run_name(name: Any) -> None:
    """A run name becomes a folder name: one plain path component, nothing that leaves the log folder."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(
            f"tb_log_name must be a plain folder name (not empty, no '/', '\\', '.' or '..'), got {name!r}."
        )


def _plain_backward(loss: th.Tensor, **kwargs: Any) -> None:
    loss.backward(**kwargs)


def _to_checkpoint_safe(value: Any) -> Any:
    """Numpy -> tensors/lists so that the checkpoint loads with ``torch.load(weights_only=True)``."""
    if isinstance(value, dict):
        return {k: _to_checkpoint_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        converted = [_to_checkpoint_safe(v) for v in value]
        return converted if isinstance(value, list) else tuple(converted)
    if isinstance(value, np.ndarray):
        return th.as_tensor(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return value
