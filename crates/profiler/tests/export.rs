//! Exporters: Chrome trace JSON, CSV and SVG, on timelines built by hand.

use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use gpu_counters_profiler::export::{
    chrome, render_svg, to_chrome_trace_json, write_chrome_trace, write_csv, write_svg, SvgOptions,
    CSV_HEADER,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const NASTY: &str = "blur, \"wide\" <&> pass";
const MULTILINE: &str = "two\nlines";
const GRAPHICS: &str = "graphics";
const COMPUTE: &str = "async compute";

#[allow(clippy::too_many_arguments)]
fn iv(
    label: &str,
    kind: PassKind,
    queue: &str,
    depth: u32,
    parent: Option<usize>,
    start_ns: u64,
    end_ns: u64,
    statistics: Option<CounterResultStatistic>,
) -> TimelineInterval {
    TimelineInterval {
        label: label.to_string(),
        kind,
        queue: queue.to_string(),
        depth,
        parent,
        thread: None,
        start_ns,
        end_ns,
        // Distinct from the nanoseconds, so a mix-up shows.
        start_ticks: start_ns / 32 + 7,
        end_ticks: end_ns / 32 + 7,
        error_bound_ns: 1_500,
        statistics,
    }
}

fn draw_stats(k: u64) -> CounterResultStatistic {
    CounterResultStatistic {
        vertex_invocations: 300 * k,
        clipper_invocations: 100 * k,
        fragment_invocations: 5_000 * k,
        fragments_passed: 4_000 * k,
        ..Default::default()
    }
}

fn dispatch_stats(k: u64) -> CounterResultStatistic {
    CounterResultStatistic {
        compute_kernel_invocations: 4096 * k,
        ..Default::default()
    }
}

/// Three frames, two queues, scopes nested two deep, statistics on some
/// passes, awkward labels. Every frame's intervals sit at the same offsets
/// from its CPU submit, with sub-microsecond digits.
fn sample() -> Timeline {
    let mut frames = Vec::new();
    for n in 0..3u64 {
        let submit = 5_000_000_123 + n * 16_666_667;
        let t = |off: u64| submit + off;
        frames.push(TimelineFrame {
            index: 10 + n,
            cpu_submit_ns: submit,
            cpu_complete_ns: t(2_400_000),
            intervals: vec![
                iv(
                    "frame",
                    PassKind::Scope,
                    GRAPHICS,
                    0,
                    None,
                    t(50_001),
                    t(2_000_999),
                    None,
                ),
                iv(
                    "shadows",
                    PassKind::Render,
                    GRAPHICS,
                    1,
                    Some(0),
                    t(60_250),
                    t(700_500),
                    Some(draw_stats(n + 1)),
                ),
                iv(
                    "post",
                    PassKind::Scope,
                    GRAPHICS,
                    1,
                    Some(0),
                    t(710_000),
                    t(1_900_000),
                    None,
                ),
                iv(
                    NASTY,
                    PassKind::Compute,
                    GRAPHICS,
                    2,
                    Some(2),
                    t(720_000),
                    t(1_300_123),
                    Some(dispatch_stats(n + 1)),
                ),
                iv(
                    "copy out",
                    PassKind::Blit,
                    GRAPHICS,
                    2,
                    Some(2),
                    t(1_310_000),
                    t(1_890_000),
                    None,
                ),
                iv(
                    "simulate",
                    PassKind::Compute,
                    COMPUTE,
                    0,
                    None,
                    t(100_000),
                    t(900_777),
                    Some(dispatch_stats(2)),
                ),
                iv(
                    MULTILINE,
                    PassKind::Compute,
                    COMPUTE,
                    0,
                    None,
                    t(950_000),
                    t(1_200_000),
                    None,
                ),
            ],
        });
    }
    Timeline {
        device: "Test GPU <1>".to_string(),
        frames,
    }
}

fn all_intervals(t: &Timeline) -> Vec<(u64, &TimelineInterval)> {
    t.frames
        .iter()
        .flat_map(|f| f.intervals.iter().map(move |i| (f.index, i)))
        .collect()
}

// ---------------------------------------------------------------- chrome

fn chrome_events(t: &Timeline) -> Vec<Value> {
    let mut bytes = Vec::new();
    write_chrome_trace(t, &mut bytes).unwrap();
    let v: Value = serde_json::from_slice(&bytes).expect("trace is JSON");
    assert_eq!(v, to_chrome_trace_json(t));
    assert_eq!(v["displayTimeUnit"], "ns");
    assert!(v["metadata"].is_object());
    v["traceEvents"].as_array().expect("traceEvents").clone()
}

fn thread_names(events: &[Value]) -> BTreeMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn chrome_complete_events_carry_times_in_microseconds_and_raw_ticks() {
    let t = sample();
    let events = chrome_events(&t);
    let names = thread_names(&events);
    let xs: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "cpu")
        .collect();
    let input = all_intervals(&t);
    assert_eq!(xs.len(), input.len());
    for (frame, i) in input {
        let e = xs
            .iter()
            .find(|e| e["args"]["frame"] == frame && e["name"] == i.label.as_str())
            .unwrap_or_else(|| panic!("no event for {:?} in frame {frame}", i.label));
        assert_eq!(e["ts"].as_f64().unwrap(), i.start_ns as f64 / 1000.0);
        assert_eq!(e["dur"].as_f64().unwrap(), i.duration_ns() as f64 / 1000.0);
        assert!(
            e["ts"].as_f64().unwrap().fract() != 0.0,
            "sub-µs digits kept"
        );
        assert_eq!(e["cat"], i.kind.name());
        assert_eq!(e["pid"], chrome::GPU_PID);
        assert_eq!(names[&e["tid"].as_u64().unwrap()], i.queue);
        let args = &e["args"];
        assert_eq!(args["start_ticks"], i.start_ticks);
        assert_eq!(args["end_ticks"], i.end_ticks);
        assert_eq!(args["start_ns"], i.start_ns);
        assert_eq!(args["end_ns"], i.end_ns);
        assert_eq!(args["duration_ns"], i.duration_ns());
        assert_eq!(args["error_bound_ns"], i.error_bound_ns);
        match &i.statistics {
            Some(s) => {
                for (name, value) in s.named() {
                    assert_eq!(args[name], value, "{name} of {:?}", i.label);
                }
            }
            None => assert!(args.get("vertex_invocations").is_none()),
        }
    }
}

