"""How to stack K seeds' networks: one SAC update (entropy coefficient, critics, actor, target critics) for K
seeds, three ways, on one torch thread (see docs/seed_batching.md):

* ``bmm``: the seeds' MLPs stacked into EnsembleLinear layers (one ``baddbmm`` per layer), as a K-seed ``SAC`` does
  (``SeedBatch(SAC, seeds=[...])``: ``SAC.train``, minibatch sampling included);
* ``vmap``: ``torch.func.stack_module_state`` + ``vmap(functional_call(...))`` of the single-seed actor and
  critic modules, per-seed losses summed, one fused Adam step over the stacked parameters;
* ``loop``: K single-seed ``SAC.train`` calls (what K separate processes compute, without process overhead).

Timings are interleaved (bmm, vmap, loop in each repeat) and reported as ratios of medians.

``--fits N`` measures instead whole ``RLTrainer`` fits of N env steps per seed: one K-seed batch against the K
single-seed fits run one after the other in this process (interleaved pairs).

Usage: ``PYTHONPATH=. python benchmarks/bench_seed_stacking.py --seeds 8 --net 64 --batch-size 64 --repeats 7``
(``--fits 400 --repeats 2`` for the end-to-end pairs)
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch as th
from torch.func import functional_call, stack_module_state, vmap

from lit_sb3 import SAC, SeedBatch
from lit_sb3.vec_env import make_vec_env


def _fill(batch, n: int) -> None:
    rng = np.random.default_rng(0)
    k = batch.n_seeds
    for _ in range(n):
        batch.replay_buffer.add(
            rng.normal(size=(k, 1, 3)).astype(np.float32),
            rng.normal(size=(k, 1, 3)).astype(np.float32),
            rng.uniform(-1, 1, size=(k, 1, 1)).astype(np.float32),
            rng.normal(size=(k, 1)).astype(np.float32),
            np.zeros((k, 1), np.float32),
        )


class _VmapSAC:
    """SAC's update with torch.func over the members' own (single-seed) actor and critic modules."""

    def __init__(self, members: list[SAC]) -> None:
        self.actor, self.critic = members[0].actor, members[0].critic
        self.actor_params, _ = stack_module_state([m.actor for m in members])
        self.critic_params, _ = stack_module_state([m.critic for m in members])
        self.target_params = {k: v.detach().clone() for k, v in self.critic_params.items()}
        self.log_alpha = th.zeros(len(members), 1, requires_grad=True)
        self.opt_actor = th.optim.Adam(list(self.actor_params.values()), lr=3e-4, fused=True)
        self.opt_critic = th.optim.Adam(list(self.critic_params.values()), lr=3e-4, fused=True)
        self.opt_alpha = th.optim.Adam([self.log_alpha], lr=3e-4, fused=True)
        self.target_entropy = -1.0
        actor, critic = self.actor, self.critic

        def pi(params, obs):
            latent_params = {k[len("latent_pi.") :]: v for k, v in params.items() if k.startswith("latent_pi.")}
            latent = functional_call(actor.latent_pi, latent_params, (obs,))
            mean = functional_call(actor.mu, {"weight": params["mu.weight"], "bias": params["mu.bias"]}, (latent,))
            log_std_params = {"weight": params["log_std.weight"], "bias": params["log_std.bias"]}
            log_std = functional_call(actor.log_std, log_std_params, (latent,)).clamp(-20, 2)
            std = log_std.exp()
            gaussian = mean + std * th.randn_like(mean)
            action = th.tanh(gaussian)
            log_prob = (-((gaussian - mean) ** 2) / (2 * std**2) - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
            log_prob = log_prob - th.log(1 - action**2 + 1e-6).sum(-1)
            return action, log_prob.unsqueeze(-1)

        def q(params, obs, actions):
            qf_params = {k[len("qf.") :]: v for k, v in params.items() if k.startswith("qf.")}
            return functional_call(critic.qf, qf_params, (th.cat([obs, actions], -1),))

        self.pi = vmap(pi, randomness="different")
        self.q = vmap(q)

    def update(self, data) -> None:
        obs, actions, next_obs, rewards, dones = (
            data.observations,
            data.actions,
            data.next_observations,
            data.rewards,
            data.dones,
        )
        actions_pi, log_prob = self.pi(self.actor_params, obs)
        alpha = self.log_alpha.detach().exp().view(-1, 1, 1)
        alpha_loss = -(self.log_alpha.unsqueeze(1) * (log_prob + self.target_entropy).detach()).mean(dim=(1, 2))
        self.opt_alpha.zero_grad()
        alpha_loss.sum().backward()
        self.opt_alpha.step()
        with th.no_grad():
            next_actions, next_log_prob = self.pi(self.actor_params, next_obs)
            next_q = self.q(self.target_params, next_obs, next_actions).min(dim=1).values - alpha * next_log_prob
            target = rewards + (1 - dones) * 0.99 * next_q
        current = self.q(self.critic_params, obs, actions)
        critic_loss = (current - target.unsqueeze(1)).pow(2).mean(dim=(1, 2, 3))
        self.opt_critic.zero_grad()
        critic_loss.sum().backward()
        self.opt_critic.step()
        min_q = self.q(self.critic_params, obs, actions_pi).min(dim=1).values
        actor_loss = (alpha * log_prob - min_q).mean(dim=(1, 2))
        self.opt_actor.zero_grad()
        actor_loss.sum().backward(inputs=list(self.actor_params.values()))
        self.opt_actor.step()
        with th.no_grad():
            th._foreach_lerp_(list(self.target_params.values()), list(self.critic_params.values()), 0.005)


def end_to_end(k: int, steps: int, pairs: int, kwargs: dict) -> None:
    """One K-seed batch fit against K single-seed fits, ``pairs`` interleaved pairs (after one warm-up pair)."""
    from lit_sb3 import RLEnvDataModule, RLTrainer

    def batched() -> None:
        batch = SeedBatch(SAC, seeds=list(range(k)), **kwargs)
        envs = [make_vec_env("Pendulum-v1", seed=s) for s in range(k)]
        RLTrainer(max_steps=steps, logger=False).fit(batch, datamodule=RLEnvDataModule(train_env=envs))

    def separate() -> None:
        for s in range(k):
            model = SAC("MlpPolicy", seed=s, **kwargs)
            env = make_vec_env("Pendulum-v1", seed=s)
            RLTrainer(max_steps=steps, logger=False).fit(model, datamodule=RLEnvDataModule(train_env=env))

    batched()
    separate()
    for pair in range(pairs):
        start = time.perf_counter()
        batched()
        t_batch = time.perf_counter() - start
        start = time.perf_counter()
        separate()
        t_separate = time.perf_counter() - start
        print(f"pair {pair}: batch {t_batch:.1f} s, {k} single fits {t_separate:.1f} s: {t_separate / t_batch:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--net", type=int, default=64, help="hidden units (two layers)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--updates", type=int, default=100, help="updates per timing")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fits", type=int, default=0, help="env steps per seed of end-to-end fits (0: updates only)")
    args = parser.parse_args()
    th.set_num_threads(1)
    k, b = args.seeds, args.batch_size
    kwargs = dict(batch_size=b, policy_kwargs=dict(net_arch=[args.net, args.net]), device=args.device)
    if args.fits:
        end_to_end(k, args.fits, args.repeats, {**kwargs, "learning_starts": 100})
        return
    batch = SeedBatch(SAC, seeds=list(range(k)), **kwargs)
    batch.set_env([make_vec_env("Pendulum-v1", n_envs=1, seed=s) for s in range(k)])
    _fill(batch, 2000)
    singles = []
    for s in range(k):
        single = SAC("MlpPolicy", seed=s, **kwargs)
        single.set_env(make_vec_env("Pendulum-v1", n_envs=1, seed=s))
        single._setup_model()
        for _ in range(2000):
            single.replay_buffer.add(
                np.random.normal(size=(1, 3)), np.random.normal(size=(1, 3)), np.random.uniform(-1, 1, (1, 1)),
                np.random.normal(size=1), np.zeros(1), [{}],
            )  # fmt: skip
        singles.append(single)
    vm = _VmapSAC([batch.member(i) for i in range(k)])
    sync = th.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def run_bmm() -> None:
        batch.train(gradient_steps=args.updates, batch_size=b)

    def run_vmap() -> None:
        for _ in range(args.updates):
            vm.update(batch._sample_replay(b))

    def run_loop() -> None:
        for _ in range(args.updates):
            for single in singles:
                single.train(gradient_steps=1, batch_size=b)

    runs = {"bmm": run_bmm, "vmap": run_vmap, "loop": run_loop}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for name, fn in runs.items():
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append((time.perf_counter() - start) / args.updates * 1e3)
    med = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"K={k} net={args.net}x2 batch={b} device={args.device} ({args.repeats} interleaved repeats of {args.updates} updates)"
    )
    for name in runs:
        print(f"  {name:5s} {med[name]:7.3f} ms per update of all {k} seeds")
    print(f"  vmap / bmm = {med['vmap'] / med['bmm']:.2f}x   loop / bmm = {med['loop'] / med['bmm']:.2f}x")


if __name__ == "__main__":
    main()
