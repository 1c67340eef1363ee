#!/usr/bin/env python3
"""loom-train against a PyTorch model written here from docs/training.md (in the manner of llm.c's
test_gpt2): the same weights, through loom-train's safetensors export under Hugging Face's names and layout
(q/k in rotate_half order), the same batches, the same AdamW and schedule. Compared: the step-1 loss (1e-5),
every gradient of step 1 (1e-4; Loom's first AdamW moment divided by 1 - beta1), ten steps' losses and the
weights after them (1e-4), for GPT-2, Llama 3 (GQA, rope_theta 500000, Llama 3.1 scaling), Mixtral's form
(SwiGLU experts, renormalised top-2, z-loss) and DeepSeek-MoE's form (a shared expert, block 0 dense).
Then the weights go back in (--init-safetensors: the same losses), a bf16 export reads back within bf16's
rounding, and tp 2, pp 2, dp 2 with ZeRO-1 and ZeRO-3, and (MoE) dp 2 with ep 2 (mpirun -np 2) give the
one-process run's losses and weights.

Exit 77 (ctest: skipped) when torch is not installed (Debian: apt-get install python3-torch).
Usage: torch_parity.py LOOM_TRAIN MPIEXEC [WORKDIR]
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP   : torch_parity: python3-torch is not installed (apt-get install python3-torch)")
    sys.exit(77)

torch.set_default_dtype(torch.float64)  # the reference in double: what is compared is Loom's fp32
LOOM_TRAIN, MPIEXEC = sys.argv[1], sys.argv[2]
WORK = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="loom-torch-parity-")
SEED, STEPS, VOCAB, SEQ = 1234, 10, 96, 16
MICRO, BATCH = 2, 4
failures = []


def check(what, ok, detail=""):
    print(("PASS   : " if ok else "FAIL!  : ") + what + (" " + detail if detail else ""))
    if not ok:
        failures.append(what)


# ---- models (each a Loom layout) ----
BASE = {"layers": 2, "hidden": 32, "heads": 4, "ffn_hidden": 64, "vocab": VOCAB, "seq_len": SEQ,
        "vocab_pad_multiple": 64}
LLAMA = dict(BASE, mlp="swiglu", norm="rmsnorm", position="rope", bias=False, tie_embeddings=False,
             kv_heads=2, norm_eps=1e-6)
MODELS = {
    "gpt2": (dict(BASE, name="parity-gpt2"),
             {"adam_beta1": 0.9, "adam_beta2": 0.95, "lr": 3e-3, "lr_warmup_iters": 2}, {"method": "gpt2"}),
    "llama3": (dict(LLAMA, name="parity-llama3", rope_theta=500000.0,
                    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 512}),
               {"adam_eps": 1e-5, "weight_decay": 0.1, "weight_decay_on": ["matrices", "lm_head"], "lr": 3e-3,
                "lr_warmup_iters": 2, "lr_decay_style": "WSD", "lr_wsd_decay_iters": 4, "clip_grad": 0.5},
               {"method": "normal", "std": 0.2}),  # large weights, so that the rotary frequencies show
    "mixtral": (dict(LLAMA, name="parity-mixtral", rope_theta=1e6, experts=4, top_k=2, moe_ffn_hidden=48,
                     router_norm_topk=True, router_z_loss=0.01, aux_loss_coeff=0.02),
                {"lr": 3e-3, "lr_warmup_iters": 3, "lr_decay_style": "linear", "min_lr_fraction": 0.0},
                {"method": "normal", "std": 0.05}),
    "deepseek": (dict(LLAMA, name="parity-deepseek", layers=3, experts=4, top_k=2, moe_ffn_hidden=24,
                      shared_experts=2, shared_expert_hidden=16, first_dense_layers=1, aux_loss_coeff=0.01),
                 {"lr": 2e-3, "lr_warmup_iters": 2, "weight_decay_on": ["matrices", "embedding", "lm_head"]},
                 {"method": "normal", "std": 0.05}),
}


def layout(name, model, opt, init, tp=1, pp=1, dp=1, zero=0, ep=1):
    return {"loom_layout": 1, "name": name, "model": model, "cluster": "local", "nodes": 1,
            "parallel": {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "micro_batch": MICRO, "global_batch": BATCH,
                         "schedule": "1f1b"},
            "memory": {"zero": zero, "recompute": "none"}, "optimizer": opt, "init": init}


def run(lay, args, ranks=1):
    path = os.path.join(WORK, lay["name"] + ".json")
    with open(path, "w") as f:
        json.dump(lay, f)
    cmd = [LOOM_TRAIN, "--layout", path, "--seed", str(SEED), "--data", DATA] + args
    if ranks > 1:
        cmd = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("loom-train failed: " + " ".join(cmd) + "\n" + r.stdout[-3000:] + r.stderr[-3000:])


def losses(metrics):
    with open(metrics) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


# ---- data: an llm.c token file, and Loom's documented order (SplitMix64 of step and sequence) ----
def mix64(x):
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


gen = torch.Generator().manual_seed(7)
TOKENS = torch.randint(0, VOCAB, (4000,), generator=gen).tolist()
DATA = os.path.join(WORK, "tokens.bin")
os.makedirs(WORK, exist_ok=True)
with open(DATA, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(TOKENS), *([0] * 253)))
    f.write(struct.pack("<%dH" % len(TOKENS), *TOKENS))


def batch(step):
    span = len(TOKENS) - SEQ - 1
    xs, ys = [], []
    for j in range(BATCH):
        start = mix64(SEED ^ mix64(step * 1000003 + j)) % (span + 1)
        xs.append(TOKENS[start:start + SEQ])
        ys.append(TOKENS[start + 1:start + SEQ + 1])
    return torch.tensor(xs), torch.tensor(ys)


# ---- safetensors, read here from the format's description ----
def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out, dtypes = {}, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        chunk = bytearray(raw[8 + n + b:8 + n + end])
        if e["dtype"] == "F32":
            t = torch.frombuffer(chunk, dtype=torch.float32)
        else:  # BF16: the upper half of an fp32
            t = (torch.frombuffer(chunk, dtype=torch.int16).to(torch.int32) << 16).view(torch.float32)
        out[name] = t.reshape(e["shape"]).to(torch.float64)
        dtypes[name] = e["dtype"]
    return out, dtypes


# ---- the reference model (Hugging Face's names and layout) ----
def rope_frequencies(m, d):
    theta = m.get("rope_theta", 10000.0)
    freq = [theta ** (-2.0 * i / d) for i in range(d // 2)]
    s = m.get("rope_scaling")
    if s:
        orig = s["original_max_position_embeddings"]
        low, high = orig / s["low_freq_factor"], orig / s["high_freq_factor"]
        out = []
        for f in freq:
            wl = 2 * math.pi / f
            if wl < high:
                out.append(f)
            elif wl > low:
                out.append(f / s["factor"])
            else:
                a = (orig / wl - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
                out.append((1 - a) * f / s["factor"] + a * f)
        freq = out
    return torch.tensor(freq)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def attention(q, k, v):
    B, H, T, d = q.shape
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * d)


def layer_norm(x, g, b, eps):
    return F.layer_norm(x, (x.shape[-1],), g, b, eps)


def rms_norm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def swiglu_mlp(P, pre, x, mixtral=False):
    g, u, d = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    return F.linear(F.silu(F.linear(x, P[pre + g + ".weight"])) * F.linear(x, P[pre + u + ".weight"]),
                    P[pre + d + ".weight"])


def moe(m, P, pre, x):
    """Returns the block's MoE output and its weighted auxiliary losses (load balance, z)."""
    mixtral = not (m.get("shared_experts") or m.get("first_dense_layers"))
    pre = pre + ("block_sparse_moe." if mixtral else "mlp.")
    E, k = m["experts"], m["top_k"]
    flat = x.reshape(-1, x.shape[-1])
    n = flat.shape[0]
    logits = F.linear(flat, P[pre + "gate.weight"])
    p = logits.softmax(-1)
    top, idx = p.topk(k, dim=-1)
    if m.get("router_norm_topk"):
        top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(flat)
    for e in range(E):
        rows, slot = (idx == e).nonzero(as_tuple=True)
        if len(rows):
            y = swiglu_mlp(P, pre + "experts.%d." % e, flat[rows], mixtral)
            out = out.index_add(0, rows, top[rows, slot].unsqueeze(-1) * y)
    if m.get("shared_experts"):
        out = out + swiglu_mlp(P, pre + "shared_experts.", flat)
    f = torch.stack([(idx == e).sum() for e in range(E)]).to(p.dtype) / (n * k)
    aux = m.get("aux_loss_coeff", 0.01) * E * (f * p.mean(0)).sum()
    z = m.get("router_z_loss", 0.0) * torch.logsumexp(logits, -1).pow(2).mean()
    return out.reshape(x.shape), aux + z


