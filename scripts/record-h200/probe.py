"""Which libcupti `import torch` maps; a first CUDA kernel."""
import torch
maps = open("/proc/self/maps").read()
libs = sorted({l.split()[-1] for l in maps.splitlines() if "cupti" in l})
print("libcupti mapped after import torch:", libs)
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
x = torch.ones(1 << 20, device="cuda")
y = (x * 2).sum()
torch.cuda.nvtx.range_push("probe range")
z = x + 1
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("sum", y.item())
maps = open("/proc/self/maps").read()
print("libcupti mapped at the end:", sorted({l.split()[-1] for l in maps.splitlines() if "cupti" in l}))
