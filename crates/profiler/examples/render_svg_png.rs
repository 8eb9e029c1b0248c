//! Renders a sample timeline to SVG and PNG so a person can look at it.
//!
//! ```text
//! cargo run -p gpu-counters-profiler --example render_svg_png [OUT.png] [--unaligned]
//! ```
//!
//! Writes `OUT.png` (default `/tmp/timeline_sample.png`) and the SVG next to
//! it. Text needs system fonts (Debian: `fonts-dejavu-core`).

use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use gpu_counters_profiler::export::{render_svg, SvgOptions};
use std::error::Error;
use std::path::PathBuf;

#[allow(clippy::too_many_arguments)]
fn interval(
    label: &str,
    kind: PassKind,
    queue: &str,
    depth: u32,
    parent: Option<usize>,
    start_ns: u64,
    end_ns: u64,
    statistics: Option<CounterResultStatistic>,
) -> TimelineInterval {
    // A 1 GHz device clock that started 5 s before CLOCK_MONOTONIC's zero.
    let ticks = |ns: u64| ns + 5_000_000_000;
    TimelineInterval {
        label: label.to_string(),
        kind,
        queue: queue.to_string(),
        depth,
        parent,
        thread: Some("render-thread".to_string()),
        start_ns,
        end_ns,
        start_ticks: ticks(start_ns),
        end_ticks: ticks(end_ns),
        error_bound_ns: 15_000,
        statistics,
    }
}

fn sample() -> Timeline {
    let mut frames = Vec::new();
    for n in 0..3u64 {
        let submit = 1_000_000_000 + n * 16_600_000;
        let jitter = n * 180_000;
        let t = |us: u64| submit + us * 1_000;
        let draw = CounterResultStatistic {
            vertex_invocations: 3 * 40_000,
            clipper_invocations: 40_000,
            clipper_primitives_out: 38_000 + n * 100,
            fragment_invocations: 2_073_600,
            fragments_passed: 1_900_000,
            ..Default::default()
        };
        let dispatch = CounterResultStatistic {
            compute_kernel_invocations: 1 << 20,
            ..Default::default()
        };
        let intervals = vec![
            interval(
                "frame",
                PassKind::Scope,
                "graphics",
                0,
                None,
                t(120),
                t(9_800) + jitter,
                None,
            ),
            interval(
                "shadow maps",
                PassKind::Render,
                "graphics",
                1,
                Some(0),
                t(130),
                t(1_900),
                Some(draw),
            ),
            interval(
                "G-buffer",
                PassKind::Render,
                "graphics",
                1,
                Some(0),
                t(1_950),
                t(4_700) + jitter,
                Some(draw),
            ),
            interval(
                "lighting",
                PassKind::Scope,
                "graphics",
                1,
                Some(0),
                t(4_750) + jitter,
                t(8_200) + jitter,
                None,
            ),
            interval(
                "tiled lights",
                PassKind::Compute,
                "graphics",
                2,
                Some(3),
                t(4_760) + jitter,
                t(6_900) + jitter,
                Some(dispatch),
            ),
            interval(
                "SSAO, blur",
                PassKind::Compute,
                "graphics",
                2,
                Some(3),
                t(6_920) + jitter,
                t(8_100) + jitter,
                Some(dispatch),
            ),
            interval(
                "tonemap",
                PassKind::Render,
                "graphics",
                1,
                Some(0),
                t(8_250) + jitter,
                t(9_100) + jitter,
                Some(draw),
            ),
            interval(
                "UI",
                PassKind::Render,
                "graphics",
                1,
                Some(0),
                t(9_120) + jitter,
                t(9_300) + jitter,
                None,
            ),
            interval(
                "present blit",
                PassKind::Blit,
                "graphics",
                1,
                Some(0),
                t(9_320) + jitter,
                t(9_790) + jitter,
                None,
            ),
            interval(
                "particles sim",
                PassKind::Compute,
                "async compute",
                0,
                None,
                t(400),
                t(3_600),
                Some(dispatch),
            ),
            interval(
                "cull \"instances\" <&>",
                PassKind::Compute,
                "async compute",
                0,
                None,
                t(3_700),
                t(4_300),
                Some(dispatch),
            ),
            interval(
                "upload textures",
                PassKind::Blit,
                "transfer",
                0,
                None,
                t(50),
                t(2_400 + n * 600),
                None,
            ),
        ];
        frames.push(TimelineFrame {
            index: 100 + n,
            cpu_submit_ns: submit,
            cpu_complete_ns: t(10_400) + jitter,
            intervals,
        });
    }
    Timeline {
        device: "NVIDIA H200 (sample data)".to_string(),
        frames,
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let align_frames = !args.iter().any(|a| a == "--unaligned");
    let png = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/timeline_sample.png"));
    let opts = SvgOptions {
        align_frames,
        title: Some("gpu-counters: sample timeline".to_string()),
        ..SvgOptions::default()
    };
    let svg = render_svg(&sample(), &opts)?;
    std::fs::write(png.with_extension("svg"), &svg)?;

    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    if options.fontdb.is_empty() {
        eprintln!("warning: no system fonts found; install fonts-dejavu-core to draw text");
    }
    let tree = resvg::usvg::Tree::from_str(&svg, &options)?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or("the picture has no area")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.save_png(&png)?;
    println!(
        "wrote {} and {}",
        png.display(),
        png.with_extension("svg").display()
    );
    Ok(())
}
