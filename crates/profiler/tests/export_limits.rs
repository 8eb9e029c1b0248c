//! Every size a caller controls in the exporters has a stated limit and a
//! typed error, and what an exporter keeps is bounded by its input plus a
//! stated constant: absurd option values, absurd labels.

use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::{BackendKind, TimestampPair};
use gpu_counters_profiler::export::svg::{MAX_TITLE_BYTES, MAX_WIDTH};
use gpu_counters_profiler::export::tracy::{TracyCall, TracyClock, TracyPlanner, MAX_NAME_BYTES};
use gpu_counters_profiler::export::{render_svg, write_svg, ExportError, SvgOptions};

fn interval(label: &str, queue: &str, start_ns: u64, end_ns: u64) -> TimelineInterval {
    TimelineInterval {
        label: label.into(),
        kind: PassKind::Compute,
        queue: queue.into(),
        depth: 0,
        parent: None,
        thread: None,
        start_ns,
        end_ns,
        start_ticks: start_ns,
        end_ticks: end_ns,
        error_bound_ns: 0,
        statistics: None,
    }
}

/// One frame whose single interval spans the whole `u64` range: the widest
/// time axis there is.
fn full_range() -> Timeline {
    Timeline {
        device: "GPU".into(),
        frames: vec![TimelineFrame {
            index: 0,
            cpu_submit_ns: 0,
            cpu_complete_ns: u64::MAX,
            intervals: vec![interval("all of time", "graphics", 0, u64::MAX)],
        }],
    }
}

