"""SB3-style callbacks, which are also Lightning callbacks.

An RL callback sees the algorithm at every env step (``on_step``) and at rollout boundaries, exactly as in SB3.
Because :class:`BaseCallback` subclasses ``lightning.pytorch.Callback``, RLTrainer attaches it to the trainer
so that Lightning hooks (``on_train_start``, ``on_save_checkpoint``, ...) can be used as well.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lightning.pytorch.callbacks import Callback as LightningCallback

from lit_sb3.core.logger import Logger

if TYPE_CHECKING:
    from lit_sb3.algorithms.base import BaseAlgorithm

__all__ = [
    "BaseCallback",
    "CallbackList",
    "ConvertCallback",
    "EventCallback",
    "EveryNTimesteps",
    "LogEveryNTimesteps",
    "StopTrainingOnMaxEpisodes",
]


class BaseCallback(LightningCallback, ABC):
    """Base class for RL callbacks.

    Once bound to a model, ``self.logger`` is SB3's logger API over the run's loggers
    (:class:`~lit_sb3.core.logger.Logger`): ``self.logger.record("custom/x", value)`` reaches TensorBoard, CSV,
    MLflow, ... with the model's next dump, at the env step it was recorded; ``self.logger.dump(step)`` sends at once.

    Args:
        verbose: 0 no output, 1 info messages, 2 debug messages.
    """

    def __init__(self, verbose: int = 0) -> None:
        super().__init__()
        self.n_calls = 0
        self.num_timesteps = 0
        self.verbose = verbose
        self.locals: dict[str, Any] = {}
        self.globals: dict[str, Any] = {}
        self.parent: BaseCallback | None = None
        self.model: BaseAlgorithm | None = None
        self.logger: Logger | None = None

    @property
    def training_env(self):
        assert self.model is not None
        return self.model.get_env()

    def init_callback(self, model: BaseAlgorithm) -> None:
        """Bind the callback to ``model`` (called once per ``fit``)."""
        self.model = model
        self.logger = Logger(model)
        self._init_callback()

    def _init_callback(self) -> None:
        pass

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        self.locals = locals_
        self.globals = globals_
        assert self.model is not None
        self.num_timesteps = self.model.num_timesteps
        self._on_training_start()

    def _on_training_start(self) -> None:
        pass

    def on_rollout_start(self) -> None:
        self._on_rollout_start()

    def _on_rollout_start(self) -> None:
        pass

    def _on_step(self) -> bool:
        """Return False to stop training."""
        return True

    def on_step(self) -> bool:
        """Called after every ``env.step`` (all sub-envs at once). Return False to stop training."""
        self.n_calls += 1
        assert self.model is not None
        self.num_timesteps = self.model.num_timesteps
        return self._on_step()

    def on_training_end(self) -> None:
        self._on_training_end()

    def _on_training_end(self) -> None:
        pass

    def on_rollout_end(self) -> None:
        self._on_rollout_end()

    def _on_rollout_end(self) -> None:
        pass

    def update_locals(self, locals_: dict[str, Any]) -> None:
        """Give the callback the collection loop's local variables (``infos``, ``dones``, ...)."""
        self.locals.update(locals_)
        self.update_child_locals(locals_)

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        pass


class EventCallback(BaseCallback):
    """A callback that triggers a child callback on an event.

    Args:
        callback: the child callback, called when the event fires.
        verbose: verbosity level.
    """

    def __init__(self, callback: BaseCallback | None = None, verbose: int = 0) -> None:
        super().__init__(verbose=verbose)
        self.callback = callback
        if callback is not None:
            self.callback.parent = self

    def init_callback(self, model: BaseAlgorithm) -> None:
        super().init_callback(model)
        if self.callback is not None:
            self.callback.init_callback(self.model)  # type: ignore[arg-type]

    def _on_training_start(self) -> None:
        if self.callback is not None:
            self.callback.on_training_start(self.locals, self.globals)

    def _on_event(self) -> bool:
        if self.callback is not None:
            return self.callback.on_step()
        return True

    def _on_step(self) -> bool:
        return True

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        if self.callback is not None:
            self.callback.update_locals(locals_)


