//! Trace bytes per kernel on a synthetic stream of a million kernels with
//! 300 distinct names and two shapes each (a training loop's mix), written
//! by the collector's writer (`write_frames`), with and without a launch
//! slice per kernel.
//!
//! `cargo run -p gpu-counters-record --example bytes_per_kernel [KERNELS]`

use gpu_counters_record::collector::{write_frames, Caps};
use gpu_counters_record::synthetic::Script;

fn main() {
    let kernels: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    for api in [false, true] {
        let script = Script {
            pid: 4242,
            kernels,
            names: 300,
            api,
            // An hour after boot, as on a machine that has been up a while
            // (timestamps are varints: later times take more bytes).
            base_ns: 3_600_000_000_000,
            ..Script::default()
        };
        let frames = script.frames();
        let o = write_frames(
            frames.iter().map(Vec::as_slice),
            Some(std::io::sink()),
            Caps::default(),
        );
        let s = &o.summary;
        println!(
            "{} kernels, {} distinct names, launch slices {}: {} bytes, {} packets, {:.1} bytes per kernel",
            s.kernels.count,
            s.kernels.distinct,
            if api { "on" } else { "off" },
            s.trace.bytes,
            s.trace.packets,
            s.trace.bytes_per_kernel.unwrap_or(0.0)
        );
    }
}
