#!/usr/bin/env python3
"""bench/mlp_train's peers: the same MLP training step in PyTorch eager and JAX jit.

    python3 bench/mlp_train_peers.py [threads] [reps] [steps] [--only torch|jax]
    (defaults: all usable CPUs, 15 reps, 20 steps, both frameworks)

The model, sizes and step are bench/mlp_train.cpp's: 784-256-256-10, batch 128, float32, relu
layers, softmax cross-entropy against one-hot targets averaged over the batch, value and gradient
with respect to the six parameters, then SGD with lr 0.01 on every leaf. Weights are normal with
standard deviation 1/sqrt(fan_in), biases zero, inputs normal, labels uniform (NumPy's generator,
seed 0: the same scheme as the C++ side, not the same numbers). Both frameworks start from the
same arrays, and their gradients are checked against each other before timing.

  PyTorch eager  autograd.grad of the loss, then p.sub_(lr * g) under no_grad; torch.set_num_threads.
  JAX jit        one jax.jit function doing value_and_grad and the SGD update (new parameter
                 arrays each step, no donation); block_until_ready after each run of steps.

Timing follows bench/timing.hpp: two warm-up runs of `steps` steps each, then `reps` timed runs
round-robin across the frameworks with a 20 ms pause between runs; median and fastest run,
divided by `steps`: ms per step. Thread count: torch.set_num_threads(threads); XLA has no such
setting, so when `threads` is below the CPUs this process may use, the process is pinned to
`threads` of them (which XLA's thread pool sizes itself by) before JAX is imported. The last
lines, `torch_ms <median>` and `jax_ms <median>`, are for scripts.
"""

import argparse
import math
import os
import sys
import time

N_IN, N_HIDDEN, N_OUT, N_BATCH = 784, 256, 10, 128
LR = 0.01


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("threads", nargs="?", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("reps", nargs="?", type=int, default=15)
    ap.add_argument("steps", nargs="?", type=int, default=20)
    ap.add_argument("--only", choices=["torch", "jax"])
    args = ap.parse_args()
    if args.threads < 1 or args.reps < 1 or args.steps < 1:
        ap.error("threads, reps and steps must be positive")
    return args


def make_data(np):
    rng = np.random.default_rng(0)

    def normal(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    params = {
        "w1": normal((N_IN, N_HIDDEN), 1 / math.sqrt(N_IN)),
        "b1": np.zeros(N_HIDDEN, np.float32),
        "w2": normal((N_HIDDEN, N_HIDDEN), 1 / math.sqrt(N_HIDDEN)),
        "b2": np.zeros(N_HIDDEN, np.float32),
        "w3": normal((N_HIDDEN, N_OUT), 1 / math.sqrt(N_HIDDEN)),
        "b3": np.zeros(N_OUT, np.float32),
    }
    x = normal((N_BATCH, N_IN), 1.0)
    labels = rng.integers(0, N_OUT, N_BATCH)
    y = np.zeros((N_BATCH, N_OUT), np.float32)
    y[np.arange(N_BATCH), labels] = 1
    return params, x, y


def torch_peer(params0, x0, y0, steps):
    import torch

    names = list(params0)
    params = [torch.tensor(params0[k], requires_grad=True) for k in names]
    x, y = torch.tensor(x0), torch.tensor(y0)

    def loss_fn(w1, b1, w2, b2, w3, b3):
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        logits = h @ w3 + b3
        return -(y * torch.log_softmax(logits, -1)).sum(-1).mean()

    def step():
        loss = loss_fn(*params)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(LR * g)
        return loss.item()

    def run():
        for _ in range(steps):
            step()

    def grads_at_init():
        ps = [torch.tensor(params0[k], requires_grad=True) for k in names]
        loss = loss_fn(*ps)
        return loss.item(), {k: g.numpy() for k, g in zip(names, torch.autograd.grad(loss, ps))}

    def current_loss():
        with torch.no_grad():
            return loss_fn(*params).item()

    return run, step, grads_at_init, current_loss


def jax_peer(params0, x0, y0, steps):
    import jax
    import jax.numpy as jnp

    def loss_fn(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, -1), -1))

    @jax.jit
    def train_step(p, x, y):
        value, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda w, g: w - LR * g, p, grads), value

    x, y = jnp.asarray(x0), jnp.asarray(y0)
    state = {"p": {k: jnp.asarray(v) for k, v in params0.items()}}

    def step():
        state["p"], value = train_step(state["p"], x, y)
        return float(value)

    def run():
        p = state["p"]
        for _ in range(steps):
            p, _ = train_step(p, x, y)
        jax.block_until_ready(p)
        state["p"] = p

    def grads_at_init():
        p = {k: jnp.asarray(v) for k, v in params0.items()}
        value, grads = jax.jit(jax.value_and_grad(loss_fn))(p, x, y)
        return float(value), {k: jax.device_get(g) for k, g in grads.items()}

    def current_loss():
        return float(jax.jit(loss_fn)(state["p"], x, y))

    return run, step, grads_at_init, current_loss


