//! An SVG picture of a timeline.
//!
//! A time axis runs along the top; below it each frame is a band, labelled
//! `frame N`, with one lane per queue (named on the left) and nested scopes
//! drawn as deeper rows of their lane. Each interval is a rounded bar
//! coloured by kind (a legend at the bottom says which), labelled with its
//! label and duration where they fit (truncated with an ellipsis where they
//! do not), and has a `<title>` tooltip with the full details. A thin grey
//! bracket under each frame's lanes shows the frame's CPU submit→complete
//! window.
//!
//! With [`SvgOptions::align_frames`] (the default) the axis starts at each
//! frame's CPU submit time, so frames line up and can be compared; without it
//! every frame is drawn on one axis starting at the timeline's start.
//!
//! Bars are `<g class="bar" data-frame=".." data-index="..">` groups holding
//! a `<rect>`, and brackets are `<g class="cpu-window" data-frame="..">`
//! groups, for tools that read the picture back.
//!
//! # Limits and memory
//!
//! The width is at most [`MAX_WIDTH`] pixels (a tick and grid line every
//! 100 pixels or so, so at most about 330 of them) and the title at most
//! [`MAX_TITLE_BYTES`] bytes; past either, [`render_svg`] and [`write_svg`]
//! fail with [`ExportError::OverLimit`] and write nothing. Widths under
//! [`MIN_WIDTH`] are drawn at [`MIN_WIDTH`]. The height follows from the
//! timeline (its frames, queues and nesting), not from an option.
//!
//! [`write_svg`] streams the picture: it keeps the layout (24 bytes per
//! interval, 64 per frame and 32 per queue of a frame) and one frame's (or
//! the axis's) markup at a time, and writes through a buffer of
//! [`BUFFER_BYTES`](super::BUFFER_BYTES). [`render_svg`] returns the whole
//! picture as a `String`.

use super::ExportError;
use gpu_counters_hal::timeline::{PassKind, Timeline, TimelineFrame, TimelineInterval};
use std::fmt::Write as _;
use std::io::{self, Write};

/// The widest picture, in pixels: [`SvgOptions::width`] over it is an
/// [`ExportError::OverLimit`].
pub const MAX_WIDTH: u32 = 32_768;

/// The narrowest picture, in pixels: a smaller [`SvgOptions::width`] is
/// drawn at this width.
pub const MIN_WIDTH: u32 = 480;

/// The longest [`SvgOptions::title`], in bytes of UTF-8: a longer one is an
/// [`ExportError::OverLimit`].
pub const MAX_TITLE_BYTES: usize = 4096;

/// How to draw the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvgOptions {
    /// Width of the picture in pixels (default 1200): at most
    /// [`MAX_WIDTH`]; under [`MIN_WIDTH`], [`MIN_WIDTH`] is used.
    pub width: u32,
    /// Start the axis at each frame's CPU submit time (default `true`);
    /// `false` draws all frames on one axis from the timeline's start.
    pub align_frames: bool,
    /// A title drawn at the top, if any (default none), on one line (line
    /// breaks and tabs drawn as spaces), at most [`MAX_TITLE_BYTES`] bytes.
    pub title: Option<String>,
}

impl SvgOptions {
    /// Checks every option against its limit: [`ExportError::OverLimit`]
    /// names the first one over it.
    pub fn check(&self) -> Result<(), ExportError> {
        super::at_most(
            "SvgOptions::width",
            u64::from(self.width),
            u64::from(MAX_WIDTH),
            "pixels",
        )?;
        if let Some(title) = &self.title {
            super::at_most(
                "SvgOptions::title",
                title.len() as u64,
                MAX_TITLE_BYTES as u64,
                "bytes",
            )?;
        }
        Ok(())
    }
}

impl Default for SvgOptions {
    fn default() -> Self {
        Self {
            width: 1200,
            align_frames: true,
            title: None,
        }
    }
}

// Layout, in pixels.
const GUTTER: f64 = 170.0;
const RIGHT: f64 = 28.0;
const TITLE_H: f64 = 34.0;
const AXIS_H: f64 = 34.0;
const FRAME_HEADER_H: f64 = 24.0;
const ROW_H: f64 = 22.0;
const BAR_H: f64 = 18.0;
const LANE_GAP: f64 = 6.0;
const BRACKET_H: f64 = 26.0;
const FRAME_GAP: f64 = 6.0;
const FOOTER_H: f64 = 54.0;
const FONT: f64 = 12.0;
const SMALL_FONT: f64 = 11.0;
/// Estimated advance of one character, in ems (DejaVu Sans is wide; this
/// errs on the side of truncating).
const CHAR_EM: f64 = 0.62;
const TARGET_TICK_PX: f64 = 100.0;

