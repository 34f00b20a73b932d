"""The report's content: per algorithm × env protocol and hyperparameters, the summary lines (verdicts from
:mod:`lit_sb3.zoo.report.control`), and the blocks of every section (summary, budget/protocol, aggregates, per-env results, hyperparameters,
normalisation constants, failed runs, timing, provenance)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lit_sb3.zoo import stats
from lit_sb3.zoo.report.blocks import Block, _ci, _fmt, _int, _n, _steps
from lit_sb3.zoo.report.control import decision_text
from lit_sb3.zoo.results import Results

#: params shown in the budget/protocol table rather than among the hyperparameters (``seed`` varies per run)
_PROTOCOL_KEYS = ("n_timesteps", "n_timesteps_requested", "eval_freq", "eval_episodes", "seed")


def _hyperparams(runs: list[Any]) -> dict[str, str]:
    """One algo × env's hyperparameters from its runs' params (values that differ between seeds joined by " | ").

    ``seed`` and the budget/protocol keys are left out (shown elsewhere); a Lightning-logged duplicate
    ``model.K`` is dropped when ``K`` or ``algo_kwargs.K`` is there too.
    """
    merged: dict[str, set[str]] = {}
    for r in runs:
        for k, v in r.params.items():
            merged.setdefault(k, set()).add(v)
    out = {}
    for k, vs in merged.items():
        if k in _PROTOCOL_KEYS:
            continue
        if k.startswith("model.") and (k[6:] in merged or f"algo_kwargs.{k[6:]}" in merged):
            continue
        out[k] = " | ".join(sorted(vs))
    return out


def _protocol(results: Results, env: str, algo: str) -> dict[str, Any]:
    runs = results.select(algo, env)

    def values(key: str) -> str:
        found = sorted({r.params.get(key, "") for r in runs} - {""}, key=lambda v: (len(v), v))
        return ", ".join(_int(float(v)) if v.isdigit() else v for v in found) if found else "—"

    budgets = [float(r.params["n_timesteps"]) for r in runs if r.params.get("n_timesteps", "").isdigit()]
    asked = [float(r.params["n_timesteps_requested"]) for r in runs
             if r.params.get("n_timesteps_requested", "").isdigit()]  # fmt: skip
    return {
        "budget_requested": _steps(asked) if asked else "—",
        "budget": _steps(budgets),
        "budget_values": sorted({int(b) for b in budgets}),
        "env_steps": _steps([r.total_timesteps for r in runs]),
        "env_steps_values": sorted({int(r.total_timesteps) for r in runs if np.isfinite(r.total_timesteps)}),
        "eval_freq": values("eval_freq"),
        "eval_episodes": values("eval_episodes"),
        "deterministic": values("eval_deterministic")
        if any("eval_deterministic" in r.params for r in runs)
        else "True",
    }


def _summary(
    agg: dict[str, dict[str, stats.Interval]],
    verdicts: list[dict[str, Any]],
    scale: str,
    counts: dict[str, list[int]],
    tasks: list[str],
    algo_steps: dict[str, str],
) -> list[str]:
    lines = []
    if agg:
        best = max(agg, key=lambda a: agg[a]["iqm"].point)
        lines.append(
            f"Highest IQM {scale}: {best} ({_ci(agg[best]['iqm'])}), over {_n(sum(counts[best]), 'run')} on "
            f"{_n(len(tasks), 'env')}, {algo_steps[best]} env steps per run."
        )
    for d in verdicts:
        x, y, iv = d["x"], d["y"], d["interval"]
        if d["kind"] == "better" and d["winner"] == y:  # state it from the winner's side: P(Y > X) = 1 - P(X > Y)
            x, y, iv = y, x, stats.Interval(1.0 - iv.point, 1.0 - iv.high, 1.0 - iv.low)
        lines.append(
            f"{d['verdict']}: P({x} > {y}) = {_ci(iv)} (95 % bootstrap CI); rests on {d['runs']} runs "
            f"({d['x']}: n={d['n_x']}, {d['y']}: n={d['n_y']} per env) on {_n(d['tasks'], 'env')}, "
            f"{d['env_steps']} env steps per run; {decision_text(d)}."
        )
    return lines


def _blocks(
    a: dict[str, Any],
    verdicts: list[dict[str, Any]],
    figs: list[tuple[str, str]],
    env_figs: dict[str, tuple[str, str]],
    results: Results,
) -> list[Block]:
    prov, tasks, scale = a["provenance"], a["tasks"], a["scale"]
    b: list[Block] = [Block("h1", a["title"]), Block("code", a["command"])]
    if a["sample_warning"]:
        b.append(Block("warn", a["sample_warning"]))
    b.append(Block("h2", "Summary"))
    b.append(
        Block(
            "p",
            f"{_n(len(results.runs), 'finished run')} of {_n(len(results.algos), 'algorithm')} on "
            f"{_n(len(results.envs), 'env')}. Aggregates of {scale} over {_n(len(tasks), 'env')} "
            f"({', '.join(tasks) or 'none'}), 95 % stratified-bootstrap CIs with {_int(a['reps'])} reps "
            f"(seed {a['seed']}, engine {a['engine']}"
            + ("" if a["engine"] == "rliable" else ": vectorised, checked against rliable.library")
            + (f"); verdicts: {a['verdict_rule']}" if a["verdict_rule"] else ")")
            + (f"; score table version {a['table_version']}." if a["table_version"] is not None else "."),
        )
    )
    b.append(Block("ul", items=a["summary"] or ["Not enough data for comparisons."]))
    if a["warnings"]:
        b += [Block("h2", "Warnings"), Block("ul", items=a["warnings"])]

    b.append(Block("h2", "Budget and evaluation protocol"))
    rows = []
    for env, per_algo in a["protocol"].items():
        for algo, p in per_algo.items():
            rows.append(
                [
                    env,
                    algo,
                    p.get("budget_requested", "—"),
                    p["budget"],
                    p["env_steps"],
                    p["eval_freq"],
                    p["eval_episodes"],
                    p["deterministic"],
                ]  # fmt: skip
            )
    b.append(
        Block(
            "table",
            headers=[
                "env",
                "algo",
                "budget asked (env steps)",
                "budget run (on-policy: rounded up to whole rollouts)",
                "env steps trained",
                "eval requested every (env steps)",
                "episodes per eval",
                "deterministic",
            ],
            items=rows,
        )
    )
    b.append(
        Block(
            "p",
            "A run's score is its final evaluation (mean return over the episodes above, on a separate eval env "
            "with VecNormalize statistics synced); the learning curves keep every periodic evaluation. On-policy "
            "algorithms evaluate at the first rollout boundary at or after each requested step, after the update.",
        )
    )
    if a["aggregates"]:
        b.append(Block("h2", "Aggregate metrics"))
        b.append(
            Block(
                "table",
                headers=["algo", "runs", "median", "IQM", "mean", "optimality gap"],
                items=[
                    [algo, sum(a["runs_per_task"][algo]), *(_ci(stats.Interval(**d[m])) for m in stats.METRICS)]
                    for algo, d in a["aggregates"].items()
                ],
            )
        )
    if verdicts:
        b.append(Block("h2", "Probability of improvement"))
        b.append(
            Block(
                "table",
                headers=[
                    "X",
                    "Y",
                    "P(X > Y) [95 % bootstrap CI]",
                    "runs per env (X + Y)",
                    "decided on",
                    "p",
                    "verdict",
                ],  # fmt: skip
                items=[
                    [
                        d["x"],
                        d["y"],
                        _ci(d["interval"]),
                        f"{d['n_x']} + {d['n_y']}",
                        f"{d['comparison']}, {d['seeds']} seeds per algorithm" if d["seeds"] else "—",
                        f"{d['p_value']:.3g}" if d["p_value"] is not None else "—",
                        d["verdict"],
                    ]
                    for d in verdicts
                ],  # fmt: skip
            )
        )
        b.append(
            Block(
                "p",
                f"Verdicts: {a['verdict_rule']} (the section Verdicts with error control lists every comparison). "
                "A pair is decided by its comparison over all aggregated envs (its aggregate P(X > Y), or its one "
                "env). The bootstrap CI is an interval estimate only: it decides nothing.",
            )
        )
    for path, caption in figs:
        b.append(Block("fig", caption, path=path))

    b.append(Block("h2", "Per-env results"))
    rows = []
    for env, per_algo in a["per_env"].items():
        for algo, d in per_algo.items():
            ms = f"{_fmt(d['mean'])} ± {_fmt(d['std'])}" if d["runs"] else "—"
            rows.append(
                [
                    env,
                    algo,
                    d["runs"],
                    ", ".join(map(str, d["seeds"])) or "—",
                    d["not_finished"],
                    ms,
                    _fmt(d["iqm"]),
                    _fmt(d["normalized_iqm"]),
                ]
            )
    b.append(
        Block(
            "table",
            headers=["env", "algo", "runs", "seeds", "failed/killed", "mean ± std", "IQM (raw)", "IQM (normalised)"],
            items=rows,
        )
    )
    counts = {(algo, e): d["runs"] for e, pa in a["per_env"].items() for algo, d in pa.items()}
    if len(set(counts.values())) > 1:
        b.append(
            Block(
                "p",
                "Seeds are unequal across algorithms/envs (see the runs column); the bootstrap "
                "resamples each algorithm × env with its own number of runs.",
            )
        )
    for env in a["per_env"]:
        if env in env_figs:
            per_algo = a["protocol"][env]
            b.append(Block("h3", env))
            b.append(
                Block(
                    "p",
                    "; ".join(
                        f"{algo}: {p['budget']} env steps, evaluated every {p['eval_freq']} env steps "
                        f"({p['eval_episodes']} episodes, deterministic={p['deterministic']})"
                        for algo, p in per_algo.items()
                    )
                    + ".",
                )
            )
            path, caption = env_figs[env]
            b.append(Block("fig", caption, path=path))

    b.append(Block("h2", "Hyperparameters"))
    b.append(
        Block(
            "p",
            "The resolved hyperparameters of each algorithm, as logged to its runs' MLflow params (values that "
            "differ between an algorithm's seeds are joined by |). Keys whose values differ between algorithms "
            "come first, marked ≠.",
        )
    )
    for env, hp in a["hyperparameters"].items():
        names = list(hp)
        diff = a["differing_hyperparameters"][env]
        keys = diff + sorted({k for h in hp.values() for k in h} - set(diff))
        b.append(Block("h3", f"{env}: " + (f"differing keys: {', '.join(diff)}" if diff else "no differing keys")))
        b.append(
            Block(
                "table",
                headers=["key", *names, "differs"],
                items=[[k, *(hp[n].get(k, "—") for n in names), "≠" if k in diff else ""] for k in keys],
            )
        )

    if a["normalization_constants"]:
        b.append(Block("h2", "Normalisation constants"))
        b.append(
            Block(
                "p",
                f"normalised = (score − random) / (reference − random), from {a['table_path']} "
                f"(version {a['table_version']}).",
            )
        )
        b.append(
            Block(
                "table",
                headers=["env", "random", "reference", "random source", "reference source"],
                items=[
                    [env, _fmt(c["random"]), _fmt(c["reference"]), c["random_source"], c["reference_source"]]
                    for env, c in a["normalization_constants"].items()
                ],
            )
        )

    b.append(Block("h2", "Failed and missing runs"))
    if a["not_finished"]:
        b.append(
            Block(
                "table",
                headers=["algo", "env", "not finished", "reasons"],
                items=[[d["algo"], d["env"], d["count"], "; ".join(d["reasons"]) or "—"] for d in a["not_finished"]],
            )
        )
    else:
        b.append(Block("p", "None: every job run FINISHED."))
    b.append(Block("h2", "Wall-clock and throughput"))
    b.append(
        Block(
            "table",
            headers=["algo", "runs", "wall seconds (total)", "wall seconds (mean per run)", "fps (mean)"],
            items=[
                [
                    algo,
                    t["runs"],
                    _fmt(t["wall_seconds_total"]),
                    _fmt(t["wall_seconds_mean"]),
                    _fmt(t["fps_mean"]),
                ]
                for algo, t in a["timing"].items()
            ],
        )
    )
    b.append(Block("h2", "Provenance"))
    b.append(
        Block(
            "ul",
            items=[
                f"tracking URI: {prov['tracking_uri']}",
                f"experiment: {prov['experiment']} (id {prov['experiment_id']})",
                f"lit_sb3: {prov['lit_sb3_version']}",
                f"torch: {prov['torch_version']}",
                f"gymnasium: {prov['gymnasium_version']}",
                f"git commit: {prov['git_commit']}",
                f"machine (report): {prov['machine']}",
                f"generated: {prov['generated']}",
            ],
        )
    )
    b.append(
        Block(
            "table",
            headers=["algo/env", "config hashes"],
            items=[[k, ", ".join(v)] for k, v in prov["config_hashes"].items()],
        )
    )
    b.append(Block("p", "Run ids: " + ", ".join(prov["run_ids"])))
    if a.get("links"):
        links = a["links"]
        b.append(Block("h3", "In MLflow (model-training view)"))
        b.append(Block("p", f"Serve the store with `{links['serve']}`, then:" if links["serve"] else "Open:"))
        b.append(Block("links", items=[tuple(item) for item in links["items"]]))
    return b
