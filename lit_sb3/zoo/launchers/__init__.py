"""Launchers run the units of the suite (a grid's jobs and seed batches, ``bench tune``'s workers as tasks):
:class:`~lit_sb3.zoo.launchers.local.LocalLauncher` (a process per unit on this machine) and
:class:`~lit_sb3.zoo.launchers.ray_launcher.RayLauncher` (a Ray task per unit), behind the same
:class:`~lit_sb3.zoo.launchers.base.Launcher` interface."""

from lit_sb3.zoo.launchers.base import JobDone, JobStarted, Launcher, LaunchEvent, RunBook, Task, TaskDone

__all__ = ["Launcher", "LaunchEvent", "JobStarted", "JobDone", "RunBook", "Task", "TaskDone", "get_launcher"]


def get_launcher(name: str, **kwargs: object) -> Launcher:
    """The launcher called ``name`` (``local`` or ``ray``).

    Args:
        name: launcher name.
        kwargs: its constructor arguments.
    """
    from lit_sb3.zoo.errors import BenchError, did_you_mean

    if name == "local":
        from lit_sb3.zoo.launchers.local import LocalLauncher

        return LocalLauncher(**kwargs)  # type: ignore[arg-type]
    if name == "ray":
        from lit_sb3.zoo.launchers.ray_launcher import RayLauncher

        return RayLauncher(**kwargs)  # type: ignore[arg-type]
    raise BenchError(f"unknown launcher '{name}'{did_you_mean(name, ['local', 'ray'])}; known: local, ray")
