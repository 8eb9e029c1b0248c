//! Profiles a few frames of nested GPU scopes on Vulkan and exports them:
//! a Perfetto trace and a Chrome trace (open either in
//! <https://ui.perfetto.dev>) and an SVG timeline.
//!
//! ```text
//! cargo run -p gpu-counters --features vulkan,perfetto --example profiler_export [DIR]
//! ```
//!
//! Prints each frame's scopes, nested by depth, and writes
//! `DIR/trace.pftrace`, `DIR/trace.json` and `DIR/timeline.svg` (`DIR`
//! defaults to the system's temporary directory). With `GPU_COUNTERS_VALIDATION=1` it runs
//! under the Khronos validation layer and fails on any message it reports.

use gpu_counters::export::{self, SvgOptions};
use gpu_counters::timeline::PassKind;
use gpu_counters::vulkan::{CommandBuffer, Device, GpuBuffer, InstanceOptions, MemoryLocation};
use gpu_counters::{Profiler, ProfilerOptions};
use std::error::Error;
use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;

const FRAMES: usize = 4;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args()
        .nth(1)
        .map_or_else(std::env::temp_dir, PathBuf::from);
    let device = Device::open_default(&InstanceOptions::default())?;
    // A ring of sample buffers for the frames in flight (3 by default).
    let profiler = Profiler::new(&device, ProfilerOptions::default())?;
    // Stands in for the application's resources: two buffers its passes clear.
    let small = GpuBuffer::new(&device, 1 << 16, MemoryLocation::DeviceLocal)?;
    let large = GpuBuffer::new(&device, 1 << 24, MemoryLocation::DeviceLocal)?;

    let mut results = Vec::new();
    let mut submissions = Vec::new();
    for _ in 0..FRAMES {
        let frame = profiler.begin_frame()?;
        let mut cmd = CommandBuffer::new(&device)?;
        // Scopes nest as they are begun and ended on one command buffer:
        // "frame" holds "clear small" and "clear large".
        let outer = frame.scope(&mut cmd, "frame", PassKind::Scope)?;
        for (label, buffer) in [("clear small", &small), ("clear large", &large)] {
            let scope = frame.scope(&mut cmd, label, PassKind::Blit)?;
            // SAFETY: `cmd` is recording outside a render pass on `device`;
            // the buffer (transfer-destination usage) outlives the
            // submissions, which are waited for below.
            unsafe {
                device
                    .raw()
                    .cmd_fill_buffer(cmd.raw(), buffer.raw(), 0, buffer.size(), 0)
            };
            scope.end(&mut cmd)?;
        }
        outer.end(&mut cmd)?;
        let submission = cmd.commit()?;
        // The frame's scopes resolve once its submissions are done.
        profiler.end_frame(frame, [&submission])?;
        submissions.push(submission);
        // Frames the GPU has finished, in order, each once.
        results.extend(profiler.collect()?);
    }
    results.extend(profiler.wait_collect_all(Duration::from_secs(10))?);

    for f in &results {
        for s in &f.scopes {
            println!(
                "frame {} {}{}: {} ns ± {} ns",
                f.index,
                "  ".repeat(s.depth as usize),
                s.label,
                s.duration_ns,
                s.error_bound_ns
            );
        }
    }
    let timeline = profiler.timeline(&results);
    let pftrace = dir.join("trace.pftrace");
    export::write_perfetto(&timeline, &mut File::create(&pftrace)?)?;
    let json = dir.join("trace.json");
    export::write_chrome_trace(&timeline, &mut File::create(&json)?)?;
    let svg = dir.join("timeline.svg");
    export::write_svg(&timeline, &SvgOptions::default(), &mut File::create(&svg)?)?;
    for path in [pftrace, json, svg] {
        println!("wrote {}", path.display());
    }

    let messages = device.instance().validation_messages();
    if !messages.is_empty() {
        return Err(format!("validation layer: {}", messages.join("\n")).into());
    }
    Ok(())
}
