"""The opt-in compiled update (``compile_update=True``): the gradient step through ``torch.compile`` computes what
the eager step computes, and a compiled SAC learns.

The compiled step draws its random numbers from the eager step's streams (inductor's ``fallback_random``), so from
the same state both take the same minibatch and the same noise, and differ only by float reassociation: inductor
fuses and reorders the elementwise work and the reductions. The tolerance is the standard float32 bound of the
sums involved: a dot product or sum of n terms computed in another order differs by at most ``n * u * sum|terms|``
(u = 2^-24, the unit roundoff), so a quantity that goes through sums of n_1, n_2, ... terms (the layers' inner
dimensions forward and backward, the minibatch reduction) differs by at most ``(n_1 + n_2 + ...) * u`` relative to
the magnitudes summed; we compare each tensor against its own largest magnitude with twice that bound.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch as th

from lit_sb3 import SAC, TD3
from lit_sb3.core.evaluation import evaluate_policy
from lit_sb3.vec_env import make_vec_env

th.set_num_threads(1)

UNIT_ROUNDOFF = 2.0**-24
NET = [32, 32]
BATCH = 64
OBS_DIM, ACT_DIM = 3, 1  # Pendulum-v1


def _tolerance() -> float:
    """Twice the summed lengths of the sums a gradient goes through, times the unit roundoff (see module doc)."""
    inner = [OBS_DIM + ACT_DIM, *NET]  # the critic's layers' inner dimensions (the actor's are smaller)
    return 2 * (2 * sum(inner) + BATCH) * UNIT_ROUNDOFF  # forward and backward, plus the minibatch reductions


def _rng_state() -> tuple:
    return th.get_rng_state(), np.random.get_state(), random.getstate()


def _set_rng_state(state: tuple) -> None:
    th.set_rng_state(state[0])
    np.random.set_state(state[1])
    random.setstate(state[2])


def _one_step(model, compiled: bool, snapshot: dict, rng: tuple) -> dict[str, th.Tensor]:
    """Restore ``snapshot`` and the random streams, run one gradient step, return the losses and gradients."""
    model.policy.load_state_dict(snapshot["policy"])
    for name, state in snapshot["optimizers"].items():
        model._optimizers_to_save()[name].load_state_dict(copy.deepcopy(state))
    if getattr(model, "log_ent_coef", None) is not None:
        with th.no_grad():
            model.log_ent_coef.copy_(snapshot["log_ent_coef"])
    model.compile_update = compiled
    model._log_buffer.clear()
    _set_rng_state(rng)
    model.train(gradient_steps=1, batch_size=BATCH)
    out = {f"grad/{n}": p.grad.detach().clone() for n, p in model.policy.named_parameters() if p.grad is not None}
    out.update({f"param/{n}": p.detach().clone() for n, p in model.policy.named_parameters()})
    for key, (value, _, _) in model._log_buffer.items():
        if key.startswith("train/") and key not in ("train/n_updates", "train/learning_rate"):
            out[f"metric/{key}"] = th.as_tensor(value).detach().clone().float()
    return out


# SAC in the default suite; TD3 (another compile, ~1 min on a loaded core) with -m slow
@pytest.mark.parametrize("algo", [SAC, pytest.param(TD3, marks=pytest.mark.slow)], ids=["sac", "td3"])
def test_compiled_step_equals_eager(algo) -> None:
    """From one state and one random stream, the compiled gradient step's losses, gradients and updated weights
    equal the eager step's within the float32 reassociation bound."""
    kwargs = dict(policy_delay=1) if algo is TD3 else {}  # TD3: the actor step and the target update every step
    model = algo("MlpPolicy", "Pendulum-v1", learning_starts=BATCH, batch_size=BATCH, seed=0,
                 policy_kwargs=dict(net_arch=NET), **kwargs)  # fmt: skip
    model.learn(2 * BATCH)  # a filled replay buffer and Adam moments past the first step
    snapshot = {
        "policy": copy.deepcopy(model.policy.state_dict()),
        "optimizers": {n: copy.deepcopy(o.state_dict()) for n, o in model._optimizers_to_save().items()},
        "log_ent_coef": None if getattr(model, "log_ent_coef", None) is None else model.log_ent_coef.detach().clone(),
    }
    rng = _rng_state()
    eager = _one_step(model, False, snapshot, rng)
    compiled = _one_step(model, True, snapshot, rng)
    assert model.__dict__.get("_compiled_step") is not None  # the compiled path ran
    assert set(eager) == set(compiled)
    assert any(k.startswith("grad/") for k in eager) and any(k.startswith("metric/train/critic_loss") for k in eager)
    tol = _tolerance()
    for key in eager:
        a, b = eager[key], compiled[key]
        bound = tol * a.abs().max().item()
        if key.startswith("param/"):  # compare the steps taken (a step is ~lr, far below the weights)
            before = snapshot["policy"][key[len("param/") :]]
            a, b = a - before, b - before
            # plus the rounding of the stored float32 weight itself (one unit roundoff of its magnitude, each side)
            bound = tol * a.abs().max().item() + 2 * UNIT_ROUNDOFF * eager[key].abs().max().item()
        error = (a - b).abs().max().item()
        assert error <= bound, f"{key}: {error:.3g} > {bound:.3g}"
    moved = [k for k in eager if k.startswith("param/") and not th.equal(eager[k], snapshot["policy"][k[6:]])]
    assert moved  # the compiled step trained


def test_compile_update_is_checked() -> None:
    with pytest.raises(ValueError, match="compile_update must be True or False, got 'yes'"):
        SAC("MlpPolicy", compile_update="yes")


@pytest.mark.slow
def test_compiled_sac_learns_pendulum() -> None:
    """The RL Zoo's Pendulum SAC (learning_rate 1e-3), compiled, 6000 steps: mean >= -250 (the eager check's bar)."""
    model = SAC("MlpPolicy", learning_rate=1e-3, seed=0, compile_update=True)
    model.learn(6000, env="Pendulum-v1")
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=100)
    mean, _ = evaluate_policy(model, env, n_eval_episodes=10, deterministic=True)
    assert model.__dict__.get("_compiled_step") is not None
    assert mean >= -250