const TEXT: &str = "#1b1f24";
const MUTED: &str = "#59636e";
const GRID: &str = "#e4e7eb";
const BRACKET: &str = "#8c959f";

/// Fill and stroke colours of a kind.
fn colours(kind: PassKind) -> (&'static str, &'static str) {
    match kind {
        PassKind::Compute => ("#a5d4f3", "#2f7fb5"),
        PassKind::Render => ("#b9e4a9", "#4a9a3c"),
        PassKind::Blit => ("#ffd591", "#c98a1b"),
        PassKind::Scope => ("#e4ddf8", "#8b7cc8"),
    }
}

const KINDS: [PassKind; 4] = [
    PassKind::Compute,
    PassKind::Render,
    PassKind::Blit,
    PassKind::Scope,
];

/// Escapes text for XML content or attributes; characters XML cannot hold
/// become U+FFFD.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Text for one line: line breaks and tabs become spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect()
}

/// A coordinate with two decimals; never NaN or infinite.
fn px(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "0".to_string()
    }
}

/// Estimated width of `chars` characters at `font` pixels.
fn text_width(chars: usize, font: f64) -> f64 {
    chars as f64 * font * CHAR_EM
}

/// The longest prefix of `s` that fits `width` pixels, with an ellipsis if
/// cut; `None` if not even one character and the ellipsis fit.
fn fit(s: &str, width: f64, font: f64) -> Option<String> {
    let n = s.chars().count();
    if text_width(n, font) <= width {
        return Some(s.to_string());
    }
    let keep = (width / (font * CHAR_EM)).floor() as usize;
    if keep < 2 {
        return None;
    }
    let mut out: String = s.chars().take(keep - 1).collect();
    out.push('…');
    Some(out)
}

/// A duration with about three significant digits and a unit.
pub(crate) fn fmt_duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        return format!("{ns:.0} ns");
    } else if a < 1e6 {
        (ns / 1e3, "µs")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if v.abs() < 10.0 {
        2
    } else if v.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.decimals$} {unit}")
}

/// A round tick step (1, 2 or 5 times a power of ten nanoseconds) giving
/// about `target` ticks over `span` nanoseconds.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = (span / target.max(1.0)).max(1.0);
    let exp = raw.log10().floor();
    let base = 10f64.powf(exp);
    let f = raw / base;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * base
}

/// Unit divisor and name for an axis whose largest magnitude is `max_abs`.
fn axis_unit(max_abs: f64) -> (f64, &'static str) {
    if max_abs >= 1e9 {
        (1e9, "s")
    } else if max_abs >= 1e6 {
        (1e6, "ms")
    } else if max_abs >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    }
}

/// Nanoseconds `t - origin`, as a float.
fn rel(t: u64, origin: u64) -> f64 {
    (i128::from(t) - i128::from(origin)) as f64
}

/// One interval placed on a row of its frame band.
struct Placed<'a> {
    index: usize,
    interval: &'a TimelineInterval,
    /// Row within the frame's lanes, counting from the top.
    row: usize,
}

/// One queue's lane in a frame.
struct Lane<'a> {
    queue: &'a str,
    first_row: usize,
    rows: usize,
}

/// A frame laid out into lanes and rows.
struct FrameLayout<'a> {
    frame: &'a TimelineFrame,
    lanes: Vec<Lane<'a>>,
    placed: Vec<Placed<'a>>,
    rows: usize,
}

impl FrameLayout<'_> {
    /// Height of the lanes (at least one row, for the "no intervals" note).
    fn lanes_height(&self) -> f64 {
        let rows = self.rows.max(1) as f64;
        let gaps = self.lanes.len().saturating_sub(1) as f64;
        rows * ROW_H + gaps * LANE_GAP
    }

    /// Height of the whole band.
    fn height(&self) -> f64 {
        FRAME_HEADER_H + self.lanes_height() + BRACKET_H
    }

    /// Top of a row, relative to the top of the lanes.
    fn row_y(&self, row: usize) -> f64 {
        let lane = self
            .lanes
            .iter()
            .position(|l| row >= l.first_row && row < l.first_row + l.rows)
            .unwrap_or(0);
        row as f64 * ROW_H + lane as f64 * LANE_GAP
    }
}

