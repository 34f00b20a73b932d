"""Policies, torch layers and the class registry."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from torch import nn

from lit_sb3.core.schedules import constant_fn
from lit_sb3.policies import (
    ActorCriticCnnPolicy,
    ActorCriticPolicy,
    CombinedExtractor,
    DQNPolicy,
    EnsembleLinear,
    MlpExtractor,
    MultiInputActorCriticPolicy,
    NatureCNN,
    SACPolicy,
    TD3Policy,
    create_ensemble_mlp,
    create_mlp,
    get_actor_critic_arch,
)
from lit_sb3.policies.base import decode_constructor_parameters, optimizer_build_kwargs
from lit_sb3.policies.registry import (
    class_to_path,
    path_to_class,
    register_class,
    resolve_policy_class,
)
from lit_sb3.policies.sac import ContinuousCritic
from lit_sb3.policies.torch_layers import FlattenExtractor, ensemble_member_forward
from tests.tolerances import adam_step_bound, parameter_atol, reassociation_rtol, state_tolerances, widest_fan_in

th.set_num_threads(1)
LR = constant_fn(3e-4)
BOX_OBS = spaces.Box(-1.0, 1.0, (4,), np.float32)
ASYM_ACTIONS = spaces.Box(np.array([0.0, -2.0], np.float32), np.array([1.0, 3.0], np.float32))
IMG = spaces.Box(0, 255, (3, 36, 36), np.uint8)


@pytest.fixture(autouse=True)
def _seed() -> None:
    th.manual_seed(0)


def _obs_batch(space: spaces.Space, n: int) -> th.Tensor | dict[str, th.Tensor]:
    if isinstance(space, spaces.Dict):
        return {k: th.as_tensor(np.stack([s.sample() for _ in range(n)])) for k, s in space.spaces.items()}
    return th.as_tensor(np.stack([space.sample() for _ in range(n)]))


@pytest.mark.parametrize(
    ("action_space", "action_shape"),
    [
        (spaces.Box(-2, 2, (3,), np.float32), (3,)),
        (spaces.Discrete(3), ()),
        (spaces.MultiDiscrete([2, 3]), (2,)),
        (spaces.MultiBinary(4), (4,)),
    ],
)
def test_actor_critic_shapes(action_space: spaces.Space, action_shape: tuple[int, ...]) -> None:
    policy = ActorCriticPolicy(BOX_OBS, action_space, LR)
    obs = _obs_batch(BOX_OBS, 5)
    actions, values, log_prob = policy(obs)
    assert actions.shape == (5, *action_shape) and values.shape == (5, 1) and log_prob.shape == (5,)
    values2, log_prob2, entropy = policy.evaluate_actions(obs, actions)
    assert values2.shape == (5, 1) and log_prob2.shape == (5,) and entropy is not None and entropy.shape == (5,)
    assert th.allclose(log_prob, log_prob2)
    assert policy.predict_values(obs).shape == (5, 1)
    action, _ = policy.predict(BOX_OBS.sample())
    assert action.shape == action_shape and action_space.contains(action.astype(action_space.dtype))
    assert policy.predict(np.stack([BOX_OBS.sample()] * 2))[0].shape == (2, *action_shape)


def test_actor_critic_defaults_and_ortho_init() -> None:
    policy = ActorCriticPolicy(BOX_OBS, spaces.Discrete(2), LR)
    assert policy.net_arch == dict(pi=[64, 64], vf=[64, 64])
    assert isinstance(policy.mlp_extractor.policy_net[1], nn.Tanh)
    assert policy.optimizer.defaults["eps"] == 1e-5 and policy.optimizer.defaults["fused"] is True
    w = policy.action_net.weight  # orthogonal with gain 0.01: rows are orthogonal with norm 0.01
    assert th.allclose(w @ w.T, 1e-4 * th.eye(2), atol=1e-7)
    assert th.all(policy.value_net.bias == 0)
    assert ActorCriticCnnPolicy(IMG, spaces.Discrete(2), LR).net_arch == []


def test_actor_critic_not_shared_extractor() -> None:
    policy = ActorCriticPolicy(BOX_OBS, spaces.Discrete(2), LR, share_features_extractor=False)
    assert policy.pi_features_extractor is not policy.vf_features_extractor
    _, values, _ = policy(_obs_batch(BOX_OBS, 3))
    assert values.shape == (3, 1)


def test_actor_critic_gsde() -> None:
    policy = ActorCriticPolicy(BOX_OBS, spaces.Box(-1, 1, (2,), np.float32), LR, use_sde=True, squash_output=True)
    policy.reset_noise(4)
    obs = _obs_batch(BOX_OBS, 4)
    actions, _, log_prob = policy(obs)
    assert actions.abs().max() <= 1 and log_prob.shape == (4,)
    assert th.equal(actions, policy(obs)[0])  # same noise until reset
    policy.reset_noise(4)
    assert not th.equal(actions, policy(obs)[0])
    _, _, entropy = policy.evaluate_actions(obs, actions)
    assert entropy is None
    with pytest.raises(ValueError, match="only available with gSDE"):
        ActorCriticPolicy(BOX_OBS, spaces.Box(-1, 1, (2,)), LR, squash_output=True)
    with pytest.raises(RuntimeError, match="gSDE"):
        ActorCriticPolicy(BOX_OBS, spaces.Box(-1, 1, (2,)), LR).reset_noise()


def test_multi_input_policy() -> None:
    obs_space = spaces.Dict({"img": spaces.Box(0, 255, (1, 36, 36), np.uint8), "vec": BOX_OBS, "d": spaces.Discrete(3)})
    policy = MultiInputActorCriticPolicy(obs_space, spaces.Discrete(2), LR)
    assert isinstance(policy.features_extractor, CombinedExtractor)
    assert policy.features_extractor.features_dim == 256 + 4 + 3
    actions, values, log_prob = policy(_obs_batch(obs_space, 3))
    assert actions.shape == (3,) and values.shape == (3, 1)
    sample = obs_space.sample()
    action, _ = policy.predict(sample)
    assert action.shape == ()
    batch = {k: np.stack([v, v]) for k, v in sample.items()}
    assert policy.predict(batch)[0].shape == (2,)
    with pytest.raises(ValueError, match="lacks key"):
        policy.predict({"vec": sample["vec"]})


def test_cnn_policy_normalises_uint8_images() -> None:
    policy = ActorCriticCnnPolicy(IMG, spaces.Discrete(2), LR)
    seen: list[th.Tensor] = []
    policy.features_extractor.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    obs = th.full((2, 3, 36, 36), 255, dtype=th.uint8)
    policy(obs)
    assert seen[0].dtype == th.float32 and seen[0].max() == 1.0
    # channel-last single image is transposed and un-batched
    action, _ = policy.predict(np.zeros((36, 36, 3), np.uint8))
    assert action.shape == ()
    assert policy.predict(np.zeros((5, 3, 36, 36), np.uint8))[0].shape == (5,)


def test_nature_cnn_errors() -> None:
    with pytest.raises(ValueError, match="channel-first"):
        NatureCNN(spaces.Box(0, 255, (36, 36, 3), np.uint8))
    with pytest.raises(ValueError, match=r"at least 36x36"):
        NatureCNN(spaces.Box(0, 255, (3, 20, 20), np.uint8))
    with pytest.raises(ValueError, match="only with images"):
        NatureCNN(spaces.Box(-1, 1, (3, 40, 40), np.float32))
    with pytest.raises(TypeError, match="Box"):
        NatureCNN(spaces.Discrete(3))
    assert NatureCNN(spaces.Box(-1, 1, (3, 40, 40), np.float32), normalized_image=True).features_dim == 512
    with pytest.raises(ValueError, match="Unexpected observation shape"):
        ActorCriticPolicy(BOX_OBS, spaces.Discrete(2), LR).predict(np.zeros(5, np.float32))


def test_mlp_helpers() -> None:
    layers = create_mlp(3, 2, [8, 8], nn.ReLU, squash_output=True, post_linear_modules=[nn.LayerNorm])
    assert [type(m) for m in layers] == [
        nn.Linear,
        nn.LayerNorm,
        nn.ReLU,
        nn.Linear,
        nn.LayerNorm,
        nn.ReLU,
        nn.Linear,
        nn.Tanh,
    ]
    extractor = MlpExtractor(5, dict(pi=[7], vf=[9, 3]), nn.ReLU)
    assert (extractor.latent_dim_pi, extractor.latent_dim_vf) == (7, 3)
    assert get_actor_critic_arch([4]) == ([4], [4])
    assert get_actor_critic_arch(dict(pi=[1], qf=[2])) == ([1], [2])
    with pytest.raises(ValueError, match="'qf'"):
        get_actor_critic_arch(dict(pi=[1]))


def test_ensemble_matches_separate_mlps() -> None:
    n, in_dim, arch = 3, 6, [16, 8]
    ensemble = nn.Sequential(*create_ensemble_mlp(n, in_dim, 1, arch, nn.ReLU))
    separate = [nn.Sequential(*create_mlp(in_dim, 1, arch, nn.ReLU)) for _ in range(n)]
    lin_ens = [m for m in ensemble if isinstance(m, EnsembleLinear)]
    with th.no_grad():
        for i, net in enumerate(separate):
            for layer, ens in zip([m for m in net if isinstance(m, nn.Linear)], lin_ens):
                layer.weight.copy_(ens.weight[i].T)
                layer.bias.copy_(ens.bias[i, 0])
    x = th.randn(10, in_dim)
    out = ensemble(x)
    assert out.shape == (n, 10, 1)
    # one stacked matmul against one Linear per member: one pass over sums of the widest fan-in, the gradients over
    # the batch of 10 (tests/tolerances.py: reassociation_rtol, entries at the scale of the largest)
    rtol = reassociation_rtol(max(widest_fan_in(ensemble), 10))
    for i, net in enumerate(separate):
        expected = net(x)
        th.testing.assert_close(out[i], expected, **state_tolerances(expected, rtol))
        th.testing.assert_close(ensemble_member_forward(ensemble, x, i), expected, **state_tolerances(expected, rtol))
    # gradients too
    out.sum().backward()
    sum(net(x).sum() for net in separate).backward()
    expected = separate[1][0].weight.grad.T
    th.testing.assert_close(lin_ens[0].weight.grad[1], expected, **state_tolerances(expected, rtol))
    # initialised like nn.Linear: U(-1/sqrt(in), 1/sqrt(in))
    big = EnsembleLinear(2, 100, 500)
    assert big.weight.abs().max() <= 0.1 and big.weight.abs().max() > 0.09 and big.bias.abs().max() <= 0.1


def test_continuous_critic_stacked_and_shared_extractor() -> None:
    action_space = spaces.Box(-1, 1, (2,), np.float32)
    shared = FlattenExtractor(BOX_OBS)
    critic = ContinuousCritic(BOX_OBS, action_space, [8], shared, 4, n_critics=3, share_features_extractor=True)
    obs, actions = _obs_batch(BOX_OBS, 5), th.rand(5, 2)
    q = critic(obs, actions)
    assert len(q) == 3 and all(qi.shape == (5, 1) for qi in q)
    stacked = critic.forward_stacked(obs, actions)
    assert stacked.shape == (3, 5, 1) and th.allclose(th.stack(q), stacked)
    assert th.allclose(critic.q1_forward(obs, actions), q[0])


def test_sac_policy() -> None:
    policy = SACPolicy(BOX_OBS, ASYM_ACTIONS, LR)
    assert policy.net_arch == [256, 256]
    assert not any(p.requires_grad for p in policy.critic_target.parameters())
    assert not policy.critic_target.training
    assert policy.actor.optimizer.defaults["fused"] and policy.critic.optimizer.defaults["fused"]
    for det in (False, True):
        actions, _ = policy.predict(np.stack([BOX_OBS.sample() for _ in range(50)]), deterministic=det)
        assert actions.shape == (50, 2) and all(ASYM_ACTIONS.contains(a) for a in actions)
    obs = _obs_batch(BOX_OBS, 7)
    actions, log_prob = policy.actor.action_log_prob(obs)
    assert actions.shape == (7, 2) and log_prob.shape == (7,)
    assert th.allclose(th.stack(policy.critic_target(obs, actions)), th.stack(policy.critic(obs, actions)))
    assert policy.critic.forward_stacked(obs, actions).shape == (2, 7, 1)
    # not shared: the critic's extractor is its own
    assert policy.critic.features_extractor is not policy.actor.features_extractor
    gsde = SACPolicy(BOX_OBS, ASYM_ACTIONS, LR, use_sde=True)
    gsde.reset_noise(2)
    assert gsde.predict(np.stack([BOX_OBS.sample()] * 2))[0].shape == (2, 2)
    with pytest.raises(ValueError, match="Box"):
        SACPolicy(BOX_OBS, spaces.Discrete(2), LR)


def test_sac_shared_extractor_gets_no_critic_gradient() -> None:
    img_policy = SACPolicy(
        IMG, ASYM_ACTIONS, LR, features_extractor_class=NatureCNN, share_features_extractor=True, net_arch=[8]
    )
    assert img_policy.critic.features_extractor is img_policy.actor.features_extractor
    critic_ids = {id(p) for g in img_policy.critic.optimizer.param_groups for p in g["params"]}
    assert not critic_ids & {id(p) for p in img_policy.actor.features_extractor.parameters()}
    obs = th.randint(0, 256, (2, 3, 36, 36), dtype=th.uint8)
    sum(q.sum() for q in img_policy.critic(obs, th.zeros(2, 2))).backward()
    assert all(p.grad is None for p in img_policy.actor.features_extractor.parameters())


def test_td3_policy() -> None:
    policy = TD3Policy(BOX_OBS, ASYM_ACTIONS, LR)
    assert policy.net_arch == [400, 300]
    assert isinstance(policy.actor.mu[-1], nn.Tanh)
    actions, _ = policy.predict(np.stack([BOX_OBS.sample() for _ in range(20)]))
    assert all(ASYM_ACTIONS.contains(a) for a in actions)
    obs = _obs_batch(BOX_OBS, 3)
    assert th.allclose(policy.actor_target(obs), policy.actor(obs))
    assert not any(p.requires_grad for p in policy.actor_target.parameters())
    assert policy.critic.q1_forward(obs, policy.actor(obs)).shape == (3, 1)
    shared = TD3Policy(BOX_OBS, ASYM_ACTIONS, LR, share_features_extractor=True, net_arch=dict(pi=[8], qf=[16]))
    assert shared.critic_target.features_extractor is shared.actor_target.features_extractor


def test_dqn_policy() -> None:
    env = gym.make("CartPole-v1")
    policy = DQNPolicy(env.observation_space, env.action_space, LR)
    assert policy.net_arch == [64, 64]
    obs, _ = env.reset(seed=0)
    action, _ = policy.predict(obs)
    assert action.shape == () and env.action_space.contains(int(action))
    q = policy.q_net(th.as_tensor(obs[None]))
    assert q.shape == (1, 2) and int(q.argmax()) == int(action)
    assert not any(p.requires_grad for p in policy.q_net_target.parameters())
    env.close()
    with pytest.raises(ValueError, match="Discrete"):
        DQNPolicy(BOX_OBS, ASYM_ACTIONS, LR)


def test_fused_adam_matches_default() -> None:
    def run(fused: bool) -> list[th.Tensor]:
        th.manual_seed(1)
        net = nn.Sequential(*create_mlp(4, 2, [32, 32]))
        kwargs = optimizer_build_kwargs(th.optim.Adam, {"eps": 1e-5}) if fused else {"eps": 1e-5, "foreach": False}
        assert kwargs.get("fused", False) is fused
        opt = th.optim.Adam(net.parameters(), lr=1e-3, **kwargs)
        gen = th.Generator().manual_seed(2)
        for _ in range(20):
            x = th.randn(16, 4, generator=gen)
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
        return [p.detach().clone() for p in net.parameters()]

    # the fused kernel rounds each step otherwise (a few ulps of a step), inside the bound of 20 Adam steps on
    # gradients known to reassociation_rtol (tests/tolerances.py: parameter_atol; batch 16, fan-in 33)
    atol = parameter_atol(20, 1e-3, max(2 * 16, 32 + 1), adam_step_bound())
    for a, b in zip(run(True), run(False)):
        th.testing.assert_close(a, b, atol=atol, rtol=0.0)
    assert "fused" not in optimizer_build_kwargs(th.optim.Adam, {"foreach": True})
    assert "fused" not in optimizer_build_kwargs(th.optim.SGD, {})


def test_policy_aliases() -> None:
    from lit_sb3 import PPO, SAC

    aliases = PPO.policy_aliases
    assert resolve_policy_class(aliases, "MlpPolicy", "PPO") is ActorCriticPolicy
    assert resolve_policy_class(SAC.policy_aliases, SACPolicy, "SAC") is SACPolicy
    msg = r"Unknown policy 'MlpPolicyy' for PPO \(did you mean 'MlpPolicy'\?\); available: MlpPolicy, CnnPolicy, MultiInputPolicy"
    with pytest.raises(ValueError, match=msg):
        resolve_policy_class(aliases, "MlpPolicyy", "PPO")
    with pytest.raises(TypeError):
        resolve_policy_class(aliases, int, "PPO")


def test_class_whitelist() -> None:
    assert class_to_path(nn.Tanh) == "torch.nn.modules.activation.Tanh"
    assert path_to_class("torch.nn.modules.activation.Tanh") is nn.Tanh
    assert path_to_class("nn.ReLU") is nn.ReLU and path_to_class("th.optim.AdamW") is th.optim.AdamW
    with pytest.raises(ValueError, match="not in the whitelist"):
        path_to_class("os.system")
    with pytest.raises(ValueError, match="not in the whitelist"):
        path_to_class("subprocess.Popen")

    class MyAct(nn.Module):
        def forward(self, x: th.Tensor) -> th.Tensor:
            return x

    with pytest.raises(ValueError, match="register_class"):
        class_to_path(MyAct)
    register_class(MyAct)
    assert path_to_class(class_to_path(MyAct)) is MyAct


def test_constructor_parameters_round_trip() -> None:
    policy = ActorCriticPolicy(
        BOX_OBS, spaces.Discrete(2), LR, net_arch=dict(pi=[8], vf=[8]), activation_fn=nn.ReLU,
        optimizer_class=th.optim.AdamW, optimizer_kwargs={"betas": (0.8, 0.9)},
    )  # fmt: skip
    data = json.loads(json.dumps(policy._get_constructor_parameters()))
    assert data["activation_fn"] == "torch.nn.modules.activation.ReLU"
    kwargs = decode_constructor_parameters(data)
    assert kwargs["activation_fn"] is nn.ReLU and kwargs["optimizer_class"] is th.optim.AdamW
    clone = ActorCriticPolicy(BOX_OBS, spaces.Discrete(2), LR, **kwargs)
    clone.load_from_vector(policy.parameters_to_vector())
    obs = _obs_batch(BOX_OBS, 3)
    assert th.allclose(clone.predict_values(obs), policy.predict_values(obs))
    for cls in (SACPolicy, TD3Policy):
        p = cls(BOX_OBS, ASYM_ACTIONS, LR, net_arch=[8])
        cls(
            BOX_OBS,
            ASYM_ACTIONS,
            LR,
            **decode_constructor_parameters(json.loads(json.dumps(p._get_constructor_parameters()))),
        )
    d = DQNPolicy(BOX_OBS, spaces.Discrete(2), LR)
    DQNPolicy(
        BOX_OBS,
        spaces.Discrete(2),
        LR,
        **decode_constructor_parameters(json.loads(json.dumps(d._get_constructor_parameters()))),
    )


@pytest.mark.parametrize("algo", ["ppo", "a2c", "trpo", "ppo_mask", "ppo_lstm", "dqn", "qrdqn", "sac", "td3", "tqc"])
def test_cnn_and_multi_input_policies_differ_from_mlp_only_in_their_extractor(algo: str) -> None:
    """Every algorithm's CnnPolicy/MultiInputPolicy is its MlpPolicy with NatureCNN/CombinedExtractor as the default
    features extractor (built by lit_sb3.policies.variants): same signature otherwise, a subclass, importable by its
    module and name (archives store policies by name)."""
    import importlib
    import inspect

    from lit_sb3.algorithms.registry import algorithm_class
    from lit_sb3.policies.torch_layers import CombinedExtractor, NatureCNN

    aliases = algorithm_class(algo).policy_aliases
    base = aliases["MlpPolicy"]
    base_params = inspect.signature(base).parameters
    for alias, extractor in (("CnnPolicy", NatureCNN), ("MultiInputPolicy", CombinedExtractor)):
        variant = aliases[alias]
        assert issubclass(variant, base) and variant is not base
        params = inspect.signature(variant).parameters
        assert list(params) == list(base_params)
        assert params["features_extractor_class"].default is extractor
        assert all(params[n] == p for n, p in base_params.items() if n != "features_extractor_class"), alias
        assert getattr(importlib.import_module(variant.__module__), variant.__qualname__) is variant
