"""Malformed configs and command lines: each is exit status 2, one line on stderr naming the culprit, nothing created.

The CLI runs in-process from a fresh temp folder; "nothing created" means no MLflow database or artifact folder
(the default tracking URI is ``sqlite:///mlflow.db`` in the current folder) and no Optuna journal.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lit_sb3.zoo.cli import main

RUN = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--dry-run"]
RUN_SAC = ["run", "--algos", "sac", "--envs", "Pendulum-v1", "--dry-run"]
SHOW = ["show-config", "--algo", "ppo", "--env", "CartPole-v1"]
TUNE = [
    "tune",
    "--algo",
    "ppo",
    "--env",
    "CartPole-v1",
    "--n-trials",
    "1",
    "--n-timesteps",
    "256",
    "--n-evaluations",
    "1",
]

BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)
#: ``@name`` in an argv is replaced by the path of a file with this text, written in the temp folder.
FILES = {
    "bomb": BOMB,
    "recursive": "CartPole-v1: &x\n  policy_kwargs: [*x]\n",
    "list": "- CartPole-v1\n- n_steps: 64\n",
    "scalar_entry": "CartPole-v1: 64\n",
    "broken": "CartPole-v1:\n  n_steps: [64,\n",
    "unknown_key": "CartPole-v1:\n  n_envs: 1\n  n_stepz: 64\n",
    "bad_gamma": "default:\n  n_envs: 1\nCartPole-v1:\n  gamma: 5\n",
    "bad_net_arch": 'CartPole-v1:\n  policy_kwargs: "dict(net_arch=dict(pi=[64], qf=[64]))"\n',
    "bad_normalize": 'CartPole-v1:\n  normalize: "dict(clip_obs=-1.0)"\n',
    "dup_key": "CartPole-v1:\n  n_steps: 64\n  n_steps: 32\n",
    "huge": "# padding\n" * 120_000,
    "space_bomb": BOMB,
    "space_list": "- learning_rate\n",
    "space_fixed": "target_kl: -1\n",
}

# (id, argv, text the one line must contain)
CASES = [
    # --hyperparams values, checked against the constructor annotations and the range table
    ("n_steps=abc", [*RUN, "--hyperparams", "n_steps=abc"], "--hyperparams: n_steps: bad value 'abc': expected int"),
    ("gamma=abc", [*RUN, "--hyperparams", "gamma=abc"], "gamma: bad value 'abc': expected float in [0, 1]"),
    ("gamma=5", [*RUN, "--hyperparams", "gamma=5"], "--hyperparams: gamma: bad value 5: must be in [0, 1]"),
    ("n_epochs=-3", [*RUN, "--hyperparams", "n_epochs=-3"], "n_epochs: bad value -3: must be >= 1"),
    ("batch_size=0", [*RUN, "--hyperparams", "batch_size=0"], "batch_size: bad value 0: must be >= 1"),
    ("ent_coef=abc", [*RUN, "--hyperparams", "ent_coef=abc"], "ent_coef: bad value 'abc': expected float >= 0"),
    ("sac ent_coef=abc", [*RUN_SAC, "--hyperparams", "ent_coef=abc"], "or 'auto_<initial value>'"),
    ("sac ent_coef=auto_x", [*RUN_SAC, "--hyperparams", "ent_coef=auto_x"], "ent_coef: bad value 'auto_x'"),
    ("sac target_entropy=x", [*RUN_SAC, "--hyperparams", "target_entropy=x"], "target_entropy: bad value 'x'"),
    ("max_grad_norm=abc", [*RUN, "--hyperparams", "max_grad_norm=abc"], "max_grad_norm: bad value 'abc'"),
    ("seed=abc", [*RUN, "--hyperparams", "seed=abc"], "seed: bad value 'abc': expected int | None"),
    ("seed=-1", [*RUN, "--hyperparams", "seed=-1"], "seed: bad value -1: must be in [0, 4294967295]"),
    ("verbose=abc", [*RUN, "--hyperparams", "verbose=abc"], "verbose: bad value 'abc': expected int in [0, 2]"),
    ("device=abc", [*RUN, "--hyperparams", "device=abc"], "device: unknown device 'abc'; allowed: cpu, cuda, cuda:N"),
    (
        "net_arch='abc'",
        [*RUN, "--hyperparams", "policy_kwargs=dict(net_arch='abc')"],
        "policy_kwargs.net_arch: bad value 'abc': expected list[int] | dict[str, list[int]] | None",
    ),
    ("net_arch=[0]", [*RUN, "--hyperparams", "policy_kwargs=dict(net_arch=[0])"], "layer sizes must be in [1, 65536]"),
    (
        "policy_kwargs foo",
        [*RUN, "--hyperparams", "policy_kwargs=dict(foo=1)"],
        "policy_kwargs: unknown policy argument 'foo' for ActorCriticPolicy; allowed: activation_fn",
    ),
    (
        "policy_kwargs ortho_int",
        [*RUN, "--hyperparams", "policy_kwargs=dict(ortho_int=False)"],
        "(did you mean 'ortho_init'?)",
    ),
    (
        "policy_kwargs use_sde",
        [*RUN, "--hyperparams", "policy_kwargs=dict(use_sde=True)"],
        "'use_sde' cannot be set here: it comes from the algorithm's use_sde",
    ),
    (
        "optimizer_kwargs lr",
        [*RUN, "--hyperparams", "policy_kwargs=dict(optimizer_kwargs=dict(lr=0.1))"],
        "policy_kwargs.optimizer_kwargs: 'lr' cannot be set here: it comes from learning_rate",
    ),
    (
        "optimizer_kwargs eps",
        [*RUN, "--hyperparams", "policy_kwargs=dict(optimizer_kwargs=dict(eps=-1))"],
        "policy_kwargs.optimizer_kwargs.eps: bad value -1: must be > 0",
    ),
    (
        "activation nn.Relu",
        [*RUN, "--hyperparams", "policy_kwargs=dict(activation_fn=nn.Relu)"],
        "(did you mean 'nn.ReLU'",
    ),
    (
        "sac net_arch vf",
        [*RUN_SAC, "--hyperparams", "policy_kwargs=dict(net_arch=dict(pi=[64], vf=[64]))"],
        "unknown key(s) ['vf']; allowed keys: pi, qf",
    ),
    ("policy name", [*RUN, "--hyperparams", "policy=MlpPolicyy"], "unknown policy 'MlpPolicyy' for PPO (did you mean"),
    # schedules
    ("schedule lin_abc", [*RUN, "--hyperparams", "learning_rate=lin_abc"], "learning_rate: bad schedule 'lin_abc'"),
    (
        "schedule lin_-1",
        [*RUN, "--hyperparams", "learning_rate=lin_-1"],
        "learning_rate: bad value lin_-1: must be > 0",
    ),
    ("clip_range=-0.2", [*RUN, "--hyperparams", "clip_range=-0.2"], "clip_range: bad value -0.2: must be > 0"),
    ("sac train_freq", [*RUN_SAC, "--hyperparams", "train_freq=abc"], "train_freq: expected an integer"),
    (
        "td3 noise_type",
        [
            "run",
            "--algos",
            "td3",
            "--envs",
            "Pendulum-v1",
            "--dry-run",
            "--hyperparams",
            "noise_type=gauss",
            "noise_std=0.1",
        ],
        "unknown noise type 'gauss'",
    ),  # fmt: skip
    (
        "env_wrapper kwarg",
        [*RUN_SAC, "--hyperparams", "env_wrapper=[{gymnasium.wrappers.TimeLimit: {max_episode_steps: abc}}]"],
        "env_wrapper: env wrapper 'gymnasium.wrappers.TimeLimit': max_episode_steps: bad value 'abc': expected int",
    ),
    # unknown keys
    ("unknown key", [*RUN, "--hyperparams", "n_stepz=64"], "unknown hyperparameter 'n_stepz' for ppo (did you mean"),
    # --hyperparams syntax
    ("no equals", [*RUN, "--hyperparams", "n_steps"], "--hyperparams: expected KEY=VALUE, got 'n_steps'"),
    ("unclosed", [*RUN, "--hyperparams", "policy_kwargs=dict(net_arch=[64"], "policy_kwargs: cannot parse"),
    (
        "code",
        [*RUN, "--hyperparams", "policy_kwargs=__import__('os').system('true')"],
        "function calls other than dict(key=value, ...) are not allowed",
    ),
    ("bad yaml", [*RUN, "--hyperparams", "n_steps=[1"], "--hyperparams n_steps=[1: invalid YAML"),
    # algos, envs, seeds and other options
    (
        "dqn on Box",
        ["run", "--algos", "dqn", "--envs", "Pendulum-v1", "--dry-run"],
        "nothing to run: dqn needs a Discrete action space; Pendulum-v1 has Box",
    ),
    ("unknown algo", ["run", "--algos", "ppp", "--envs", "CartPole-v1", "--dry-run"], "unknown algorithm 'ppp'"),
    (
        "unknown env",
        ["run", "--algos", "ppo", "--envs", "CartPol-v1", "--dry-run"],
        "unknown suite or env id 'CartPol-v1' (did you mean 'CartPole-v1'",
    ),
    ("no env", ["run", "--algos", "ppo", "--envs", ",", "--dry-run"], "no env given"),
    ("seeds abc", [*RUN, "--seeds", "abc"], "argument --seeds: invalid int value: 'abc'"),
    ("seeds 0", [*RUN, "--seeds", "0"], "--seeds must be >= 1, got 0"),
    ("seed-list", [*RUN, "--seed-list", "1,x"], "--seed-list: expected integers separated by commas, got 'x'"),
    ("run --device", [*RUN, "--device", "gpu"], "argument --device: invalid choice: 'gpu'"),
    # every count bounded before anything is planned, duplicate seeds refused
    ("seed-list 0,0", [*RUN, "--seed-list", "0,0"], "--seed-list: seed 0 is given twice"),
    ("seeds 10**9", [*RUN, "--seeds", "1000000000"], "--seeds must be <= 100,000"),
    (
        "seed-batch 1e20",
        [*RUN, "--seed-batch", "1e20"],
        "argument --seed-batch: expected 'auto' or an integer >= 1, got '1e20'",
    ),
    ("seed-batch 2**31", [*RUN, "--seeds", "2", "--seed-batch", "2147483648"], "--seed-batch must be in [1, 100,000]"),
    (
        "max-seeds 10**9",
        [
            "run",
            "--algos",
            "ppo,a2c",
            "--envs",
            "CartPole-v1",
            "--dry-run",
            "--until-verdict",
            "--max-seeds",
            "1000000000",
        ],
        "--max-seeds must be in [1, 100,000], got 1,000,000,000",
    ),
    (
        "wave 10**9",
        ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1", "--dry-run", "--until-verdict", "--wave", "1000000000"],
        "--wave must be in [1, 100,000]",
    ),
    ("n-timesteps 0", [*RUN, "--n-timesteps", "0"], "--n-timesteps must be >= 1, got 0"),
    ("eval-episodes 0", [*RUN, "--eval-episodes", "0"], "--eval-episodes must be >= 1, got 0"),
    # --config files
    ("yaml bomb", [*RUN, "--config", "@bomb"], "expands to more than 200,000 nodes"),
    ("recursive alias", [*RUN, "--config", "@recursive"], "recursive alias *x"),
    ("not a mapping", [*RUN, "--config", "@list"], "list.yml:1: a zoo config must map env ids"),
    ("entry not a mapping", [*RUN, "--config", "@scalar_entry"], "CartPole-v1: expected a mapping of hyperparameters"),
    ("invalid yaml", [*RUN, "--config", "@broken"], "broken.yml:3: invalid YAML"),
    ("duplicate key", [*RUN, "--config", "@dup_key"], "dup_key.yml:3: invalid YAML: while constructing a mapping"),
    (
        "config unknown key",
        [*RUN, "--config", "@unknown_key"],
        "unknown_key.yml:3: CartPole-v1: unknown hyperparameter 'n_stepz' for ppo (did you mean 'n_steps'",
    ),
    ("config gamma=5", [*RUN, "--config", "@bad_gamma"], "bad_gamma.yml:4: CartPole-v1: gamma: bad value 5"),
    ("config net_arch", [*RUN, "--config", "@bad_net_arch"], "bad_net_arch.yml:2: CartPole-v1: policy_kwargs.net_arch"),
    ("config normalize", [*RUN, "--config", "@bad_normalize"], "normalize.clip_obs: bad value -1.0: must be > 0"),
    ("config too large", [*RUN, "--config", "@huge"], "huge.yml: config file too large (over 1,048,576 bytes)"),
    ("config missing", [*RUN, "--config", "nowhere.yml"], "--config nowhere.yml: no such file"),
    # show-config
    ("show gamma=5", [*SHOW, "--hyperparams", "gamma=5"], "--hyperparams: gamma: bad value 5"),
    ("show bomb", [*SHOW, "--config", "@bomb"], "expands to more than 200,000 nodes"),
    ("show foo", [*SHOW, "--hyperparams", "policy_kwargs=dict(foo=1)"], "unknown policy argument 'foo'"),
    ("show dqn on Box", ["show-config", "--algo", "dqn", "--env", "Pendulum-v1"], "dqn needs a Discrete action space"),
    ("show unknown env", ["show-config", "--algo", "ppo", "--env", "CartPol-v1"], "unknown env id 'CartPol-v1'"),
    # tune
    ("tune device", [*TUNE, "--device", "abc"], "--device: unknown device 'abc'; allowed: cpu, cuda, cuda:N"),
    ("tune dqn on Box", ["tune", "--algo", "dqn", "--env", "Pendulum-v1"], "dqn needs a Discrete action space"),
    ("tune unknown algo", ["tune", "--algo", "pp", "--env", "CartPole-v1"], "unknown algorithm 'pp'"),
    (
        "tune n-trials abc",
        [*TUNE, "--n-trials", "abc"],
        "argument --n-trials/--max-total-trials: invalid int value: 'abc'",
    ),
    ("tune n-trials 0", [*TUNE, "--n-trials", "0"], "--n-trials must be"),
    ("tune n-trials 10**12", [*TUNE, "--n-trials", "1000000000000"], "--n-trials must be in [1, 1,000,000]"),
    ("tune seed-batch 2**31", [*TUNE, "--seed-batch", "2147483648"], "--seed-batch must be in [1, 100,000]"),
    ("tune space bomb", [*TUNE, "--search-space", "@space_bomb"], "expands to more than 200,000 nodes"),
    ("tune space list", [*TUNE, "--search-space", "@space_list"], "expected a mapping of parameter names"),
    ("tune space fixed value", [*TUNE, "--search-space", "@space_fixed"], "target_kl: bad value -1: must be > 0"),
]


def _argv(argv: list[str], folder: Path) -> list[str]:
    out = []
    for arg in argv:
        if arg.startswith("@"):
            path = folder / f"{arg[1:]}.yml"
            path.write_text(FILES[arg[1:]])
            arg = str(path)
        out.append(arg)
    return out


def _nothing_created(folder: Path) -> None:
    assert not (folder / "mlflow.db").exists(), "an MLflow database was created"
    assert not (folder / "mlartifacts").exists(), "an MLflow artifact folder was created"
    assert not (folder / "optuna").exists(), "an Optuna study was created"


@pytest.mark.parametrize("argv,culprit", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(argv: list[str], culprit: str, in_tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = _argv(argv, in_tmp_path)
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (code, err, captured.out[-500:])
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"bench {argv[0]}: error: "), err
    assert culprit in err, err
    _nothing_created(in_tmp_path)


@pytest.mark.parametrize(
    "hyperparams,culprit",
    [
        (["gamma=abc"], "gamma: bad value 'abc'"),
        (["device=abc"], "unknown device 'abc'"),
        (["n_steps=abc"], "n_steps: bad value 'abc'"),
    ],  # fmt: skip
)
def test_bad_value_fails_a_real_run_before_anything_is_tracked(hyperparams: list[str], culprit: str,
                                                             in_tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Not a dry run: the values that used to fail inside the job (or be ignored) stop the command first."""
    argv = ["run", "--algos", "ppo", "--envs", "CartPole-v1", "--n-timesteps", "64", "--hyperparams", *hyperparams]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err, err
    _nothing_created(in_tmp_path)


