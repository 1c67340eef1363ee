#!/usr/bin/python3
"""Makes the PyTorch profiler fixtures that tst_torchtrace imports.

Runs small torch.distributed jobs (gloo backend, CPU) on this machine under torch.profiler and keeps each
rank's trace as the profiler wrote it (export_chrome_trace). Debian's python3-torch 1.13 writes the plain
event list; a PyTorch with Kineto writes the Kineto object. Beside the traces, <job>.expected.json records
what the job did, measured by the job itself: ranks, profiled steps, collectives per rank, micro-batches
and, for the pipeline, each stage's idle share of the pipeline phase from its own clock readings.

    /usr/bin/python3 tests/bridges/make-torch-traces.py [OUTDIR]   (default: tests/bridges/fixtures)

Jobs: ddp-2 and ddp-4 (plain DistributedDataParallel over 2 and 4 processes) and pipeline-2 (a two-stage
GPipe pipeline written with send / recv, 4 micro-batches), each profiling 3 steps after one warm-up step.
"""
import faulthandler
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WIDTH = 384
BATCH = 256
MICRO_BATCHES = 4
STEPS = 3  # profiled steps, after one warm-up step


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage_model():
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, WIDTH))


def ddp_step(model, opt):
    x = torch.randn(BATCH, WIDTH)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


def pipeline_step(rank, model, opt, clock):
    """GPipe: all forwards, then all backwards. Stage 0 sends activations, stage 1 sends gradients back."""
    dist.barrier()  # a common point on every rank's clock
    inputs, outputs = [], []
    for mb in range(MICRO_BATCHES):
        if rank == 0:
            x = torch.randn(BATCH // MICRO_BATCHES, WIDTH)
        else:
            x = torch.empty(BATCH // MICRO_BATCHES, WIDTH)
            dist.recv(x, src=0)
            x.requires_grad_(True)
        t0 = time.monotonic_ns()
        with record_function(f"forward mb {mb}"):
            y = model(x)
        clock.append((t0, time.monotonic_ns()))
        if rank == 0:
            dist.send(y.detach(), dst=1)
        inputs.append(x)
        outputs.append(y)
    for mb in reversed(range(MICRO_BATCHES)):
        if rank == 0:
            grad = torch.empty(BATCH // MICRO_BATCHES, WIDTH)
            dist.recv(grad, src=1)
        t0 = time.monotonic_ns()
        with record_function(f"backward mb {mb}"):
            if rank == 0:
                outputs[mb].backward(grad)
            else:
                outputs[mb].square().mean().backward()
        clock.append((t0, time.monotonic_ns()))
        if rank == 1:
            dist.send(inputs[mb].grad, dst=0)
    opt.step()
    opt.zero_grad()


def worker(rank, world, job, port, outdir):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    faulthandler.dump_traceback_later(300, exit=True)  # a hung job fails instead of waiting for ever
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = stage_model()
    if job.startswith("ddp"):
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = os.path.join(outdir, f"{job}.rank{rank}.json")
    clocks = []  # per profiled step: [(start, end) of each forward / backward]
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=STEPS),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for step in range(1 + STEPS):
            clock = []
            if job.startswith("ddp"):
                ddp_step(model, opt)
            else:
                pipeline_step(rank, model, opt, clock)
            if step > 0:
                clocks.append(clock)
            prof.step()
    gathered = [None] * world
    dist.all_gather_object(gathered, clocks)
    if rank == 0:
        write_expected(job, world, gathered, outdir)
    dist.destroy_process_group()


def write_expected(job, world, clocks, outdir):
    expected = {"job": job, "ranks": world, "steps": STEPS}
    if job.startswith("ddp"):
        # DDP: one bucket, so one all-reduce per step on every rank
        expected["collectives_per_rank"] = {"all_reduce": STEPS}
    else:
        expected["micro_batches"] = MICRO_BATCHES
        expected["collectives_per_rank"] = {"barrier": STEPS, "send": STEPS * MICRO_BATCHES,
                                            "recv": STEPS * MICRO_BATCHES}
        # Each stage's idle share of the pipeline phase (first compute to last compute over both stages),
        # the mean over steps after the first, from the job's own monotonic clock (shared by the processes).
        bubble = []
        for stage in range(world):
            fractions = []
            for step in range(1, STEPS):
                spans = [s for r in range(world) for s in clocks[r][step]]
                window = max(e for _, e in spans) - min(s for s, _ in spans)
                busy = sum(e - s for s, e in clocks[stage][step])
                fractions.append(1 - busy / window)
            bubble.append(sum(fractions) / len(fractions))
        expected["bubble_per_stage"] = bubble
    with open(os.path.join(outdir, f"{job}.expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures")
    only = sys.argv[2:]  # job names; none: all
    os.makedirs(outdir, exist_ok=True)
    for job, world in (("ddp-2", 2), ("ddp-4", 4), ("pipeline-2", 2)):
        if only and job not in only:
            continue
        mp.spawn(worker, args=(world, job, free_port(), outdir), nprocs=world)
        print(f"{job}: {world} ranks written to {outdir}")


if __name__ == "__main__":
    main()