/// Lays out a frame: lanes in `queues` order, and within a lane one group of
/// rows per depth, intervals that overlap at the same depth on separate rows.
fn layout_frame<'a>(frame: &'a TimelineFrame, queues: &[&'a str]) -> FrameLayout<'a> {
    let mut lanes = Vec::new();
    let mut placed = Vec::new();
    let mut next_row = 0;
    for &queue in queues {
        let mut members: Vec<(usize, &TimelineInterval)> = frame
            .intervals
            .iter()
            .enumerate()
            .filter(|(_, i)| i.queue == queue)
            .collect();
        if members.is_empty() {
            continue;
        }
        members.sort_by_key(|(n, i)| (i.depth, i.start_ns, *n));
        let first_row = next_row;
        let mut k = 0;
        while k < members.len() {
            let depth = members[k].1.depth;
            // Row ends of this depth group, to pack overlapping intervals.
            let mut ends: Vec<u64> = Vec::new();
            while k < members.len() && members[k].1.depth == depth {
                let (index, interval) = members[k];
                let slot = match ends.iter().position(|&e| e <= interval.start_ns) {
                    Some(s) => s,
                    None => {
                        ends.push(0);
                        ends.len() - 1
                    }
                };
                if let Some(e) = ends.get_mut(slot) {
                    *e = interval.end_ns.max(interval.start_ns);
                }
                placed.push(Placed {
                    index,
                    interval,
                    row: next_row + slot,
                });
                k += 1;
            }
            next_row += ends.len();
        }
        lanes.push(Lane {
            queue,
            first_row,
            rows: next_row - first_row,
        });
    }
    FrameLayout {
        frame,
        lanes,
        placed,
        rows: next_row,
    }
}

/// Tooltip text for a bar.
fn tooltip(frame: &TimelineFrame, interval: &TimelineInterval) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "{}", interval.label);
    let _ = writeln!(
        t,
        "{} on {} · frame {} · depth {}",
        interval.kind.name(),
        interval.queue,
        frame.index,
        interval.depth
    );
    let _ = writeln!(
        t,
        "start: {} after CPU submit ({} ns CLOCK_MONOTONIC)",
        fmt_duration(rel(interval.start_ns, frame.cpu_submit_ns)),
        interval.start_ns
    );
    let _ = writeln!(
        t,
        "duration: {} ({} ns), ± {} ns",
        fmt_duration(interval.duration_ns() as f64),
        interval.duration_ns(),
        interval.error_bound_ns
    );
    let _ = write!(
        t,
        "ticks: {} → {}",
        interval.start_ticks, interval.end_ticks
    );
    if let Some(thread) = &interval.thread {
        let _ = write!(t, "\nrecorded on thread {thread}");
    }
    if let Some(stats) = &interval.statistics {
        t.push_str("\nstatistics:");
        for (name, value) in stats.named() {
            let _ = write!(t, "\n  {name}: {value}");
        }
    }
    t
}

/// Renders the timeline as an SVG document (see the [module
/// documentation](self)); fails only for an option over its limit.
pub fn render_svg(timeline: &Timeline, opts: &SvgOptions) -> Result<String, ExportError> {
    opts.check()?;
    let mut out = Vec::new();
    draw(timeline, opts, &mut out)?;
    String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e).into())
}

