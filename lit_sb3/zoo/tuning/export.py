"""Results of a study: the best trial as a zoo-format YAML entry, the best-trials table, and the figures.

The exported file is a zoo config overlay::

    # bench tune: study ppo-CartPole-v1, trial 7, value 500 (final evaluation, mean over 2 seeds)
    CartPole-v1:
      n_timesteps: 100000
      policy: MlpPolicy
      batch_size: 64
      ...
      policy_kwargs: dict(net_arch=dict(pi=[64], vf=[64]), activation_fn=nn.Tanh)

It holds the tuned hyperparameters (sampled and fixed, converted as :func:`to_hyperparameters` does), the budget
and the policy; ``bench run --config FILE`` layers it over the built-in config, which supplies everything not
tuned (``n_envs``, ``normalize``, ...), exactly as during the study.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lit_sb3.zoo.errors import BenchError

__all__ = ["best_entry", "write_best_yaml", "print_best_trials", "log_study_figures"]


def best_entry(study: Any, tuned_budget: bool = False) -> tuple[dict[str, Any], Any]:
    """``({env_id: {...}}, best_trial)`` of a study made by ``bench tune``.

    Args:
        study: the Optuna study.
        tuned_budget: ``n_timesteps`` is the study's (short) budget; default: the zoo config's (the study's when the
            config sets none).
    """
    from lit_sb3.zoo.config import resolve

    try:
        trial = study.best_trial
    except ValueError:
        raise BenchError(f"study '{study.study_name}' has no complete trial yet") from None
    attrs = study.user_attrs
    algo, env_id = attrs.get("algo"), attrs.get("env_id")
    if not algo or not env_id:
        raise BenchError(f"study '{study.study_name}' was not made by bench tune (no algo/env_id attributes)")
    base = resolve(algo, env_id)
    budget = int(attrs.get("n_timesteps") or 0) if tuned_budget or not base.n_timesteps else int(base.n_timesteps)
    entry: dict[str, Any] = {"n_timesteps": budget, "policy": base.policy}
    entry.update(trial.user_attrs.get("hyperparameters", {}))
    return {env_id: entry}, trial


def write_best_yaml(study: Any, path: str | Path, tuned_budget: bool = False) -> Path:
    """Write the best trial as a zoo-format YAML file; returns the path. Its header says the budget the trial
    was tuned at; its ``n_timesteps`` is the zoo config's unless ``tuned_budget``.

    Args:
        study: the study.
        path: the file (folders are created).
        tuned_budget: keep the study's budget (``--export-tuned-budget``).
    """
    import yaml

    data, trial = best_entry(study, tuned_budget)
    attrs = study.user_attrs
    seeds = attrs.get("seeds_per_trial", 1)
    how = "final evaluation" if attrs.get("objective", "final") == "final" else "mean of the last evaluations"
    tuned = int(attrs.get("n_timesteps") or 0)
    exported = next(iter(data.values()))["n_timesteps"]
    budget = ("the same budget" if exported == tuned else
              f"n_timesteps below is the zoo config's {exported:,}; bench tune --export-tuned-budget keeps the tuning one")  # fmt: skip
    header = (f"# bench tune: study {study.study_name}, trial {trial.number}, value {trial.value:.6g} "
              f"({how}, mean over {seeds} seed{'s' if seeds != 1 else ''}), algo {attrs.get('algo')}\n"
              f"# tuned at {tuned:,} env steps per seed; {budget}\n")  # fmt: skip
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return out


def print_best_trials(study: Any, top: int = 10) -> None:
    """Print the best COMPLETE trials and the count of every state as a rich table.

    Args:
        study: the study.
        top: how many trials to show.
    """
    from optuna.trial import TrialState
    from rich.console import Console
    from rich.table import Table

    trials = study.get_trials(deepcopy=False)
    complete = sorted((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: -t.value)
    counts = {s.name: sum(t.state == s for t in trials) for s in TrialState if any(t.state == s for t in trials)}
    console = Console(file=sys.stdout, width=160)
    attrs = study.user_attrs
    console.print(
        f"study [bold]{study.study_name}[/bold]: {attrs.get('algo')} on {attrs.get('env_id')}, "
        f"{len(trials)} trials (" + ", ".join(f"{k.lower()} {v}" for k, v in counts.items()) + ")",
        highlight=False,
    )
    table = Table(title=f"best {min(top, len(complete))} trials")
    for column in ("number", "value", "state", "env steps", "params"):
        table.add_column(column, overflow="fold")
    for t in complete[:top]:
        params = ", ".join(f"{k}={_short(v)}" for k, v in t.params.items())
        table.add_row(str(t.number), f"{t.value:.6g}", t.state.name, str(t.user_attrs.get("env_steps", "")), params)
    console.print(table)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def log_study_figures(study: Any, client: Any, run_id: str, log: Any = print) -> list[str]:
    """Log the optimisation history and parameter importances (PNG) on the study's MLflow run.

    Importances use fANOVA when scikit-learn is installed, else Optuna's PED-ANOVA; they need at least two
    complete trials and are skipped (with a message) otherwise.

    Args:
        study: the study.
        client: the study run's :class:`~lit_sb3.zoo.tracking.Tracking` (``log_figure``, ``log_dict``).
        run_id: the study run.
        log: where to print messages.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import optuna
    from optuna.trial import TrialState
    from optuna.visualization import matplotlib as ovm

    logged: list[str] = []
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExperimentalWarning of optuna.visualization.matplotlib
        if complete:
            ax = ovm.plot_optimization_history(study)
            client.log_figure(run_id, ax.figure, "optimization_history.png")
            plt.close(ax.figure)
            logged.append("optimization_history.png")
        else:
            log("no complete trial: optimisation history not plotted")
        if len(complete) < 2:
            log(f"parameter importances skipped: {len(complete)} complete trial(s), need at least 2")
            return logged
        try:
            import sklearn  # noqa: F401

            evaluator: Any = optuna.importance.FanovaImportanceEvaluator(seed=0)
        except ImportError:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        try:
            ax = ovm.plot_param_importances(study, evaluator=evaluator)
            client.log_figure(run_id, ax.figure, "param_importances.png")
            plt.close(ax.figure)
            importances = optuna.importance.get_param_importances(study, evaluator=evaluator)
            client.log_dict(run_id, {k: float(v) for k, v in importances.items()}, "param_importances.json")
            logged += ["param_importances.png", "param_importances.json"]
        except Exception as exc:  # noqa: BLE001 - e.g. no parameter varies among complete trials
            log(
                f"parameter importances skipped: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            )
    return logged
