// tracy-gpuinfo: what a .tracy capture holds of GPU contexts, GPU zones and plots.
#include <memory>
#include <stdio.h>
#include <inttypes.h>
#include <map>
#include <string>
#include <vector>
#include "TracyFileRead.hpp"
#include "TracyWorker.hpp"

static const char* TypeName(tracy::GpuContextType t) {
    static const char* n[] = {"Invalid","OpenGl","Vulkan","OpenCL","Direct3D12","Direct3D11","Metal","Custom","CUDA","Rocprof","WebGPU"};
    unsigned i = (unsigned)t; return i < sizeof(n)/sizeof(n[0]) ? n[i] : "?";
}

static void Walk(const tracy::Worker& w, const tracy::Vector<tracy::short_ptr<tracy::GpuEvent>>& v, int depth,
                 std::vector<std::pair<int,const tracy::GpuEvent*>>& out) {
    if (v.is_magic()) {  // loaded from a file: a vector of events, not of pointers
        auto& vec = *(const tracy::Vector<tracy::GpuEvent>*)&v;
        for (auto& e : vec) {
            out.push_back({depth, &e});
            if (e.Child() >= 0) Walk(w, w.GetGpuChildren(e.Child()), depth + 1, out);
        }
        return;
    }
    for (auto& e : v) {
        out.push_back({depth, &*e});
        if (e->Child() >= 0) Walk(w, w.GetGpuChildren(e->Child()), depth + 1, out);
    }
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: tracy-gpuinfo trace.tracy\n"); return 1; }
    auto f = std::unique_ptr<tracy::FileRead>(tracy::FileRead::Open(argv[1]));
    if (!f) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
    tracy::Worker w(*f);
    printf("capture: %s\nhost: %s\n", w.GetCaptureName().c_str(), w.GetHostInfo().c_str());
    printf("first time %" PRId64 " ns, last time %" PRId64 " ns, frames %zu, cpu zones %" PRIu64 ", gpu zones %" PRIu64 "\n",
           w.GetFirstTime(), w.GetLastTime(), w.GetFrameCount(*w.GetFramesBase()), w.GetZoneCount(), w.GetGpuZoneCount());
    auto& gpus = w.GetGpuData();
    printf("gpu contexts: %zu\n", (size_t)gpus.size());
    for (size_t c = 0; c < gpus.size(); c++) {
        auto* g = gpus[c];
        printf("\ncontext %zu: name \"%s\" type %s period %.6g ns hasPeriod %d hasCalibration %d count %" PRIu64
               " calibratedGpuTime %" PRId64 " calibratedCpuTime %" PRId64 " calibrationMod %.12g timeDiff %" PRId64 " overflow %" PRIu64 "\n",
               c, g->name.Active() ? w.GetString(g->name) : "(unnamed)", TypeName(g->type), g->period, g->hasPeriod, g->hasCalibration,
               g->count, g->calibratedGpuTime, g->calibratedCpuTime, g->calibrationMod, g->timeDiff, g->overflow);
        std::map<std::string, std::vector<double>> byName;
        for (auto& td : g->threadData) {
            std::vector<std::pair<int,const tracy::GpuEvent*>> evs;
            Walk(w, td.second.timeline, 0, evs);
            printf("  thread %" PRIu64 ": %zu zones\n", td.first, evs.size());
            printf("  %-5s %-12s %-16s %-16s %-14s %-16s %-14s\n", "depth", "name", "gpu_start_ns", "gpu_end_ns", "gpu_dur_ns", "cpu_start_ns", "cpu-gpu_ns");
            for (auto& [d, e] : evs) {
                auto& sl = w.GetSourceLocation(e->SrcLoc());
                const char* name = w.GetZoneName(*e);
                int64_t dur = e->GpuEnd() - e->GpuStart();
                printf("  %-5d %-12s %-16" PRId64 " %-16" PRId64 " %-14" PRId64 " %-16" PRId64 " %-14" PRId64 "  [fn %s, file %s]\n", d, name,
                       e->GpuStart(), e->GpuEnd(), dur, e->CpuStart(), e->CpuStart() - e->GpuStart(),
                       w.GetString(sl.function), w.GetString(sl.file));
                byName[name].push_back((double)dur);
            }
        }
        for (auto& [n, v] : byName) {
            double mn = v[0], mx = v[0]; for (double x : v) { if (x < mn) mn = x; if (x > mx) mx = x; }
            printf("  zones \"%s\": %zu, duration min %.3f us max %.3f us\n", n.c_str(), v.size(), mn / 1e3, mx / 1e3);
        }
    }
    auto& plots = w.GetPlots();
    size_t user = 0; for (auto* p : plots) if (p->type == tracy::PlotType::User) user++;
    printf("\nplots: %zu (user %zu)\n", (size_t)plots.size(), user);
    for (auto* p : plots) {
        printf("  [%s] \"%s\": %zu points, min %.6g max %.6g\n", p->type == tracy::PlotType::User ? "user" : "tracy",
               w.GetString(p->name), (size_t)p->data.size(), p->min, p->max);
    }
    return 0;
}
