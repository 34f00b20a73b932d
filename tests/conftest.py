"""Shared test set-up: one torch thread per test process, quiet Lightning, tests run from a temp folder."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
# bench's plan memo (lit_sb3/zoo/plan_cache.py) goes to a folder of this test run, not the user's ~/.cache
if "LIT_SB3_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["LIT_SB3_CACHE_DIR"] = tempfile.mkdtemp(prefix="lit_sb3-test-cache-")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so that "tests.envs.<module>:<EnvId>" ids import in this process and in workers
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture
def in_tmp_path(tmp_path, monkeypatch):
    """Run the test with the current directory set to a fresh temp folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty MLflow sqlite database (a new one spends seconds on migrations): copied per test
    with :func:`tests.mlflow_store.copy_store`."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments(max_results=1)
    return path


# The equivalence tests (K seeds against separate runs, lockstep against SB3/sb3-contrib, resume against the
# uninterrupted run): their tolerances are derived in tests/tolerances.py, and scripts/test.sh runs them once more
# under each ATEN_CPU_CAPABILITY the CPU supports (`-m equivalence`), so a tolerance that depends on a kernel fails on
# the developer's machine first. Marked by name: every such test says what it equals, retraces or resumes ("needs
# equal runs" is a report's input check, not an equivalence).
_EQUIVALENCE_NAME = re.compile(r"(?<!needs_)equal|retrace|lockstep|resume")
# equivalence tests whose names say it otherwise (a seed that stops alone while the others equal their separate
# runs, a batch evaluated or predicting as its members, a kernel against SB3's)
_EQUIVALENCE_ALSO = frozenset({
    "test_ppo_target_kl_stops_each_seed_alone",
    "test_a_seed_whose_loss_turns_nan_stops_alone",
    "test_diverging_env_masks_its_seed_alone",
    "test_a_seed_whose_env_turns_nan_stops_alone",
    "test_ars_diverging_env_masks_its_seed_alone",
    "test_predict_carries_one_state_per_seed",
    "test_eval_callback_evaluates_each_seed_as_its_separate_run",
    "test_fused_adam_matches_sb3_default_adam",
    "test_fused_adam_matches_default",
    "test_ensemble_matches_separate_mlps",
    "test_rollout_gae_matches_sb3",
    "test_nstep_matches_sb3",
})  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the library's equivalence tests (by their names, see above) with ``equivalence``; the suite's (bench)
    resume tests compare bookkeeping of whole CLI runs within one process, not kernels, and stay out of the reruns."""
    for item in items:
        name = item.originalname if isinstance(item, pytest.Function) else item.name
        named = _EQUIVALENCE_NAME.search(name) or name in _EQUIVALENCE_ALSO
        if named and not item.path.name.startswith(("test_bench_", "test_report")):
            item.add_marker(pytest.mark.equivalence)
