// Exploration on the H200 for gpu-counters-cuda's zero-intrusion placement
// and calibration (issue 10): CUPTI activity records against %globaltimer,
// the handshake variants, CUPTI's GPU cost, graph records, flush semantics.
// Build (here, no CUDA needed): scripts/cuda-probe/build.sh; kernels are PTX text
// Run: ./probe default|monotonic
#include <cuda.h>
#include <string>
#include <cupti.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
#include <atomic>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("CUDA %s: %d line %d\n", #x, r_, __LINE__); exit(1);} } while (0)
#define CP(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r_, &s); printf("CUPTI %s: %s line %d\n", #x, s, __LINE__); } } while (0)

static inline unsigned long long now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static unsigned long long mono() { return now(CLOCK_MONOTONIC); }
extern "C" uint64_t CUPTIAPI mono_cb(void) { return mono(); }

static const char *PTX = R"PTX(
.version 7.0
.target sm_70
.address_size 64
.visible .entry small_k(.param .u64 data)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p;
  ld.param.u64 %rd1, [data];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3];
  xor.b32 %r2, %r2, %r1;
  mov.u32 %r3, 0;
L: mad.lo.u32 %r2, %r2, 1664525, 1013904223;
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p, %r3, 16;
  @%p bra L;
  st.global.u32 [%rd3], %r2;
  ret;
}
.visible .entry probe_k(.param .u64 out, .param .u64 ns)
{
  .reg .b64 %rd<8>; .reg .pred %p;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [ns];
  mov.u64 %rd3, %globaltimer;
L: mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd3;
  setp.lt.u64 %p, %rd5, %rd2;
  @%p bra L;
  st.volatile.global.u64 [%rd1], %rd3;
  st.volatile.global.u64 [%rd1+8], %rd4;
  ret;
}
.visible .entry stamp_k(.param .u64 out)
{
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u64 %rd2, %globaltimer;
  st.volatile.global.u64 [%rd1], %rd2;
  ret;
}
.visible .entry spin_k(.param .u64 ns)
{
  .reg .b64 %rd<8>; .reg .pred %p;
  ld.param.u64 %rd2, [ns];
  mov.u64 %rd3, %globaltimer;
L: mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd3;
  setp.lt.u64 %p, %rd5, %rd2;
  @%p bra L;
  ret;
}
.visible .entry rounds_k(.param .u64 flag, .param .u64 out, .param .u32 rounds)
{
  .reg .b64 %rd<12>; .reg .b32 %r<4>; .reg .pred %p;
  ld.param.u64 %rd1, [flag]; ld.param.u64 %rd2, [out]; ld.param.u32 %r1, [rounds];
  cvt.u64.u32 %rd9, %r1;
  mov.u64 %rd3, 1;
R: ld.volatile.global.u64 %rd4, [%rd1];
  setp.lt.u64 %p, %rd4, %rd3;
  @%p bra R;
  mov.u64 %rd5, %globaltimer;
  shl.b64 %rd6, %rd3, 3;
  add.u64 %rd7, %rd2, %rd6;
  st.volatile.global.u64 [%rd7+16], %rd5;
  membar.sys;
  st.volatile.global.u64 [%rd2], %rd3;
  add.u64 %rd3, %rd3, 1;
  setp.le.u64 %p, %rd3, %rd9;
  @%p bra R;
  ret;
}
.visible .entry flag_k(.param .u64 flag, .param .u64 out)
{
  .reg .b64 %rd<6>; .reg .pred %p;
  ld.param.u64 %rd1, [flag]; ld.param.u64 %rd2, [out];
  mov.u64 %rd3, 1;
  st.volatile.global.u64 [%rd2+16], %rd3;
  membar.sys;
W: ld.volatile.global.u64 %rd4, [%rd1];
  setp.eq.u64 %p, %rd4, 0;
  @%p bra W;
  mov.u64 %rd5, %globaltimer;
  st.volatile.global.u64 [%rd2], %rd5;
  membar.sys;
  st.volatile.global.u64 [%rd2+8], %rd3;
  ret;
}
.visible .entry gate_k(.param .u64 flag, .param .u64 limit)
{
  .reg .b64 %rd<8>; .reg .pred %p;
  ld.param.u64 %rd1, [flag]; ld.param.u64 %rd2, [limit];
  mov.u64 %rd3, %globaltimer;
W: ld.volatile.global.u64 %rd4, [%rd1];
  setp.ne.u64 %p, %rd4, 0;
  @%p bra D;
  mov.u64 %rd5, %globaltimer;
  sub.u64 %rd6, %rd5, %rd3;
  setp.lt.u64 %p, %rd6, %rd2;
  @%p bra W;
  mov.u64 %rd7, 2;
  st.volatile.global.u64 [%rd1+8], %rd7;
D: ret;
}
)PTX";
struct Rec { uint32_t kind, corr, stream; uint64_t start, end, graphNode; uint32_t graph; };
static std::vector<Rec> recs; static std::atomic<int> buffers{0};
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *s = 1 << 20; *b = (uint8_t*)aligned_alloc(8, *s); *m = 0; }
static void CUPTIAPI done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
  CUpti_Activity *r = NULL; buffers++;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) { CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10*)r; recs.push_back({r->kind, k->correlationId, k->streamId, k->start, k->end, k->graphNodeId, k->graphId}); }
    else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) { CUpti_ActivityMemcpy6 *k = (CUpti_ActivityMemcpy6*)r; recs.push_back({r->kind, k->correlationId, k->streamId, k->start, k->end, k->graphNodeId, k->graphId}); }
  }
  free(b);
}
static std::vector<uint32_t> launch_corr; static std::vector<uint32_t> graph_corr;
static void CUPTIAPI cb(void *, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *p) {
  const CUpti_CallbackData *c = (const CUpti_CallbackData*)p; if (c->callbackSite != CUPTI_API_EXIT) return;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) launch_corr.push_back(c->correlationId);
  if (id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) graph_corr.push_back(c->correlationId);
}
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0 : v[v.size() / 2]; }
static void stats(const char *what, std::vector<double> v) { std::sort(v.begin(), v.end()); if (v.empty()) { printf("%s: none\n", what); return; }
  printf("%-44s n=%zu min %.0f p10 %.0f med %.0f p90 %.0f max %.0f\n", what, v.size(), v[0], v[v.size()/10], v[v.size()/2], v[v.size()*9/10], v.back()); }