#[test]
fn chrome_has_one_track_per_queue_and_a_cpu_track() {
    let t = sample();
    let events = chrome_events(&t);
    let names = thread_names(&events);
    let queue_tids: BTreeSet<u64> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "cpu")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(queue_tids.len(), 2, "one tid per queue");
    let queue_names: BTreeSet<&str> = queue_tids.iter().map(|t| names[t].as_str()).collect();
    assert_eq!(queue_names, BTreeSet::from([GRAPHICS, COMPUTE]));
    assert!(events.iter().any(|e| e["ph"] == "M"
        && e["name"] == "process_name"
        && e["args"]["name"] == "GPU Test GPU <1>"));
    let sort_tids: BTreeSet<u64> = events
        .iter()
        .filter(|e| e["name"] == "thread_sort_index")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert!(queue_tids.is_subset(&sort_tids));

    // The CPU window of every frame, on its own track.
    let cpu: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cpu")
        .collect();
    assert_eq!(cpu.len(), t.frames.len());
    for (e, f) in cpu.iter().zip(&t.frames) {
        let tid = e["tid"].as_u64().unwrap();
        assert!(!queue_tids.contains(&tid));
        assert_eq!(names[&tid], chrome::CPU_TRACK_NAME);
        assert_eq!(e["ts"].as_f64().unwrap(), f.cpu_submit_ns as f64 / 1000.0);
        assert_eq!(
            e["dur"].as_f64().unwrap(),
            (f.cpu_complete_ns - f.cpu_submit_ns) as f64 / 1000.0
        );
    }

    // Metadata first, then everything sorted by ts; a parent precedes the
    // children that start with it, and children lie inside their parent.
    let first_timed = events.iter().position(|e| e["ph"] != "M").unwrap();
    assert!(events[first_timed..].iter().all(|e| e["ph"] != "M"));
    let ts: Vec<f64> = events[first_timed..]
        .iter()
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "sorted by ts");
    let find = |frame: u64, label: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "X" && e["args"]["frame"] == frame && e["name"] == label)
            .unwrap()
    };
    let (post, nasty) = (find(11, "post"), find(11, NASTY));
    assert_eq!(post["tid"], nasty["tid"]);
    let (p0, p1) = (post["ts"].as_f64().unwrap(), post["dur"].as_f64().unwrap());
    let (c0, c1) = (
        nasty["ts"].as_f64().unwrap(),
        nasty["dur"].as_f64().unwrap(),
    );
    assert!(p0 <= c0 && c0 + c1 <= p0 + p1);
}

