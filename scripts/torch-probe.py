#!/usr/bin/env python3
"""Times, on one CUDA GPU through PyTorch, the parts of a transformer layer that the CUDA probe
(clustersim-probe-cuda: cuBLASLt GEMMs, copies, NCCL) does not measure, for checking the training
model's attention efficiencies and memory-bound op times against a real GPU:

  attention   fused causal attention (scaled_dot_product_attention) forward and backward, per
              backend (cuDNN, as Transformer Engine uses on Hopper; FlashAttention-2), bf16, 17
              shapes with grouped-query attention among them (kv_heads recorded)
  ops         the memory-bound ops of a GPT layer at one micro-batch: layer norm, GeLU, bias-free
              residual add, the logits' cross-entropy over a whole vocabulary, an embedding's
              backward, a fused AdamW step over a given number of parameters
  layer       one whole GPT layer (pre-norm, MHA, GeLU MLP, no dropout), forward and backward, in
              eager PyTorch with the cuDNN attention backend
  tp_layer    one tensor-parallel rank's share of such a layer with sequence parallelism and no
              communication, at the shapes of Megatron-Core's 2024 H100 runs (7.1B at TP 2, 16B at
              TP 4, 32B and the 177B GPT-3 at TP 8, one 4k sequence): what the model charges a rank
              for a layer's compute, without the collectives beside it
  step        a whole training step of Megatron-Core's 1.7B model on this one GPU: 4 micro-batches
              of one 4k sequence, bf16 weights and gradients, then Megatron's mixed-precision
              optimizer (gradients cast to fp32 main gradients, fused AdamW on fp32 main
              weights, copied back to bf16); not run with --quick

  python3 scripts/torch-probe.py --out FILE.json [--quick] [--only SECTION,...]

Needs PyTorch with CUDA (not a clustersim dependency; the GPU machines' image has it). Writes one
JSON file ("clustersim-torch-probe/1"): the GPU, library versions, and a list of samples, each with
a section, a name, its dimensions, the FLOPs or bytes the model counts for it, and the median
seconds over timed repetitions (CUDA events around batches of back-to-back calls of about 2 ms,
after warm-up; the attention backward timed alone, on a retained graph). A section that fails is recorded with
its error and the others still run. The clocks are brought up by a second of matrix products first.
Files written before 2026-12-05 timed each call between its own two events and took the backward
as forward-and-backward less forward (tests/data/calibrate/h200-device-2026-12-04/README.md).
"""
import argparse
import json
import os
import sys
import time
import traceback


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--only", default="attention,ops,layer,tp_layer,step", help="comma-separated sections to run")
    args = ap.parse_args()
    wanted = set(args.only.split(","))
    unknown = wanted - {"attention", "ops", "layer", "tp_layer", "step"}
    if unknown:
        sys.exit("torch-probe: unknown section(s) %s (expected attention, ops, layer, tp_layer, step)" % ", ".join(sorted(unknown)))

    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.exit("torch-probe: PyTorch sees no CUDA GPU")
    dev = torch.device("cuda")
    prop = torch.cuda.get_device_properties(dev)
    result = {
        "format": "clustersim-torch-probe/1",
        "gpu": prop.name,
        "sm_count": prop.multi_processor_count,
        "memory_bytes": prop.total_memory,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "errors": {},
        "samples": [],
    }
    try:
        result["cudnn"] = torch.backends.cudnn.version()
    except RuntimeError as e:  # a cuDNN on LD_LIBRARY_PATH that does not match PyTorch's
        result["errors"]["cudnn"] = str(e)
    reps = 10 if args.quick else 30
    bf16 = torch.bfloat16

    def write():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, args.out)

    def timed(fn, n=reps, warmup=3):
        # Median over n timings, each of a batch of back-to-back calls between two CUDA events, the
        # batch sized to span about 2 ms so that the host's dispatch between calls stays hidden
        # behind the GPU's work (a lone short kernel would be timed with the gap before it).
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        batch = max(1, min(100, int(2e-3 / max(time.perf_counter() - t0, 1e-6))))
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for s, e in events:
            s.record()
            for _ in range(batch):
                fn()
            e.record()
        torch.cuda.synchronize()
        ms = sorted(s.elapsed_time(e) / batch for s, e in events)
        return ms[len(ms) // 2] / 1e3

    def sample(section, name, seconds, **fields):
        d = {"section": section, "name": name, "seconds": seconds}
        d.update(fields)
        result["samples"].append(d)
        rate = ""
        if "flops" in fields:
            rate = " %.1f TFLOP/s" % (fields["flops"] / seconds / 1e12)
        elif "bytes" in fields:
            rate = " %.0f GB/s" % (fields["bytes"] / seconds / 1e9)
        print("torch-probe: %s %s %s: %.3f ms%s" % (section, name, {k: v for k, v in fields.items() if k not in ("flops", "bytes")},
                                                   seconds * 1e3, rate), flush=True)

    def section(name, fn):
        t = time.time()
        try:
            fn()
        except Exception as e:  # one section's failure must not lose the others
            result["errors"][name] = "%s: %s" % (type(e).__name__, e)
            traceback.print_exc()
        torch.cuda.empty_cache()
        print("torch-probe: section %s took %.1f s" % (name, time.time() - t), flush=True)
        write()

    # Clocks up: a second of 8192^3 bf16 products.
    a = torch.randn(8192, 8192, device=dev, dtype=bf16)
    t = time.time()
    while time.time() - t < 1.0:
        a @ a
    torch.cuda.synchronize()
    square = timed(lambda: a @ a, n=10)
    sample("warmup", "matmul_8192", square, flops=2.0 * 8192 ** 3)
    del a

    from torch.nn.attention import SDPBackend, sdpa_kernel

    # (batch, heads, kv_heads, seq, head_dim): one sequence of Megatron-Core's 1.7B / 7.1B (4k), GPT-3
    # and the Llama shapes a TP rank holds (heads / tp), a FlashAttention-3 benchmark point (16k
    # tokens); then grouped-query attention as a TP rank of Llama 3 holds it at 8k (8B at TP 1 and 2,
    # 70B and 405B at TP 8) and longer sequences of few heads.
    att_shapes = [(1, 16, 16, 4096, 128), (1, 32, 32, 4096, 128), (1, 8, 8, 4096, 128), (1, 12, 12, 2048, 128), (4, 16, 16, 4096, 128),
                  (1, 16, 16, 8192, 128), (2, 16, 16, 2048, 128), (1, 24, 24, 2048, 96), (1, 16, 16, 4096, 64),
                  (1, 32, 8, 8192, 128), (1, 16, 4, 8192, 128), (1, 8, 1, 8192, 128), (1, 16, 2, 8192, 128), (1, 8, 8, 8192, 128),
                  (1, 8, 8, 16384, 128), (1, 4, 4, 8192, 128), (2, 8, 1, 4096, 128)]
    if args.quick:
        att_shapes = att_shapes[:3]

    def attention():
        backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]
        for b, h, kvh, s, d in att_shapes:
            # Causal: half the s x s scores; forward 2 products (QK^T, PV), backward 5 (2.5 x forward).
            fwd_flops = 2.0 * 2.0 * b * h * s * s * d / 2.0
            gqa = dict(enable_gqa=True) if kvh != h else {}
            for bname, backend in backends:
                q = torch.randn(b, h, s, d, device=dev, dtype=bf16, requires_grad=True)
                k, v = (torch.randn(b, kvh, s, d, device=dev, dtype=bf16, requires_grad=True) for _ in range(2))
                g = torch.randn(b, h, s, d, device=dev, dtype=bf16)
                try:
                    with sdpa_kernel([backend]):
                        def fwd():
                            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)

                        # The backward alone: one forward's graph kept and run backward again.
                        o = fwd()

                        def bwd():
                            q.grad = k.grad = v.grad = None
                            o.backward(g, retain_graph=True)

                        tf = timed(fwd)
                        tb = timed(bwd)
                except Exception as e:
                    result["errors"]["attention_%s_%dx%dx%dx%dx%d" % (bname, b, h, kvh, s, d)] = "%s: %s" % (type(e).__name__, e)
                    continue
                dims = dict(backend=bname, batch=b, heads=h, kv_heads=kvh, seq=s, head_dim=d)
                sample("attention", "forward", tf, flops=fwd_flops, **dims)
                sample("attention", "backward", tb, flops=2.5 * fwd_flops, **dims)
                del q, k, v, g, o

    # (hidden, ffn, heads, vocab, tokens): Megatron-Core's 1.7B and 7.1B at one 4k sequence.
    layers = [(2048, 8192, 16, 131072, 4096), (4096, 16384, 32, 131072, 4096)]
    if args.quick:
        layers = layers[:1]

    def ops():
        for hid, ffn, heads, vocab, tokens in layers:
            dims = dict(hidden=hid, tokens=tokens)
            x = torch.randn(tokens, hid, device=dev, dtype=bf16, requires_grad=True)
            gx = torch.randn(tokens, hid, device=dev, dtype=bf16)
            w = torch.ones(hid, device=dev, dtype=bf16, requires_grad=True)
            bias = torch.zeros(hid, device=dev, dtype=bf16, requires_grad=True)
            act = tokens * hid * 2.0
            sample("ops", "layer_norm_forward", timed(lambda: F.layer_norm(x, (hid,), w, bias)), bytes=2 * act, **dims)

            def ln_fb():
                x.grad = w.grad = bias.grad = None
                F.layer_norm(x, (hid,), w, bias).backward(gx)
            sample("ops", "layer_norm_forward_backward", timed(ln_fb), bytes=5 * act, **dims)
            y = torch.randn(tokens, hid, device=dev, dtype=bf16)
            sample("ops", "residual_add", timed(lambda: x.detach() + y), bytes=3 * act, **dims)
            u = torch.randn(tokens, ffn, device=dev, dtype=bf16, requires_grad=True)
            gu = torch.randn(tokens, ffn, device=dev, dtype=bf16)
            wide = tokens * ffn * 2.0
            sample("ops", "gelu_forward", timed(lambda: F.gelu(u)), bytes=2 * wide, ffn=ffn, **dims)

            def gelu_fb():
                u.grad = None
                F.gelu(u).backward(gu)
            sample("ops", "gelu_forward_backward", timed(gelu_fb), bytes=5 * wide, ffn=ffn, **dims)
            del u, gu
            # Logits and their cross-entropy: the product is the CUDA probe's; here the loss alone.
            logits = torch.randn(tokens, vocab, device=dev, dtype=bf16, requires_grad=True)
            target = torch.randint(0, vocab, (tokens,), device=dev)
            lbytes = tokens * vocab * 2.0
            sample("ops", "cross_entropy_forward", timed(lambda: F.cross_entropy(logits.float(), target)), bytes=lbytes, vocab=vocab, **dims)

            def ce_fb():
                logits.grad = None
                F.cross_entropy(logits.float(), target).backward()
            sample("ops", "cross_entropy_forward_backward", timed(ce_fb), bytes=3 * lbytes, vocab=vocab, **dims)
            del logits
            emb = torch.nn.Embedding(vocab, hid, device=dev, dtype=bf16)
            ids = torch.randint(0, vocab, (tokens,), device=dev)
            gy = torch.randn(tokens, hid, device=dev, dtype=bf16)

            def emb_fb():
                emb.weight.grad = None
                emb(ids).backward(gy)
            sample("ops", "embedding_forward_backward", timed(emb_fb), bytes=vocab * hid * 2.0, vocab=vocab, **dims)
            del emb
            torch.cuda.empty_cache()
        # Fused AdamW over fp32 parameters (Megatron's distributed optimizer steps fp32 main
        # parameters): 100 M parameters, 16 bytes read (parameter, gradient, two moments) and 12 written.
        n = 100_000_000
        p = torch.zeros(n, device=dev, dtype=torch.float32, requires_grad=True)
        p.grad = torch.randn(n, device=dev, dtype=torch.float32)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        sample("ops", "adamw_fused_fp32", timed(opt.step, n=10), bytes=n * (4 * 4 + 3 * 4.0), params=n)
        del p, opt

    class Layer(torch.nn.Module):
        def __init__(self, hid, ffn, heads):
            super().__init__()
            lin = lambda i, o: torch.nn.Linear(i, o, device=dev, dtype=bf16)
            self.hid, self.heads = hid, heads
            self.ln1 = torch.nn.LayerNorm(hid, device=dev, dtype=bf16)
            self.ln2 = torch.nn.LayerNorm(hid, device=dev, dtype=bf16)
            self.qkv, self.proj, self.fc1, self.fc2 = lin(hid, 3 * hid), lin(hid, hid), lin(hid, ffn), lin(ffn, hid)

        def forward(self, x):
            b, t, _ = x.shape
            a = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, self.hid // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = (a[i].contiguous() for i in range(3))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h1 = x + self.proj(o.transpose(1, 2).reshape(b, t, self.hid))
            return h1 + self.fc2(F.gelu(self.fc1(self.ln2(h1))))

    def time_layer(section, blk, rows, tp, hid, ffn, heads, tokens):
        # Forward, and forward with backward, of a layer (or a TP rank's share of one: tp > 1) fed
        # `rows` tokens; samples carry the model's FLOPs of the pass.
        x = torch.randn(1, rows, hid, device=dev, dtype=bf16, requires_grad=True)
        g = torch.randn(1, rows, hid, device=dev, dtype=bf16)
        params = list(blk.parameters())

        def forward():
            return blk(x)

        def fwd_bwd():
            for p in params:
                p.grad = None
            x.grad = None
            forward().backward(g)

        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            tf = timed(forward)
            tfb = timed(fwd_bwd)
        gemm_flops = 2.0 * tokens * hid * (3 * hid + hid + 2 * ffn) / tp
        att_flops = 2.0 * tokens * tokens * hid / tp  # causal, forward
        dims = dict(hidden=hid, ffn=ffn, heads=heads, tokens=tokens)
        if tp > 1:
            dims["tp"] = tp
        sample(section, "forward", tf, flops=gemm_flops + att_flops, **dims)
        sample(section, "forward_backward", tfb, flops=3 * gemm_flops + 3.5 * att_flops, **dims)
        del params, x, g

    def layer():
        for hid, ffn, heads, vocab, tokens in layers:
            time_layer("layer", Layer(hid, ffn, heads), tokens, 1, hid, ffn, heads, tokens)
            torch.cuda.empty_cache()

    class TPLayer(torch.nn.Module):
        # One TP rank's share of Layer under Megatron's sequence parallelism, its collectives left out:
        # the layer norms and residual adds on this rank's tokens / tp rows, the GEMMs on all tokens
        # with the weights split tp ways (column-parallel qkv and fc1, row-parallel proj and fc2),
        # heads / tp attention heads. Where Megatron all-gathers the sequence, this repeats the rank's
        # rows tp times (one copy kernel); where it reduce-scatters, it keeps the first tokens / tp rows
        # (a view, whose backward zero-fills the rest: one kernel over the GEMM's output).
        def __init__(self, hid, ffn, heads, tp):
            super().__init__()
            lin = lambda i, o: torch.nn.Linear(i, o, device=dev, dtype=bf16)
            self.hid, self.heads, self.tp = hid, heads, tp
            self.ln1 = torch.nn.LayerNorm(hid, device=dev, dtype=bf16)
            self.ln2 = torch.nn.LayerNorm(hid, device=dev, dtype=bf16)
            self.qkv, self.proj = lin(hid, 3 * hid // tp), lin(hid // tp, hid)
            self.fc1, self.fc2 = lin(hid, ffn // tp), lin(ffn // tp, hid)

        def forward(self, x):
            b, rows, _ = x.shape
            t = rows * self.tp
            a = self.qkv(self.ln1(x).repeat(1, self.tp, 1))
            a = a.view(b, t, 3, self.heads // self.tp, self.hid // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = (a[i].contiguous() for i in range(3))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h1 = x + self.proj(o.transpose(1, 2).reshape(b, t, self.hid // self.tp))[:, :rows]
            return h1 + self.fc2(F.gelu(self.fc1(self.ln2(h1).repeat(1, self.tp, 1))))[:, :rows]

    # (hidden, ffn, heads, tp, tokens): training.yaml's Megatron-Core 2024 H100 runs with TP (7.1B,
    # 16B, 32B) and the 177B GPT-3 of its table and strong-scaling series, one 4k sequence.
    tp_layers = [(4096, 16384, 32, 2, 4096), (6144, 24576, 48, 4, 4096), (7168, 28672, 56, 8, 4096), (12288, 49152, 96, 8, 4096)]
    if args.quick:
        tp_layers = tp_layers[-1:]

    def tp_layer():
        for hid, ffn, heads, tp, tokens in tp_layers:
            time_layer("tp_layer", TPLayer(hid, ffn, heads, tp), tokens // tp, tp, hid, ffn, heads, tokens)
            torch.cuda.empty_cache()

    def step():
        # Megatron-Core's 1.7B (training.yaml's megatron-core-2024-h100-weak-1.7B): 24 layers, h 2048,
        # 16 heads, ffn 8192, vocab 131072, 4k sequences; 4 micro-batches of 1. The output layer is a
        # weight of its own (untied), as tests/training_test.cpp simulates this step; Megatron ties it
        # by default, which spares the optimizer one vocabulary table and changes no GEMM.
        layers_n, hid, ffn, heads, vocab, seq, micro = 24, 2048, 8192, 16, 131072, 4096, 4
        torch.manual_seed(0)
        emb = torch.nn.Embedding(vocab, hid, device=dev, dtype=bf16)
        blocks = torch.nn.ModuleList(Layer(hid, ffn, heads) for _ in range(layers_n))
        lnf = torch.nn.LayerNorm(hid, device=dev, dtype=bf16)
        head = torch.nn.Linear(hid, vocab, bias=False, device=dev, dtype=bf16)
        params = list(emb.parameters()) + list(blocks.parameters()) + list(lnf.parameters()) + list(head.parameters())
        for p in params:
            p.grad = torch.zeros_like(p)
        mains = [p.detach().float() for p in params]
        for m in mains:
            m.grad = torch.zeros_like(m)
        opt = torch.optim.AdamW(mains, lr=1e-5, fused=True)
        ids = torch.randint(0, vocab, (micro, 1, seq), device=dev)
        targets = torch.randint(0, vocab, (micro, 1, seq), device=dev)
        n_params = sum(p.numel() for p in params)

        def optimizer():
            for p, m in zip(params, mains):
                m.grad.copy_(p.grad)
            opt.step()
            for p, m in zip(params, mains):
                p.data.copy_(m.data)

        def train_step():
            for p in params:
                p.grad.zero_()
            for i in range(micro):
                h = emb(ids[i])
                for blk in blocks:
                    h = blk(h)
                logits = head(lnf(h))
                F.cross_entropy(logits.float().view(-1, vocab), targets[i].view(-1)).backward()
            optimizer()

        dims = dict(layers=layers_n, hidden=hid, ffn=ffn, heads=heads, vocab=vocab, seq=seq, micro_batches=micro, params=n_params)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            sample("step", "train_step", timed(train_step, n=5, warmup=2), **dims)
        sample("step", "optimizer", timed(optimizer, n=5, warmup=1), **dims)
        print("torch-probe: peak memory %.1f GiB" % (torch.cuda.max_memory_allocated() / 2**30), flush=True)
        del emb, blocks, lnf, head, params, mains, opt

    for name, fn in (("attention", attention), ("ops", ops), ("layer", layer), ("tp_layer", tp_layer), ("step", step)):
        if name in wanted and not (name == "step" and args.quick):
            section(name, fn)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write()
    print("torch-probe: %d samples, %d errors, written to %s" % (len(result["samples"]), len(result["errors"]), args.out))
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
