//! A wgpu compute program three ways, as examples: `unprofiled`,
//! `with_wgpu_profiler` and `with_gpu_counters` (see README.md). The library
//! is empty.