#[test]
fn chrome_statistics_are_counter_steps() {
    let t = sample();
    let events = chrome_events(&t);
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert!(!counters.is_empty());
    for c in &counters {
        let args = c["args"].as_object().unwrap();
        assert!(!args.is_empty());
        assert!(args.values().all(Value::is_number), "numeric args: {c}");
    }
    // At each interval with statistics: its values at its start, 0 at its end
    // unless another interval with statistics continues there.
    for (frame, i) in all_intervals(&t) {
        let Some(stats) = i.statistics else { continue };
        let at = |ns: u64| {
            counters
                .iter()
                .find(|c| {
                    c["name"] == i.queue.as_str() && c["ts"].as_f64() == Some(ns as f64 / 1000.0)
                })
                .unwrap_or_else(|| panic!("no counter at {ns} for {:?} frame {frame}", i.label))
        };
        for (name, value) in stats.named() {
            if value != 0 {
                assert_eq!(at(i.start_ns)["args"][name], value);
                assert_eq!(at(i.end_ns)["args"][name], 0);
            }
        }
    }
    let last_graphics = counters
        .iter()
        .rev()
        .find(|c| c["name"] == GRAPHICS)
        .unwrap();
    assert!(last_graphics["args"]
        .as_object()
        .unwrap()
        .values()
        .all(|v| v == 0));
}

#[test]
fn chrome_empty_timeline_is_valid() {
    let events = chrome_events(&Timeline::default());
    assert!(events.iter().all(|e| e["ph"] == "M"));
}

// ---------------------------------------------------------------- csv

#[test]
fn csv_has_header_rows_and_round_trips_quoted_labels() {
    let t = sample();
    let mut bytes = Vec::new();
    write_csv(&t, &mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let stat_names: Vec<&str> = CounterResultStatistic::default()
        .named()
        .iter()
        .map(|(n, _)| *n)
        .collect();
    let mut expected_header = "frame,label,kind,queue,depth,start_ns,end_ns,duration_ns,start_ticks,end_ticks,error_bound_ns".to_string();
    for n in &stat_names {
        expected_header.push(',');
        expected_header.push_str(n);
    }
    assert_eq!(text.lines().next(), Some(expected_header.as_str()));
    assert_eq!(CSV_HEADER.join(","), expected_header);
    assert!(
        text.contains("\"blur, \"\"wide\"\" <&> pass\""),
        "RFC 4180 quoting"
    );

    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let input = all_intervals(&t);
    assert_eq!(rows.len(), input.len());
    for (row, (frame, i)) in rows.iter().zip(input) {
        assert_eq!(row.len(), 19);
        assert_eq!(&row[0], frame.to_string());
        assert_eq!(&row[1], i.label);
        assert_eq!(&row[2], i.kind.name());
        assert_eq!(&row[3], i.queue);
        assert_eq!(&row[4], i.depth.to_string());
        assert_eq!(&row[5], i.start_ns.to_string());
        assert_eq!(&row[6], i.end_ns.to_string());
        assert_eq!(&row[7], i.duration_ns().to_string());
        assert_eq!(&row[8], i.start_ticks.to_string());
        assert_eq!(&row[9], i.end_ticks.to_string());
        assert_eq!(&row[10], i.error_bound_ns.to_string());
        for k in 0..8 {
            let cell = &row[11 + k];
            match &i.statistics {
                Some(s) => assert_eq!(cell, s.to_array()[k].to_string()),
                None => assert_eq!(cell, ""),
            }
        }
    }
    assert!(rows.iter().any(|r| &r[1] == NASTY));
    assert!(rows.iter().any(|r| &r[1] == MULTILINE));
}

#[test]
fn csv_empty_timeline_is_just_the_header() {
    let mut bytes = Vec::new();
    write_csv(&Timeline::default(), &mut bytes).unwrap();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        CSV_HEADER.join(",") + "\n"
    );
}

