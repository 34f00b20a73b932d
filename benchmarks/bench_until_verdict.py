"""Seeds saved by ``bench run --until-verdict`` against a fixed grid, and whether the verdicts agree.

For each group of algorithms and envs it runs, through the ``bench`` CLI in this process:

1. ``bench run --until-verdict`` (seeds in waves, experiment ``<name>-<group>-seq``) and its ``bench report``
   (into ``reports/<name>/<group>-seq``),
2. the fixed grid of ``--max-seeds`` seeds: its own experiment ``<name>-<group>-fixed`` and report, or (a group
   marked ``shared`` in ``GROUPS``) the sequential experiment filled up to ``--max-seeds`` seeds and judged by the
   fixed design's rule,

then writes ``reports/<name>/summary.md`` and ``summary.json``: per group, the jobs and env steps each design
trained, the saving, and per comparison the sequential verdict (and the seeds it used) next to the fixed grid's
verdict with error control (Holm over the same family, one look at ``--max-seeds`` seeds). Both experiments live
in one sqlite store, ``bench_runs/<name>/mlflow.db`` (git-ignored, with its artifacts); rerunning the command
resumes both (finished jobs are skipped).

The measurement of issue 25 (a quiet machine; hours of CPU):

    python benchmarks/bench_until_verdict.py --name until_verdict --jobs 2

A smoke test of the script itself (minutes):

    python benchmarks/bench_until_verdict.py --name until_verdict_smoke --smoke --min-seeds 2 --max-seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: (group, algos, envs, env steps per run, --smoke's budget and hyperparameters, shared): PPO vs A2C on two
#: classic-control tasks; SAC, TD3 and PPO on Pendulum (the zoo configs' hyperparameters). ``shared``: the fixed
#: grid is not a second experiment but the sequential one filled up to --max-seeds seeds (``bench run --seeds``
#: trains only the seeds the sequence did not), and its verdicts come from the fixed design's rule
#: (:func:`lit_sb3.zoo.stats.sequential.fixed_design`, as ``bench report`` of a fixed experiment) on those runs:
#: both designs judge the same runs, and SAC's 20k-step runs are trained once.
GROUPS = (
    ("onpolicy", "ppo,a2c", "CartPole-v1,Acrobot-v1", 100_000, 256, ["n_steps=64", "n_envs=1"], False),
    # SAC vs TD3 (close) and each against PPO at the off-policy budget (clear): PPO's comparisons settle early and
    # it stops getting seeds while SAC vs TD3 stays open
    ("pendulum", "sac,td3,ppo", "Pendulum-v1", 20_000, 200, [], True),
)


def _bench(argv: list[str]) -> int:
    from lit_sb3.zoo.cli import main

    print("$ bench " + " ".join(argv), flush=True)
    return main(argv)


def _decisions(uri: str, experiment: str) -> list[dict[str, Any]]:
    """The comparisons of the latest sequential grid run of ``experiment``."""
    import tempfile

    from lit_sb3.zoo.tracking import open_reader

    store = open_reader(uri)
    store.use_experiment(experiment)
    runs = [r for r in store.search_runs("tags.`lit_sb3.run_type` = 'grid'") if r.info.status == "FINISHED"]
    latest = max(runs, key=lambda r: r.info.start_time)
    with tempfile.TemporaryDirectory() as tmp:
        path = store.client.download_artifacts(latest.info.run_id, "sequential/decisions.json", tmp)
        return json.loads(Path(path).read_text())["comparisons"]


def _trained(uri: str, experiment: str, decided: list[dict[str, Any]] | None = None) -> tuple[int, int]:
    """FINISHED job runs of the experiment and the env steps they trained; with a sequential design's decisions,
    only the seeds it gave each (algo, env) (a shared experiment holds the fixed grid's extra seeds too)."""
    from lit_sb3.zoo.results import load_results

    res = load_results(uri, experiment)
    runs = res.runs
    if decided is not None:
        seeds: dict[tuple[str, str], int] = {}
        for c in decided:
            for algo in (c["x"], c["y"]):
                for env in c["envs"]:
                    seeds[(algo, env)] = max(seeds.get((algo, env), 0), int(c["seeds"]))
        runs = [r for r in runs if r.seed < seeds.get((r.algo, r.env), 0)]
    return len(runs), int(sum(r.total_timesteps for r in runs))


def _fixed_on_runs(
    uri: str, experiment: str, algos: str, envs: str, max_seeds: int
) -> tuple[list[dict[str, Any]], int, int]:
    """The fixed design's comparisons on seeds ``0..max_seeds-1`` of an experiment (the rule ``bench report`` uses
    for a fixed-seed experiment: one look, exact permutation test, Holm, alpha 0.05), its runs and env steps."""
    import itertools

    from lit_sb3.zoo.report.control import ALPHA, MARGIN
    from lit_sb3.zoo.results import load_results
    from lit_sb3.zoo.stats.sequential import fixed_design

    res = load_results(uri, experiment)
    names, tasks = algos.split(","), envs.split(",")
    runs = {(a, e): sorted((r for r in res.select(a, e) if r.seed < max_seeds), key=lambda r: r.seed)
            for a in names for e in tasks}  # fmt: skip
    scores = {key: [r.score for r in rs] for key, rs in runs.items()}
    family = fixed_design(scores, list(itertools.combinations(names, 2)), tasks, alpha=ALPHA, margin=MARGIN, min_runs=5)
    steps = sum(int(r.total_timesteps) for rs in runs.values() for r in rs)
    return [c.as_dict() for c in family], sum(len(rs) for rs in runs.values()), steps


def main() -> int:
    """Run the groups, write the summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", default="until_verdict", help="reports/<name>/ (default until_verdict)")
    p.add_argument("--smoke", action="store_true", help="tiny budgets (a few hundred env steps): tests the script")
    p.add_argument("--min-seeds", type=int, default=5)
    p.add_argument("--max-seeds", type=int, default=10, help="also the fixed grid's seeds (default 10)")
    p.add_argument("--wave", type=int, default=1)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--seed-batch", type=int, default=1, help="bench run --seed-batch of both designs (default 1)")
    p.add_argument("--reps", type=int, default=20_000, help="bootstrap reps of the reports")
    args = p.parse_args()
    out = ROOT / "reports" / args.name
    out.mkdir(parents=True, exist_ok=True)
    store = ROOT / "bench_runs" / args.name
    store.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{store / 'mlflow.db'}"
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    jobs += ["--seed-batch", str(args.seed_batch)] if args.seed_batch > 1 else []
    summary: dict[str, Any] = {"groups": []}
    lines = [f"# Seeds saved by `--until-verdict` ({args.name})", "", f"`python {' '.join(sys.argv)}`", ""]
    for group, algos, envs, steps, smoke_steps, smoke_hyper, shared in GROUPS:
        budget = smoke_steps if args.smoke else steps
        common = ["--algos", algos, "--envs", envs, "--n-timesteps", str(budget), "--tracking-uri", uri, *jobs]
        if args.smoke:
            common += ["--eval-episodes", "2", "--hyperparams", *smoke_hyper]
        seq, fixed = f"{args.name}-{group}-seq", f"{args.name}-{group}-fixed"
        seq_flags = ["--until-verdict", "--min-seeds", str(args.min_seeds), "--max-seeds", str(args.max_seeds),
                     "--wave", str(args.wave)]  # fmt: skip
        if _bench(["run", *common, "--experiment", seq, *seq_flags]) != 0:
            return 1
        _bench(["report", "--experiment", seq, "--tracking-uri", uri, "--out", str(out / seq.split("-", 1)[1]),
                "--reps", str(args.reps)])  # fmt: skip
        decided = _decisions(uri, seq)
        seq_runs, seq_steps = _trained(uri, seq, decided)
        if shared:  # fill the sequential experiment up to --max-seeds, judge its first --max-seeds seeds once
            if _bench(["run", *common, "--experiment", seq, "--seeds", str(args.max_seeds)]) != 0:
                return 1
            fixed_comparisons, fixed_runs, fixed_steps = _fixed_on_runs(uri, seq, algos, envs, args.max_seeds)
        else:
            if _bench(["run", *common, "--experiment", fixed, "--seeds", str(args.max_seeds)]) != 0:
                return 1
            _bench(["report", "--experiment", fixed, "--tracking-uri", uri, "--out", str(out / fixed.split("-", 1)[1]),
                    "--reps", str(args.reps)])  # fmt: skip
            fixed_runs, fixed_steps = _trained(uri, fixed)
            report = json.loads((out / fixed.split("-", 1)[1] / "aggregates.json").read_text())
            fixed_comparisons = report["error_control"]["comparisons"]
        fixed_by = {(c["x"], c["y"], c["env"]): c for c in fixed_comparisons}
        rows = []
        for c in decided:
            f = fixed_by.get((c["x"], c["y"], c["env"])) or fixed_by.get((c["y"], c["x"], c["env"]))
            flip = f is not None and (f["x"], f["y"]) != (c["x"], c["y"])
            swap = {"x_better": "y_better", "y_better": "x_better"}
            f_outcome = None if f is None else swap.get(f["outcome"], f["outcome"]) if flip else f["outcome"]
            agree = f_outcome == c["outcome"] or (c["outcome"] == "open" and f_outcome in ("open", "equivalent"))
            rows.append({"x": c["x"], "y": c["y"], "env": c["env"], "sequential": c["outcome"], "seeds": c["seeds"],
                         "why": c["reason"], "fixed": f_outcome, "agree": agree})  # fmt: skip
        entry = {"group": group, "algos": algos, "envs": envs, "budget": budget, "sequential_runs": seq_runs,
                 "sequential_env_steps": seq_steps, "fixed_runs": fixed_runs, "fixed_env_steps": fixed_steps,
                 "fixed_design_on": "the same runs (filled up)" if shared else "its own experiment",
                 "comparisons": rows}  # fmt: skip
        summary["groups"].append(entry)
        saving = 1.0 - seq_steps / fixed_steps if fixed_steps else float("nan")
        lines += [
            f"## {group}: {algos} on {envs}, {budget:,} env steps per run",
            "",
            f"- `--until-verdict` (min {args.min_seeds}, max {args.max_seeds}, wave {args.wave}): {seq_runs} runs, "
            f"{seq_steps:,} env steps",
            f"- fixed grid of {args.max_seeds} seeds: {fixed_runs} runs, {fixed_steps:,} env steps"
            + (
                " (judged on the sequential experiment filled up to that many seeds: both designs read the same runs)"
                if shared
                else f" (its own experiment, `{fixed}`)"
            ),
            f"- saving: {saving:.0%} of the env steps",
            "",
            "| X | Y | env | sequential verdict | seeds used | why it stopped | fixed grid (Holm) | agree |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {r['x']} | {r['y']} | {r['env']} | {r['sequential']} | {r['seeds']} | {r['why']} | {r['fixed']} | "
                f"{'yes' if r['agree'] else 'no'} |"
                for r in rows
            ),  # fmt: skip
            "",
            f"Reports: [{seq.split('-', 1)[1]}]({seq.split('-', 1)[1]}/report.md)"
            + ("." if shared else f", [{fixed.split('-', 1)[1]}]({fixed.split('-', 1)[1]}/report.md)."),
            "",
        ]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text("\n".join(lines))
    print(f"summary: {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
