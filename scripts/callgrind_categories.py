"""Instructions per pass of callgrind files, by where they ran.

    python3 scripts/callgrind_categories.py PASSES FILE...

Each FILE is one callgrind run (typically one variant's phase of
`wgpu_host_cost`, collected with `--toggle-collect=wgpu_host_cost::record_phase_VARIANT`
in a process where all variants take turns; see BENCHMARKS.md's
twenty-sixth-session section). Prints, per file, its instructions over
PASSES (N * ROUNDS) split into gpu-counters' own code (and the example's),
wgpu (wgpu, wgpu-core, wgpu-hal, naga, ash), the allocator, mem* (memcpy,
memmove, memset), the driver and loader (lavapipe, libvulkan), and the rest.
"""
import re,subprocess,sys
D=int(sys.argv[1])
def load(f):
    txt=subprocess.run(['callgrind_annotate','--inclusive=no','--auto=no','--threshold=100',f],capture_output=True,text=True).stdout
    d={}
    for line in txt.splitlines():
        m=re.match(r'\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$',line)
        if m and 'PROGRAM TOTALS' not in m.group(2):
            d[m.group(2)]=d.get(m.group(2),0)+int(m.group(1).replace(',',''))
    return d
def cat(k):
    fn=k.split(':',1)[1] if ':' in k else k
    if 'memmove' in k or 'memcpy' in k or 'memset' in k: return 'mem*'
    if re.search(r'malloc|free|arena\.c|__rdl_|__rust_(alloc|dealloc|realloc)|realloc', k): return 'allocator'
    if 'libvulkan' in k or k.startswith('???'): return 'driver/loader'
    if 'gpu_counters' in fn or 'wgpu_host_cost::main' in fn or 'crates/' in k.split(':')[0]: return 'gpu-counters+bench'
    if 'wgpu' in fn or 'naga' in fn or 'ash' in fn: return 'wgpu'
    return 'other'
cols=sys.argv[2:]
tabs={}
for f in cols:
    d=load(f); t={}
    for k,v in d.items(): t[cat(k)]=t.get(cat(k),0)+v/D
    t['total']=sum(d.values())/D; tabs[f]=t
keys=['total','gpu-counters+bench','wgpu','allocator','mem*','driver/loader','other']
print(f"{'':20s}"+''.join(f"{c.split('/')[-1].removesuffix('.out')[-24:]:>25s}" for c in cols))
for k in keys: print(f"{k:20s}"+''.join(f"{tabs[c].get(k,0):25.1f}" for c in cols))