// ---------------------------------------------------------------- svg

fn attr_f64(node: roxmltree::Node, name: &str) -> f64 {
    node.attribute(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .parse()
        .unwrap()
}

/// `(x, width)` of the bar of interval `index` in frame `frame`.
fn bar(doc: &roxmltree::Document, frame: u64, index: usize) -> (f64, f64) {
    let g = doc
        .descendants()
        .find(|n| {
            n.attribute("class") == Some("bar")
                && n.attribute("data-frame") == Some(frame.to_string().as_str())
                && n.attribute("data-index") == Some(index.to_string().as_str())
        })
        .unwrap_or_else(|| panic!("no bar {frame}/{index}"));
    let rect = g.children().find(|n| n.has_tag_name("rect")).unwrap();
    (attr_f64(rect, "x"), attr_f64(rect, "width"))
}

/// x of the start of frame `frame`'s CPU submit→complete bracket.
fn bracket_x(doc: &roxmltree::Document, frame: u64) -> f64 {
    let g = doc
        .descendants()
        .find(|n| {
            n.attribute("class") == Some("cpu-window")
                && n.attribute("data-frame") == Some(frame.to_string().as_str())
        })
        .unwrap();
    let d = g
        .children()
        .find(|n| n.has_tag_name("path"))
        .unwrap()
        .attribute("d")
        .unwrap();
    d.trim_start_matches('M')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.011
}

/// Pixels per nanosecond, known from a bar `width` px wide for `ns`: the
/// bounds its two-decimal rounding allows.
struct Scale(f64, f64);

impl Scale {
    fn from_bar(width: f64, ns: u64) -> Self {
        Scale((width - 0.005) / ns as f64, (width + 0.005) / ns as f64)
    }

    /// Whether `px` pixels (a difference of two rounded coordinates) is
    /// `ns` nanoseconds.
    fn is(&self, px: f64, ns: u64) -> bool {
        let ns = ns as f64;
        ns * self.0 - 0.011 <= px && px <= ns * self.1 + 0.011
    }
}

#[test]
fn svg_is_xml_with_every_label_escaped() {
    let t = sample();
    let svg = render_svg(&t, &SvgOptions::default()).expect("render");
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    assert!(doc.root_element().has_tag_name("svg"));
    assert!(svg.contains("blur, &quot;wide&quot; &lt;&amp;&gt; pass"));
    assert!(!svg.contains("<&>"));
    let tooltips: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    for (frame, i) in all_intervals(&t) {
        assert!(
            tooltips
                .iter()
                .any(|tt| tt.starts_with(&format!("{}\n", i.label))
                    && tt.contains(&format!("frame {frame}"))),
            "tooltip of {:?}",
            i.label
        );
    }
    // Labels of wide bars are drawn in full, with their duration.
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    assert!(texts
        .iter()
        .any(|t| t.starts_with("simulate") && t.ends_with(" µs")));
    for n in 10..13 {
        assert!(texts.contains(&format!("frame {n}").as_str()));
    }
    assert!(texts.contains(&GRAPHICS) && texts.contains(&COMPUTE));
    let mut out = Vec::new();
    write_svg(&t, &SvgOptions::default(), &mut out).unwrap();
    assert_eq!(out, svg.as_bytes());
}

#[test]
fn svg_bars_are_proportional_to_time_and_frames_align() {
    let t = sample();
    let svg = render_svg(&t, &SvgOptions::default()).expect("render");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let f = &t.frames[0];
    let (a, b) = (&f.intervals[1], &f.intervals[3]);
    let (xa, wa) = bar(&doc, 10, 1);
    let (xb, wb) = bar(&doc, 10, 3);
    let scale = Scale::from_bar(wa, a.duration_ns());
    assert!(wa > 5.0);
    assert!(scale.is(wb, b.duration_ns()), "width ∝ duration");
    assert!(scale.is(xb - xa, b.start_ns - a.start_ns), "x ∝ start");
    let x0 = bracket_x(&doc, 10);
    assert!(
        scale.is(xa - x0, a.start_ns - f.cpu_submit_ns),
        "origin at submit"
    );
    // Aligned frames: the same offset from submit is the same x.
    for frame in 11..13 {
        assert!(close(bar(&doc, frame, 1).0, xa));
        assert!(close(bracket_x(&doc, frame), x0));
    }
    // Bars stay inside the picture.
    let width = attr_f64(doc.root_element(), "width");
    assert_eq!(width, 1200.0);
    for g in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("bar"))
    {
        let r = g.children().find(|n| n.has_tag_name("rect")).unwrap();
        assert!(attr_f64(r, "x") >= 0.0 && attr_f64(r, "x") + attr_f64(r, "width") <= width);
    }
}

