//! Profiler.
