#!/usr/bin/env python3
"""A minimal PyTorch training step of GPT-2 124M, the reference of tests/gpu/device-check.sh item 4.

Plain PyTorch: nn.Linear/nn.LayerNorm, torch.nn.functional.scaled_dot_product_attention (causal), bf16
autocast with fp32 master weights, torch.optim.AdamW; no torch.compile, no fused kernels of our own.
The model is gpt2-124m as Loom's profile gives it (12 layers, hidden 768, 12 heads, vocab 50257, seq 1024,
tied embedding). Prints one JSON line: the micro-batch that fit, tokens/s and MFU (Narayanan et al. eq. 3
without recomputation, against the peak given by --peak-tflops).
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

L, H, HEADS, V, S = 12, 768, 12, 50257, 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(H), nn.LayerNorm(H)
        self.qkv, self.proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.fc, self.out = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(H, dim=2)
        q, k, v = (t.view(b, s, HEADS, H // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, H))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, H), nn.Embedding(S, H)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.lnf = nn.LayerNorm(H)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))


def step(model, opt, batch):
    idx = torch.randint(0, V, (batch, S), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(idx, idx.roll(-1, dims=1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def fits(batch):
    model = Gpt2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    try:
        step(model, opt, batch)
        torch.cuda.synchronize()
        return model, opt
    except torch.OutOfMemoryError:
        del model, opt
        torch.cuda.empty_cache()
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="bf16 dense peak (H100/H200 SXM: 989.4)")
    ap.add_argument("--batches", default="64,48,32,24,16,8,4,2,1")
    args = ap.parse_args()
    torch.manual_seed(1234)
    found = None
    for batch in (int(b) for b in args.batches.split(",")):
        found = fits(batch)
        if found:
            break
    if not found:
        raise SystemExit("torch_gpt2_step: not even micro-batch 1 fits")
    model, opt = found
    for _ in range(2):  # warm-up beyond the first step
        step(model, opt, batch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step(model, opt, batch)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    tokens = batch * S
    flops = 72 * batch * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H))
    print(json.dumps({
        "what": "pytorch gpt2-124m bf16 step",
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "micro_batch": batch,
        "seq": S,
        "step_s": dt,
        "tokens_per_s": tokens / dt,
        "mfu": flops / dt / (args.peak_tflops * 1e12),
        "loss": float(loss),
        "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }))
    assert math.isfinite(float(loss))


if __name__ == "__main__":
    main()
