//! Every file exporter against hostile writers: one that fails after N
//! bytes (for many N), one that takes a few bytes per call, one that is
//! interrupted; and the number of `write` calls each makes, which must be
//! about what a `BufWriter` makes (one per 8 KiB), whatever the writer.

use gpu_counters_hal::timeline::{
    MultiTimeline, PassKind, Timeline, TimelineFrame, TimelineInterval,
};
use gpu_counters_hal::CounterResultStatistic;
use gpu_counters_profiler::export::{
    write_chrome_trace, write_chrome_trace_multi, write_csv, write_svg, SvgOptions,
};
#[cfg(feature = "perfetto")]
use gpu_counters_profiler::export::{write_perfetto, PerfettoWriter};
use std::io::{self, Write};

/// `frames` frames of a compute pass (with statistics) nested in a scope on
/// one queue, and a copy on another, with labels that need escaping.
fn timeline(frames: u64) -> Timeline {
    let iv = |label: &str, kind, queue: &str, depth, parent, start_ns: u64, end_ns: u64| {
        TimelineInterval {
            label: label.to_string(),
            kind,
            queue: queue.to_string(),
            depth,
            parent,
            thread: Some("main".into()),
            start_ns,
            end_ns,
            start_ticks: start_ns / 4,
            end_ticks: end_ns / 4,
            error_bound_ns: 900,
            statistics: (kind == PassKind::Compute).then(|| CounterResultStatistic {
                compute_kernel_invocations: 4096 + start_ns % 7,
                ..Default::default()
            }),
        }
    };
    Timeline {
        device: "Test GPU \"<0>\"".into(),
        frames: (0..frames)
            .map(|n| {
                let t = 1_000_000_000 + n * 2_000_000;
                TimelineFrame {
                    index: n,
                    cpu_submit_ns: t,
                    cpu_complete_ns: t + 1_500_000,
                    intervals: vec![
                        iv(
                            "frame, \"outer\"",
                            PassKind::Scope,
                            "graphics",
                            0,
                            None,
                            t + 10_000,
                            t + 900_000,
                        ),
                        iv(
                            "blur <&>\nline two",
                            PassKind::Compute,
                            "graphics",
                            1,
                            Some(0),
                            t + 20_000,
                            t + 400_000,
                        ),
                        iv(
                            "upload",
                            PassKind::Blit,
                            "transfer",
                            0,
                            None,
                            t + 30_000,
                            t + 200_000,
                        ),
                    ],
                }
            })
            .collect(),
    }
}

fn multi(frames: u64) -> MultiTimeline {
    let mut m = MultiTimeline::new();
    m.push(timeline(frames), None);
    let mut second = timeline(frames);
    second.device = "Second GPU".into();
    m.push(second, None);
    m
}

/// A writer of a fixed timeline in one format.
type Export = Box<dyn Fn(&mut dyn Write) -> Result<(), String>>;

/// Every file exporter, named, each writing a timeline of `frames` frames.
fn exporters(frames: u64) -> Vec<(&'static str, Export)> {
    let t = timeline(frames);
    let m = multi(frames);
    let (t1, t2, t3) = (t.clone(), t.clone(), t.clone());
    #[allow(unused_mut)]
    let mut all: Vec<(&'static str, Export)> = vec![
        (
            "chrome",
            Box::new(move |mut w: &mut dyn Write| {
                write_chrome_trace(&t1, &mut w).map_err(|e| e.to_string())
            }),
        ),
        (
            "chrome multi",
            Box::new(move |mut w: &mut dyn Write| {
                write_chrome_trace_multi(&m, &mut w).map_err(|e| e.to_string())
            }),
        ),
        (
            "csv",
            Box::new(move |mut w: &mut dyn Write| {
                write_csv(&t2, &mut w).map_err(|e| e.to_string())
            }),
        ),
        (
            "svg",
            Box::new(move |mut w: &mut dyn Write| {
                write_svg(&t3, &SvgOptions::default(), &mut w).map_err(|e| e.to_string())
            }),
        ),
    ];
    #[cfg(feature = "perfetto")]
    {
        let t4 = t.clone();
        all.push((
            "perfetto",
            Box::new(move |mut w: &mut dyn Write| {
                write_perfetto(&t4, &mut w).map_err(|e| e.to_string())
            }),
        ));
        all.push((
            "perfetto frame by frame",
            Box::new(move |w: &mut dyn Write| {
                let mut p = PerfettoWriter::new(w);
                for f in &t.frames {
                    p.write_frame(&t.device, f).map_err(|e| e.to_string())?;
                }
                p.finish().map(drop).map_err(|e| e.to_string())
            }),
        ));
    }
    all
}