/// `render_svg` with `width: u32::MAX` for one frame spanning the full
/// range built about 12 GB (a tick every 100 pixels): the width is now at
/// most `MAX_WIDTH`, and more is a typed error naming the option and the
/// limit, from both `render_svg` and `write_svg` (which then writes
/// nothing).
#[test]
fn svg_width_over_the_limit_is_a_typed_error() {
    let t = full_range();
    for width in [MAX_WIDTH + 1, u32::MAX] {
        let opts = SvgOptions {
            width,
            ..Default::default()
        };
        let e = render_svg(&t, &opts).expect_err("width over the limit");
        match &e {
            ExportError::OverLimit {
                option, value, max, ..
            } => {
                assert_eq!(*option, "SvgOptions::width");
                assert_eq!(*value, u64::from(width));
                assert_eq!(*max, u64::from(MAX_WIDTH));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            format!("SvgOptions::width {width}: must be at most {MAX_WIDTH} pixels")
        );
        let mut out = Vec::new();
        let e = write_svg(&t, &opts, &mut out).expect_err("width over the limit");
        assert!(matches!(e, ExportError::OverLimit { .. }), "{e:?}");
        assert!(out.is_empty(), "{} bytes written", out.len());
    }
}

/// At the limit the picture of the widest axis is small: its size (and so
/// the exporter's memory, which streams it) does not grow with the width
/// beyond a stated constant.
#[test]
fn svg_at_the_widest_is_bounded() {
    let t = full_range();
    let small = render_svg(&t, &SvgOptions::default()).expect("default width");
    let widest = render_svg(
        &t,
        &SvgOptions {
            width: MAX_WIDTH,
            ..Default::default()
        },
    )
    .expect("widest");
    assert!(widest.starts_with("<svg") && widest.ends_with("</svg>\n"));
    assert!(
        widest.len() < small.len() + 200 * 1024,
        "{} bytes at {MAX_WIDTH} px against {} at the default",
        widest.len(),
        small.len()
    );
    // Tiny widths are drawn at the stated minimum.
    let tiny = render_svg(
        &t,
        &SvgOptions {
            width: 0,
            ..Default::default()
        },
    )
    .expect("width 0 draws at the minimum");
    assert!(tiny.contains(r#"width="480.00""#), "{}", &tiny[..200]);
}

/// A title over `MAX_TITLE_BYTES` is a typed error; one at the limit draws.
#[test]
fn svg_title_over_the_limit_is_a_typed_error() {
    let t = full_range();
    let at = "é".repeat(MAX_TITLE_BYTES / 2);
    assert_eq!(at.len(), MAX_TITLE_BYTES);
    render_svg(
        &t,
        &SvgOptions {
            title: Some(at.clone()),
            ..Default::default()
        },
    )
    .expect("a title at the limit");
    let over = format!("{at}x");
    let e = render_svg(
        &t,
        &SvgOptions {
            title: Some(over),
            ..Default::default()
        },
    )
    .expect_err("a title over the limit");
    assert_eq!(
        e.to_string(),
        format!(
            "SvgOptions::title {}: must be at most {MAX_TITLE_BYTES} bytes",
            MAX_TITLE_BYTES + 1
        )
    );
}

fn tracy_clock() -> TracyClock {
    TracyClock {
        anchor: TimestampPair {
            cpu_ns: 0,
            gpu_ticks: 0,
            max_deviation_ns: 0,
        },
        rate_ns_per_tick: 1.0,
        period_ns: 1.0,
        mask: u64::MAX,
    }
}

/// Tracy copies a zone's name, function and file into one source location
/// whose size is a `u16`: a label or queue name of 64 KiB or more made
/// Tracy's client write past that allocation. The planner cuts every name
/// it hands over (zone names, files, plot names) to `MAX_NAME_BYTES` at a
/// character boundary, and counts each cut.
#[test]
fn tracy_names_fit_tracys_source_locations_and_cuts_are_counted() {
    let long_label = format!("a{}", "é".repeat(70_000));
    let long_queue = format!("q{}", "ü".repeat(40_000));
    let mut iv = interval(&long_label, &long_queue, 10, 20);
    iv.error_bound_ns = 7;
    iv.statistics = Some(gpu_counters_hal::CounterResultStatistic {
        compute_kernel_invocations: 5,
        ..Default::default()
    });
    let f = TimelineFrame {
        index: 0,
        cpu_submit_ns: 0,
        cpu_complete_ns: 30,
        intervals: vec![iv],
    };
    let mut p = TracyPlanner::new();
    let calls = p.frame("GPU", BackendKind::Fake, &tracy_clock(), &f, 5);
    let mut zones = 0;
    let mut plots = 0;
    for c in &calls {
        match c {
            TracyCall::ZoneBegin {
                name,
                function,
                file,
                ..
            } => {
                zones += 1;
                // Tracy's `AllocSourceLocation`: 2 + 4 + 4 + function + 1 +
                // file + 1 + name bytes, a u16.
                assert!(10 + function.len() + 1 + file.len() + 1 + name.len() <= 65_535);
                assert!(name.len() <= MAX_NAME_BYTES && file.len() <= MAX_NAME_BYTES);
                assert!(long_label.starts_with(name.as_str()), "a prefix");
                assert!(name.len() > MAX_NAME_BYTES - 4, "cut at the last boundary");
            }
            TracyCall::Plot { name, .. } => {
                plots += 1;
                assert!(name.len() <= MAX_NAME_BYTES, "{}", name.len());
            }
            TracyCall::ContextName { name, .. } => {
                assert!(name.len() <= MAX_NAME_BYTES, "{}", name.len());
            }
            _ => {}
        }
    }
    assert_eq!((zones, plots), (1, 2), "{calls:?}");
    // The zone's name and file, the context's name and both plot names.
    assert_eq!(p.truncated_names(), 5);
}

/// The Perfetto writer interns slice names so that a name repeated over
/// frames is written once; it keeps that table between frames, so it
/// interns only names of at most `MAX_INTERNED_NAME_BYTES` (and at most
/// `MAX_INTERNED_NAMES` of them): longer names are written inline in each
/// event, and the table stays bounded however long the labels are.
#[cfg(feature = "perfetto")]
#[test]
fn perfetto_interns_only_short_names() {
    use gpu_counters_profiler::export::perfetto::{PerfettoWriter, MAX_INTERNED_NAME_BYTES};
    use perfetto_protos::trace::Trace;
    use perfetto_protos::track_event::track_event::Name_field;
    use protobuf::Message;

    let long = |n: usize| format!("{n}{}", "x".repeat(MAX_INTERNED_NAME_BYTES));
    let mut w = PerfettoWriter::new(Vec::new());
    for n in 0..3u64 {
        let t = n * 1000;
        let f = TimelineFrame {
            index: n,
            cpu_submit_ns: t,
            cpu_complete_ns: t + 900,
            intervals: vec![
                interval("short", "graphics", t + 10, t + 20),
                interval(&long(n as usize), "graphics", t + 30, t + 40),
                interval(&long(n as usize), "graphics", t + 50, t + 60),
            ],
        };
        w.write_frame("GPU", &f).expect("write a frame");
    }
    let bytes = w.finish().expect("finish");
    let trace = Trace::parse_from_bytes(&bytes).expect("a Perfetto trace");
    let mut interned = Vec::new();
    let mut inline = Vec::new();
    let mut by_iid = 0;
    for p in &trace.packet {
        if let Some(i) = p.interned_data.as_ref() {
            interned.extend(i.event_names.iter().map(|n| n.name().to_string()));
        }
        if p.has_track_event() {
            match &p.track_event().name_field {
                Some(Name_field::Name(name)) if !name.starts_with("frame ") => {
                    inline.push(name.clone())
                }
                Some(Name_field::NameIid(_)) => by_iid += 1,
                _ => {}
            }
        }
    }
    assert_eq!(interned, ["short"]);
    assert_eq!(by_iid, 3, "`short` once per frame, by its iid");
    let expected: Vec<String> = (0..3).flat_map(|n| [long(n), long(n)]).collect();
    assert_eq!(inline, expected, "each long name inline in each event");
}

/// At most `MAX_INTERNED_NAMES` names are interned: the names first seen
/// after the table is full are written inline, and every event keeps its
/// name.
#[cfg(feature = "perfetto")]
#[test]
fn perfetto_interns_at_most_max_interned_names() {
    use gpu_counters_profiler::export::perfetto::{PerfettoWriter, MAX_INTERNED_NAMES};
    use perfetto_protos::trace::Trace;
    use perfetto_protos::track_event::track_event::Name_field;
    use protobuf::Message;

    let n = MAX_INTERNED_NAMES + 5;
    let f = TimelineFrame {
        index: 0,
        cpu_submit_ns: 0,
        cpu_complete_ns: 10 * n as u64 + 10,
        intervals: (0..n as u64)
            .map(|k| interval(&format!("pass {k}"), "graphics", 10 * k, 10 * k + 5))
            .collect(),
    };
    let mut w = PerfettoWriter::new(Vec::new());
    w.write_frame("GPU", &f).expect("write the frame");
    let trace = Trace::parse_from_bytes(&w.finish().expect("finish")).expect("a trace");
    let interned: usize = trace
        .packet
        .iter()
        .filter_map(|p| p.interned_data.as_ref())
        .map(|i| i.event_names.len())
        .sum();
    assert_eq!(interned, MAX_INTERNED_NAMES);
    let (mut by_iid, mut inline) = (0, Vec::new());
    for p in trace.packet.iter().filter(|p| p.has_track_event()) {
        match &p.track_event().name_field {
            Some(Name_field::NameIid(_)) => by_iid += 1,
            Some(Name_field::Name(name)) if name.starts_with("pass ") => inline.push(name.clone()),
            _ => {}
        }
    }
    assert_eq!(by_iid, MAX_INTERNED_NAMES);
    let last: Vec<String> = (MAX_INTERNED_NAMES..n)
        .map(|k| format!("pass {k}"))
        .collect();
    assert_eq!(inline, last);
}