class CallbackList(BaseCallback):
    """Several callbacks called in order; training stops if any returns False.

    Args:
        callbacks: the callbacks.
    """

    def __init__(self, callbacks: list[BaseCallback]) -> None:
        super().__init__()
        if not isinstance(callbacks, list):
            raise TypeError(f"CallbackList expects a list of callbacks, got {type(callbacks).__name__}.")
        self.callbacks = callbacks

    def _init_callback(self) -> None:
        for callback in self.callbacks:
            callback.init_callback(self.model)  # type: ignore[arg-type]
            if self.parent is not None:
                callback.parent = self.parent

    def _on_training_start(self) -> None:
        for callback in self.callbacks:
            callback.on_training_start(self.locals, self.globals)

    def _on_rollout_start(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_start()

    def _on_step(self) -> bool:
        continue_training = True
        for callback in self.callbacks:
            continue_training = callback.on_step() and continue_training
        return continue_training

    def _on_rollout_end(self) -> None:
        for callback in self.callbacks:
            callback.on_rollout_end()

    def _on_training_end(self) -> None:
        for callback in self.callbacks:
            callback.on_training_end()

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.update_locals(locals_)

    # Lightning hooks are forwarded to the children so that they participate in fit as well.
    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:  # type: ignore[override]
        for callback in self.callbacks:
            callback.on_save_checkpoint(trainer, pl_module, checkpoint)

    def on_load_checkpoint(self, trainer, pl_module, checkpoint) -> None:  # type: ignore[override]
        for callback in self.callbacks:
            callback.on_load_checkpoint(trainer, pl_module, checkpoint)


class ConvertCallback(BaseCallback):
    """Wrap a function ``f(locals, globals) -> bool`` as a callback.

    Args:
        callback: the function (return False to stop training).
        verbose: verbosity level.
    """

    def __init__(self, callback: Callable[[dict[str, Any], dict[str, Any]], bool] | None, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.callback = callback

    def _on_step(self) -> bool:
        if self.callback is not None:
            return self.callback(self.locals, self.globals)
        return True


class EveryNTimesteps(EventCallback):
    """Trigger ``callback`` every ``n_steps`` env steps.

    Args:
        n_steps: number of env steps between two triggers.
        callback: the callback to trigger.
    """

    def __init__(self, n_steps: int, callback: BaseCallback) -> None:
        super().__init__(callback)
        if n_steps <= 0:
            raise ValueError(f"EveryNTimesteps needs n_steps > 0, got {n_steps}.")
        self.n_steps = n_steps
        self.last_time_trigger = 0

    def _on_step(self) -> bool:
        if (self.num_timesteps - self.last_time_trigger) >= self.n_steps:
            self.last_time_trigger = self.num_timesteps
            return self._on_event()
        return True


class LogEveryNTimesteps(EveryNTimesteps):
    """Dump the logs every ``n_steps`` env steps (SB3's; pair it with ``learn(log_interval=None)``).

    Args:
        n_steps: number of env steps between two dumps.
    """

    def __init__(self, n_steps: int) -> None:
        super().__init__(n_steps, callback=ConvertCallback(self._log_data))

    def _log_data(self, _locals: dict[str, Any], _globals: dict[str, Any]) -> bool:
        assert self.logger is not None
        self.logger.dump(self.num_timesteps)
        return True


class StopTrainingOnMaxEpisodes(BaseCallback):
    """Stop after ``max_episodes`` episodes (counted over all sub-envs).

    Args:
        max_episodes: maximum number of episodes.
        verbose: verbosity level.
    """

    def __init__(self, max_episodes: int, verbose: int = 0) -> None:
        super().__init__(verbose=verbose)
        self.max_episodes = max_episodes
        self._total_max_episodes = max_episodes
        self.n_episodes = 0

    def _init_callback(self) -> None:
        assert self.model is not None
        self._total_max_episodes = self.max_episodes * self.model.n_envs

    def _on_step(self) -> bool:
        assert "dones" in self.locals, (
            "`dones` variable is not defined, please check your code next to `callback.on_step()`"
        )
        self.n_episodes += int(sum(self.locals["dones"]))
        continue_training = self.n_episodes < self._total_max_episodes
        if self.verbose >= 1 and not continue_training:
            print(f"Stopping training: reached max_episodes={self.max_episodes} episodes per env.")
        return continue_training