static CUmodule MOD; static CUfunction F(const char *k) { CUfunction f; CK(cuModuleGetFunction(&f, MOD, k)); return f; }
static void launch(CUfunction f, CUstream s, void **args, int threads = 1) { CK(cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, s, args, NULL)); }

int main(int argc, char **argv) {
  bool monotonic = argc > 1 && !strcmp(argv[1], "monotonic");
  printf("== mode %s\n", monotonic ? "monotonic timestamp callback" : "CUPTI default clock");
  printf("offsets Kernel10: start %zu end %zu deviceId %zu contextId %zu streamId %zu corr %zu graphNodeId %zu graphId %zu size %zu\n",
    offsetof(CUpti_ActivityKernel10, start), offsetof(CUpti_ActivityKernel10, end), offsetof(CUpti_ActivityKernel10, deviceId), offsetof(CUpti_ActivityKernel10, contextId),
    offsetof(CUpti_ActivityKernel10, streamId), offsetof(CUpti_ActivityKernel10, correlationId), offsetof(CUpti_ActivityKernel10, graphNodeId), offsetof(CUpti_ActivityKernel10, graphId), sizeof(CUpti_ActivityKernel10));
  printf("offsets Memcpy6: start %zu end %zu streamId %zu corr %zu graphNodeId %zu graphId %zu; Memset4 start %zu corr %zu graphNodeId %zu graphId %zu\n",
    offsetof(CUpti_ActivityMemcpy6, start), offsetof(CUpti_ActivityMemcpy6, end), offsetof(CUpti_ActivityMemcpy6, streamId), offsetof(CUpti_ActivityMemcpy6, correlationId), offsetof(CUpti_ActivityMemcpy6, graphNodeId), offsetof(CUpti_ActivityMemcpy6, graphId),
    offsetof(CUpti_ActivityMemset4, start), offsetof(CUpti_ActivityMemset4, correlationId), offsetof(CUpti_ActivityMemset4, graphNodeId), offsetof(CUpti_ActivityMemset4, graphId));
  uint32_t ver; cuptiGetVersion(&ver); printf("cupti version %u\n", ver);
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&MOD, PTX));
  CUstream s, s2; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)); CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUfunction fsmall = F("small_k"), fprobe = F("probe_k"), fstamp = F("stamp_k"), fspin = F("spin_k"), frounds = F("rounds_k"), fflag = F("flag_k");
  CUdeviceptr data; CK(cuMemAlloc(&data, 256)); CK(cuMemsetD8(data, 1, 256));
  unsigned long long *host; CK(cuMemHostAlloc((void**)&host, 1 << 20, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)); memset(host, 0, 1 << 20);
  CUdeviceptr dhost; CK(cuMemHostGetDevicePointer(&dhost, host, 0));
  volatile unsigned long long *vh = host;

  // ---- E4 handshake calibration variants (before CUPTI is touched) ----
  for (int clk = 0; clk < 2; clk++) {
    clockid_t C = clk ? CLOCK_REALTIME : CLOCK_MONOTONIC;
    const char *cn = clk ? "REALTIME" : "MONOTONIC";
    // (a) one launch per read (today's method)
    std::vector<double> win; double lo = -1e30, hi = 1e30;
    for (int i = 0; i < 64; i++) {
      for (int k = 0; k < 4; k++) vh[k] = 0;
      CUdeviceptr f = dhost, o = dhost + 8; void *args[] = {&f, &o};
      launch(fflag, s2, args);
      while (vh[3] == 0) {}
      unsigned long long b = now(C); vh[0] = 1; while (vh[2] == 0) {} unsigned long long a = now(C);
      CK(cuStreamSynchronize(s2));
      double g = (double)vh[1]; win.push_back(a - b);
      lo = std::max(lo, (double)b - g - 32); hi = std::min(hi, (double)a - g);
      if (i == 7) printf("%s per-launch: best window of 8 = %.0f\n", cn, *std::min_element(win.begin(), win.end()));
    }
    stats((std::string(cn) + " per-launch window (64)").c_str(), win);
    printf("%s per-launch intersection of 64: width %.0f ns, off mid %.0f\n", cn, hi - lo, (hi + lo) / 2 - 1.7e18 * clk);
    // (b) rounds in one launch
    for (int R : {64, 256, 1024}) {
      for (int k = 0; k < 12 + R; k++) vh[k] = 0;
      CUdeviceptr f = dhost, o = dhost + 64; int rr = R; void *args[] = {&f, &o, &rr};
      volatile unsigned long long *out = vh + 8;
      launch(frounds, s2, args);
      std::vector<double> w; std::vector<double> bs(R + 1), as(R + 1);
      for (int r = 1; r <= R; r++) { unsigned long long b = now(C); vh[0] = r; while (out[0] != (unsigned long long)r) {} unsigned long long a = now(C); bs[r] = b; as[r] = a; w.push_back(a - b); }
      CK(cuStreamSynchronize(s2));
      double lo2 = -1e30, hi2 = 1e30;
      for (int r = 1; r <= R; r++) { double g = (double)out[2 + r]; lo2 = std::max(lo2, bs[r] - g - 32); hi2 = std::min(hi2, as[r] - g); }
      char name[64]; snprintf(name, 64, "%s rounds-in-one-launch window (%d)", cn, R); stats(name, w);
      printf("%s rounds %d: intersection width %.0f ns (half %.0f), span %.0f us, off mid %.0f\n", cn, R, hi2 - lo2, (hi2 - lo2) / 2, (as[R] - bs[1]) / 1e3, (hi2 + lo2) / 2 - 1.7e18 * clk);
    }
  }
  { // realtime - monotonic on the CPU
    std::vector<double> w; double best = 1e30, off = 0;
    for (int i = 0; i < 1000; i++) { unsigned long long a = mono(), r = now(CLOCK_REALTIME), b = mono(); if (b - a < best) { best = b - a; off = (double)r - (a + b) / 2.0; } }
    printf("REALTIME-MONOTONIC: %.0f (window %.0f)\n", off - 1.7e18, best);
  }

  // ---- CUPTI setup ----
  if (monotonic) CP(cuptiActivityRegisterTimestampCallback(mono_cb));
  CP(cuptiActivityRegisterCallbacks(req, done));
  CUpti_SubscriberHandle sub; CP(cuptiSubscribe(&sub, (CUpti_CallbackFunc)cb, NULL));
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CP(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  { uint64_t ct; unsigned long long a = mono(); cuptiGetTimestamp(&ct); unsigned long long b = mono(), r = now(CLOCK_REALTIME);
    printf("cuptiGetTimestamp - mono %.0f, - realtime %.0f (call %llu ns)\n", (double)ct - (a + b) / 2.0, (double)ct - r, b - a); }

  // ---- E1/E2 probe kernels: records vs globaltimer ----
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  const int NP = 400;
  launch_corr.clear(); recs.clear();
  for (int i = 0; i < NP; i++) { CUdeviceptr o = dhost + 8 * (1024 + 2 * i); unsigned long long ns = (i % 4) * 500; void *args[] = {&o, &ns}; launch(fprobe, s, args); }
  CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
  {
    std::vector<double> ds, de, dur;
    int found = 0;
    for (int i = 0; i < NP; i++) { uint32_t c = launch_corr[i];
      for (auto &r : recs) if (r.corr == c) { found++; double g0 = host[1024 + 2 * i], g1 = host[1024 + 2 * i + 1]; ds.push_back(g0 - (double)r.start); de.push_back((double)r.end - g1); dur.push_back(r.end - r.start); break; } }
    printf("probe records found %d of %d (buffers %d)\n", found, NP, buffers.load());
    stats("gt_entry - rec_start (ns)", ds); stats("rec_end - gt_exit (ns)", de); stats("rec duration", dur);
    double mx = -1e30, mn = 1e30; for (size_t i = 0; i < ds.size(); i++) { mx = std::max(mx, -ds[i]); mn = std::min(mn, de[i]); }
    printf("consistency interval for (rec - gt) offset: [%.0f, %.0f] width %.0f\n", mx, mn, mn - mx);
  }
  size_t dropped = 0; CP(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped)); printf("dropped %zu\n", dropped);

  // ---- E5 graphs ----
  {
    CUgraph g; CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int i = 0; i < 10; i++) { void *args[] = {&data}; launch(fsmall, s, args, 64); }
    CK(cuStreamEndCapture(s, &g)); CUgraphExec ge; CK(cuGraphInstantiate(&ge, g, 0));
    recs.clear(); graph_corr.clear(); launch_corr.clear();
    unsigned long long spin = 200000000ull; void *sa[] = {&spin}; launch(fspin, s2, sa); // 200 ms on another stream
    for (int i = 0; i < 3; i++) CK(cuGraphLaunch(ge, s));
    CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
    int n = 0; for (auto &r : recs) for (uint32_t c : graph_corr) if (r.corr == c) n++;
    printf("graph: %zu launches seen by callback; %d of 30 node records arrived while another stream runs; total recs %zu\n", graph_corr.size(), n, recs.size());
    for (auto &r : recs) if (!graph_corr.empty() && r.corr == graph_corr[0]) printf("  rec corr %u stream %u graph %u node %llu start %llu end %llu\n", r.corr, r.stream, r.graph, (unsigned long long)r.graphNode, (unsigned long long)r.start, (unsigned long long)r.end);
    // a plain kernel on s while s2 still spins: arrives on a default flush?
    recs.clear(); launch_corr.clear(); { void *args[] = {&data}; launch(fsmall, s, args, 64); } CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
    int m = 0; for (auto &r : recs) if (r.corr == launch_corr[0]) m++;
    printf("plain kernel while other stream busy: %d record(s) after default flush\n", m);
    CK(cuStreamSynchronize(s2)); CP(cuptiActivityFlushAll(0));
    // disable after launch
    recs.clear(); launch_corr.clear();
    for (int i = 0; i < 10; i++) { void *args[] = {&data}; launch(fsmall, s, args, 64); }
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
    int k = 0; for (auto &r : recs) for (uint32_t c : launch_corr) if (r.corr == c) k++;
    printf("disabled right after 10 launches: %d of 10 records\n", k);
    { void *args[] = {&data}; launch(fsmall, s, args, 64); } CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
    printf("after disable: records now %zu (expect 10)\n", recs.size());
  }

  // ---- E3 overhead: 4000 small kernels ----
  {
    CUevent e0, e1; CK(cuEventCreate(&e0, 0)); CK(cuEventCreate(&e1, 0));
    CUevent *ev = (CUevent*)malloc(8000 * sizeof(CUevent)); for (int i = 0; i < 8000; i++) CK(cuEventCreate(&ev[i], 0));
    auto run = [&](int mode) -> double {
      // 0 off, 1 activity on, 2 event after each, 3 globaltimer kernel after each, 4 activity enable+disable around
      if (mode == 1) CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      CK(cuEventRecord(e0, s));
      for (int i = 0; i < 4000; i++) { void *args[] = {&data}; launch(fsmall, s, args, 64);
        if (mode == 2) CK(cuEventRecord(ev[i], s));
        if (mode == 3) { CUdeviceptr o = dhost + 8 * (4096 + i); void *a2[] = {&o}; launch(fstamp, s, a2); } }
      CK(cuEventRecord(e1, s)); CK(cuEventSynchronize(e1));
      if (mode == 1) { CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); CP(cuptiActivityFlushAll(0)); }
      float ms; CK(cuEventElapsedTime(&ms, e0, e1)); return ms * 1e6;
    };
    for (int w = 0; w < 2; w++) for (int m = 0; m < 4; m++) run(m);
    std::vector<double> t[4];
    for (int rep = 0; rep < 9; rep++) for (int m = 0; m < 4; m++) { double best = 1e30; for (int k = 0; k < 3; k++) best = std::min(best, run(m)); t[m].push_back(best); }
    const char *nm[] = {"off", "cupti concurrent kernel", "event per kernel", "globaltimer kernel per kernel"};
    for (int m = 0; m < 4; m++) { char b[96]; snprintf(b, 96, "4000 kernels GPU ns: %s", nm[m]); stats(b, t[m]); }
    std::vector<double> ratio; for (int rep = 0; rep < 9; rep++) ratio.push_back(t[1][rep] / t[0][rep]);
    stats("ratio cupti/off x1e6", [&] { std::vector<double> r; for (double x : ratio) r.push_back(x * 1e6); return r; }());
    printf("per-kernel added: cupti %.1f ns, event %.1f ns, globaltimer %.1f ns\n", (med(t[1]) - med(t[0])) / 4000, (med(t[2]) - med(t[0])) / 4000, (med(t[3]) - med(t[0])) / 4000);
  }
  CP(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped)); printf("dropped at end %zu\n", dropped);
  // ---- E6 gated: every launch queued behind a gate kernel, then released ----
  {
    CUfunction fgate = F("gate_k");
    CUevent e0, e1; CK(cuEventCreate(&e0, 0)); CK(cuEventCreate(&e1, 0));
    auto run = [&](int mode, int n) -> double {
      if (mode == 1) CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      vh[100] = 0; vh[101] = 0; CUdeviceptr f = dhost + 800; unsigned long long lim = 300000000ull; void *ga[] = {&f, &lim};
      launch(fgate, s, ga);
      unsigned long long t0 = mono();
      CK(cuEventRecord(e0, s));
      for (int i = 0; i < n; i++) { void *args[] = {&data}; launch(fsmall, s, args, 64); }
      CK(cuEventRecord(e1, s));
      unsigned long long t1 = mono();
      vh[100] = 1; CK(cuEventSynchronize(e1));
      if (vh[101] == 2) { printf("gate timed out (queue full?) after %.1f ms of launching %d\n", (t1 - t0) / 1e6, n); return -1; }
      if (mode == 1) { CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); CP(cuptiActivityFlushAll(0)); }
      float ms; CK(cuEventElapsedTime(&ms, e0, e1)); return ms * 1e6;
    };
    for (int n : {1000, 4000}) {
      if (run(0, n) < 0) continue; run(1, n);
      std::vector<double> t[2];
      for (int rep = 0; rep < 9; rep++) for (int m = 0; m < 2; m++) { double best = 1e30; for (int k = 0; k < 3; k++) best = std::min(best, run(m, n)); t[m].push_back(best); }
      char b[96]; snprintf(b, 96, "gated %d kernels GPU ns: off", n); stats(b, t[0]);
      snprintf(b, 96, "gated %d kernels GPU ns: cupti", n); stats(b, t[1]);
      std::vector<double> r; for (int i = 0; i < 9; i++) r.push_back(1e6 * t[1][i] / t[0][i]); stats("gated ratio x1e6", r);
    }
    // enable/disable host cost
    unsigned long long a = mono(); for (int i = 0; i < 100; i++) { cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); }
    printf("enable+disable: %.0f ns each pair\n", (mono() - a) / 100.0);
    // forced flush with incomplete records
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); recs.clear(); launch_corr.clear();
    unsigned long long spin = 100000000ull; void *sa[] = {&spin}; launch(fspin, s, sa);
    { void *args[] = {&data}; launch(fsmall, s, args, 64); }
    CP(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    printf("forced flush with 2 in flight: %zu records:", recs.size()); for (auto &r : recs) printf(" [corr %u start %llu end %llu]", r.corr, (unsigned long long)r.start, (unsigned long long)r.end); printf("\n");
    CK(cuStreamSynchronize(s)); CP(cuptiActivityFlushAll(0));
    printf("after sync + flush: %zu records\n", recs.size());
    CP(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped)); printf("dropped %zu\n", dropped);
  }
  return 0;
}
