"""HerReplayBuffer: relabelling, goal strategies, episode bookkeeping, save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from lit_sb3.algorithms.her import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy, HerReplayBuffer
from lit_sb3.vec_env import DummyVecEnv

try:
    from tests.envs import BitFlippingEnv
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from envs import BitFlippingEnv

th.set_num_threads(1)

N_BITS = 10
STEP_BITS = 5  # code = episode * 2**STEP_BITS + step, stored as bits in the goals


class CountingBitFlippingEnv(BitFlippingEnv):
    """BitFlippingEnv that counts its compute_reward calls."""

    calls = 0

    def compute_reward(self, achieved_goal, desired_goal, _info):  # type: ignore[override]
        CountingBitFlippingEnv.calls += 1
        return super().compute_reward(achieved_goal, desired_goal, _info)


def _bits(code: int | np.ndarray) -> np.ndarray:
    code = np.asarray(code)
    return ((code[..., None] >> np.arange(N_BITS)) & 1).astype(np.int8)


def _code(bits: th.Tensor | np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.int64) << np.arange(N_BITS)).sum(-1)


def _make_venv(n_envs: int = 1, **env_kwargs) -> DummyVecEnv:
    return DummyVecEnv([lambda: CountingBitFlippingEnv(n_bits=N_BITS, **env_kwargs) for _ in range(n_envs)])


def _add_episodes(buf: HerReplayBuffer, lengths_per_env: list[list[int]], unfinished: int = 0) -> None:
    """Add episodes whose transitions are identifiable: obs codes (episode, step), next achieved goal (episode, step + 1).

    All envs step together; env e runs the episodes ``lengths_per_env[e]`` back to back, then ``unfinished`` steps
    of an episode that does not end. Episode ids are ``8 * e + k``.
    """
    n_envs = buf.n_envs
    schedules = []
    for e, lengths in enumerate(lengths_per_env):
        sched = [(e * 8 + k, s, s == n - 1) for k, n in enumerate(lengths) for s in range(n)]
        sched += [(e * 8 + len(lengths), s, False) for s in range(unfinished)]
        schedules.append(sched)
    n_steps = len(schedules[0])
    assert all(len(s) == n_steps for s in schedules), "all envs must add the same number of transitions"
    desired = np.ones((n_envs, N_BITS), dtype=np.int8)
    for t in range(n_steps):
        ep = np.array([schedules[e][t][0] for e in range(n_envs)])
        step = np.array([schedules[e][t][1] for e in range(n_envs)])
        done = np.array([schedules[e][t][2] for e in range(n_envs)])
        cur, nxt = _bits((ep << STEP_BITS) + step), _bits((ep << STEP_BITS) + step + 1)
        obs = {"observation": cur, "achieved_goal": cur, "desired_goal": desired}
        next_obs = {"observation": nxt, "achieved_goal": nxt, "desired_goal": desired}
        reward = -np.ones(n_envs, dtype=np.float32)
        infos = [{"TimeLimit.truncated": bool(d)} for d in done]
        buf.add(obs, next_obs, np.zeros((n_envs, 1), dtype=np.int64), reward, done, infos)


def _make_buffer(venv: DummyVecEnv, size: int, strategy: str = "future", **kwargs) -> HerReplayBuffer:
    return HerReplayBuffer(
        size,
        venv.observation_space,
        venv.action_space,
        env=venv,
        device="cpu",
        n_envs=venv.num_envs,
        goal_selection_strategy=strategy,
        **kwargs,
    )


def test_goal_selection_strategy_keys() -> None:
    assert KEY_TO_GOAL_STRATEGY == {
        "future": GoalSelectionStrategy.FUTURE,
        "final": GoalSelectionStrategy.FINAL,
        "episode": GoalSelectionStrategy.EPISODE,
    }


def test_her_rejects_non_goal_spaces() -> None:
    venv = _make_venv()
    bad = spaces.Dict({"observation": spaces.MultiBinary(3), "goal": spaces.MultiBinary(3)})
    with pytest.raises(ValueError, match=r"keys \['goal', 'observation'\]"):
        HerReplayBuffer(10, bad, venv.action_space, env=venv)
    with pytest.raises(ValueError, match="a Box space"):
        HerReplayBuffer(10, spaces.Box(-1, 1, (3,)), venv.action_space, env=venv)
    with pytest.raises(ValueError, match="allowed: \\['future', 'final', 'episode'\\]"):
        _make_buffer(venv, 10, strategy="best")
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        _make_buffer(venv, 10, optimize_memory_usage=True)


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_her_goals_from_same_episode(strategy: str) -> None:
    venv = _make_venv(n_envs=2)
    lengths = [[3, 5, 2, 4], [4, 4, 1, 5]]
    buf = _make_buffer(venv, 2 * 40, strategy=strategy, n_sampled_goal=4)
    _add_episodes(buf, lengths, unfinished=2)
    length_of = {e * 8 + k: n for e, ls in enumerate(lengths) for k, n in enumerate(ls)}
    batch = 512
    s = buf.sample(batch)
    n_virtual = int(0.8 * batch)
    n_real = batch - n_virtual
    obs_code = _code(s.observations["observation"])
    ep, step = obs_code >> STEP_BITS, obs_code % (1 << STEP_BITS)
    assert set(ep.tolist()) <= set(length_of), "only transitions of finished episodes are sampled"
    # real transitions keep the env's goal
    assert th.all(s.observations["desired_goal"][:n_real] == 1)
    goal_code = _code(s.observations["desired_goal"][n_real:])
    g_ep, g_step = goal_code >> STEP_BITS, goal_code % (1 << STEP_BITS)  # goal = next achieved goal: step + 1
    ep_v, step_v = ep[n_real:], step[n_real:]
    ep_len = np.array([length_of[e] for e in ep_v])
    assert np.all(g_ep == ep_v), "goals come from the same episode"
    assert np.all((g_step >= 1) & (g_step <= ep_len))
    if strategy == "future":
        assert np.all(g_step >= step_v + 1), "future goals come from the current step or later"
        assert np.any(g_step > step_v + 1) and np.any(g_step == step_v + 1)
    elif strategy == "final":
        assert np.all(g_step == ep_len)
    else:
        assert np.any(g_step < step_v + 1), "episode strategy also uses earlier goals"
    # next observations carry the same new goal; rewards agree with compute_reward
    assert th.equal(s.next_observations["desired_goal"], s.observations["desired_goal"])
    expected = venv.envs[0].compute_reward(
        s.next_observations["achieved_goal"].numpy(), s.observations["desired_goal"].numpy(), None
    )
    np.testing.assert_array_equal(s.rewards[:, 0].numpy(), expected)
    assert s.rewards[n_real:].eq(0).any(), "some relabelled transitions reach their goal"
    # timeouts are not dones
    assert th.all(s.dones == 0)


def test_her_ratio_and_single_compute_reward_call() -> None:
    venv = _make_venv()
    for n_sampled_goal, batch in [(4, 256), (1, 100), (0, 64)]:
        buf = _make_buffer(venv, 100, n_sampled_goal=n_sampled_goal)
        assert buf.her_ratio == pytest.approx(1 - 1 / (n_sampled_goal + 1))
        _add_episodes(buf, [[5, 5, 5, 5]])
        CountingBitFlippingEnv.calls = 0
        s = buf.sample(batch)
        n_virtual = int(buf.her_ratio * batch)
        assert CountingBitFlippingEnv.calls == (1 if n_virtual else 0)
        assert th.all(s.observations["desired_goal"][: batch - n_virtual] == 1)
        # virtual goals are achieved goals (codes of this buffer), which are never the all-ones goal here
        assert th.all(s.observations["desired_goal"][batch - n_virtual :].sum(-1) < N_BITS)
        assert len(s.rewards) == batch


def test_her_overwritten_and_unfinished_episodes_are_not_sampled() -> None:
    venv = _make_venv()
    buf = _make_buffer(venv, 10)
    with pytest.raises(RuntimeError, match="end of the first episode"):
        _add_episodes(buf, [[]], unfinished=3)
        buf.sample(4)
    buf = _make_buffer(venv, 10)
    # episodes 0..3 of length 4: episode 2 ends at index 11 -> it wraps around; the 4th overwrites the first
    _add_episodes(buf, [[4, 4, 4]], unfinished=2)
    assert buf.full and buf.pos == 4
    eps = set((_code(buf.sample(300).observations["observation"]) >> STEP_BITS).tolist())
    # episode 0 is partly overwritten (by episode 2 and the unfinished one) -> invalid
    assert eps == {1, 2}
    np.testing.assert_array_equal(buf.ep_length[:, 0], [4, 4, 0, 0, 4, 4, 4, 4, 4, 4])


def test_her_truncate_last_trajectory() -> None:
    venv = _make_venv()
    buf = _make_buffer(venv, 20)
    _add_episodes(buf, [[3]], unfinished=4)
    assert set((_code(buf.sample(100).observations["observation"]) >> STEP_BITS).tolist()) == {0}
    with pytest.warns(UserWarning, match="truncated"):
        buf.truncate_last_trajectory()
    assert buf.dones[6, 0] == 1 and buf.timeouts[6, 0] == 1
    assert set((_code(buf.sample(200).observations["observation"]) >> STEP_BITS).tolist()) == {0, 1}
    buf.truncate_last_trajectory()  # nothing unfinished: no-op


def test_her_with_real_env_rollouts() -> None:
    venv = DummyVecEnv([lambda: BitFlippingEnv(n_bits=6, continuous=True) for _ in range(2)])
    buf = HerReplayBuffer(
        200, venv.observation_space, venv.action_space, env=venv, device="cpu", n_envs=2, copy_info_dict=True
    )
    venv.seed(0)
    venv.action_space.seed(0)
    obs = venv.reset()
    for _ in range(60):
        actions = np.stack([venv.action_space.sample() for _ in range(2)])
        new_obs, rewards, dones, infos = venv.step(actions)
        next_obs = {k: v.copy() for k, v in new_obs.items()}
        for i, done in enumerate(dones):
            if done:
                for k, value in next_obs.items():
                    value[i] = infos[i]["terminal_observation"][k]
        buf.add(obs, next_obs, actions, rewards, dones, infos)
        obs = new_obs
    s = buf.sample(128)
    assert s.actions.shape == (128, 6) and s.observations["observation"].dtype == th.int8
    expected = venv.envs[0].compute_reward(
        s.next_observations["achieved_goal"].numpy(), s.observations["desired_goal"].numpy(), None
    )
    np.testing.assert_array_equal(s.rewards[:, 0].numpy(), expected)
    assert buf.infos is not None and "is_success" in buf.infos[0, 0]


def test_her_save_load_round_trip(tmp_path) -> None:
    venv = _make_venv(n_envs=2)
    buf = _make_buffer(venv, 40, strategy="final", n_sampled_goal=2, copy_info_dict=True)
    _add_episodes(buf, [[3, 6, 4], [5, 5, 3]], unfinished=3)
    path = tmp_path / "her.npz"
    buf.save(path)
    loaded = HerReplayBuffer.load(path, venv.observation_space, venv.action_space, device="cpu")
    assert loaded.env is None and loaded.goal_selection_strategy == GoalSelectionStrategy.FINAL
    assert loaded.n_sampled_goal == 2 and loaded.copy_info_dict
    loaded.set_env(venv)
    with pytest.raises(ValueError, match="already initialized"):
        loaded.set_env(venv)
    np.testing.assert_array_equal(loaded.ep_start, buf.ep_start)
    np.testing.assert_array_equal(loaded.ep_length, buf.ep_length)
    np.testing.assert_array_equal(loaded._current_ep_start, buf._current_ep_start)
    assert loaded.infos[0, 0] == buf.infos[0, 0]
    for name, tensor in buf._storage_tensors().items():
        assert th.equal(loaded._storage_tensors()[name], tensor), name
    np.random.seed(5)
    a = buf.sample(64)
    np.random.seed(5)
    b = loaded.sample(64)
    for k in a.observations:
        assert th.equal(a.observations[k], b.observations[k])
    assert th.equal(a.rewards, b.rewards)
