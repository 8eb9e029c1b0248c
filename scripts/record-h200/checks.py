"""Workloads of the GPU-metrics and per-kernel-counter checks (CuPy kernels,
and one PyTorch kernel for the runtime API's launch path).

python3 checks.py pm        # copy phase, FMA phase, matmul phase
python3 checks.py counters  # three kernels, each launched once

Prints one JSON line on stderr with what the trace should show: the bytes
each copy kernel moves, how many copies ran, the kernels' names.

- copy_kernel: y[i] = x[i] over N float4s, grid-stride: reads and writes
  N * 16 bytes, far more than the L2 holds, so DRAM sees them all.
- fma_kernel: each thread runs a long chain of FMAs on registers and writes
  one float: compute-bound, next to no DRAM traffic.
- matmul: float16 matrix products (cuBLAS, tensor cores).
"""
import json, sys, time

import cupy as cp

SRC = r"""
extern "C" __global__ void copy_kernel(const float4* __restrict__ x, float4* __restrict__ y, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        y[i] = x[i];
    }
}
extern "C" __global__ void fma_kernel(float* out, int iters) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, b, c); d = fmaf(d, c, b); b = fmaf(b, a, d); c = fmaf(c, d, a);
    }
    if (a + b + c + d == 12345.678f) out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}
"""

mode = sys.argv[1]
if mode == "counters":
    # Before CUDA starts: PyTorch maps its libcupti at import, which the
    # injection then uses (one CUPTI per process).
    import torch
mod = cp.RawModule(code=SRC, options=("-O3",))
copy_k = mod.get_function("copy_kernel")
fma_k = mod.get_function("fma_kernel")
sms = cp.cuda.Device(0).attributes["MultiProcessorCount"]


def copy(x, y):
    n = x.size // 4
    copy_k((sms * 8,), (512,), (x, y, cp.uint64(n)))


def fma(out, iters):
    fma_k((sms * 8,), (256,), (out, cp.int32(iters)))


if mode == "pm":
    nbytes = 2 << 30
    x = cp.ones(nbytes // 4, dtype=cp.float32)
    y = cp.empty_like(x)
    out = cp.zeros(sms * 8 * 256, dtype=cp.float32)
    a = cp.random.rand(8192, 8192, dtype=cp.float32).astype(cp.float16)
    b = cp.random.rand(8192, 8192, dtype=cp.float32).astype(cp.float16)
    # Warm up every kernel once (compiles, cuBLAS handles), then idle.
    copy(x, y); fma(out, 1000); cp.matmul(a, b)
    cp.cuda.Device().synchronize()
    time.sleep(0.3)
    copies = 8
    for _ in range(copies):
        copy(x, y)
    cp.cuda.Device().synchronize()
    time.sleep(0.3)
    t = time.perf_counter()
    while time.perf_counter() - t < 0.3:
        fma(out, 200_000)
        cp.cuda.Device().synchronize()
    time.sleep(0.3)
    t = time.perf_counter()
    while time.perf_counter() - t < 0.3:
        for _ in range(4):
            cp.matmul(a, b)
        cp.cuda.Device().synchronize()
    time.sleep(0.3)
    print(json.dumps({"check": "pm-workload", "bytes_per_copy": nbytes, "copies": copies,
                      "copy_kernel": "copy_kernel", "fma_kernel": "fma_kernel"}), file=sys.stderr)
elif mode == "counters":
    nbytes = 256 << 20
    x = cp.ones(nbytes // 4, dtype=cp.float32)
    y = cp.empty_like(x)
    out = cp.zeros(sms * 8 * 256, dtype=cp.float32)
    # Fill the L2 with something else, so that the copy reads all of x
    # from DRAM in every run.
    scratch = cp.zeros(nbytes // 4, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    copy(x, y)
    fma(out, 20_000)
    t = torch.empty(1 << 26, device="cuda")  # no kernel
    t.fill_(1.5)
    u = t * 3.0  # MulFunctor: a runtime-API launch
    torch.cuda.synchronize()
    cp.cuda.Device().synchronize()
    print(json.dumps({"check": "counters-workload", "copy_bytes": nbytes,
                      "kernels": ["copy_kernel", "fma_kernel", "MulFunctor"]}), file=sys.stderr)
else:
    sys.exit(f"unknown mode {mode}")
