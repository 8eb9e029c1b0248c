//! Writes a Perfetto trace of 10 million scopes (by default) with
//! [`PerfettoWriter`], frame by frame as a profiler would hand them over,
//! and prints one JSON line: scopes, bytes, seconds, and the process's peak
//! resident memory (VmHWM) before and after writing.
//!
//! ```sh
//! cargo run --release -p gpu-counters-profiler --example perfetto_10m -- OUT [SCOPES] [PER_FRAME] [--unique-labels]
//! ```
//!
//! Each frame holds PER_FRAME scopes (default 1000): a root scope and, under
//! it, alternating passes and scopes two deep, on two queues, with
//! statistics on the passes; labels come from a set of 16, or are all
//! different with `--unique-labels` (which fills the interned-name table, so
//! later names are written inline).

use gpu_counters_hal::timeline::{PassKind, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use gpu_counters_profiler::export::PerfettoWriter;
use std::io::{BufWriter, Write};
use std::time::Instant;

/// Peak resident set size of this process in KiB (Linux), 0 elsewhere.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Counts the bytes written through it.
struct Counting<W: Write> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let unique = args.iter().any(|a| a == "--unique-labels");
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(out) = pos.first() else {
        return Err("usage: perfetto_10m OUT [SCOPES] [PER_FRAME] [--unique-labels]".into());
    };
    let scopes: u64 = pos.get(1).map_or(Ok(10_000_000), |s| s.parse())?;
    let per_frame: usize = pos.get(2).map_or(Ok(1000), |s| s.parse())?;
    if per_frame == 0 || scopes == 0 {
        return Err("SCOPES and PER_FRAME must be at least 1".into());
    }
    const LABELS: [&str; 16] = [
        "frame", "shadows", "gbuffer", "lighting", "ssao", "bloom", "tonemap", "ui", "skin",
        "cull", "simulate", "reduce", "copy in", "copy out", "blur h", "blur v",
    ];

    // One frame's intervals, reused: only times and labels change.
    let mut frame = TimelineFrame {
        index: 0,
        cpu_submit_ns: 0,
        cpu_complete_ns: 0,
        intervals: Vec::with_capacity(per_frame),
    };
    let before = peak_rss_kib();
    let file = std::fs::File::create(out.as_str())?;
    let mut writer = PerfettoWriter::new(Counting {
        inner: BufWriter::with_capacity(1 << 20, file),
        bytes: 0,
    });
    let started = Instant::now();
    let mut written = 0u64;
    let mut t = 1_000_000_000_000u64;
    while written < scopes {
        let n = per_frame.min((scopes - written) as usize);
        frame.index += 1;
        frame.cpu_submit_ns = t;
        frame.intervals.clear();
        // A root scope, then groups of three: a scope and two passes in it;
        // every fifth group on a second queue.
        let root_end = t + 10 + 290 * n as u64;
        let mut at = t + 10;
        for k in 0..n {
            let r = (k + 2) % 3; // 0: a group's scope, 1 and 2: its passes
            let group = (k.max(1) - 1) / 3;
            let (start, len, depth, parent, kind) = match (k, r) {
                (0, _) => (t + 10, root_end - t - 10, 0, None, PassKind::Scope),
                (_, 0) => (at, 580, 1, Some(0), PassKind::Scope),
                _ => {
                    at += 290;
                    (at - 290, 280, 2, Some(k - r), PassKind::Compute)
                }
            };
            let label = if unique {
                format!("scope {}", written + k as u64)
            } else {
                LABELS[k % LABELS.len()].to_string()
            };
            let queue = if k > 0 && group % 5 == 4 {
                "async compute"
            } else {
                "graphics"
            };
            frame.intervals.push(TimelineInterval {
                label,
                kind,
                queue: queue.to_string(),
                depth,
                parent,
                thread: Some("main".to_string()),
                start_ns: start,
                end_ns: start + len,
                start_ticks: start / 2,
                end_ticks: (start + len) / 2,
                error_bound_ns: 2_624,
                statistics: (kind == PassKind::Compute).then_some(CounterResultStatistic {
                    compute_kernel_invocations: 4096,
                    ..Default::default()
                }),
            });
        }
        frame.cpu_complete_ns = root_end + 1_000;
        writer.write_frame("Synthetic GPU", &frame)?;
        written += n as u64;
        t = frame.cpu_complete_ns + 1_000;
    }
    let packets = writer.packets();
    let sink = writer.finish()?;
    let bytes = sink.bytes;
    drop(sink);
    let seconds = started.elapsed().as_secs_f64();
    let after = peak_rss_kib();
    println!(
        "{{\"scopes\": {scopes}, \"per_frame\": {per_frame}, \"unique_labels\": {unique}, \
         \"packets\": {packets}, \"bytes\": {bytes}, \"seconds\": {seconds:.3}, \
         \"scopes_per_second\": {:.0}, \"peak_rss_kib_before\": {before}, \
         \"peak_rss_kib_after\": {after}}}",
        scopes as f64 / seconds
    );
    Ok(())
}
