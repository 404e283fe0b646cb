#!/usr/bin/env python3
"""Runs random small training plans folded (one rank per pipeline stage, the default) and unfolded
(--no-fold, every rank) and prints how far apart the two step times are: the check behind
docs/training.md's "Folding" figures.

Each plan draws a fabric (rail-optimized, rail-only, 2- and 3-tier InfiniBand and RoCE fat trees, a
3:1 oversubscribed tree), TP, PP, CP, a dense or MoE 8-layer model of hidden 2048, a ZeRO stage,
vpp and a batch, on 4, 8 or 16 DGX H100 nodes. A plan the fabric cannot hold is printed as ERR and
not counted. The same seed draws the same plans.

  python3 scripts/fold-sweep.py [--seed N] [--plans N] [--orders] [--clustersim PATH]

--orders also draws each plan's rank order (Megatron's default and three others that move the
experts' groups across TP ranks and nodes), from a generator of its own, so that a seed draws the
same plans with or without it.

Prints one line per plan (a difference over 1% is marked <<<), then a summary line.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

FABRICS = [
    ("rail", "{kind: rail-optimized, scalable_unit: 4, tiers: [{radix: 64}, {radix: 64}]}"),
    ("ib2", "{kind: fat-tree, technology: infiniband, tiers: [{radix: 16}, {radix: 16}]}"),
    ("ib3", "{kind: fat-tree, technology: infiniband, tiers: [{radix: 16}, {radix: 16}, {radix: 16}]}"),
    ("roce2", "{kind: fat-tree, technology: roce, tiers: [{radix: 32}, {radix: 32}]}"),
    ("roce3", "{kind: fat-tree, technology: roce, tiers: [{radix: 16}, {radix: 16}, {radix: 16}]}"),
    ("over", "{kind: fat-tree, technology: infiniband, tiers: [{radix: 16, oversubscription: 3}, {radix: 16}]}"),
    ("railonly", "{kind: rail-only, scalable_unit: 4, tiers: [{radix: 64}]}"),
]


ORDERS = ["tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp", "tp-cp-dp-ep-pp", "dp-tp-cp-ep-pp"]


def draw(rng, order_rng=None):
    """One plan as (label, scenario YAML), or None when its GPUs do not divide."""
    name, fabric = rng.choice(FABRICS)
    tp = rng.choice([1, 2, 4, 8])
    pp = rng.choice([1, 2, 4])
    cp = rng.choice([1, 1, 2])
    nodes = rng.choice([4, 8, 16])
    gpus = nodes * 8
    if gpus % (tp * pp * cp):
        return None
    dp = gpus // (tp * pp * cp)
    moe = rng.random() < 0.3
    ep = rng.choice([e for e in [1, 2, 4, 8] if (tp * cp * dp) % e == 0]) if moe else 1
    zero = rng.choice([0, 1, 2, 3])
    vpp = rng.choice([1, 2]) if pp > 1 else 1
    global_batch = dp * rng.choice([1, 2, 4]) * pp
    experts = ", moe: {experts: 8, top_k: 2, expert_ffn_hidden: 4096}" if moe else ""
    model = ("{name: m, layers: 8, hidden: 2048, ffn_hidden: 8192, heads: 16, kv_heads: 16, vocab: 32000, "
             f"seq_len: 2048, activation: gelu{experts}}}")
    plan = (f"tp: {tp}, pp: {pp}, dp: {dp}, cp: {cp}, ep: {ep}, vpp: {vpp}, "
            f"sequence_parallel: {'true' if tp > 1 else 'false'}, zero_stage: {zero}")
    if order_rng is not None:
        plan += f", order: {order_rng.choice(ORDERS)}"
    scenario = f"""scenario:
  name: fold-sweep
  kind: training
  model: {model}
  topology: {{name: t, node: dgx-h100, nodes: {nodes}, fabric: {fabric}}}
  parallelism: {{{plan}}}
  batch: {{micro: 1, global: {global_batch}}}
  recompute: full
  precision: bf16
"""
    return f"{name:8s} {plan}{' moe' if moe else ''} gb={global_batch}", scenario


def step_time(clustersim, path, extra):
    r = subprocess.run([clustersim, "run", "--json", path] + extra, capture_output=True, text=True, timeout=600)
    if r.returncode:
        lines = r.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit {r.returncode}"
    return json.loads(r.stdout)["step_time_s"], None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--plans", type=int, default=80, help="plans drawn, those that do not divide included")
    ap.add_argument("--clustersim", default=os.path.join(root, "build", "release", "bin", "clustersim"))
    ap.add_argument("--orders", action="store_true", help="also draw each plan's rank order")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    order_rng = random.Random(a.seed + 1_000_003) if a.orders else None
    gaps = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.yaml")
        for _ in range(a.plans):
            drawn = draw(rng, order_rng)
            if drawn is None:
                continue
            label, scenario = drawn
            with open(path, "w") as f:
                f.write(scenario)
            folded, error = step_time(a.clustersim, path, [])
            unfolded, error2 = (None, None) if error else step_time(a.clustersim, path, ["--no-fold"])
            if error or error2:
                print(f"{label}: ERR {error or error2}")
                continue
            gap = 100.0 * (folded - unfolded) / unfolded
            gaps.append(gap)
            print(f"{label}: folded {folded:.5f} s, unfolded {unfolded:.5f} s, {gap:+.2f}%{' <<<' if abs(gap) > 1 else ''}", flush=True)
    if not gaps:
        print("no plan ran")
        return 1
    within = sum(abs(g) <= 1 for g in gaps)
    worst = max(gaps, key=abs)
    print(f"{len(gaps)} plans: {within} within 1%, worst {worst:+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
