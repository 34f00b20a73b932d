"""Seeds saved by ``bench run --until-verdict`` against a fixed grid, and whether the verdicts agree.

For each group of algorithms and envs it runs, through the ``bench`` CLI in this process:

1. ``bench run --until-verdict`` (seeds in waves, experiment ``<name>-<group>-seq``),
2. the fixed grid of ``--max-seeds`` seeds (experiment ``<name>-<group>-fixed``),
3. ``bench report`` of both (into ``reports/<name>/<group>-seq`` and ``reports/<name>/<group>-fixed``),

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

#: (group, algos, envs, env steps per run, --smoke's budget and hyperparameters): PPO vs A2C on two
#: classic-control tasks; SAC, TD3 and PPO on Pendulum (the zoo configs' hyperparameters)
GROUPS = (
    ("onpolicy", "ppo,a2c", "CartPole-v1,Acrobot-v1", 100_000, 256, ["n_steps=64", "n_envs=1"]),
    # SAC vs TD3 (close) and each against PPO at the off-policy budget (clear): PPO's comparisons settle early and
    # it stops getting seeds while SAC vs TD3 stays open
    ("pendulum", "sac,td3,ppo", "Pendulum-v1", 20_000, 200, []),
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


def _trained(uri: str, experiment: str) -> tuple[int, int]:
    """FINISHED job runs of the experiment and the env steps they trained."""
    from lit_sb3.zoo.results import load_results

    res = load_results(uri, experiment)
    return len(res.runs), int(sum(r.total_timesteps for r in res.runs))


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
    for group, algos, envs, steps, smoke_steps, smoke_hyper in GROUPS:
        budget = smoke_steps if args.smoke else steps
        common = ["--algos", algos, "--envs", envs, "--n-timesteps", str(budget), "--tracking-uri", uri, *jobs]
        if args.smoke:
            common += ["--eval-episodes", "2", "--hyperparams", *smoke_hyper]
        seq, fixed = f"{args.name}-{group}-seq", f"{args.name}-{group}-fixed"
        seq_flags = ["--until-verdict", "--min-seeds", str(args.min_seeds), "--max-seeds", str(args.max_seeds),
                     "--wave", str(args.wave)]  # fmt: skip
        if _bench(["run", *common, "--experiment", seq, *seq_flags]) != 0:
            return 1
        if _bench(["run", *common, "--experiment", fixed, "--seeds", str(args.max_seeds)]) != 0:
            return 1
        for exp in (seq, fixed):
            _bench(["report", "--experiment", exp, "--tracking-uri", uri, "--out", str(out / exp.split("-", 1)[1]),
                    "--reps", str(args.reps)])  # fmt: skip
        seq_runs, seq_steps = _trained(uri, seq)
        fixed_runs, fixed_steps = _trained(uri, fixed)
        decided = _decisions(uri, seq)
        fixed_control = json.loads((out / fixed.split("-", 1)[1] / "aggregates.json").read_text())["error_control"]
        fixed_by = {(c["x"], c["y"], c["env"]): c for c in fixed_control["comparisons"]}
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
                 "comparisons": rows}  # fmt: skip
        summary["groups"].append(entry)
        saving = 1.0 - seq_steps / fixed_steps if fixed_steps else float("nan")
        lines += [
            f"## {group}: {algos} on {envs}, {budget:,} env steps per run",
            "",
            f"- `--until-verdict` (min {args.min_seeds}, max {args.max_seeds}, wave {args.wave}): {seq_runs} runs, "
            f"{seq_steps:,} env steps",
            f"- fixed grid of {args.max_seeds} seeds: {fixed_runs} runs, {fixed_steps:,} env steps",
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
            f"Reports: [{seq.split('-', 1)[1]}]({seq.split('-', 1)[1]}/report.md), "
            f"[{fixed.split('-', 1)[1]}]({fixed.split('-', 1)[1]}/report.md).",
            "",
        ]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text("\n".join(lines))
    print(f"summary: {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
