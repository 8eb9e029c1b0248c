//! Wraps a small frame loop's passes in profiler scopes and writes a Chrome
//! trace that Perfetto UI (<https://ui.perfetto.dev>) or `chrome://tracing`
//! opens.
//!
//! ```text
//! cargo run -p gpu-counters-profiler --example scopes [TRACE.json]
//! ```
//!
//! Writes `TRACE.json` (default `/tmp/gpu_counters_scopes.json`). Each frame
//! records two command buffers on two threads, each an outer scope around a
//! "simulate" compute pass and a "clear" blit, with three frames in flight.

use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::CommonCounterSet;
use gpu_counters_profiler::{export, Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::{
    CommandBuffer, Device, GpuBuffer, InstanceOptions, MemoryLocation, Submission,
};
use gpu_counters_workloads::{ComputeWorkload, GpuContext};
use std::collections::VecDeque;
use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

const FRAMES: usize = 12;
const FRAMES_IN_FLIGHT: usize = 3;
const THREADS: usize = 2;

/// What one thread records per frame: its passes, each in a scope.
fn record(
    device: &Device,
    frame: &gpu_counters_profiler::Frame<'_, Device>,
    cmd: &mut CommandBuffer,
    work: &ComputeWorkload,
    target: &GpuBuffer,
    thread: usize,
) -> Result<(), Box<dyn Error + Send + Sync>> {
    let d = device.raw();
    let outer = frame.scope(cmd, &format!("thread {thread}"), PassKind::Scope)?;

    let simulate = frame.scope(cmd, "simulate", PassKind::Compute)?;
    // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
    // outside any render pass (profiler scopes open none) on `device`, where
    // `work` was built; `work` is destroyed only after the submissions are
    // waited for.
    unsafe {
        work.record_dispatch(d, cmd.raw());
        work.record_barrier(d, cmd.raw());
        work.record_dispatch(d, cmd.raw());
    }
    simulate.end(cmd)?;

    let clear = frame.scope(cmd, "clear", PassKind::Blit)?;
    // SAFETY: `cmd` is recording outside a render pass; the buffer is live
    // with transfer-destination usage.
    unsafe { d.cmd_fill_buffer(cmd.raw(), target.raw(), 0, target.size(), 0) };
    clear.end(cmd)?;

    outer.end(cmd)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/gpu_counters_scopes.json"));

    let device = Device::open_default(&InstanceOptions::default())?;
    let statistics = device
        .info()
        .counter_set(CommonCounterSet::Statistic)
        .is_some();
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            frames_in_flight: FRAMES_IN_FLIGHT,
            max_scopes_per_frame: 16,
            statistics,
            when_full: WhenFull::Wait {
                timeout: Duration::from_secs(5),
            },
            queue_name: Some("graphics".into()),
        },
    )?;
    let ctx = GpuContext::from_device(&device);
    let mut works = Vec::new();
    let mut targets = Vec::new();
    for t in 0..THREADS {
        works.push(ComputeWorkload::new(&ctx, 64, 16 * (t as u32 + 1), 200)?);
        targets.push(GpuBuffer::new(&device, 4096, MemoryLocation::DeviceLocal)?);
    }

    // Command buffers of the frames in flight, reused once their frame is done.
    let mut in_flight: VecDeque<Vec<Submission>> = VecDeque::new();
    let mut results = Vec::new();
    for _ in 0..FRAMES {
        let frame = profiler.begin_frame()?;
        let mut cmds = match in_flight.len() {
            FRAMES_IN_FLIGHT => in_flight
                .pop_front()
                .into_iter()
                .flatten()
                .map(Submission::reuse)
                .collect::<Result<Vec<_>, _>>()?,
            _ => (0..THREADS)
                .map(|_| CommandBuffer::new(&device))
                .collect::<Result<Vec<_>, _>>()?,
        };
        // Each thread records its own command buffer into the shared frame.
        std::thread::scope(|s| {
            let handles: Vec<_> = cmds
                .iter_mut()
                .enumerate()
                .map(|(t, cmd)| {
                    let (frame, device, work, target) = (&frame, &device, &works[t], &targets[t]);
                    s.spawn(move || record(device, frame, cmd, work, target, t))
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().map_err(|_| "recording thread panicked")?)
        })?;
        let submissions = cmds
            .into_iter()
            .map(CommandBuffer::commit)
            .collect::<Result<Vec<_>, _>>()?;
        profiler.end_frame(frame, &submissions)?;
        in_flight.push_back(submissions);
        // Frames come back a few frames later, in order, each exactly once.
        results.extend(profiler.collect()?);
    }
    for submission in in_flight.iter().flatten() {
        submission.wait()?;
    }
    results.extend(profiler.wait_collect_all(Duration::from_secs(5))?);

    for f in &results {
        let summary: Vec<String> = f
            .scopes
            .iter()
            .map(|s| {
                format!(
                    "{}{} {:.1} us",
                    "  ".repeat(s.depth as usize),
                    s.label,
                    s.duration_ns as f64 / 1e3
                )
            })
            .collect();
        println!(
            "frame {:>2}: {} scopes, {} dropped\n{}",
            f.index,
            f.scopes.len(),
            f.dropped_scopes,
            summary.join("\n")
        );
    }
    let timeline = profiler.timeline(&results);
    export::write_chrome_trace(&timeline, &mut std::fs::File::create(&out)?)?;
    println!(
        "wrote {} ({} frames, ring of {}, {} scopes dropped)",
        out.display(),
        results.len(),
        profiler.ring_size(),
        profiler.dropped_scopes_total()
    );

    drop(in_flight);
    for w in &mut works {
        // SAFETY: every submission using the workloads was waited for.
        unsafe { w.destroy(device.raw()) };
    }
    Ok(())
}