/// Accepts `left` bytes, then fails every call (a full disk).
struct FailsAfter {
    left: usize,
    written: Vec<u8>,
}

impl Write for FailsAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "disk full (test)",
            ));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        self.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Takes at most 3 bytes per call, and is interrupted every other call.
struct Trickle {
    calls: usize,
    written: Vec<u8>,
}

impl Write for Trickle {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(2) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let n = buf.len().min(3);
        self.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Counts `write` calls and bytes.
#[derive(Default)]
struct Counting {
    calls: usize,
    bytes: usize,
    flushes: usize,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        self.bytes += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes += 1;
        Ok(())
    }
}

fn reference(export: &dyn Fn(&mut dyn Write) -> Result<(), String>) -> Vec<u8> {
    let mut out = Vec::new();
    export(&mut out).expect("writing to a Vec");
    out
}

/// A writer that fails after N bytes, for N from 0 to the whole output less
/// one byte: every exporter returns its error (naming the writer's), never
/// panics, and what it wrote is a prefix of the full output. Given exactly
/// the whole output's room, it succeeds with the same bytes.
#[test]
fn a_writer_failing_after_n_bytes_gives_the_exporters_error() {
    for (name, export) in exporters(100) {
        let full = reference(export.as_ref());
        assert!(full.len() > 20_000, "{name}: {} bytes", full.len());
        let mut ns: Vec<usize> = vec![0, 1, 2, 7, 100, 4095, 4096, 8191, 8192, 8193, 20_000];
        ns.extend([full.len() / 2, full.len() - 8193, full.len() - 1]);
        for n in ns {
            let mut w = FailsAfter {
                left: n,
                written: Vec::new(),
            };
            let r = export(&mut w);
            let e = r.expect_err(&format!("{name}: {n} bytes of {} succeeded", full.len()));
            assert!(e.contains("disk full (test)"), "{name} at {n}: {e}");
            assert!(w.written.len() <= n, "{name} at {n}");
            assert_eq!(w.written[..], full[..w.written.len()], "{name} at {n}");
        }
        let mut w = FailsAfter {
            left: full.len(),
            written: Vec::new(),
        };
        export(&mut w).unwrap_or_else(|e| panic!("{name} with room for all: {e}"));
        assert!(w.written == full, "{name}: output differs");
    }
}

/// Short and interrupted writes lose nothing.
#[test]
fn short_and_interrupted_writes_give_the_same_bytes() {
    for (name, export) in exporters(5) {
        let full = reference(export.as_ref());
        let mut w = Trickle {
            calls: 0,
            written: Vec::new(),
        };
        export(&mut w).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(w.written == full, "{name}: output differs");
    }
}

/// Handed an unbuffered writer (a `File`, a socket), each exporter makes
/// about one `write` call per 8 KiB, as a `BufWriter` would, and flushes it
/// at the end.
#[test]
fn exporters_buffer_their_writes() {
    for (name, export) in exporters(50) {
        let mut w = Counting::default();
        export(&mut w).unwrap_or_else(|e| panic!("{name}: {e}"));
        let most = w.bytes.div_ceil(8192) + 1;
        assert!(
            w.calls <= most,
            "{name}: {} write calls for {} bytes (at most {most})",
            w.calls,
            w.bytes
        );
        assert!(w.flushes >= 1, "{name}: the writer was not flushed");
    }
}
