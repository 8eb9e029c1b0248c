//! What the Tracy layer hands to Tracy's client, call by call: the order and
//! the content, without a client (`export::tracy::TracyPlanner` is pure).

use gpu_counters_hal::timeline::{PassKind, TimelineFrame, TimelineInterval};
use gpu_counters_hal::{BackendKind, CounterResultStatistic, TimestampPair, COUNTER_ERROR_VALUE};
use gpu_counters_profiler::export::tracy::{
    TracyCall, TracyClock, TracyContextType, TracyPlanner, CONTEXT_CALIBRATION, MAX_PLOTS,
};
use TracyCall::{GpuTime, ZoneBegin, ZoneEnd};

const DEV: &str = "GPU 0";

fn clock(cpu_ns: u64, gpu_ticks: u64, mask: u64) -> TracyClock {
    TracyClock {
        anchor: TimestampPair {
            cpu_ns,
            gpu_ticks,
            max_deviation_ns: 10,
        },
        rate_ns_per_tick: 2.0,
        period_ns: 2.0,
        mask,
    }
}

#[allow(clippy::too_many_arguments)]
fn iv(
    label: &str,
    kind: PassKind,
    queue: &str,
    depth: u32,
    parent: Option<usize>,
    ticks: (u64, u64),
    bound: u64,
    statistics: Option<CounterResultStatistic>,
) -> TimelineInterval {
    TimelineInterval {
        label: label.into(),
        kind,
        queue: queue.into(),
        depth,
        parent,
        thread: None,
        // The nanoseconds order the zones; the ticks are what Tracy gets.
        start_ns: ticks.0 * 2,
        end_ns: ticks.1 * 2,
        start_ticks: ticks.0,
        end_ticks: ticks.1,
        error_bound_ns: bound,
        statistics,
    }
}

fn frame(index: u64, intervals: Vec<TimelineInterval>) -> TimelineFrame {
    TimelineFrame {
        index,
        cpu_submit_ns: 0,
        cpu_complete_ns: 0,
        intervals,
    }
}

fn stats(k: u64) -> CounterResultStatistic {
    CounterResultStatistic {
        compute_kernel_invocations: k,
        // Not counted by the device: never plotted.
        vertex_invocations: COUNTER_ERROR_VALUE,
        ..Default::default()
    }
}

fn zone(context: u8, query: u16, name: &str, kind: &'static str, queue: &str) -> TracyCall {
    ZoneBegin {
        context,
        query,
        name: name.into(),
        function: kind,
        file: format!("gpu-counters {queue}"),
    }
}

fn plot(name: &str, value: f64) -> TracyCall {
    TracyCall::Plot {
        name: name.into(),
        value,
    }
}

#[test]
fn first_frame_creates_a_calibrated_context_and_nests_zones_outer_first() {
    let mut p = TracyPlanner::new();
    let c = clock(1_000_000, 5_000, u64::MAX);
    let f = frame(
        0,
        vec![
            iv(
                "frame",
                PassKind::Scope,
                "gfx",
                0,
                None,
                (10_000, 20_000),
                300,
                None,
            ),
            iv(
                "a",
                PassKind::Compute,
                "gfx",
                1,
                Some(0),
                (11_000, 12_000),
                310,
                Some(stats(64)),
            ),
            iv(
                "b",
                PassKind::Render,
                "gfx",
                1,
                Some(0),
                (13_000, 19_000),
                305,
                None,
            ),
        ],
    );
    // Now: 2 ms after the anchor at 2 ns per tick, 500_000 ticks later.
    let calls = p.frame(DEV, BackendKind::Vulkan, &c, &f, 2_000_000);
    assert_eq!(
        calls,
        vec![
            TracyCall::NewContext {
                context: 254,
                gpu_time: 505_000,
                period: 2.0,
                flags: CONTEXT_CALIBRATION,
                kind: TracyContextType::Vulkan,
            },
            TracyCall::ContextName {
                context: 254,
                name: "GPU 0 / gfx".into()
            },
            zone(254, 0, "frame", "scope", "gfx"),
            GpuTime {
                context: 254,
                query: 0,
                gpu_time: 10_000
            },
            zone(254, 1, "a", "compute", "gfx"),
            GpuTime {
                context: 254,
                query: 1,
                gpu_time: 11_000
            },
            ZoneEnd {
                context: 254,
                query: 2
            },
            GpuTime {
                context: 254,
                query: 2,
                gpu_time: 12_000
            },
            zone(254, 3, "b", "render", "gfx"),
            GpuTime {
                context: 254,
                query: 3,
                gpu_time: 13_000
            },
            ZoneEnd {
                context: 254,
                query: 4
            },
            GpuTime {
                context: 254,
                query: 4,
                gpu_time: 19_000
            },
            ZoneEnd {
                context: 254,
                query: 5
            },
            GpuTime {
                context: 254,
                query: 5,
                gpu_time: 20_000
            },
            plot("GPU 0 / gfx: a compute_kernel_invocations", 64.0),
            plot("GPU 0 / gfx: error bound ns", 310.0),
        ]
    );

    // The next frame on the same calibration: no new context, query ids go
    // on, no calibration message.
    let g = frame(
        1,
        vec![iv(
            "a",
            PassKind::Compute,
            "gfx",
            0,
            None,
            (30_000, 31_000),
            200,
            None,
        )],
    );
    let calls = p.frame(DEV, BackendKind::Vulkan, &c, &g, 3_000_000);
    assert_eq!(
        calls,
        vec![
            zone(254, 6, "a", "compute", "gfx"),
            GpuTime {
                context: 254,
                query: 6,
                gpu_time: 30_000
            },
            ZoneEnd {
                context: 254,
                query: 7
            },
            GpuTime {
                context: 254,
                query: 7,
                gpu_time: 31_000
            },
            plot("GPU 0 / gfx: error bound ns", 200.0),
        ]
    );
}