def main():
    args = parse_args()
    usable = sorted(os.sched_getaffinity(0))
    if args.threads < len(usable):
        os.sched_setaffinity(0, usable[: args.threads])
    frameworks = [args.only] if args.only else ["torch", "jax"]

    import numpy as np

    params0, x0, y0 = make_data(np)
    peers = {}
    if "torch" in frameworks:
        import torch

        torch.set_num_threads(args.threads)
        peers["torch"] = torch_peer(params0, x0, y0, args.steps)
    if "jax" in frameworks:
        peers["jax"] = jax_peer(params0, x0, y0, args.steps)

    # Correctness: the gradients at the initial point against each other (when both run), and a
    # finite loss, lower than the initial one, after one step of each.
    inits = {name: peer[2]() for name, peer in peers.items()}
    if len(inits) == 2:
        (lt, gt), (lj, gj) = inits["torch"], inits["jax"]
        diff = max(
            float(np.max(np.abs(gt[k] - gj[k]) / np.maximum(1.0, np.abs(gj[k])))) for k in gt
        )
        print(f"initial loss: torch {lt:.6f}, jax {lj:.6f}; gradients differ by {diff:.2g}")
        if abs(lt - lj) > 1e-5 or diff > 1e-5:
            sys.exit("mlp_train_peers: torch and jax disagree")
    for name, (_, step, _, current_loss) in peers.items():
        before = inits[name][0]
        step()
        after = current_loss()
        print(f"{name}: initial loss {before:.6f}, after one step {after:.6f}")
        if not math.isfinite(after) or not after < before:
            sys.exit(f"mlp_train_peers: {name}'s first step is wrong")

    runs = [peer[0] for peer in peers.values()]
    for run in runs:
        run()
        run()
        time.sleep(0.02)
    times = [[] for _ in runs]
    for _ in range(args.reps):
        for k, run in enumerate(runs):
            t0 = time.perf_counter()
            run()
            times[k].append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.02)
    for name, (_, _, _, current_loss) in peers.items():
        if not math.isfinite(current_loss()):
            sys.exit(f"mlp_train_peers: {name}'s loss is not finite after training")

    versions = []
    if "torch" in peers:
        versions.append(f"torch {torch.__version__}")
    if "jax" in peers:
        import jax

        versions.append(f"jax {jax.__version__}")
    print(
        f"\nmlp_train_peers: {N_IN}-{N_HIDDEN}-{N_HIDDEN}-{N_OUT}, batch {N_BATCH}, float32, SGD lr "
        f"{LR}, {args.threads} threads, {args.reps} reps of {args.steps} steps; "
        + ", ".join(versions)
        + "\n"
    )
    print("| peer | median ms/step | best ms/step |\n|---|---:|---:|")
    labels = {"torch": "PyTorch eager", "jax": "JAX jit"}
    results = {}
    for name, t in zip(peers, times):
        t.sort()
        results[name] = (t[len(t) // 2] / args.steps, t[0] / args.steps)
        print(f"| {labels[name]} | {results[name][0]:.3f} | {results[name][1]:.3f} |")
    print()
    for name, (median, best) in results.items():
        print(f"{name}_ms {median:.4f}\n{name}_best_ms {best:.4f}")


if __name__ == "__main__":
    main()
