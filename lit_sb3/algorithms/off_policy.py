"""Off-policy algorithm base class (SAC, TD3, DDPG, DQN) as a LightningModule (seed 000's contract).

Architecture:
  * ``automatic_optimization = False``: every backward/optimizer step is explicit.
  * ``train_dataloader`` (from :class:`BaseAlgorithm`) yields endless tokens
    (:class:`~lit_sb3.data.replay.InfiniteReplayBufferDataset`); the RLTrainer's env-step budget stops the run.
  * ``training_step`` runs collect/update *cycles*: collect ``train_freq`` env steps into the replay buffer, then
    ``gradient_steps`` updates (subclasses' :meth:`train`). Lightning costs ~0.7-1.3 ms per ``training_step``,
    so one ``training_step`` runs cycles until at least ``min_env_steps_per_training_step`` (32) env steps were
    collected (each cycle ends on an episode boundary when ``train_freq`` is in episodes). The semantics are
    exactly those of one cycle per step, as in SB3: callbacks fire after every env step, logs are dumped every
    ``log_interval`` episodes. Each completed cycle is one Lightning ``global_step``.
  * Budget end: the budget is exact (collection stops on the step that reaches it). A cycle cut by the budget (or
    by a step boundary: checkpoint cadence, evaluation) stays *open*: its update runs once the cycle completes, in
    the next ``training_step`` or a continued fit, and its counts are saved in Lightning checkpoints. So stopping
    at any env step N and continuing gives exactly the run that did not stop (SB3 instead collects past the
    budget to finish the cycle).
  * ``learn()`` wraps ``RLTrainer.fit`` with SB3's signature.

Speed choices (see ``benchmarks/bench_off_policy.py``): actions are selected by a lean path (numpy -> tensor
without copy -> ``policy._predict`` under ``inference_mode`` -> numpy), transitions are stored without the
per-step ``deepcopy`` unless an episode ended, losses stay tensors until logs are flushed, backward is a plain
``loss.backward()`` whenever Lightning's ``manual_backward`` would only add empty hooks (see
:meth:`BaseAlgorithm._select_backward`); precisions that need loss scaling (``16-mixed``) are rejected with a
clear error, ``bf16-mixed``/``bf16-true``/``32-true``/``64-true`` work.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.base import BaseAlgorithm
from lit_sb3.algorithms.her.goal_selection_strategy import GoalSelectionStrategy
from lit_sb3.algorithms.her.her_replay_buffer import HerReplayBuffer
from lit_sb3.algorithms.on_policy import obs_as_tensor
from lit_sb3.algorithms.seed_dim import _all_finite, _copy_obs, _obs_at, _set_obs
from lit_sb3.buffers.dict_replay import DictReplayBuffer
from lit_sb3.buffers.nstep_replay import NStepReplayBuffer
from lit_sb3.buffers.replay import ReplayBuffer
from lit_sb3.buffers.seed_replay import SeedReplayBuffer
from lit_sb3.callbacks.base import BaseCallback
from lit_sb3.core.logger import rollout_metrics
from lit_sb3.core.noise import ActionNoise, VectorizedActionNoise, noise_from_dict, noise_to_dict
from lit_sb3.core.preprocessing import is_image_space
from lit_sb3.core.types import MaybeCallback, RolloutReturn, Schedule, TrainFreq, TrainFrequencyUnit
from lit_sb3.policies.base import BasePolicy
from lit_sb3.policies.registry import register_class
from lit_sb3.utils.files import BadFileError
from lit_sb3.utils.training import should_collect_more_steps
from lit_sb3.vec_env import VecEnv

SelfOffPolicyAlgorithm = TypeVar("SelfOffPolicyAlgorithm", bound="OffPolicyAlgorithm")

__all__ = ["OffPolicyAlgorithm"]

# replay buffer classes may be named in saved models (constructor argument `replay_buffer_class`)
_BUFFER_CLASSES: dict[str, type[ReplayBuffer]] = {
    cls.__name__: cls for cls in (ReplayBuffer, DictReplayBuffer, NStepReplayBuffer, HerReplayBuffer)
}
for _cls in _BUFFER_CLASSES.values():
    register_class(_cls)
del _cls
# HerReplayBuffer's own arguments (K > 1 seeds: their HER relabelling over the seeds' storage)
_HER_KWARGS = ("goal_selection_strategy", "n_sampled_goal", "copy_info_dict")


# modules whose forward does not depend on `training` (anything else, e.g. BatchNorm, Dropout or a custom
# module, makes the algorithms switch the policy between training and evaluation mode as SB3 does)
_MODE_FREE_MODULES = (
    "torch.nn.modules.linear",
    "torch.nn.modules.conv",
    "torch.nn.modules.activation",
    "torch.nn.modules.container",
    "torch.nn.modules.flatten",
    "torch.nn.modules.normalization",
)


def _train_mode_matters(module: th.nn.Module) -> bool:
    """Whether some submodule may behave differently in training and evaluation mode."""
    for sub in module.modules():
        name = type(sub).__module__
        if name.startswith("lit_sb3.") or name in _MODE_FREE_MODULES:
            continue
        return True
    return False


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}.")


class OffPolicyAlgorithm(BaseAlgorithm):
    """Base class for off-policy algorithms (SAC, TD3, DDPG, DQN).

    K seeds (``SeedBatch(SAC, seeds=[...])``, see :mod:`lit_sb3.algorithms.seed_dim`): one VecEnv per seed stepped
    in lockstep (one forward pass acts for all seeds), one :class:`~lit_sb3.buffers.seed_replay.SeedReplayBuffer`,
    and the subclass's ``train`` over ``[K, batch, ...]`` minibatches, each seed sampling its own.

    Args:
        policy: policy class or alias (``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"``).
        learning_rate: learning rate, constant or a schedule of ``progress_remaining``.
        buffer_size: replay buffer capacity.
        learning_starts: env steps of random actions (warm-up) before gradient updates begin.
        batch_size: minibatch size of each gradient step.
        tau: soft (Polyak) update coefficient of the target networks.
        gamma: discount factor.
        train_freq: collect this many steps between updates: an int (steps) or ``(n, "step" | "episode")``.
        gradient_steps: gradient steps after each collection; ``-1``: as many as env steps collected.
        action_noise: exploration noise added to the (scaled) actions; wrapped in a
            :class:`VectorizedActionNoise` for several envs.
        replay_buffer_class: buffer class; ``None`` chooses DictReplayBuffer (Dict observations),
            NStepReplayBuffer (``n_steps > 1``) or ReplayBuffer.
        replay_buffer_kwargs: extra buffer arguments (HerReplayBuffer gets the env automatically).
        optimize_memory_usage: store each observation once (needs ``handle_timeout_termination=False``).
        n_steps: n-step returns (``> 1`` uses NStepReplayBuffer).
        policy_kwargs: extra policy arguments.
        stats_window_size: episodes averaged for ``rollout/ep_rew_mean`` and ``rollout/success_rate``.
        verbose: verbosity level.
        device: torch device.
        support_multi_env: several envs may be used at once.
        monitor_wrapper: wrap plain envs in a Monitor.
        seed: random seed.
        use_sde: gSDE exploration.
        sde_sample_freq: resample the gSDE noise every n steps (-1: only at the start of each collection).
        use_sde_at_warmup: use gSDE instead of uniform random actions during the warm-up.
        sde_support: the policy accepts ``use_sde``.
        supported_action_spaces: allowed action spaces.
    """

    automatic_optimization = False
    # plain attributes written after every env step: stored without nn.Module.__setattr__'s bookkeeping
    # (~2-3 us per assignment, several per step); they are never parameters, buffers or modules
    _PLAIN_HOT_ATTRIBUTES: ClassVar[frozenset[str]] = BaseAlgorithm._PLAIN_HOT_ATTRIBUTES | {
        "_n_calls",
        "exploration_rate",
        "_cycle_open",
        "_cycle_steps",
        "_cycle_episodes",
    }
    # one training_step runs collect/update cycles until at least this many env steps were collected
    min_env_steps_per_training_step: ClassVar[int] = 32

    actor: th.nn.Module
    # opt-in: run the algorithm's `_gradient_step` through torch.compile (SAC, TD3, DDPG take it as an argument)
    compile_update: bool = False

    def __init__(
        self,
        policy: str | type[BasePolicy],
        learning_rate: float | Schedule,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: int | tuple[int, str] = (1, "step"),
        gradient_steps: int = 1,
        action_noise: ActionNoise | None = None,
        replay_buffer_class: type[ReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        verbose: int = 0,
        device: th.device | str = "auto",
        support_multi_env: bool = False,
        monitor_wrapper: bool = True,
        seed: int | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        sde_support: bool = True,
        supported_action_spaces: tuple[type[spaces.Space], ...] | None = None,
    ) -> None:
        super().__init__(
            policy=policy,
            learning_rate=learning_rate,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            verbose=verbose,
            device=device,
            support_multi_env=support_multi_env,
            monitor_wrapper=monitor_wrapper,
            seed=seed,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            supported_action_spaces=supported_action_spaces,
        )
        _check_int("buffer_size", buffer_size, 1)
        _check_int("learning_starts", learning_starts, 0)
        _check_int("batch_size", batch_size, 1)
        _check_int("gradient_steps", gradient_steps, -1)
        _check_int("n_steps", n_steps, 1)
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"`tau` must be in [0, 1], got {tau}.")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"`gamma` must be in [0, 1], got {gamma}.")
        if action_noise is not None and not isinstance(action_noise, ActionNoise):
            raise TypeError(
                f"`action_noise` must be an ActionNoise (e.g. NormalActionNoise) or None, got {action_noise!r}."
            )
        if replay_buffer_class is not None and not (
            isinstance(replay_buffer_class, type) and issubclass(replay_buffer_class, ReplayBuffer)
        ):
            raise TypeError(
                f"`replay_buffer_class` must be a ReplayBuffer subclass or None, got {replay_buffer_class!r}."
            )
        self.buffer_size = buffer_size
        self.batch_size = batch_size
        self.learning_starts = learning_starts
        self.tau = tau
        self.gamma = gamma
        self.gradient_steps = gradient_steps
        self.action_noise = action_noise
        self.optimize_memory_usage = optimize_memory_usage
        self.replay_buffer: ReplayBuffer | None = None
        self.replay_buffer_class = replay_buffer_class
        self.replay_buffer_kwargs = dict(replay_buffer_kwargs or {})
        self.n_steps = n_steps
        self.train_freq: TrainFreq | int | tuple[int, str] = train_freq
        # checked now so that a bad unit fails at construction, not when training starts
        self._convert_train_freq()

        if sde_support:
            self.policy_kwargs["use_sde"] = self.use_sde
        self.use_sde_at_warmup = use_sde_at_warmup
        self._stop_requested = False
        # an unfinished collect/update cycle (the budget or a step boundary fell inside it): its counts so far
        self._cycle_open = False
        self._cycle_steps = 0
        self._cycle_episodes = 0
        self._lean_obs = False
        self._mode_matters = True

    # ------------------------------------------------------------------
    # Model setup
    # ------------------------------------------------------------------

    def _convert_train_freq(self) -> None:
        """Convert ``train_freq`` (int or tuple) to a :class:`TrainFreq`."""
        if isinstance(self.train_freq, TrainFreq):
            return
        train_freq = self.train_freq
        if not isinstance(train_freq, (tuple, list)):
            train_freq = (train_freq, "step")
        if len(train_freq) != 2:
            raise ValueError(
                f"`train_freq` must be an int or a tuple (n, 'step' | 'episode'), got {self.train_freq!r}."
            )
        try:
            unit = TrainFrequencyUnit(train_freq[1])
        except ValueError as e:
            raise ValueError(
                f"The unit of the `train_freq` must be either 'step' or 'episode' not '{train_freq[1]}'!"
            ) from e
        frequency = train_freq[0]
        if isinstance(frequency, bool) or not isinstance(frequency, (int, np.integer)):
            raise ValueError(f"The frequency of `train_freq` must be an integer and not {frequency}")
        if frequency < 1:
            raise ValueError(
                f"The frequency of `train_freq` must be >= 1 (collect at least one step or episode), got {frequency}."
            )
        self.train_freq = TrainFreq(int(frequency), unit)

    def _check_seed_batchable(self) -> None:
        her = self.replay_buffer_class is not None and issubclass(self.replay_buffer_class, HerReplayBuffer)
        other_class = self.replay_buffer_class is not None and not her
        unsupported = {
            # HerReplayBuffer is batched (one HER bookkeeping per seed over the seeds' storage); a custom class is not
            f"replay_buffer_class {getattr(self.replay_buffer_class, '__name__', '')} (HerReplayBuffer is)": other_class,
        }
        allowed = {"handle_timeout_termination"} | (set(_HER_KWARGS) if her else set())
        unknown = sorted(set(self.replay_buffer_kwargs) - allowed)
        if unknown:
            unsupported[f"replay_buffer_kwargs {unknown} (allowed: {sorted(allowed)})"] = True
        bad = [name for name, flag in unsupported.items() if flag]
        if bad:
            raise NotImplementedError(
                f"{type(self).__name__} with K > 1 seeds does not support {', '.join(bad)} yet (K = 1 does)."
            )

    def _seeds_sit_out(self) -> bool:
        # train_freq in episodes: each seed updates when its own episodes complete a cycle, the others sit out
        return isinstance(self.train_freq, TrainFreq) and self.train_freq.unit == TrainFrequencyUnit.EPISODE

    def _setup_member(self, member: BaseAlgorithm) -> None:
        # the K-seed model stores the transitions: the member builds its networks with a 1-slot buffer of the class
        # and arguments its separate run's buffer has (whose constructor checks them as that run's does)
        member._choose_replay_buffer_class()  # type: ignore[attr-defined]
        kwargs = dict(member.replay_buffer_kwargs)  # type: ignore[attr-defined]
        if issubclass(member.replay_buffer_class, HerReplayBuffer):  # type: ignore[attr-defined]
            kwargs["env"] = None  # (its rewards come from the seed's env when the K-seed storage samples)
        member.replay_buffer = member.replay_buffer_class(  # type: ignore[attr-defined]
            1,
            member.observation_space,
            member.action_space,
            device="cpu",
            optimize_memory_usage=member.optimize_memory_usage,  # type: ignore[attr-defined]
            **kwargs,
        )
        member._setup_model()
        member.replay_buffer = None  # type: ignore[attr-defined]

    def _setup_seed_model(self) -> None:
        """K > 1: build the members as their separate runs, stack them, one replay storage for all seeds."""
        space = self.observation_space
        entries = space.spaces.values() if isinstance(space, spaces.Dict) else [space]
        if not isinstance(space, (spaces.Box, spaces.Dict)) or not all(
            isinstance(entry, (spaces.Box, spaces.MultiBinary)) for entry in entries
        ):
            raise NotImplementedError(
                f"{type(self).__name__} with K > 1 seeds supports Box observations (vectors, images) only, or Dict "
                f"observations of Box and MultiBinary entries, got {space} (K = 1 supports every space)."
            )
        self._setup_lr_schedule()
        self._convert_train_freq()
        state = self._seed_state
        assert state is not None
        state.stack_members()
        her = self.replay_buffer_class is not None and issubclass(self.replay_buffer_class, HerReplayBuffer)
        if her:
            self._check_her_envs(state.envs)
        strategy = self.replay_buffer_kwargs.get("goal_selection_strategy", "future")
        if isinstance(strategy, GoalSelectionStrategy):
            strategy = strategy.name
        self.replay_buffer = SeedReplayBuffer(  # type: ignore[assignment]
            self.n_seeds,
            self.buffer_size,
            self.observation_space,
            self.action_space,
            self.n_envs,
            self.device,
            handle_timeout_termination=self.replay_buffer_kwargs.get("handle_timeout_termination", True),
            n_steps=self.n_steps,
            gamma=self.gamma,
            optimize_memory_usage=self.optimize_memory_usage,
            goal_selection_strategy=str(strategy).lower() if her else None,
            n_sampled_goal=self.replay_buffer_kwargs.get("n_sampled_goal", 4),
            copy_info_dict=self.replay_buffer_kwargs.get("copy_info_dict", False),
        )
        self._lean_obs = True
        self._mode_matters = _train_mode_matters(self.policy)
        if self._seeds_sit_out():  # each seed its own cycle and update count
            self._n_updates = np.zeros(self.n_seeds, dtype=np.int64)
            self._seed_cycles = np.zeros((2, self.n_seeds), dtype=np.int64)  # steps, episodes of each seed's cycle

    @staticmethod
    def _check_her_envs(envs: list[VecEnv]) -> None:
        """HER computes the rewards of relabelled transitions with each seed's env: each must have them."""
        for i, env in enumerate(envs):
            if not env.has_attr("compute_reward"):
                raise ValueError(
                    "HerReplayBuffer needs goal-conditioned envs (a vectorised `compute_reward(achieved_goal, "
                    f"desired_goal, info)` method); the env of seed index {i} has no `compute_reward`."
                )

    def _choose_replay_buffer_class(self) -> None:
        """``replay_buffer_class=None``: DictReplayBuffer (Dict observations), NStepReplayBuffer (``n_steps > 1``,
        which gets ``n_steps``/``gamma`` in ``replay_buffer_kwargs``) or ReplayBuffer."""
        if self.replay_buffer_class is not None:
            return
        if isinstance(self.observation_space, spaces.Dict):
            if self.n_steps > 1:
                raise ValueError(
                    "N-step returns (n_steps > 1) are not supported for Dict observation spaces yet; use n_steps=1."
                )
            self.replay_buffer_class = DictReplayBuffer
        elif self.n_steps > 1:
            self.replay_buffer_class = NStepReplayBuffer
            self.replay_buffer_kwargs.update({"n_steps": self.n_steps, "gamma": self.gamma})
        else:
            self.replay_buffer_class = ReplayBuffer

    def _setup_model(self) -> None:
        if self._seed_state is not None:
            return self._setup_seed_model()
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self._convert_train_freq()
        assert isinstance(self.train_freq, TrainFreq)
        if self.train_freq.unit == TrainFrequencyUnit.EPISODE and self.n_envs > 1:
            raise ValueError(
                f"`train_freq` in episodes needs a single env (got {self.n_envs} envs); use train_freq=(n, 'step') "
                "or one env."
            )

        if self.n_steps > 1 and self.replay_buffer_class is not None and "n_steps" not in self.replay_buffer_kwargs:
            warnings.warn(
                f"`n_steps={self.n_steps}` is ignored because a custom `replay_buffer_class` "
                f"(`{self.replay_buffer_class.__name__}`) was passed: n-step returns are only set up "
                "automatically when `replay_buffer_class` is `None`. To use n-step returns with a custom replay "
                f'buffer, configure it explicitly, e.g. `replay_buffer_kwargs={{"n_steps": {self.n_steps}, "gamma": {self.gamma}}}`.',
                stacklevel=2,
            )

        self._choose_replay_buffer_class()

        if self.replay_buffer is None:
            replay_buffer_kwargs = self.replay_buffer_kwargs.copy()
            if issubclass(self.replay_buffer_class, HerReplayBuffer):
                if self.env is None:
                    raise ValueError(
                        "You must pass an environment when using `HerReplayBuffer` (it calls env.compute_reward)."
                    )
                if not self.env.has_attr("compute_reward"):
                    raise ValueError(
                        "HerReplayBuffer needs a goal-conditioned env (Dict observations with 'observation', "
                        "'achieved_goal', 'desired_goal' and a vectorised `compute_reward(achieved_goal, desired_goal, info)` "
                        f"method); the env {self.env.unwrapped.envs[0] if hasattr(self.env.unwrapped, 'envs') else self.env} has no `compute_reward`."
                    )
                replay_buffer_kwargs["env"] = self.env
            self.replay_buffer = self.replay_buffer_class(
                self.buffer_size,
                self.observation_space,
                self.action_space,
                device=self.device,
                n_envs=self.n_envs,
                optimize_memory_usage=self.optimize_memory_usage,
                **replay_buffer_kwargs,
            )

        self.policy = self.policy_class(
            self.observation_space,
            self.action_space,
            self.lr_schedule,
            **self.policy_kwargs,
        )
        self.policy = self.policy.to(self.device)
        # observations that go straight to the networks (no transpose/one-hot/dict handling needed)
        self._lean_obs = isinstance(self.observation_space, spaces.Box) and not is_image_space(self.observation_space)
        self._mode_matters = _train_mode_matters(self.policy)

    def _set_policy_training_mode(self, mode: bool) -> None:
        """``policy.set_training_mode(mode)``, skipped when no module of the policy behaves differently in
        training mode (the recursive call costs ~0.1-1 ms per collect/update cycle)."""
        if self._mode_matters:
            self.policy.set_training_mode(mode)

    def _on_device_ready(self) -> None:
        if isinstance(self.replay_buffer, SeedReplayBuffer):
            if self.replay_buffer.device != self.device:
                self.replay_buffer.to(self.device)
        elif self.replay_buffer is not None:
            self._attach_replay_buffer(self.replay_buffer)
        self._build_param_lists()

    def _attach_replay_buffer(self, buffer: ReplayBuffer) -> None:
        """Use ``buffer``, its samples on the model's device and, once the networks exist, in their dtype
        (``precision="bf16-true"``/``"64-true"``; None keeps float32 samples as stored)."""
        buffer.device = self.device
        if self.policy_ready:
            dtype = next(self.policy.parameters()).dtype
            buffer.sample_float_dtype = None if dtype == th.float32 else dtype
        self.replay_buffer = buffer

    def _build_param_lists(self) -> None:
        """Hook: build the parameter lists used by the target updates (once, not per gradient step)."""

    # ------------------------------------------------------------------
    # Lightning loop
    # ------------------------------------------------------------------

    def configure_optimizers(self) -> Any:
        """Subclasses return their optimizers (so that Lightning checkpoints save and restore them)."""
        raise NotImplementedError(f"{self.__class__.__name__} must implement `configure_optimizers`.")

    def on_train_start(self) -> None:
        super().on_train_start()
        plugin = getattr(self.trainer, "precision_plugin", None)
        if getattr(plugin, "scaler", None) is not None:
            raise ValueError(
                f"{type(self).__name__} does not support precision {self.trainer.precision!r}, which needs loss scaling; "
                "use '32-true', 'bf16-mixed', 'bf16-true' or '64-true'."
            )

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """Collect/update cycles until ``min_env_steps_per_training_step`` env steps, the budget, a stop or a step
        boundary (checkpoint cadence, evaluation).

        Each cycle: collect ``train_freq`` (steps or episodes) into the replay buffer, then, once
        ``num_timesteps > learning_starts``, run ``gradient_steps`` updates (``-1``: as many as steps collected).
        When the budget (or a step boundary) falls inside a cycle, collection stops exactly there and the cycle
        stays open: its update runs when it completes, in the next ``training_step`` or in a continued fit
        (``ckpt_path=`` or ``learn(reset_num_timesteps=False)``), so that stopping at any env step and continuing
        gives the same run as not stopping. Under ``fast_dev_run`` the update also runs during the warm-up.
        One loop for K >= 1 seeds (K > 1: every live seed's env in lockstep, see :meth:`collect_rollouts`).
        """
        del batch, batch_idx
        callback, replay_buffer = self._rl_callback, self.replay_buffer
        assert callback is not None and replay_buffer is not None
        assert isinstance(self.train_freq, TrainFreq)
        single_cycle = self.fit_context is not None and self.fit_context.single_cycle
        collected = 0
        while True:
            rollout = self.collect_rollouts(
                self.env,  # None for K > 1 seeds: their envs are self.envs
                callback=callback,
                train_freq=self.train_freq,
                replay_buffer=replay_buffer,
                action_noise=self.action_noise,
                learning_starts=self.learning_starts,
                log_interval=self._log_interval,
            )
            if not rollout.continue_training:
                self._stop_requested = True
                break
            if self._cycle_open:
                break  # stopped inside the cycle: its update waits until the cycle is complete
            collected += rollout.episode_timesteps
            warm = self.num_timesteps > 0 and (self.num_timesteps > self.learning_starts or single_cycle)
            self._update_after_cycle(rollout.episode_timesteps, warm)
            self._end_cycle()
            if self._stop_requested or self._should_end_training_step(collected):
                break
        self._apply_finite_checks()  # K > 1: seeds whose update was not finite are masked from now on
        self._restore_failed()

    def _update_after_cycle(self, cycle_timesteps: int, warm: bool) -> None:
        """The update of a completed cycle: ``gradient_steps`` steps (``-1``: as many as env steps collected) once
        warm. With seeds on their own cycles (:attr:`_own_seed_cycles`), only the seeds whose cycle completed take
        it (grouped by their number of gradient steps), and their cycles restart.

        Args:
            cycle_timesteps: env steps collected in the cycle (per seed).
            warm: whether the warm-up is over (or ``fast_dev_run`` runs the update anyway).
        """
        cycles = self._own_seed_cycles
        if cycles is None:
            gradient_steps = self.gradient_steps if self.gradient_steps >= 0 else cycle_timesteps
            if warm and gradient_steps > 0:
                self.train(gradient_steps=gradient_steps, batch_size=self.batch_size)
                self._restore_failed()
            return
        ended = self._ended_seed_cycles()
        if warm:
            n_envs, k = self.n_envs, self.n_seeds
            steps = cycles[0] * n_envs if self.gradient_steps < 0 else np.full(k, self.gradient_steps)
            for gradient_steps in np.unique(steps[ended]):
                if gradient_steps > 0:
                    self._train_seeds(ended & (steps == gradient_steps), int(gradient_steps))
        cycles[:, ended] = 0

    @property
    def _own_seed_cycles(self) -> np.ndarray | None:
        """K > 1 with ``train_freq`` in episodes: each seed's steps and episodes ``[2, K]`` in its own cycle (each
        seed updates when its own episodes complete a cycle, the others sit out); None otherwise."""
        return self.__dict__.get("_seed_cycles") if self._seed_state is not None else None

    def _ended_seed_cycles(self) -> np.ndarray:
        """Host ``[K]`` bool of the live seeds whose own cycle is complete (:attr:`_own_seed_cycles`)."""
        cycles = self._own_seed_cycles
        assert cycles is not None and isinstance(self.train_freq, TrainFreq)
        live = np.array([i not in self.failed for i in range(self.n_seeds)])
        return live & (cycles[1] >= self.train_freq.frequency)

    def _update_step(self) -> Any:
        """The callable that runs one gradient step (``self._gradient_step``): the method itself, or with
        ``compile_update=True`` the same method through ``torch.compile`` (inductor, static shapes), built once.

        The compiled step draws its random numbers from the same streams as the eager one (inductor's
        ``fallback_random``), so it computes what the eager step computes up to float reassociation. Where
        torch.compile cannot trace a part (the backward calls, a per-seed optimiser step), that part runs eagerly
        between compiled graphs; where it fails to compile at all, ``suppress_errors`` runs the step eagerly.
        """
        if not self.compile_update:
            return self._gradient_step
        compiled = self.__dict__.get("_compiled_step")
        if compiled is None:
            compiled = th.compile(self._gradient_step, dynamic=False, options={"fallback_random": True})
            self.__dict__["_compiled_step"] = compiled

        def step(*args: Any) -> Any:
            with th._dynamo.config.patch(suppress_errors=True):
                return compiled(*args)

        return step

    def _gradient_step(self, *args: Any) -> Any:
        """One gradient step on a sampled minibatch, optimiser steps included (algorithms that compile their
        update implement it; see :meth:`_update_step`)."""
        raise NotImplementedError(f"{self.__class__.__name__} does not define a compilable `_gradient_step`.")

    def train(self, gradient_steps: int | bool = True, batch_size: int = 100) -> Any:
        """The algorithm's update (``gradient_steps`` steps); ``train(True/False)`` sets nn.Module's mode.

        Args:
            gradient_steps: number of gradient steps (a bool calls ``nn.Module.train(mode)``).
            batch_size: minibatch size.
        """
        if isinstance(gradient_steps, bool):
            return super().train(gradient_steps)
        raise NotImplementedError(f"{self.__class__.__name__} must implement `train(gradient_steps, batch_size)`.")

    # ------------------------------------------------------------------
    # Data collection
    # ------------------------------------------------------------------

    def _policy_actions(self, observation: np.ndarray | dict[str, np.ndarray]) -> np.ndarray:
        """Exploration actions of the policy for a batch of observations (lean path, no checks or copies).

        Box actions are returned scaled to [-1, 1] (what the replay buffer stores), others as they are.

        Args:
            observation: batch of observations ``[n_envs, ...]`` from the VecEnv.
        """
        if self._lean_obs or self._seed_state is not None:  # K > 1: observations [K, n_envs, ...], as they are
            obs_tensor: Any = obs_as_tensor(observation, self.device)
        else:
            obs_tensor, _ = self.policy.obs_to_tensor(observation)
        with th.inference_mode():
            actions_t = self.policy._predict(obs_tensor, deterministic=False)
        if actions_t.dtype in (th.bfloat16, th.float16):
            actions_t = actions_t.float()
        actions = actions_t.cpu().numpy()
        if self._seed_state is not None:  # [K, n_envs, ...]
            actions = actions.reshape((self.n_seeds, self.n_envs, *self.action_space.shape))
        if isinstance(self.action_space, spaces.Box):
            if self._seed_state is None:
                actions = actions.reshape((-1, *self.action_space.shape))
            if not self.policy.squash_output:
                actions = self.policy.scale_action(np.clip(actions, self.action_space.low, self.action_space.high))
        return actions

    def _sample_action(
        self,
        learning_starts: int,
        action_noise: ActionNoise | None = None,
        n_envs: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Action to take and action to store: uniform random during the warm-up, else the policy's
        (plus ``action_noise`` on the [-1, 1] scale for Box spaces). K > 1 seeds: ``[K, n_envs, ...]``, each seed
        sampling from its own seeded action space, its own noise drawing from its own numpy stream.

        Args:
            learning_starts: warm-up length in env steps.
            action_noise: exploration noise (Box actions; K > 1: each member's own).
            n_envs: number of envs (per seed).
        """
        box = isinstance(self.action_space, spaces.Box)
        if self.num_timesteps < learning_starts and not (self.use_sde and self.use_sde_at_warmup):
            if self.n_seeds == 1:
                unscaled_action = np.array([self.action_space.sample() for _ in range(n_envs)])
            else:  # each seed's own seeded action space
                unscaled_action = np.array([[m.action_space.sample() for _ in range(n_envs)] for m in self.members])
            if not box:
                return unscaled_action, unscaled_action
            scaled_action = self.policy.scale_action(unscaled_action)
        else:
            assert self._last_obs is not None, "self._last_obs was not set"
            scaled_action = self._policy_actions(self._last_obs)
            if not box:
                return scaled_action, scaled_action
        if self.n_seeds == 1:
            if action_noise is not None:
                scaled_action = np.clip(scaled_action + action_noise(), -1, 1)
        else:
            scaled_action = self._add_seed_noise(scaled_action)
        return self.policy.unscale_action(scaled_action), scaled_action

    def _add_seed_noise(self, scaled: np.ndarray) -> np.ndarray:
        """K > 1: each seed's action noise added to its scaled actions (seed i's noise drawing from seed i's numpy
        stream: what its separate run draws from the global one); a seed whose actions are not finite (its networks
        diverged) is failed, naming the loss that did it when there is one.

        Args:
            scaled: the seeds' actions on the [-1, 1] scale, ``[K, n_envs, ...]``.
        """
        state = self._seed_state
        assert state is not None
        noises = [m.action_noise for m in state.members]  # type: ignore[attr-defined]
        if any(n is not None for n in noises):
            for noise, rng in zip(noises, state.np_rngs):
                if noise is not None and noise.rng is not rng:
                    noise.rng = rng
            scaled = np.stack([np.clip(a + n(), -1, 1) if n is not None else a for a, n in zip(scaled, noises)]).astype(
                scaled.dtype, copy=False
            )
        finite = np.isfinite(scaled.reshape(self.n_seeds, -1)).all(1)
        if not finite.all():
            self._apply_finite_checks()
            for i in np.flatnonzero(~finite):
                if int(i) not in self.failed:
                    self.fail_seed(int(i), f"diverged: non-finite action at step {self.num_timesteps + self.n_envs}")
        return scaled

    def _store_transition(
        self,
        replay_buffer: ReplayBuffer,
        buffer_action: np.ndarray,
        new_obs: np.ndarray | dict[str, np.ndarray],
        reward: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]] | list[list[dict[str, Any]]],
    ) -> None:
        """Store every live seed's ``(obs, next_obs, action, reward, done)``: its original (un-normalised)
        observations and rewards (its own VecNormalize), and the terminal observation as ``next_obs`` where an
        episode ended (the VecEnv already reset). K = 1 arrives in SB3's shapes and goes through the buffer's
        ``add`` (a user's ``replay_buffer_class`` too); K > 1 arrives ``[K, n_envs, ...]`` and goes into the K-seed
        storage at once, a live seed whose original reward or observation is not finite failed first (its columns
        are unused).

        Args:
            replay_buffer: the buffer (K > 1: the :class:`~lit_sb3.buffers.seed_replay.SeedReplayBuffer`).
            buffer_action: actions to store (scaled to [-1, 1] for Box spaces).
            new_obs: observations returned by the envs' step (first of a new episode where done).
            reward: rewards.
            dones: episode ends.
            infos: step infos (``terminal_observation``, ``TimeLimit.truncated``); K > 1: each seed's.
        """
        single = self.n_seeds == 1
        state, last_obs = self._seed_state, self._last_obs
        assert last_obs is not None
        if single and self._vec_normalize_env is None and not dones.any():  # K = 1, nothing to rewrite: as given
            replay_buffer.add(last_obs, new_obs, buffer_action, reward, dones, infos)  # type: ignore[arg-type]
            self._last_obs = new_obs
            return
        # K = 1: a seed dimension of one in front of SB3's shapes (numpy views), the same rules below
        seeded = (lambda obs: _obs_at(obs, None)) if single else (lambda obs: obs)
        normalizers = [self._vec_normalize_env] if single else state.normalizers  # type: ignore[union-attr]
        seed_infos = [infos] if single else infos
        normalized = any(n is not None for n in normalizers)
        original_obs = seeded(self._last_original_obs if normalized else last_obs)
        next_obs, next_original = _copy_obs(seeded(new_obs)), _copy_obs(original_obs) if normalized else None
        raw_rewards = np.array(seeded(reward), dtype=None if single else np.float32)  # (K = 1: as the env gave them)
        seed_dones = seeded(dones)
        timeouts = np.zeros(np.shape(seed_dones), dtype=np.float32)
        for i in [0] if single else self.active_seeds:
            vec_normalize = normalizers[i]
            if vec_normalize is not None:
                raw_obs = vec_normalize.get_original_obs()
                raw_rewards[i] = vec_normalize.get_original_reward()
                _set_obs(next_obs, i, raw_obs)
                _set_obs(next_original, i, raw_obs)
            for j in np.flatnonzero(seed_dones[i]):
                info = seed_infos[i][j]  # type: ignore[index]
                terminal = info.get("terminal_observation")
                if terminal is not None:
                    raw = vec_normalize.unnormalize_obs(terminal) if vec_normalize is not None else terminal
                    _set_obs(next_obs, (i, j), raw)
                timeouts[i, j] = info.get("TimeLimit.truncated", False)
            if single:  # (one run is not failed: SB3 stores what its env gave)
                continue
            bad_reward = not np.isfinite(raw_rewards[i]).all()
            if bad_reward or not _all_finite(next_obs, i):
                what = "reward" if bad_reward else "observation"
                self.fail_seed(i, f"diverged: non-finite {what} from the env at step {self.num_timesteps}")
        if single:
            replay_buffer.add(_obs_at(original_obs, 0), _obs_at(next_obs, 0), buffer_action, raw_rewards[0], dones,
                              infos)  # type: ignore[arg-type]  # fmt: skip
        else:
            replay_buffer.add(original_obs, next_obs, buffer_action, raw_rewards, dones, timeouts, infos)  # type: ignore[call-arg]
        self._last_obs = new_obs
        if normalized:
            self._last_original_obs = _obs_at(next_original, 0) if single else next_original

    def collect_rollouts(
        self,
        env: VecEnv | None,
        callback: BaseCallback,
        train_freq: TrainFreq,
        replay_buffer: ReplayBuffer,
        action_noise: ActionNoise | None = None,
        learning_starts: int = 0,
        log_interval: int | None = None,
    ) -> RolloutReturn:
        """Collect ``train_freq`` steps or episodes into ``replay_buffer`` (stops early at the env-step budget).

        One loop for K >= 1 seeds: K = 1 steps ``env`` as SB3 does; K > 1 steps every live seed's VecEnv
        (:attr:`envs`) in lockstep, one forward pass acting for all seeds (``[K, n_envs, ...]``), all K transitions
        stored at once. With ``train_freq`` in episodes, K > 1 seeds keep their own cycles
        (:attr:`_own_seed_cycles`): collection stops at the step that completes some live seed's cycle.

        Args:
            env: the training VecEnv (None for K > 1 seeds: their envs are :attr:`envs`).
            callback: called after every env step (``False`` stops training).
            train_freq: how much to collect.
            replay_buffer: where transitions go.
            action_noise: exploration noise (K > 1: each member's own).
            learning_starts: warm-up length (uniform random actions before it).
            log_interval: dump logs every ``log_interval`` episodes (of each seed).
        """
        self._set_policy_training_mode(False)
        n_envs = self.n_envs if env is None else env.num_envs
        seed_cycles = self._own_seed_cycles
        context = self.fit_context
        cadences = () if context is None else context.env_step_cadences
        if self._cycle_open:  # continue the cycle that a budget end or a step boundary interrupted
            num_collected_steps, num_collected_episodes = self._cycle_steps, self._cycle_episodes
            self._cycle_open = False
        else:
            num_collected_steps, num_collected_episodes = 0, 0
            if self.use_sde and seed_cycles is None:  # K > 1: each seed's matrices from its own stream
                self.actor.reset_noise(n_envs)  # type: ignore[operator]
            callback.on_rollout_start()
        continue_training = True
        while self._collect_more(train_freq, num_collected_steps, num_collected_episodes):
            if self.use_sde and seed_cycles is not None:
                self._reset_seed_noise(seed_cycles[0])
            elif self.use_sde and self.sde_sample_freq > 0 and num_collected_steps % self.sde_sample_freq == 0:
                self.actor.reset_noise(n_envs)  # type: ignore[operator]
            live = None if seed_cycles is None else np.array([i not in self.failed for i in range(self.n_seeds)])
            actions, buffer_actions = self._sample_action(learning_starts, action_noise, n_envs)
            new_obs, rewards, dones, infos = self._step_envs(env, actions)
            self.num_timesteps += n_envs
            num_collected_steps += 1
            budget_reached = self._has_reached_rl_budget()

            callback.update_locals(locals())
            if not callback.on_step() and not budget_reached:
                return RolloutReturn(num_collected_steps * n_envs, num_collected_episodes, continue_training=False)

            self._store_transition(replay_buffer, buffer_actions, new_obs, rewards, dones, infos)  # type: ignore[arg-type]
            self._update_seed_info(infos, dones)
            self._update_current_progress_remaining(self.num_timesteps, self._total_timesteps)
            self._on_step()
            if dones.any():
                episodes = self._end_episodes(dones, action_noise, log_interval, n_envs)
                num_collected_episodes += int(episodes.sum())
                if seed_cycles is not None:
                    seed_cycles[1] += episodes
            if seed_cycles is not None:
                seed_cycles[0] += live
            if self._stop_requested:  # every seed has failed
                return RolloutReturn(num_collected_steps * n_envs, num_collected_episodes, continue_training=False)

            if cadences and context.crossed_env_step_boundary(self.num_timesteps - n_envs, self.num_timesteps):
                context.request_boundary()
            if budget_reached or (context is not None and context.boundary_requested):
                if self._collect_more(train_freq, num_collected_steps, num_collected_episodes):
                    # the cycle is unfinished: keep its counts; it continues in the next training_step / fit
                    self._cycle_open = True
                    self._cycle_steps, self._cycle_episodes = num_collected_steps, num_collected_episodes
                    return RolloutReturn(num_collected_steps * n_envs, num_collected_episodes, continue_training)
                break

        callback.on_rollout_end()
        return RolloutReturn(num_collected_steps * n_envs, num_collected_episodes, continue_training)

    def _collect_more(self, train_freq: TrainFreq, steps: int, episodes: int) -> bool:
        """Whether the cycle goes on: SB3's ``should_collect_more_steps``; with seeds on their own cycles, until
        some live seed's cycle is complete."""
        if self._own_seed_cycles is None:
            return should_collect_more_steps(train_freq, steps, episodes)
        return not self._ended_seed_cycles().any()

    def _end_episodes(
        self, dones: np.ndarray, action_noise: ActionNoise | None, log_interval: int | None, n_envs: int
    ) -> np.ndarray:
        """Each live seed's episodes that ended at this step: counted, their env's action noise reset, the seed's
        logs dumped every ``log_interval`` of its episodes. Returns the ended episodes per seed ``[K]``.

        Args:
            dones: the step's dones (K > 1: ``[K, n_envs]``).
            action_noise: the noise (K = 1; K > 1 seeds have their members' own).
            log_interval: dump every this many episodes.
            n_envs: envs per seed.
        """
        single = self.n_seeds == 1
        seed_dones = [dones] if single else dones
        noises = [action_noise] if single else [m.action_noise for m in self.members]  # type: ignore[attr-defined]
        ended = np.zeros(self.n_seeds, dtype=np.int64)
        for i in [0] if single else self.active_seeds:
            for j in np.flatnonzero(seed_dones[i]):
                ended[i] += 1
                episode = self._count_episode(i)
                if noises[i] is not None:
                    noises[i].reset(**({"indices": [int(j)]} if n_envs > 1 else {}))
                if log_interval is not None and log_interval > 0 and episode % log_interval == 0:
                    self.dump_logs(i)
        return ended

    def _on_step(self) -> None:
        """Called after each env step; override for per-step work (e.g. DQN's target update)."""

    def dump_logs(self, i: int = 0) -> None:
        """Send time/rollout metrics and the buffered train metrics to the loggers (step = env steps); K > 1: seed
        index i's (its separate run's ``dump_logs``), as ``seed{i}/<key>``.

        Args:
            i: seed index.
        """
        state = self._seed_state
        infos, successes = self._ep_info_buffers[i], self._ep_success_buffers[i]
        assert infos is not None and successes is not None
        time_elapsed = max((time.time_ns() - self.start_time) / 1e9, sys.float_info.epsilon)
        fps = int((self.num_timesteps - self._num_timesteps_at_start) / time_elapsed)
        metrics: dict[str, Any] = {
            "time/episodes": self._episode_num if state is None else state.episode_nums[i],
            "time/fps": fps,
            "time/time_elapsed": int(time_elapsed),
            "time/total_timesteps": self.num_timesteps,
        }
        metrics.update(rollout_metrics(infos, successes))
        if self.use_sde:
            std = self.actor.get_std().detach()  # type: ignore[operator]
            metrics["train/std"] = std.mean() if state is None else std[i].mean()
        if state is None:
            self.log_metrics(metrics, step=self.num_timesteps)
        else:
            state.dump_logs(i, metrics)

    # ------------------------------------------------------------------
    # K > 1 seeds: seeds on their own update schedules
    # ------------------------------------------------------------------

    def _train_seeds(self, taking: np.ndarray, gradient_steps: int) -> None:
        """``train(gradient_steps)`` for the seeds where ``taking`` is True; the others sit out: they draw nothing
        from their random streams, their optimisers do not step (per-seed optimisers), their parameters, targets
        and update counts are as before."""
        state = self._seed_state
        assert state is not None
        mask = th.as_tensor(taking, device=self.device)
        snapshot = [link.stacked.detach().clone() for link in state.links]
        n_updates = np.array(self._n_updates)
        optimizers = list(self._optimizers_to_save().values())
        state.update_mask, state.update_seeds = mask, taking
        for optimizer in optimizers:
            optimizer.active = mask  # type: ignore[attr-defined]
        try:
            with self._only_seed_streams(taking):
                self.train(gradient_steps=gradient_steps, batch_size=self.batch_size)
        finally:
            state.update_mask, state.update_seeds = None, None
            for optimizer in optimizers:
                optimizer.active = None  # type: ignore[attr-defined]
            self._n_updates = np.where(taking, self._n_updates, n_updates)
            k = self.n_seeds
            with th.no_grad():
                for link, value in zip(state.links, snapshot):
                    for i in np.flatnonzero(~taking):
                        link.stacked.view(k, -1)[i].copy_(value.view(k, -1)[i])
        self._restore_failed()

    def _reset_seed_noise(self, cycle_steps: np.ndarray) -> None:
        """gSDE with per-seed cycles: redraw the exploration matrices of the seeds whose own cycle starts now and
        then of those at a multiple of ``sde_sample_freq`` steps into it (collect_rollouts' two redraws, in its
        order); the other seeds draw nothing and keep theirs.

        Args:
            cycle_steps: each seed's steps so far in its own cycle.
        """
        redraws = [cycle_steps == 0]
        if self.sde_sample_freq > 0:
            redraws.append(cycle_steps % self.sde_sample_freq == 0)
        for seeds in redraws:
            if seeds.all():
                self.actor.reset_noise(self.n_envs)  # type: ignore[operator]
            elif seeds.any():
                with self._only_seed_streams(seeds):
                    self.actor.reset_noise(self.n_envs)  # type: ignore[operator]

    @contextlib.contextmanager
    def _only_seed_streams(self, seeds: np.ndarray) -> Iterator[None]:
        """Within the block only ``seeds``' (host ``[K]`` bool) random streams draw: the others' generator slots are
        empty (they draw nothing, and gSDE matrices they drew before are kept)."""
        state = self._seed_state
        assert state is not None and state.generators is not None
        generators, saved = state.generators, list(state.generators)
        for i in np.flatnonzero(~seeds):
            generators[i] = None  # type: ignore[call-overload]
        try:
            yield
        finally:
            generators[:] = saved

    def _sample_replay(self, batch_size: int) -> Any:
        """A minibatch for the update: ``[batch, ...]`` tensors at K = 1 (the replay buffer's sample, as before),
        ``[K, batch, ...]`` at K > 1 (each seed's own indices from its own stream, observations and rewards
        normalised with each seed's VecNormalize)."""
        state, buffer = self._seed_state, self.replay_buffer
        assert buffer is not None
        if state is None:
            return buffer.sample(batch_size, env=self._vec_normalize_env)
        assert isinstance(buffer, SeedReplayBuffer) and state.generators is not None
        rngs = None
        if buffer.her is not None:  # seed i's relabelling from its numpy stream (a seed sitting out or failed: none)
            rngs = [
                rng if generator is not None and i not in self.failed else None
                for i, (rng, generator) in enumerate(zip(state.np_rngs, state.generators))
            ]
        if not any(vn is not None for vn in state.normalizers):
            return buffer.sample(batch_size, state.generators, rngs, state.envs)
        # n-step returns: each step's reward normalised before the window's sum, as NStepReplayBuffer does
        n_step = self.n_steps > 1
        normalize = self._normalize_seed_rewards if n_step else None
        data = buffer.sample(batch_size, state.generators, rngs, state.envs, normalize)
        obs, next_obs = data.observations.cpu().numpy(), data.next_observations.cpu().numpy()
        for i, vn in enumerate(state.normalizers):
            if vn is not None:
                obs[i], next_obs[i] = vn.normalize_obs(obs[i]), vn.normalize_obs(next_obs[i])
        dev = self.device
        return data._replace(
            observations=th.as_tensor(obs, device=dev),
            next_observations=th.as_tensor(next_obs, device=dev),
            rewards=data.rewards if n_step else self._normalize_seed_rewards(data.rewards),
        )

    def _normalize_seed_rewards(self, rewards: th.Tensor) -> th.Tensor:
        """Stored rewards ``[K, ...]`` normalised with each seed's VecNormalize (float32, on the model's device)."""
        state = self._seed_state
        assert state is not None
        values = rewards.cpu().numpy()
        for i, vn in enumerate(state.normalizers):
            if vn is not None:
                values[i] = vn.normalize_reward(values[i])
        return th.as_tensor(values, device=self.device)

    def replay_buffer_of(self, i: int) -> ReplayBuffer:
        """Seed index i's transitions as the buffer its separate run has (K > 1: a ``ReplayBuffer``,
        ``DictReplayBuffer``, ``NStepReplayBuffer`` or ``HerReplayBuffer`` with seed i's episodes, on seed i's env;
        e.g. ``m = model.member(i); m.replay_buffer = model.replay_buffer_of(i)`` to continue that seed alone).
        At K = 1: the replay buffer.

        Args:
            i: seed index.
        """
        self._check_seed_index(i)
        storage = self.replay_buffer
        if not isinstance(storage, SeedReplayBuffer):
            if storage is None:
                raise RuntimeError("there is no replay buffer yet: train the model (fit) first.")
            return storage
        member = self.members[i]
        buffer_class: type[ReplayBuffer] = member.replay_buffer_class  # type: ignore[attr-defined]
        kwargs: dict[str, Any] = {
            "n_envs": self.n_envs,
            "handle_timeout_termination": storage.handle_timeout_termination,
        }
        if storage.her is not None:
            kwargs.update(env=self.envs[i] if self.envs else None, copy_info_dict=storage.infos is not None)
            kwargs.update(
                goal_selection_strategy=storage.goal_selection_strategy, n_sampled_goal=storage.n_sampled_goal
            )
        elif issubclass(buffer_class, NStepReplayBuffer):
            kwargs.update(n_steps=self.n_steps, gamma=self.gamma)
        else:
            kwargs["optimize_memory_usage"] = self.optimize_memory_usage
        buffer = buffer_class(self.buffer_size, self.observation_space, self.action_space, device=self.device, **kwargs)
        buffer.storage.take_seed(storage, i)
        return buffer

    # ------------------------------------------------------------------
    # Replay buffer I/O (npz, no pickle)
    # ------------------------------------------------------------------

    def save_replay_buffer(self, path: str | pathlib.Path | io.BufferedIOBase) -> None:
        """Save the replay buffer as an ``.npz`` file (``.npz`` is added to a path without a suffix).

        Args:
            path: file path (parent folders are created) or writable binary file object.
        """
        if self.replay_buffer is None:
            raise RuntimeError("There is no replay buffer to save yet: train the model first.")
        if isinstance(self.replay_buffer, SeedReplayBuffer):
            raise NotImplementedError(
                f"save_replay_buffer saves one seed's buffer; this model holds {self.n_seeds} seeds: save seed index "
                "i's with model.replay_buffer_of(i).save(path) (a Lightning checkpoint keeps the K seeds' storage)."
            )
        if isinstance(path, (str, pathlib.Path)):
            path = pathlib.Path(path)
            if path.suffix == "":
                path = path.with_suffix(".npz")
            path.parent.mkdir(parents=True, exist_ok=True)
        self.replay_buffer.save(path)  # type: ignore[arg-type]

    def load_replay_buffer(
        self,
        path: str | pathlib.Path | io.BufferedIOBase,
        truncate_last_traj: bool = True,
    ) -> None:
        """Load a replay buffer saved with :meth:`save_replay_buffer` (nothing is unpickled).

        Args:
            path: ``.npz`` file path (``.npz`` may be omitted) or readable binary file object.
            truncate_last_traj: HerReplayBuffer only: mark the last (unfinished) episode as ended (True), or
                continue it (False).
        """
        if getattr(self, "observation_space", None) is None:
            raise RuntimeError(
                "load_replay_buffer needs the model's spaces: train or load the model (with its env) first."
            )
        if self._seed_state is not None:
            raise NotImplementedError(
                f"load_replay_buffer loads one seed's buffer; this model holds {self.n_seeds} seeds: load it into "
                "the single model of that seed (model.member(i)) or resume the K seeds from a Lightning checkpoint."
            )
        if isinstance(path, (str, pathlib.Path)):
            path = pathlib.Path(path)
            if not path.exists() and path.suffix == "":
                path = path.with_suffix(".npz")
        class_name = ReplayBuffer.saved_class_name(path)  # the checks of ReplayBuffer.load (BadFileError)
        buffer_class = _BUFFER_CLASSES.get(class_name)
        if buffer_class is None:
            if self.replay_buffer is not None and type(self.replay_buffer).__name__ == class_name:
                buffer_class = type(self.replay_buffer)
            else:
                where = path if isinstance(path, pathlib.Path) else getattr(path, "name", "<file object>")
                raise BadFileError(
                    f"{where}: unknown replay buffer class {class_name!r}; known: {', '.join(sorted(_BUFFER_CLASSES))}"
                )
        if issubclass(buffer_class, HerReplayBuffer):
            if self.env is None:
                raise ValueError("You must attach an environment (set_env or load(env=...)) to load a HerReplayBuffer.")
            buffer = buffer_class.load(
                path, self.observation_space, self.action_space, device=self.device, env=self.env
            )
            if truncate_last_traj:
                buffer.truncate_last_trajectory()
        else:
            buffer = buffer_class.load(path, self.observation_space, self.action_space, device=self.device)
        self._attach_replay_buffer(buffer)

    # ------------------------------------------------------------------
    # SB3-compatible _setup_learn / learn
    # ------------------------------------------------------------------

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        run_name: str = "run",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        if reset_num_timesteps:  # a fresh count starts a fresh cycle
            self._cycle_open, self._cycle_steps, self._cycle_episodes = False, 0, 0
        replay_buffer = self.replay_buffer
        truncate_last_traj = (
            self.optimize_memory_usage
            and reset_num_timesteps
            and replay_buffer is not None
            and (replay_buffer.full or replay_buffer.pos > 0)
        )
        if truncate_last_traj:
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated, "
                "see https://github.com/DLR-RM/stable-baselines3/issues/46."
                "You should use `reset_num_timesteps=False` or `optimize_memory_usage=False`"
                "to avoid that issue.",
                stacklevel=2,
            )
            assert replay_buffer is not None
            storage = replay_buffer if isinstance(replay_buffer, SeedReplayBuffer) else replay_buffer.storage
            storage.truncate_last_trajectory()
        if self._seed_state is not None:
            if reset_num_timesteps and self._seeds_sit_out() and self.policy_ready:
                self._seed_cycles[:] = 0
            if isinstance(replay_buffer, SeedReplayBuffer) and replay_buffer.her is not None:
                self._check_her_envs(self.envs)
            if self.n_envs > 1:
                for member in self.members:
                    noise = member.action_noise  # type: ignore[attr-defined]
                    if noise is not None and not isinstance(noise, VectorizedActionNoise):
                        member.action_noise = VectorizedActionNoise(noise, self.n_envs)  # type: ignore[attr-defined]
            return super()._setup_learn(total_timesteps, callback, run_name, reset_num_timesteps, progress_bar)
        assert self.env is not None
        if (
            self.action_noise is not None
            and self.env.num_envs > 1
            and not isinstance(self.action_noise, VectorizedActionNoise)
        ):
            self.action_noise = VectorizedActionNoise(self.action_noise, self.env.num_envs)

        return super()._setup_learn(total_timesteps, callback, run_name, reset_num_timesteps, progress_bar)

    @property
    def _default_log_every_n_steps(self) -> int:
        return 4

    def _prepare_fit(self) -> None:
        self._convert_train_freq()
        self._build_param_lists()

    # ------------------------------------------------------------------
    # Lightning checkpoints: replay buffer, noise and counters
    # ------------------------------------------------------------------

    def _extra_checkpoint_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "action_noise": noise_to_dict(self.action_noise) if self.action_noise is not None else None,
            "cycle": [int(self._cycle_open), int(self._cycle_steps), int(self._cycle_episodes)],
        }
        if isinstance(self.replay_buffer, SeedReplayBuffer):  # K > 1 seeds: the stacked storage's tensors
            state["seed_replay_buffer"] = self.replay_buffer.state_dict()
        elif self.replay_buffer is not None:
            # the buffer's own npz format, kept as bytes in a uint8 tensor (loads with weights_only=True)
            stream = io.BytesIO()
            self.replay_buffer.save(stream)
            state["replay_buffer"] = th.frombuffer(bytearray(stream.getvalue()), dtype=th.uint8)
        return state

    def _load_extra_checkpoint_state(self, state: dict[str, Any]) -> None:
        if state.get("action_noise") is not None:
            self.action_noise = noise_from_dict(state["action_noise"])
        cycle_open, self._cycle_steps, self._cycle_episodes = state.get("cycle", (0, 0, 0))
        self._cycle_open = bool(cycle_open)
        if state.get("seed_replay_buffer") is not None:
            assert isinstance(self.replay_buffer, SeedReplayBuffer)
            self.replay_buffer.load_state_dict(state["seed_replay_buffer"])
        data = state.get("replay_buffer")
        if data is not None:
            assert self.replay_buffer is not None
            stream = io.BytesIO(data.numpy().tobytes())
            kwargs: dict[str, Any] = {"env": self.env} if isinstance(self.replay_buffer, HerReplayBuffer) else {}
            buffer = type(self.replay_buffer).load(
                stream, self.observation_space, self.action_space, device=self.device, **kwargs
            )
            self._attach_replay_buffer(buffer)