def forward(m, P, tokens, targets):
    """Mean cross-entropy over the tokens, plus the MoE blocks' auxiliary losses over these tokens."""
    B, T = tokens.shape
    H, h = m["heads"], m["hidden"]
    d = h // H
    extra = 0.0
    if "mlp" not in m:  # GPT-2
        x = P["transformer.wte.weight"][tokens] + P["transformer.wpe.weight"][:T]
        for l in range(m["layers"]):
            q = "transformer.h.%d." % l
            a = layer_norm(x, P[q + "ln_1.weight"], P[q + "ln_1.bias"], 1e-5)
            qkv = a @ P[q + "attn.c_attn.weight"] + P[q + "attn.c_attn.bias"]
            qh, kh, vh = (t.reshape(B, T, H, d).transpose(1, 2) for t in qkv.split(h, -1))
            x = x + attention(qh, kh, vh) @ P[q + "attn.c_proj.weight"] + P[q + "attn.c_proj.bias"]
            a = layer_norm(x, P[q + "ln_2.weight"], P[q + "ln_2.bias"], 1e-5)
            x = x + gelu_tanh(a @ P[q + "mlp.c_fc.weight"] + P[q + "mlp.c_fc.bias"]) @ P[q + "mlp.c_proj.weight"] \
                + P[q + "mlp.c_proj.bias"]
        x = layer_norm(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], 1e-5)
        logits = x @ P["transformer.wte.weight"].T
    else:
        eps, KV = m["norm_eps"], m["kv_heads"]
        freq = rope_frequencies(m, d)
        angle = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
        cos, sin = torch.cat((angle.cos(), angle.cos()), -1), torch.cat((angle.sin(), angle.sin()), -1)
        x = P["model.embed_tokens.weight"][tokens]
        for l in range(m["layers"]):
            q = "model.layers.%d." % l
            a = rms_norm(x, P[q + "input_layernorm.weight"], eps)
            qh = F.linear(a, P[q + "self_attn.q_proj.weight"]).reshape(B, T, H, d).transpose(1, 2)
            kh = F.linear(a, P[q + "self_attn.k_proj.weight"]).reshape(B, T, KV, d).transpose(1, 2)
            vh = F.linear(a, P[q + "self_attn.v_proj.weight"]).reshape(B, T, KV, d).transpose(1, 2)
            qh, kh = qh * cos + rotate_half(qh) * sin, kh * cos + rotate_half(kh) * sin
            kh, vh = kh.repeat_interleave(H // KV, 1), vh.repeat_interleave(H // KV, 1)
            x = x + F.linear(attention(qh, kh, vh), P[q + "self_attn.o_proj.weight"])
            a = rms_norm(x, P[q + "post_attention_layernorm.weight"], eps)
            if m.get("experts") and l >= m.get("first_dense_layers", 0):
                y, loss = moe(m, P, q, a)
                x, extra = x + y, extra + loss
            else:
                x = x + swiglu_mlp(P, q + "mlp.", a)
        x = rms_norm(x, P["model.norm.weight"], eps)
        logits = F.linear(x, P["lm_head.weight"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)) + extra


def decay_group(name):
    if name.endswith("embed_tokens.weight") or name.endswith("wte.weight") or name.endswith("wpe.weight"):
        return "embedding"
    if name == "lm_head.weight":
        return "lm_head"
    if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
        return "router"
    if "ln_" in name or "norm" in name:
        return "norm"
    if name.endswith(".bias"):
        return "bias"
    return "matrices"


def lr_at(opt, step):
    lr, warm = opt.get("lr", 1e-3), opt.get("lr_warmup_iters", 10)
    lo = opt.get("min_lr", lr * opt.get("min_lr_fraction", 0.1))
    style, total = opt.get("lr_decay_style", "cosine"), STEPS
    if step < warm:
        return lr * (step + 1) / warm
    if style == "constant":
        return lr

    def fall(s, prog):
        prog = min(max(prog, 0.0), 1.0)
        return 1 - prog if s == "linear" else 0.5 * (1 + math.cos(math.pi * prog))

    if style == "WSD":
        start = max(warm, total - opt.get("lr_wsd_decay_iters", max(1, total // 10)))
        if step < start:
            return lr
        return lo + (lr - lo) * fall(opt.get("lr_wsd_decay_style", "linear"), (step - start) / max(1, total - start))
    return lo + (lr - lo) * fall(style, (step - warm) / (total - warm))


def train_reference(m, opt, P):
    """Ten steps of AdamW; returns the losses, step 1's clipped gradients, the weights after."""
    params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
    decays = set(opt.get("weight_decay_on", ["matrices", "embedding", "lm_head", "router"]))
    b1, b2 = opt.get("adam_beta1", 0.9), opt.get("adam_beta2", 0.95)
    eps, wd, clip = opt.get("adam_eps", 1e-8), opt.get("weight_decay", 0.1), opt.get("clip_grad", 1.0)
    state = {k: (torch.zeros_like(v), torch.zeros_like(v)) for k, v in params.items()}
    out, first_grads = [], None
    for step in range(STEPS):
        xs, ys = batch(step)
        loss = 0.0
        for mb in range(BATCH // MICRO):  # each micro-batch's mean, averaged: Loom's loss scale
            loss = loss + forward(m, params, xs[mb * MICRO:(mb + 1) * MICRO], ys[mb * MICRO:(mb + 1) * MICRO])
        loss = loss / (BATCH // MICRO)
        for v in params.values():
            v.grad = None
        loss.backward()
        out.append(loss.item())
        norm = math.sqrt(sum(float((v.grad ** 2).sum()) for v in params.values()))
        scale = clip / (norm + 1e-6) if clip > 0 and norm > clip else 1.0
        lr = lr_at(opt, step)
        with torch.no_grad():
            if first_grads is None:
                first_grads = {k: v.grad * scale for k, v in params.items()}
            for k, v in params.items():
                g = v.grad * scale
                mo, ve = state[k]
                mo.mul_(b1).add_((1 - b1) * g)
                ve.mul_(b2).add_((1 - b2) * g * g)
                c1, c2 = 1 - b1 ** (step + 1), 1 - b2 ** (step + 1)
                if decay_group(k) in decays:
                    v.mul_(1 - lr * wd)
                v.sub_(lr * (mo / c1) / ((ve / c2).sqrt() + eps))
    return out, first_grads, {k: v.detach() for k, v in params.items()}


# ---- Loom's checkpoint tensors (global, Loom's names and (in, out) layout) under HF names ----
def loom_to_hf(m, folder, suffix, hf_shapes):
    """Reads every tensor of checkpoint `folder` (suffix .f32 or .adam_m.f32) as HF's tensor."""
    d = m["hidden"] // m["heads"]
    out = {}
    for hf, shape in hf_shapes.items():
        loom, transform = hf_to_loom_name(m, hf)
        with open(os.path.join(folder, loom + suffix), "rb") as f:
            flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).to(torch.float64)
        if transform == "vocab":
            t = flat.reshape(-1, shape[1])[:shape[0]]
        elif transform in ("t", "rope"):
            t = flat.reshape(shape[1], shape[0]).T.contiguous()
            if transform == "rope":  # Loom's feature 2i is HF's i, 2i+1 is i + d/2, within each head
                heads = shape[0] // d
                perm = [hh * d + (j // 2 if j % 2 == 0 else j // 2 + d // 2) for hh in range(heads) for j in range(d)]
                fixed = torch.empty_like(t)
                fixed[perm] = t
                t = fixed
        else:
            t = flat.reshape(shape)
        out[hf] = t
    return out


def hf_to_loom_name(m, hf):
    if hf.startswith("transformer."):  # GPT-2: Conv1D weights are (in, out) like Loom's
        s = hf[len("transformer."):]
        fixed = {"wte.weight": ("wte", "vocab"), "wpe.weight": ("wpe", ""), "ln_f.weight": ("lnf.g", ""),
                 "ln_f.bias": ("lnf.b", "")}
        if s in fixed:
            return fixed[s]
        _, l, rest = s.split(".", 2)
        names = {"ln_1.weight": "ln1.g", "ln_1.bias": "ln1.b", "attn.c_attn.weight": "qkv.w",
                 "attn.c_attn.bias": "qkv.b", "attn.c_proj.weight": "proj.w", "attn.c_proj.bias": "proj.b",
                 "ln_2.weight": "ln2.g", "ln_2.bias": "ln2.b", "mlp.c_fc.weight": "fc.w", "mlp.c_fc.bias": "fc.b",
                 "mlp.c_proj.weight": "fcproj.w", "mlp.c_proj.bias": "fcproj.b"}
        return "h%s.%s" % (l, names[rest]), ""
    fixed = {"model.embed_tokens.weight": ("wte", "vocab"), "lm_head.weight": ("lm_head", "vocab"),
             "model.norm.weight": ("lnf.g", "")}
    if hf in fixed:
        return fixed[hf]
    _, _, l, rest = hf.split(".", 3)
    p = "h%s." % l
    simple = {"input_layernorm.weight": ("ln1.g", ""), "post_attention_layernorm.weight": ("ln2.g", ""),
              "self_attn.q_proj.weight": ("q.w", "rope"), "self_attn.k_proj.weight": ("k.w", "rope"),
              "self_attn.v_proj.weight": ("v.w", "t"), "self_attn.o_proj.weight": ("proj.w", "t")}
    if rest in simple:
        return p + simple[rest][0], simple[rest][1]
    parts = rest.split(".")
    mlp = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}
    if parts[1] == "gate":
        return p + "router.w", "t"
    if parts[1] == "experts":
        return p + "expert%s.%s.w" % (parts[2], mlp[parts[3]]), "t"
    if parts[1] == "shared_experts":
        return p + "shared.%s.w" % mlp[parts[2]], "t"
    return p + mlp[parts[1]] + ".w", "t"


def worst(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def parity(key):
    model, opt, init = MODELS[key]
    base = layout("parity-" + key, model, opt, init)
    init_dir, out_dir = os.path.join(WORK, key + "-init"), os.path.join(WORK, key + "-out")
    run(base, ["--steps", "0", "--export-safetensors", init_dir])
    P, dtypes = read_safetensors(os.path.join(init_dir, "model.safetensors"))
    check(key + ": export is fp32 under Hugging Face's names", all(t == "F32" for t in dtypes.values()),
          "(%d tensors)" % len(P))
    ref_losses, ref_grads, ref_final = train_reference(model, opt, P)

    # Step 1 alone: its loss and (through the first AdamW moment) every gradient.
    ck = os.path.join(WORK, key + "-ck1")
    run(base, ["--steps", "1", "--init-safetensors", init_dir, "--checkpoint-dir", ck,
               "--metrics", os.path.join(WORK, key + "-1.jsonl")])
    loss1 = losses(os.path.join(WORK, key + "-1.jsonl"))[0]
    check(key + ": step-1 loss", abs(loss1 - ref_losses[0]) <= 1e-5, "loom %.9f torch %.9f" % (loss1, ref_losses[0]))
    b1 = opt.get("adam_beta1", 0.9)
    moments = loom_to_hf(model, os.path.join(ck, "step-1"), ".adam_m.f32", {k: v.shape for k, v in P.items()})
    grads = {k: v / (1 - b1) for k, v in moments.items()}
    err = worst(grads, ref_grads)
    check(key + ": every gradient of step 1", err <= 1e-4, "worst abs difference %.3g over %d tensors" % (err, len(P)))

    # Ten steps, from the imported weights; and from the seed (the import gives the same losses).
    metrics = os.path.join(WORK, key + "-10.jsonl")
    run(base, ["--steps", str(STEPS), "--init-safetensors", init_dir, "--metrics", metrics,
               "--export-safetensors", out_dir])
    loom_losses = losses(metrics)
    err = max(abs(a - b) for a, b in zip(loom_losses, ref_losses))
    check(key + ": ten steps' losses", len(loom_losses) == STEPS and err <= 1e-4, "worst %.3g" % err)
    final, _ = read_safetensors(os.path.join(out_dir, "model.safetensors"))
    err = worst(final, ref_final)
    check(key + ": weights after ten steps", err <= 1e-4, "worst abs difference %.3g" % err)
    seeded = os.path.join(WORK, key + "-seed.jsonl")
    run(base, ["--steps", str(STEPS), "--metrics", seeded])
    err = max(abs(a - b) for a, b in zip(losses(seeded), loom_losses))
    check(key + ": import gives the seeded run's losses", err <= 1e-6, "worst %.3g" % err)

    # bf16 export: every weight within bf16's rounding (2^-8 relative) of the fp32 one.
    bf = os.path.join(WORK, key + "-bf16")
    run(base, ["--steps", "0", "--export-safetensors", bf, "--export-dtype", "bf16"])
    Pb, dtb = read_safetensors(os.path.join(bf, "model.safetensors"))
    rel = max(float(((Pb[k] - P[k]).abs() / (P[k].abs() + 1e-30)).max()) for k in P)
    check(key + ": bf16 export", all(t == "BF16" for t in dtb.values()) and rel <= 2 ** -8, "worst relative %.3g" % rel)

    # The same model under tp 2, pp 2 and dp 2 with ZeRO-1: the one-process run's losses and weights.
    others = [("tp2", {"tp": 2}), ("pp2", {"pp": 2}), ("dp2-zero1", {"dp": 2, "zero": 1}),
              ("dp2-zero3", {"dp": 2, "zero": 3})]
    if model.get("experts"):  # expert parallelism: each of the two DP ranks holds half the experts
        others.append(("dp2-ep2", {"dp": 2, "ep": 2}))
    for name, kw in others:
        lay = layout("parity-%s-%s" % (key, name), model, opt, init, **kw)
        mpath, odir = os.path.join(WORK, "%s-%s.jsonl" % (key, name)), os.path.join(WORK, "%s-%s-out" % (key, name))
        run(lay, ["--steps", str(STEPS), "--init-safetensors", init_dir, "--metrics", mpath,
                  "--export-safetensors", odir], ranks=2)
        other = losses(mpath)
        err = max(abs(a - b) for a, b in zip(other, loom_losses))
        werr = worst(read_safetensors(os.path.join(odir, "model.safetensors"))[0], final)
        check("%s: %s equals one process" % (key, name), len(other) == STEPS and err <= 1e-5 and werr <= 1e-4,
              "losses %.3g, weights %.3g" % (err, werr))


for key in (sys.argv[4].split(",") if len(sys.argv) > 4 else MODELS):
    parity(key)
print("Totals: %d failed" % len(failures))
sys.exit(1 if failures else 0)
