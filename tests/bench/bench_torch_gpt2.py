#!/usr/bin/python3
"""PyTorch's step on the shape bench_step uses (GPT-2 124M, batch 4 x 64, fp32, AdamW with global-norm
clipping at 1), for the peer figures in docs/training.md. Needs Debian's python3-torch (run it with
/usr/bin/python3). Prints the median milliseconds per step and, with --json, one JSON line.

    /usr/bin/python3 tests/bench/bench_torch_gpt2.py --threads 1 --steps 6
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fcproj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, vocab=50257, seq=1024, c=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        for module in self.modules():  # GPT-2's initialisation (as Loom and llm.c start)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    times, losses = [], []
    for step in range(a.steps):
        idx = torch.randint(0, 50257, (4, 65))
        t0 = time.perf_counter()
        loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    median = sorted(times[1:])[len(times[1:]) // 2] * 1e3
    load = open("/proc/loadavg").read().split()[:3]
    if a.json:
        print(json.dumps({"bench": "torch", "torch": torch.__version__, "threads": a.threads, "step_ms": round(median, 1),
                          "loss_first": losses[0], "loss_last": losses[-1], "loadavg": " ".join(load)}))
    else:
        print(f"PyTorch {torch.__version__}, GPT-2 124M, batch 4 x 64, {a.threads} thread(s): {median:.1f} ms per step "
              f"(median of {len(times) - 1}; loss {losses[0]:.4f} -> {losses[-1]:.4f}; load {' '.join(load)})")


if __name__ == "__main__":
    main()