#[test]
fn a_refit_sends_a_calibration_to_every_context_of_the_device_first() {
    let mut p = TracyPlanner::new();
    let f = |ticks: u64| {
        frame(
            0,
            vec![
                iv(
                    "x",
                    PassKind::Compute,
                    "gfx",
                    0,
                    None,
                    (ticks, ticks + 10),
                    1,
                    None,
                ),
                iv(
                    "y",
                    PassKind::Compute,
                    "copy",
                    0,
                    None,
                    (ticks, ticks + 10),
                    1,
                    None,
                ),
            ],
        )
    };
    let calls = p.frame(
        DEV,
        BackendKind::Wgpu,
        &clock(1_000, 100, u64::MAX),
        &f(200),
        5_000,
    );
    let contexts: Vec<(u8, String)> = calls
        .iter()
        .filter_map(|c| match c {
            TracyCall::ContextName { context, name } => Some((*context, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        contexts,
        [(254, "GPU 0 / gfx".into()), (253, "GPU 0 / copy".into())]
    );
    assert!(calls.iter().any(|c| matches!(
        c,
        TracyCall::NewContext {
            kind: TracyContextType::WebGpu,
            context: 253,
            gpu_time: 2_100,
            ..
        }
    )));

    // The calibration refits: the new anchor is 1_000 ticks after the old
    // one, now is 11_000 ns, so the GPU time of now is 100 + 1_000 +
    // (11_000 - 3_000) / 2 = 5_100; 6_000 ns passed since the contexts were
    // made.
    let calls = p.frame(
        DEV,
        BackendKind::Wgpu,
        &clock(3_000, 1_100, u64::MAX),
        &f(1_200),
        11_000,
    );
    assert_eq!(
        calls[..2],
        [
            TracyCall::Calibration {
                context: 254,
                gpu_time: 5_100,
                cpu_delta_ns: 6_000
            },
            TracyCall::Calibration {
                context: 253,
                gpu_time: 5_100,
                cpu_delta_ns: 6_000
            },
        ]
    );
    assert!(!calls
        .iter()
        .any(|c| matches!(c, TracyCall::NewContext { .. })));
    // The next refit counts from this one.
    let calls = p.frame(
        DEV,
        BackendKind::Wgpu,
        &clock(4_000, 1_600, u64::MAX),
        &f(1_700),
        12_000,
    );
    assert_eq!(
        calls[0],
        TracyCall::Calibration {
            context: 254,
            gpu_time: 5_600,
            cpu_delta_ns: 1_000
        }
    );
}

#[test]
fn wrapped_ticks_are_unwrapped_onto_one_line() {
    let mut p = TracyPlanner::new();
    let mask = (1u64 << 32) - 1;
    let near_wrap = mask - 99;
    let c = clock(1_000, near_wrap, mask);
    // Starts before the counter wraps, ends after it.
    let f = frame(
        0,
        vec![iv(
            "w",
            PassKind::Blit,
            "gfx",
            0,
            None,
            (near_wrap + 50, 20),
            1,
            None,
        )],
    );
    let times: Vec<i64> = p
        .frame(DEV, BackendKind::Cuda, &c, &f, 1_000)
        .into_iter()
        .filter_map(|c| match c {
            GpuTime { gpu_time, .. } => Some(gpu_time),
            _ => None,
        })
        .collect();
    assert_eq!(times, [near_wrap as i64 + 50, mask as i64 + 1 + 20]);
}

#[test]
fn overlapping_intervals_get_an_overlap_context() {
    let mut p = TracyPlanner::new();
    let f = frame(
        0,
        vec![
            iv("a", PassKind::Compute, "gfx", 0, None, (100, 200), 1, None),
            iv("b", PassKind::Compute, "gfx", 0, None, (150, 250), 1, None),
        ],
    );
    let calls = p.frame(DEV, BackendKind::Fake, &clock(0, 0, u64::MAX), &f, 0);
    let names: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c {
            TracyCall::ContextName { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["GPU 0 / gfx", "GPU 0 / gfx (overlap 1)"]);
    let zones: Vec<(u8, String)> = calls
        .iter()
        .filter_map(|c| match c {
            ZoneBegin { context, name, .. } => Some((*context, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(zones, [(254, "a".into()), (253, "b".into())]);
    assert!(calls.iter().any(|c| matches!(
        c,
        TracyCall::NewContext {
            kind: TracyContextType::Custom,
            ..
        }
    )));
}

#[test]
fn plot_names_are_capped_and_the_rest_counted() {
    let mut p = TracyPlanner::new();
    let c = clock(0, 0, u64::MAX);
    let n = MAX_PLOTS + 10;
    let f = frame(
        0,
        (0..n)
            .map(|k| {
                let t = 10 * k as u64;
                iv(
                    &format!("s{k}"),
                    PassKind::Compute,
                    "gfx",
                    0,
                    None,
                    (t, t + 5),
                    1,
                    Some(stats(1)),
                )
            })
            .collect(),
    );
    let calls = p.frame(DEV, BackendKind::Vulkan, &c, &f, 0);
    let plots = calls
        .iter()
        .filter(|c| matches!(c, TracyCall::Plot { .. }))
        .count();
    // One statistic per scope plus the error bound, which comes last and is
    // left out too.
    assert_eq!(plots, MAX_PLOTS);
    assert_eq!(p.skipped_plot_points(), 11);
    // Every zone still went out.
    let zones = calls
        .iter()
        .filter(|c| matches!(c, ZoneBegin { .. }))
        .count();
    assert_eq!(zones, n);
}
