//! GPU metrics (PM sampling) and per-kernel counters through the
//! collector: the summary's lines and counts, and the trace's GPU counter
//! tracks decoded with Perfetto's own schema (units, values, times).

mod common;

use gpu_counters_record::collector::{write_frames, Caps, Outcome};
use gpu_counters_record::protocol::*;
use serde_json::Value;

const PID: u32 = 4321;
const UUID: [u8; 16] = *b"pm-sampling-gpu0";
const T0: u64 = 5_000_000_000;

/// Str ids of the strings every stream sends first.
const GPU_NAME: u32 = 1;
const KERNEL_NAME: u32 = 2;
const SM: u32 = 3;
const DRAM_READ: u32 = 4;
const DRAM_WRITE: u32 = 5;
const TENSOR: u32 = 6;
const INST: u32 = 7;

fn strings() -> Vec<(u32, &'static str)> {
    vec![
        (GPU_NAME, "Test GPU"),
        (KERNEL_NAME, "_Z4copyPfS_m"),
        (SM, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        (DRAM_READ, "dram__bytes_read.sum"),
        (DRAM_WRITE, "dram__bytes_write.sum"),
        (
            TENSOR,
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        ),
        (INST, "smsp__inst_executed.sum"),
    ]
}

/// `records` after a Hello, the strings and device 0, in numbered frames.
fn frames(records: &[Record<'_>]) -> Vec<Vec<u8>> {
    let cmd = b"metrics-test\0";
    let hello = Record::Hello(Hello {
        ppid: 1,
        start_ns: T0,
        lib_version: 0x0001_0000,
        cupti_version: 0,
        driver_version: 0,
        flags: init::CUDA,
        exe: Text::from_str("metrics-test"),
        cmdline: Text::new(cmd),
    });
    let texts: Vec<(u32, &str)> = strings();
    let mut all: Vec<Record<'_>> = vec![hello];
    for (id, s) in &texts {
        all.push(Record::Str(Str {
            id: *id,
            text: Text::from_str(s),
        }));
    }
    all.push(Record::Device(Device {
        ordinal: 0,
        uuid: UUID,
        sm_count: 132,
        cc_major: 9,
        cc_minor: 0,
        name: GPU_NAME,
        chip: 0,
    }));
    all.extend_from_slice(records);
    all.push(Record::Goodbye(Goodbye {
        reason: goodbye::ATEXIT,
        unsent: 0,
    }));
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut seq = 0;
    for r in &all {
        let mut rec = Vec::new();
        r.encode(&mut rec).expect("encodes");
        if !cur.is_empty() && cur.len() + rec.len() > MAX_FRAME {
            out.push(std::mem::take(&mut cur));
        }
        if cur.is_empty() {
            FrameHeader {
                flags: 0,
                pid: PID,
                seq,
            }
            .encode(&mut cur);
            seq += 1;
        }
        cur.extend_from_slice(&rec);
    }
    out.push(cur);
    out
}

fn record(records: &[Record<'_>], trace: &std::path::Path) -> Outcome {
    let f = frames(records);
    let mut out = Vec::new();
    let o = write_frames(f.iter().map(Vec::as_slice), Some(&mut out), Caps::default());
    assert!(o.write_error.is_none());
    std::fs::write(trace, &out).unwrap();
    o
}

fn kernel(correlation: u32, start: u64, end: u64) -> Record<'static> {
    Record::Kernel(Kernel {
        work: Work {
            correlation,
            device: 0,
            flags: 0,
            context: 1,
            stream: 7,
            start_ns: start,
            end_ns: end,
            ..Work::default()
        },
        registers: 32,
        grid: [1024, 1, 1],
        block: [256, 1, 1],
        smem_static: 0,
        smem_dynamic: 0,
        name: KERNEL_NAME,
    })
}

/// PM samples become one GPU counter track per metric: percentages as
/// percent, byte counts as bytes per second over each sample, so that the
/// DRAM tracks integrate to the bytes each sample counted; the summary
/// counts the samples, names the metrics and says the clocks were locked,
/// and a sample of a device with no config is counted, not drawn.
#[test]
fn pm_samples_become_counter_tracks_that_integrate_to_the_bytes_counted() {
    const N: u64 = 100;
    const SPAN: u64 = 100_000;
    const READ: f64 = 2.5e6;
    const WRITE: f64 = 1.25e6;
    let metrics = [SM, DRAM_READ, DRAM_WRITE, TENSOR];
    let mut records = vec![Record::PmConfig(MetricConfig {
        device: 0,
        metrics: Seq::Slice(&metrics),
    })];
    let values: Vec<[f64; 4]> = (0..N)
        .map(|i| [i as f64 % 100.0, READ, WRITE * (i % 2) as f64, 12.5])
        .collect();
    for (i, v) in values.iter().enumerate() {
        let start = T0 + i as u64 * SPAN;
        records.push(Record::PmSample(PmSample {
            device: 0,
            start_ns: start,
            end_ns: start + SPAN,
            values: Seq::Slice(v),
        }));
    }
    // A device that sent no config.
    records.push(Record::PmSample(PmSample {
        device: 3,
        start_ns: T0,
        end_ns: T0 + SPAN,
        values: Seq::Slice(&[1.0]),
    }));
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("pm.pftrace");
    let o = record(&records, &trace);
    let s = &o.summary;
    assert!(s.pm_clocks_locked);
    assert!(!s.serialized);
    assert_eq!(s.gpu_metrics.len(), 1);
    let row = &s.gpu_metrics[0];
    assert_eq!((row.gpu, row.samples, row.covered_ns), (0, N, N * SPAN));
    assert_eq!(
        row.metrics,
        vec![
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__bytes_read.sum",
            "dram__bytes_write.sum",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
        ]
    );
    assert_eq!(s.drops.unknown_references, 1);
    let text = s.render_text();
    assert!(
        text.contains(
            "  GPU0 metrics: 100 samples over 10.000 ms of sm__throughput.avg.pct_of_peak_sustained_elapsed, dram__bytes_read.sum, dram__bytes_write.sum, sm__pipe_tensor_cycles_active"
        ),
        "{text}"
    );
    assert!(
        text.contains("  PM sampling locked the GPU clocks while it ran\n"),
        "{text}"
    );
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["gpu_metrics"][0]["samples"], N);
    assert_eq!(json["pm_clocks_locked"], true);

    let Some(py) = common::python("pm_samples_become_counter_tracks") else {
        return;
    };
    let v = common::dump(&py, &trace, &[]);
    let units = &v["gpu_counter_units"];
    let unit = |name: &str| {
        (
            units[name]["numerator"].as_array().unwrap().clone(),
            units[name]["denominator"].as_array().unwrap().clone(),
        )
    };
    assert_eq!(
        unit("dram__bytes_read.sum"),
        (vec![Value::from("BYTE")], vec![Value::from("SECOND")])
    );
    assert_eq!(
        unit("sm__throughput.avg.pct_of_peak_sustained_elapsed").0,
        vec![Value::from("PERCENT")]
    );
    let samples = v["gpu_counters"].as_array().unwrap();
    assert_eq!(samples.len() as u64, N);
    let mut read = 0.0;
    let mut write = 0.0;
    for (i, e) in samples.iter().enumerate() {
        // Each sample at its end (values look backwards).
        assert_eq!(e["ts"], T0 + (i as u64 + 1) * SPAN);
        let vals = &e["values"];
        assert_eq!(
            vals["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
            (i as f64 % 100.0)
        );
        assert_eq!(
            vals["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"],
            12.5
        );
        let secs = SPAN as f64 / 1e9;
        read += vals["dram__bytes_read.sum"].as_f64().unwrap() * secs;
        write += vals["dram__bytes_write.sum"].as_f64().unwrap() * secs;
    }
    let want_read = READ * N as f64;
    let want_write = WRITE * (N / 2) as f64;
    assert!((read - want_read).abs() < 1e-6 * want_read, "{read}");
    assert!((write - want_write).abs() < 1e-6 * want_write, "{write}");
    let instants: Vec<&str> = v["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(
        instants.iter().any(|i| i.starts_with(
            "gpu-counters: PM sampling of sm__throughput.avg.pct_of_peak_sustained_elapsed, dram__bytes_read.sum"
        ) && i.ends_with("on GPU0: the GPU clocks are locked while it runs")),
        "{instants:?}"
    );
}

/// Per-kernel counters are drawn at their kernel's end, also when they
/// arrive before the kernel's record; byte counts stay bytes. Kernels
/// without counters and counters without a kernel are counted; the
/// summary and the trace say kernels were serialized.
#[test]
fn per_kernel_counters_are_drawn_at_their_kernels_end_and_counted() {
    let metrics = [INST, DRAM_READ];
    let k = |c: u32| {
        (
            T0 + u64::from(c) * 10_000,
            T0 + u64::from(c) * 10_000 + 4_000,
        )
    };
    let v1 = [1000.0, 4096.0];
    let v2 = [2000.0, 8192.0];
    let v3 = [3000.0, 0.0];
    let v4 = [4000.0, 1.0];
    let orphan = [5.0, 5.0];
    let records = vec![
        Record::CounterConfig(MetricConfig {
            device: 0,
            metrics: Seq::Slice(&metrics),
        }),
        // Counters of kernel 1 before its record.
        Record::KernelCounters(KernelCounters {
            correlation: 1,
            device: 0,
            values: Seq::Slice(&v1),
        }),
        kernel(1, k(1).0, k(1).1),
        kernel(2, k(2).0, k(2).1),
        kernel(3, k(3).0, k(3).1),
        Record::KernelCounters(KernelCounters {
            correlation: 2,
            device: 0,
            values: Seq::Slice(&v2),
        }),
        Record::KernelCounters(KernelCounters {
            correlation: 3,
            device: 0,
            values: Seq::Slice(&v3),
        }),
        kernel(4, k(4).0, k(4).1),
        Record::KernelCounters(KernelCounters {
            correlation: 4,
            device: 0,
            values: Seq::Slice(&v4),
        }),
        // Kernel 5 has none; correlation 99 has no kernel.
        kernel(5, k(5).0, k(5).1),
        Record::KernelCounters(KernelCounters {
            correlation: 99,
            device: 0,
            values: Seq::Slice(&orphan),
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("counters.pftrace");
    let o = record(&records, &trace);
    let s = &o.summary;
    assert!(s.serialized);
    assert!(!s.pm_clocks_locked);
    assert_eq!(s.kernels.count, 5);
    assert_eq!(s.counters.len(), 1);
    let c = &s.counters[0];
    assert_eq!((c.gpu, c.kernels_measured, c.kernels_unmeasured), (0, 4, 1));
    assert_eq!(
        c.metrics,
        vec!["smsp__inst_executed.sum", "dram__bytes_read.sum"]
    );
    assert_eq!(s.drops.unknown_references, 1, "the orphan's counters");
    let text = s.render_text();
    assert!(
        text.contains(
            "  GPU0 per-kernel counters: 4 kernels measured, 1 not, of smsp__inst_executed.sum, dram__bytes_read.sum\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  per-kernel counters serialized the kernels\n"),
        "{text}"
    );

    let Some(py) = common::python("per_kernel_counters_are_drawn") else {
        return;
    };
    let v = common::dump(&py, &trace, &[]);
    let units = &v["gpu_counter_units"]["dram__bytes_read.sum (per kernel)"];
    assert_eq!(units["numerator"], serde_json::json!(["BYTE"]));
    assert_eq!(units["denominator"], serde_json::json!([]));
    let events = v["gpu_counters"].as_array().unwrap();
    assert_eq!(events.len(), 4);
    let mut seen: Vec<(u64, f64, f64)> = events
        .iter()
        .map(|e| {
            (
                e["ts"].as_u64().unwrap(),
                e["values"]["smsp__inst_executed.sum (per kernel)"]
                    .as_f64()
                    .unwrap(),
                e["values"]["dram__bytes_read.sum (per kernel)"]
                    .as_f64()
                    .unwrap(),
            )
        })
        .collect();
    seen.sort_by_key(|e| e.0);
    assert_eq!(
        seen,
        vec![
            (k(1).1, 1000.0, 4096.0),
            (k(2).1, 2000.0, 8192.0),
            (k(3).1, 3000.0, 0.0),
            (k(4).1, 4000.0, 1.0),
        ]
    );
    let instants: Vec<&str> = v["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(
        instants.contains(
            &"gpu-counters: per-kernel counters (smsp__inst_executed.sum, dram__bytes_read.sum) on GPU0: kernels are serialized"
        ),
        "{instants:?}"
    );
}
