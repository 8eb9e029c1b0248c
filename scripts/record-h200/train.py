"""A small transformer training loop with an NVTX range per step.

python3 train.py [--steps N] [--warmup W] [--profiler TRACE.json.gz]
                 [--out TIMES.json] [--signal-file F]
Each step: push "step i" > "forward" / "backward" ranges, optimizer step,
torch.cuda.synchronize() inside the step's range. With --profiler,
torch.profiler records the steps after the warmup (record_function
"step i" around each) and writes a gzipped Chrome trace.
"""
import argparse, gzip, json, os, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--profiler", default=None)
ap.add_argument("--out", default=None)
ap.add_argument("--signal-file", default=None)
a = ap.parse_args()
t_start = time.perf_counter()
import torch
import torch.nn as nn

torch.manual_seed(0)
dev = "cuda"
layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(32, 128, 512, device=dev)
nvtx = torch.cuda.nvtx
sig = open(a.signal_file, "w") if a.signal_file else None


def step(i, rf=None):
    nvtx.range_push(f"step {i}")
    if sig:
        sig.write(f"step {i}\n")
        sig.flush()
    ctx = rf(f"step {i}") if rf else None
    if ctx:
        ctx.__enter__()
    nvtx.range_push("forward")
    y = model(x)
    loss = y.float().pow(2).mean()
    nvtx.range_pop()
    nvtx.range_push("backward")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nvtx.range_pop()
    opt.step()
    torch.cuda.synchronize()
    if ctx:
        ctx.__exit__(None, None, None)
    nvtx.range_pop()


for i in range(a.warmup):
    step(i)
torch.cuda.synchronize()
steps = range(a.warmup, a.warmup + a.steps)
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
if a.profiler:
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        e0.record()
        for i in steps:
            s0 = time.perf_counter()
            step(i, record_function)
            times.append(time.perf_counter() - s0)
        e1.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    if not a.profiler.endswith("none"):
        tmp = a.profiler + ".tmp.json"
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as f, gzip.open(a.profiler, "wb") as g:
            g.write(f.read())
        os.remove(tmp)
else:
    t0 = time.perf_counter()
    e0.record()
    for i in steps:
        s0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - s0)
    e1.record()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
res = {"loop_s": t1 - t0, "gpu_ms": e0.elapsed_time(e1), "step_s": times,
       "first_step": a.warmup, "steps": a.steps, "process_to_end_s": time.perf_counter() - t_start}
if a.out:
    with open(a.out, "w") as f:
        json.dump(res, f)
print(json.dumps({k: v for k, v in res.items() if k != "step_s"}))