/// Writes the SVG document of [`render_svg`] to `w`, streaming it (see the
/// [module documentation](self)). Buffers internally
/// ([`BUFFER_BYTES`](super::BUFFER_BYTES)), so `w` can be a `File` as it
/// is; flushes `w`. An option over its limit fails before anything is
/// written; a failed write is [`ExportError::Io`] with `w`'s error, and
/// what reached `w` is a prefix of the document.
pub fn write_svg<W: Write + ?Sized>(
    timeline: &Timeline,
    opts: &SvgOptions,
    w: &mut W,
) -> Result<(), ExportError> {
    opts.check()?;
    let mut out = super::buffered(w);
    draw(timeline, opts, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Writes what `s` holds to `out` and empties it.
fn emit(out: &mut dyn Write, s: &mut String) -> io::Result<()> {
    out.write_all(s.as_bytes())?;
    s.clear();
    Ok(())
}

/// [`emit`] once `s` holds a buffer's worth, so that `out` gets writes of
/// [`BUFFER_BYTES`](super::BUFFER_BYTES) or more.
fn emit_full(out: &mut dyn Write, s: &mut String) -> io::Result<()> {
    if s.len() >= super::BUFFER_BYTES {
        emit(out, s)?;
    }
    Ok(())
}

/// Draws the picture into `out`, a frame band (or the axis) at a time.
fn draw(timeline: &Timeline, opts: &SvgOptions, out: &mut dyn Write) -> io::Result<()> {
    let width = f64::from(opts.width.max(MIN_WIDTH));
    let plot_x = GUTTER;
    let plot_w = width - GUTTER - RIGHT;
    let title_h = if opts.title.is_some() { TITLE_H } else { 8.0 };

    let mut s = String::new();
    let header = |s: &mut String, height: f64| {
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Verdana, Helvetica, Arial, sans-serif" font-size="{FONT}">"#,
            w = px(width),
            h = px(height)
        );
        let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
        if let Some(title) = &opts.title {
            let _ = writeln!(
                s,
                r#"<text x="12" y="24" font-size="16" font-weight="bold" fill="{TEXT}">{}</text>"#,
                esc(&one_line(title))
            );
        }
    };

    let (Some(t_start), Some(_)) = (timeline.start_ns(), timeline.end_ns()) else {
        let height = title_h + 100.0;
        header(&mut s, height);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="16" fill="{MUTED}">no data: the timeline has no frames</text>"#,
            px(width / 2.0),
            px(title_h + 50.0)
        );
        s.push_str("</svg>\n");
        return emit(out, &mut s);
    };

    let queues = super::queues_in_order(timeline);
    let layouts: Vec<FrameLayout> = timeline
        .frames
        .iter()
        .map(|f| layout_frame(f, &queues))
        .collect();
    let origin = |f: &TimelineFrame| {
        if opts.align_frames {
            f.cpu_submit_ns
        } else {
            t_start
        }
    };

    // Time domain, nanoseconds relative to the origin.
    let mut lo = 0f64;
    let mut hi = 0f64;
    for f in &timeline.frames {
        let o = origin(f);
        for t in std::iter::once(f.cpu_submit_ns)
            .chain(std::iter::once(f.cpu_complete_ns))
            .chain(f.intervals.iter().flat_map(|i| [i.start_ns, i.end_ns]))
        {
            lo = lo.min(rel(t, o));
            hi = hi.max(rel(t, o));
        }
    }
    let span = (hi - lo).max(1.0);
    let hi = hi + span * 0.02;
    let span = hi - lo;
    let scale = plot_w / span;
    let x_of = |t: f64| plot_x + (t - lo) * scale;

    let bands_h: f64 = layouts.iter().map(|l| l.height() + FRAME_GAP).sum();
    let axis_y = title_h + AXIS_H;
    let bands_top = axis_y + 4.0;
    let height = bands_top + bands_h + FOOTER_H;
    header(&mut s, height);

    // Frame band backgrounds first, so grid lines lie on top of them.
    let mut y = bands_top;
    for (n, l) in layouts.iter().enumerate() {
        let fill = if n % 2 == 0 { "#f6f8fa" } else { "#ffffff" };
        let _ = writeln!(
            s,
            r#"<rect x="0" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
            px(y),
            px(width),
            px(l.height())
        );
        y += l.height() + FRAME_GAP;
    }

    emit_full(out, &mut s)?;

    // Axis: ticks, labels and grid lines.
    let step = nice_step(span, plot_w / TARGET_TICK_PX);
    let (div, unit) = axis_unit(lo.abs().max(hi.abs()));
    let decimals = (-(step / div).log10() - 1e-9).ceil().clamp(0.0, 9.0) as usize;
    let grid_bottom = bands_top + bands_h - FRAME_GAP;
    let _ = writeln!(
        s,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{MUTED}" stroke-width="1"/>"#,
        px(plot_x),
        px(axis_y),
        px(plot_x + plot_w),
        px(axis_y)
    );
    let axis_caption = if opts.align_frames {
        "time since CPU submit"
    } else {
        "time since start"
    };
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end" font-size="{SMALL_FONT}" fill="{MUTED}">{axis_caption}</text>"#,
        px(plot_x - 10.0),
        px(axis_y - 8.0)
    );
    let first_tick = (lo / step).ceil() as i64;
    let last_tick = (hi / step).floor() as i64;
    for k in first_tick..=last_tick {
        let t = k as f64 * step;
        let x = x_of(t);
        let colour = if k == 0 { BRACKET } else { GRID };
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{colour}" stroke-width="1"/>"#,
            px(axis_y),
            px(grid_bottom),
            x = px(x)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{MUTED}" stroke-width="1"/>"#,
            px(axis_y - 4.0),
            px(axis_y),
            x = px(x)
        );
        let v = t / div;
        let label = if k == 0 {
            "0".to_string()
        } else {
            format!("{v:.decimals$} {unit}")
        };
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{SMALL_FONT}" fill="{TEXT}">{label}</text>"#,
            px(x),
            px(axis_y - 8.0)
        );
    }

    emit_full(out, &mut s)?;

    // Frames.
    let mut y = bands_top;
    for l in &layouts {
        let f = l.frame;
        let o = origin(f);
        let lanes_top = y + FRAME_HEADER_H;
        let _ = writeln!(s, r#"<g class="frame" data-frame="{}">"#, f.index);
        let _ = writeln!(
            s,
            r#"<text x="12" y="{}" font-size="13" font-weight="bold" fill="{TEXT}">frame {}</text>"#,
            px(y + 17.0),
            f.index
        );
        let gpu = f
            .intervals
            .iter()
            .map(|i| i.start_ns)
            .min()
            .zip(f.intervals.iter().map(|i| i.end_ns).max());
        let mut summary = format!(
            "CPU submit→complete {}",
            fmt_duration(rel(f.cpu_complete_ns, f.cpu_submit_ns))
        );
        if let Some((a, b)) = gpu {
            let _ = write!(
                summary,
                " · GPU first start→last end {} · {} intervals",
                fmt_duration(rel(b, a)),
                f.intervals.len()
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="{SMALL_FONT}" fill="{MUTED}">{}</text>"#,
            px(plot_x + 4.0),
            px(y + 16.0),
            esc(&summary)
        );

        // Lane names and separators.
        for (n, lane) in l.lanes.iter().enumerate() {
            let ly = lanes_top + l.row_y(lane.first_row);
            if let Some(name) = fit(&one_line(lane.queue), GUTTER - 40.0, FONT) {
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{}" text-anchor="end" fill="{TEXT}">{}</text>"#,
                    px(plot_x - 10.0),
                    px(ly + BAR_H / 2.0 + FONT * 0.36),
                    esc(&name)
                );
            }
            if n > 0 {
                let sy = ly - LANE_GAP / 2.0;
                let _ = writeln!(
                    s,
                    r#"<line x1="24" y1="{y}" x2="{}" y2="{y}" stroke="{GRID}" stroke-width="1" stroke-dasharray="4 3"/>"#,
                    px(width - 8.0),
                    y = px(sy)
                );
            }
        }
        if l.placed.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="{SMALL_FONT}" fill="{MUTED}">no GPU intervals</text>"#,
                px(plot_x + 4.0),
                px(lanes_top + BAR_H / 2.0 + SMALL_FONT * 0.36)
            );
        }

        // Bars.
        for p in &l.placed {
            let i = p.interval;
            let x0 = x_of(rel(i.start_ns, o));
            let w = (i.duration_ns() as f64 * scale).max(1.0);
            let by = lanes_top + l.row_y(p.row) + (ROW_H - BAR_H) / 2.0;
            let (fill, stroke) = colours(i.kind);
            let _ = writeln!(
                s,
                r#"<g class="bar" data-frame="{}" data-index="{}" data-kind="{}">"#,
                f.index,
                p.index,
                i.kind.name()
            );
            let _ = writeln!(s, "<title>{}</title>", esc(&tooltip(f, i)));
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{}" width="{}" height="{}" rx="3" ry="3" fill="{fill}" stroke="{stroke}" stroke-width="1"/>"#,
                px(x0),
                px(by),
                px(w),
                px(BAR_H)
            );
            let label = one_line(&i.label);
            let full = format!("{label}  {}", fmt_duration(i.duration_ns() as f64));
            let room = w - 8.0;
            let text = if text_width(full.chars().count(), FONT) <= room {
                Some(full)
            } else {
                fit(&label, room, FONT)
            };
            if let Some(text) = text {
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{}" fill="{TEXT}">{}</text>"#,
                    px(x0 + 4.0),
                    px(by + BAR_H / 2.0 + FONT * 0.36),
                    esc(&text)
                );
            }
            s.push_str("</g>\n");
        }

        // CPU submit→complete bracket.
        let bx0 = x_of(rel(f.cpu_submit_ns, o));
        let bx1 = x_of(rel(f.cpu_complete_ns, o)).max(bx0);
        let bline = lanes_top + l.lanes_height() + 8.0;
        let _ = writeln!(s, r#"<g class="cpu-window" data-frame="{}">"#, f.index);
        let _ = writeln!(
            s,
            "<title>{}</title>",
            esc(&format!(
                "frame {}: CPU submit {} ns → complete {} ns ({})",
                f.index,
                f.cpu_submit_ns,
                f.cpu_complete_ns,
                fmt_duration(rel(f.cpu_complete_ns, f.cpu_submit_ns))
            ))
        );
        let _ = writeln!(
            s,
            r#"<path d="M{a} {top} L{a} {y} L{b} {y} L{b} {top}" fill="none" stroke="{BRACKET}" stroke-width="1.5"/>"#,
            a = px(bx0),
            b = px(bx1),
            y = px(bline),
            top = px(bline - 5.0)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end" font-size="{SMALL_FONT}" fill="{MUTED}">CPU submit→complete</text>"#,
            px(plot_x - 10.0),
            px(bline + 4.0)
        );
        let cpu_label = fmt_duration(rel(f.cpu_complete_ns, f.cpu_submit_ns));
        let label_w = text_width(cpu_label.chars().count(), SMALL_FONT);
        // Right of the bracket where there is room, else under its right end.
        let (lx, ly, anchor) = if bx1 + 6.0 + label_w <= width - 4.0 {
            (bx1 + 6.0, bline + 4.0, "start")
        } else {
            (bx1, bline + 15.0, "end")
        };
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" font-size="{SMALL_FONT}" fill="{MUTED}">{}</text>"#,
            px(lx),
            px(ly),
            esc(&cpu_label)
        );
        s.push_str("</g>\n</g>\n");
        emit_full(out, &mut s)?;
        y += l.height() + FRAME_GAP;
    }

    // Legend and caption.
    let ly = bands_top + bands_h + 14.0;
    let mut lx = plot_x;
    for kind in KINDS {
        let (fill, stroke) = colours(kind);
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="22" height="12" rx="3" ry="3" fill="{fill}" stroke="{stroke}" stroke-width="1"/>"#,
            px(lx),
            px(ly)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" fill="{TEXT}">{}</text>"#,
            px(lx + 28.0),
            px(ly + 10.5),
            kind.name()
        );
        lx += 28.0 + text_width(kind.name().len(), FONT) + 22.0;
    }
    let _ = writeln!(
        s,
        r#"<path d="M{a} {t} L{a} {y} L{b} {y} L{b} {t}" fill="none" stroke="{BRACKET}" stroke-width="1.5"/>"#,
        a = px(lx),
        b = px(lx + 22.0),
        y = px(ly + 10.0),
        t = px(ly + 5.0)
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" fill="{TEXT}">CPU submit→complete</text>"#,
        px(lx + 28.0),
        px(ly + 10.5)
    );
    let caption = if opts.align_frames {
        format!(
            "{} · t = 0 at each frame's CPU submit (CLOCK_MONOTONIC) · hover a bar for details",
            timeline.device
        )
    } else {
        format!(
            "{} · t = 0 at CLOCK_MONOTONIC {} ns · hover a bar for details",
            timeline.device, t_start
        )
    };
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="{SMALL_FONT}" fill="{MUTED}">{}</text>"#,
        px(plot_x),
        px(ly + 32.0),
        esc(&one_line(&caption))
    );
    s.push_str("</svg>\n");
    emit(out, &mut s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(1000.0, 10.0), 100.0);
        assert_eq!(nice_step(1500.0, 10.0), 200.0);
        assert_eq!(nice_step(4000.0, 10.0), 500.0);
        assert_eq!(nice_step(7000.0, 10.0), 1000.0);
        assert_eq!(nice_step(0.0, 10.0), 1.0);
    }

    #[test]
    fn durations() {
        assert_eq!(fmt_duration(850.0), "850 ns");
        assert_eq!(fmt_duration(12_345.0), "12.3 µs");
        assert_eq!(fmt_duration(1_234_567.0), "1.23 ms");
        assert_eq!(fmt_duration(2_500_000_000.0), "2.50 s");
    }

    #[test]
    fn escaping_and_fitting() {
        assert_eq!(esc("a<b>&\"'\u{1}"), "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}");
        assert_eq!(fit("abcdef", 1000.0, 12.0).as_deref(), Some("abcdef"));
        let cut = fit("abcdefghijkl", text_width(5, 12.0), 12.0);
        assert_eq!(cut.as_deref(), Some("abcd…"));
        assert_eq!(fit("abcdef", 5.0, 12.0), None);
    }
}