#[test]
fn svg_unaligned_uses_one_axis() {
    let t = sample();
    let opts = SvgOptions {
        width: 900,
        align_frames: false,
        title: Some("a <title> & more".to_string()),
    };
    let svg = render_svg(&t, &opts).expect("render");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("a &lt;title&gt; &amp; more"));
    assert_eq!(attr_f64(doc.root_element(), "width"), 900.0);
    let (x10, w10) = bar(&doc, 10, 1);
    let (x12, _) = bar(&doc, 12, 1);
    let scale = Scale::from_bar(w10, t.frames[0].intervals[1].duration_ns());
    let shift = t.frames[2].cpu_submit_ns - t.frames[0].cpu_submit_ns;
    assert!(
        scale.is(x12 - x10, shift),
        "{} px for {shift} ns",
        x12 - x10
    );
    assert!(scale.is(bracket_x(&doc, 12) - bracket_x(&doc, 10), shift));
}

#[test]
fn svg_empty_timeline_says_no_data() {
    let svg = render_svg(&Timeline::default(), &SvgOptions::default()).expect("render");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(doc
        .descendants()
        .any(|n| n.text().is_some_and(|t| t.contains("no data"))));

    // A frame without intervals still draws its CPU window.
    let t = Timeline {
        device: "d".into(),
        frames: vec![TimelineFrame {
            index: 0,
            cpu_submit_ns: 10,
            cpu_complete_ns: 10,
            intervals: vec![],
        }],
    };
    let svg = render_svg(
        &t,
        &SvgOptions {
            width: 1,
            ..Default::default()
        },
    )
    .expect("render");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("no GPU intervals"));
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
    bracket_x(&doc, 0);
}

#[test]
fn svg_renders_with_resvg() {
    let t = sample();
    let svg = render_svg(&t, &SvgOptions::default()).expect("render");
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(&svg, &options).expect("resvg parses the SVG");
    let size = tree.size().to_int_size();
    assert_eq!(size.width(), 1200);
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    // The bars' fill colours are on the canvas.
    let compute = [0xa5, 0xd4, 0xf3];
    let render = [0xb9, 0xe4, 0xa9];
    let has = |c: [u8; 3]| {
        pixmap
            .pixels()
            .iter()
            .any(|p| [p.red(), p.green(), p.blue()] == c)
    };
    assert!(has(compute) && has(render));
    let png = pixmap.encode_png().unwrap();
    assert!(png.starts_with(b"\x89PNG"));
}