def test_yaml_bomb_is_refused_fast(in_tmp_path: Path) -> None:
    """The 350-byte bomb expands to 10**9 nodes; it is refused while composing (~10 ms here; unbounded, the
    same file took 150 s and 4.2 GB), so even a loaded machine stays far below the bound."""
    from lit_sb3.zoo.config import load_zoo_file
    from lit_sb3.zoo.errors import BenchError

    path = Path(_argv(["@bomb"], in_tmp_path)[0])
    assert path.stat().st_size < 400
    t0 = time.monotonic()
    with pytest.raises(BenchError, match=r"bomb\.yml:\d+: invalid YAML: the document expands to more than"):
        load_zoo_file(path)
    assert time.monotonic() - t0 < 2.0


def test_suites_and_scores_files_are_bounded(tmp_path: Path) -> None:
    from lit_sb3.zoo.errors import BenchError
    from lit_sb3.zoo.normalization import load_table
    from lit_sb3.zoo.suites import load_suites

    path = tmp_path / "bomb.yml"
    path.write_text(BOMB)
    for load in (load_suites, load_table):
        with pytest.raises(BenchError, match="expands to more than 200,000 nodes"):
            load(path)


def test_bad_input_writes_nothing_under_home(tmp_path: Path) -> None:
    """Every case above in a fresh process whose HOME is an empty folder (no XDG_CACHE_HOME, MPLCONFIGDIR nor
    LIT_SB3_CACHE_DIR: the defaults under HOME): exactly one line of output (no banner before the error) and no file
    under HOME (library caches: matplotlib's, MLflow's, the plan memo) nor in the working folder, even at exit."""
    import json
    import os
    import subprocess
    import sys

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "MPLCONFIGDIR", "LIT_SB3_CACHE_DIR")}
    env.update(HOME=str(home), PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    done = subprocess.run([sys.executable, "-m", "tests.bad_inputs_home", str(work)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert len(report) == len(CASES)
    bad = [(r["name"], r["code"], r["lines"][:2], r["home"][:3], r["cwd"][:3]) for r in report
           if r["code"] != 2 or len(r["lines"]) != 1 or r["home"] or r["cwd"]]  # fmt: skip
    assert not bad, bad
    assert not list(home.rglob("*")), "files left under HOME at exit"


def test_an_absurd_seed_count_is_refused_fast_under_a_small_address_space(tmp_path: Path) -> None:
    """``--until-verdict --max-seeds 1000000000`` (it planned until the OOM killer stopped it at 22.7 GB) is refused
    with one line in a process capped at 1 GB of address space, in under 3 s of its own CPU time."""
    import os
    import resource
    import subprocess
    import sys

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    argv = ["run", "--algos", "ppo,a2c", "--envs", "CartPole-v1", "--until-verdict", "--max-seeds", "1000000000"]
    code = "import sys; from lit_sb3.zoo.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, preexec_fn=cap)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 2, done.stderr[-1000:]
    assert done.stdout == "" and done.stderr.strip() == (
        "bench run: error: --max-seeds must be in [1, 100,000], got 1,000,000,000"
    )
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 3.0
    assert not list(tmp_path.iterdir())
