//! Profiler layer of gpu-counters: scopes, frames in flight, a calibrated
//! timeline, and exporters that turn a [`gpu_counters_core::timeline::Timeline`]
//! into a Chrome trace (Perfetto UI, `chrome://tracing`), CSV, or an SVG
//! picture.

pub mod export;
