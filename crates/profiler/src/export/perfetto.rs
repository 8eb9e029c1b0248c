//! Perfetto's native protobuf trace, written frame by frame through
//! [`GpuTraceWriter`], the writer `gpu-counters record` writes its traces
//! with: one encoder of Perfetto's model for both.
//!
//! Open the file in <https://ui.perfetto.dev> (or `trace_processor`). Unlike
//! the Chrome JSON export, which Perfetto imports "best effort", this is the
//! format Perfetto itself records, so large traces and overlapping intervals
//! load as they are.
//!
//! # Layout
//!
//! Every packet is on one trusted sequence; the first sets
//! `BUILTIN_CLOCK_MONOTONIC`, the clock of the timeline, as every packet's
//! clock (the sequence's packet defaults) and, in a clock snapshot, as the
//! trace's primary clock, so the times Perfetto shows are the timeline's
//! `CLOCK_MONOTONIC` nanoseconds, unconverted.
//!
//! - one track per device, `GPU <device>`, grouping:
//!   - `CPU submit→complete`: one slice per frame (`frame N`) from its CPU
//!     submit to its CPU completion time;
//!   - one track per queue, named after the queue, with a slice per interval
//!     (TrackEvent `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END`, nested as the
//!     intervals nest), its name the label and its category the kind;
//!   - one counter track per queue and statistic, `<queue> <statistic>`,
//!     stepping as the Chrome export's counters do (the innermost running
//!     interval's value, 0 when none runs); a statistic gets its track the
//!     first time it is not 0 on the queue, and values that are
//!     [`COUNTER_ERROR_VALUE`](gpu_counters_hal::COUNTER_ERROR_VALUE) (not counted) are left out;
//! - intervals that overlap without nesting (frames in flight, two command
//!   buffers) go on extra tracks beside their queue's, `<queue> (overlap N)`
//!   (`CPU submit→complete (overlap N)` for frames), since a Perfetto track's
//!   slices must nest.
//!
//! Every slice carries debug annotations: for an interval `frame`, `depth`,
//! `thread` (where known), `start_ns`, `end_ns`, `duration_ns`,
//! `start_ticks`, `end_ticks` (raw GPU ticks), `error_bound_ns` and its
//! statistics by name; for a frame `frame`, `cpu_submit_ns`,
//! `cpu_complete_ns`, `duration_ns`, `intervals` and, when it has intervals,
//! `gpu_start_ns` and `gpu_end_ns`.
//!
//! # Bounded memory
//!
//! [`PerfettoWriter`] encodes each frame's packets as the frame arrives and
//! writes them through a buffer of [`BUFFER_BYTES`](super::BUFFER_BYTES),
//! so a frame costs about what a `BufWriter` write does, whatever the
//! writer; the buffer reaches the writer when full, at
//! [`PerfettoWriter::flush`] and at [`PerfettoWriter::finish`]. What it
//! keeps between frames is per track (devices, queues, overlap lanes,
//! counter tracks: one entry per distinct name it was given) and
//! [`GpuTraceWriter`]'s tables of interned names: at most
//! [`MAX_INTERNED_NAMES`] slice names of at most [`MAX_INTERNED_NAME_BYTES`]
//! bytes each (under 24 MiB with the table's own overhead; other names are
//! written inline in their events), and the few categories and annotation
//! names. A trace of any number of frames is written in memory bounded by
//! the largest frame, the tracks and those tables.
//!
//! # Why `perfetto_protos`
//!
//! The messages are those of the `perfetto_protos` crate: Rust bindings
//! generated at build time (by rust-protobuf, with a vendored `protoc`) from
//! Perfetto's own, unmodified `.proto` files (Perfetto v51). It is the one
//! crate on crates.io that ships Perfetto's trace schema as plain messages;
//! `perfetto-sdk` (Google's) records live in-process through the Perfetto C
//! library rather than writing a trace from data we already hold, and the
//! other crates bundle hand-picked subsets inside unrelated frameworks.

use super::lanes::{frame_queues, queue_items, LaneEvent, Lanes};
use super::perfetto_gpu::{
    AnnotationValue, ClockReadings, CounterUnit, GpuTraceWriter, Slice, TrackSpec, TrackUuid,
};
use super::Fused;
use gpu_counters_hal::timeline::{Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use std::io::{self, BufWriter, Write};
use thiserror::Error;

pub use super::perfetto_gpu::{MAX_INTERNED_NAMES, MAX_INTERNED_NAME_BYTES};
pub use super::CPU_TRACK_NAME;

/// The first track uuid (the rest count up from it): an arbitrary constant,
/// so that the tracks of a trace are the same from one run to the next and
/// unlikely to meet uuids of a trace this one is merged with.
const FIRST_UUID: u64 = 0x6770_7563_6e74_0001;

/// What can go wrong writing a Perfetto trace.
#[derive(Debug, Error)]
pub enum PerfettoError {
    /// Writing to the output failed.
    #[error("writing the Perfetto trace: {0}")]
    Io(#[from] io::Error),
    /// Encoding a packet failed (the protobuf library's error, which also
    /// carries output errors it met).
    #[error("encoding the Perfetto trace: {0}")]
    Encode(#[from] protobuf::Error),
}

impl From<PerfettoError> for io::Error {
    fn from(e: PerfettoError) -> Self {
        match e {
            PerfettoError::Io(e) => e,
            PerfettoError::Encode(e) => io::Error::other(e),
        }
    }
}

/// The trace writer's error, typed: an encoding error that it carried
/// inside an [`io::Error`] comes out as [`PerfettoError::Encode`].
fn typed(e: io::Error) -> PerfettoError {
    if !e.get_ref().is_some_and(|r| r.is::<protobuf::Error>()) {
        return PerfettoError::Io(e);
    }
    match e.into_inner().map(|r| r.downcast::<protobuf::Error>()) {
        Some(Ok(p)) => PerfettoError::Encode(*p),
        Some(Err(r)) => PerfettoError::Io(io::Error::other(r)),
        None => PerfettoError::Io(io::Error::other("encoding the Perfetto trace")),
    }
}

/// The result type of this module.
pub type Result<T, E = PerfettoError> = std::result::Result<T, E>;

/// The output before the first packet, then the trace writer on it.
enum Output<W: Write> {
    Idle(BufWriter<Fused<W>>),
    Writing(Box<GpuTraceWriter<BufWriter<Fused<W>>>>),
    /// Starting the trace failed: the output went with the error.
    Lost,
}

/// One logical track and its overlap lanes (lane 0 is the track itself).
#[derive(Debug)]
struct LaneTracks {
    name: String,
    uuids: Vec<TrackUuid>,
    lanes: Lanes<usize>,
}

impl LaneTracks {
    fn new(name: String) -> Self {
        Self {
            name,
            uuids: Vec::new(),
            lanes: Lanes::default(),
        }
    }
}

#[derive(Debug)]
struct QueueTracks {
    slices: LaneTracks,
    /// Counter track uuid per statistic, once it has one.
    counters: [Option<TrackUuid>; CounterResultStatistic::FIELDS],
}

#[derive(Debug)]
struct DeviceTracks {
    name: String,
    uuid: TrackUuid,
    cpu: LaneTracks,
    queues: Vec<QueueTracks>,
    /// Next `sibling_order_rank` of a child track.
    next_rank: i32,
}

/// A streaming Perfetto trace writer (see the [module documentation](self)
/// for the layout): [`PerfettoWriter::write_frame`] as frames arrive, then
/// [`PerfettoWriter::finish`].
pub struct PerfettoWriter<W: Write> {
    out: Output<W>,
    devices: Vec<DeviceTracks>,
}

impl<W: Write> std::fmt::Debug for PerfettoWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfettoWriter")
            .field("devices", &self.devices)
            .field("packets", &self.packets())
            .finish_non_exhaustive()
    }
}

/// Writes `timeline` as a Perfetto trace to `w` (see the
/// [module documentation](self)). Buffers internally
/// ([`BUFFER_BYTES`](super::BUFFER_BYTES)), so `w` can be a `File` as it
/// is; flushes `w`. A failed write is returned as `w`'s error, and what
/// reached `w` is a prefix of the trace.
pub fn write_perfetto<W: Write + ?Sized>(timeline: &Timeline, w: &mut W) -> io::Result<()> {
    let mut writer = PerfettoWriter::new(w);
    writer.write_timeline(timeline)?;
    writer.finish()?;
    Ok(())
}

fn lane_of<T>(e: &LaneEvent<T>) -> usize {
    match e {
        LaneEvent::Begin { lane, .. } | LaneEvent::End { lane, .. } => *lane,
    }
}

impl<W: Write> PerfettoWriter<W> {
    /// A writer that writes to `out` through its buffer; nothing is
    /// written before the first frame (or [`PerfettoWriter::finish`]).
    pub fn new(out: W) -> Self {
        Self {
            out: Output::Idle(super::buffered(out)),
            devices: Vec::new(),
        }
    }

    /// Packets written so far (including those still buffered).
    pub fn packets(&self) -> u64 {
        match &self.out {
            Output::Writing(w) => w.packets_written(),
            Output::Idle(_) | Output::Lost => 0,
        }
    }

    /// Writes every frame of `timeline`, on its device.
    pub fn write_timeline(&mut self, timeline: &Timeline) -> Result<()> {
        for frame in &timeline.frames {
            self.write_frame(&timeline.device, frame)?;
        }
        Ok(())
    }

    /// Writes one frame of the device named `device`: its CPU window, its
    /// intervals on their queues' tracks, and its statistics as counter
    /// steps. Frames should come oldest first, as a profiler collects them;
    /// a frame overlapping an earlier one goes on overlap tracks.
    pub fn write_frame(&mut self, device: &str, frame: &TimelineFrame) -> Result<()> {
        self.start(frame.cpu_submit_ns)?;
        let d = self.device(device)?;

        // The CPU window.
        let mut events = Vec::new();
        let window = [(frame.cpu_submit_ns, frame.cpu_complete_ns, 0usize)];
        self.devices[d].cpu.lanes.place(window, |e| events.push(e));
        for e in events.drain(..) {
            let uuid = self.lane_uuid(d, None, lane_of(&e))?;
            match e {
                LaneEvent::Begin { at, .. } => self.frame_begin(uuid, at, frame)?,
                LaneEvent::End { at, .. } => self.slice_end(uuid, at)?,
            }
        }

        // The intervals, queue by queue in order of first appearance.
        for queue in frame_queues(frame) {
            let q = self.queue(d, queue)?;
            let items = queue_items(frame, queue);
            self.devices[d].queues[q]
                .slices
                .lanes
                .place(items, |e| events.push(e));
            for e in events.drain(..) {
                let uuid = self.lane_uuid(d, Some(q), lane_of(&e))?;
                match e {
                    LaneEvent::Begin { item, at, .. } => {
                        self.interval_begin(uuid, at, frame.index, &frame.intervals[item])?
                    }
                    LaneEvent::End { at, .. } => self.slice_end(uuid, at)?,
                }
            }

            let with_stats: Vec<(&TimelineInterval, CounterResultStatistic)> = frame
                .intervals
                .iter()
                .filter(|i| i.queue == queue)
                .filter_map(|i| i.statistics.map(|s| (i, s)))
                .collect();
            for (t, values) in super::statistic_steps(&with_stats) {
                for (k, &value) in values.iter().enumerate() {
                    let Ok(v) = i64::try_from(value) else {
                        continue; // COUNTER_ERROR_VALUE: not counted
                    };
                    let uuid = match self.devices[d].queues[q].counters[k] {
                        Some(u) => u,
                        None if v == 0 => continue,
                        None => self.counter_track(d, q, k)?,
                    };
                    self.trace()?.counter(uuid, t, v).map_err(typed)?;
                }
            }
        }
        Ok(())
    }

    /// Writes what is buffered and flushes the output: what the output
    /// holds is then a trace of the frames written so far (empty before
    /// the first frame).
    pub fn flush(&mut self) -> Result<()> {
        match &mut self.out {
            Output::Idle(out) => out.flush()?,
            Output::Writing(w) => w.flush()?,
            Output::Lost => return Err(Self::lost()),
        }
        Ok(())
    }

    /// Writes what is buffered, flushes the output and returns it. A
    /// writer given no frame writes a trace with just its clock snapshot.
    pub fn finish(mut self) -> Result<W> {
        self.start(0)?;
        let Output::Writing(w) = self.out else {
            return Err(Self::lost());
        };
        let out = w.into_inner().map_err(typed)?;
        let out = out.into_inner().map_err(|e| e.into_error())?;
        Ok(out.into_inner())
    }

    fn lost() -> PerfettoError {
        PerfettoError::Io(io::Error::other("an earlier write to this output failed"))
    }

    /// The trace writer, once started.
    fn trace(&mut self) -> Result<&mut GpuTraceWriter<BufWriter<Fused<W>>>> {
        match &mut self.out {
            Output::Writing(w) => Ok(w),
            Output::Idle(_) | Output::Lost => Err(Self::lost()),
        }
    }

    /// The first packet: the packet defaults and the clock snapshot that
    /// make `CLOCK_MONOTONIC` the trace's clock.
    fn start(&mut self, now_ns: u64) -> Result<()> {
        if !matches!(self.out, Output::Idle(_)) {
            return Ok(());
        }
        let Output::Idle(out) = std::mem::replace(&mut self.out, Output::Lost) else {
            return Ok(());
        };
        let clocks = ClockReadings {
            monotonic_ns: now_ns,
            boottime_ns: None,
            realtime_ns: None,
        };
        let w = GpuTraceWriter::with_first_uuid(out, clocks, FIRST_UUID).map_err(typed)?;
        self.out = Output::Writing(Box::new(w));
        Ok(())
    }

    /// The device's index, writing its track (and its CPU track's) when new.
    fn device(&mut self, name: &str) -> Result<usize> {
        if let Some(d) = self.devices.iter().position(|d| d.name == name) {
            return Ok(d);
        }
        let track = format!("GPU {name}");
        let spec = TrackSpec {
            ranked_children: true,
            ..TrackSpec::root(&track)
        };
        let uuid = self.trace()?.named_track(&spec).map_err(typed)?;
        self.devices.push(DeviceTracks {
            name: name.to_string(),
            uuid,
            cpu: LaneTracks::new(CPU_TRACK_NAME.to_string()),
            queues: Vec::new(),
            next_rank: 0,
        });
        let d = self.devices.len() - 1;
        self.lane_uuid(d, None, 0)?;
        Ok(d)
    }

    /// The queue's index on device `d`, writing its track when new.
    fn queue(&mut self, d: usize, name: &str) -> Result<usize> {
        if let Some(q) = self.devices[d]
            .queues
            .iter()
            .position(|q| q.slices.name == name)
        {
            return Ok(q);
        }
        self.devices[d].queues.push(QueueTracks {
            slices: LaneTracks::new(name.to_string()),
            counters: [None; CounterResultStatistic::FIELDS],
        });
        let q = self.devices[d].queues.len() - 1;
        self.lane_uuid(d, Some(q), 0)?;
        Ok(q)
    }

    fn rank(&mut self, d: usize) -> i32 {
        let r = self.devices[d].next_rank;
        self.devices[d].next_rank += 1;
        r
    }

    /// Writes a child track of device `d`, next in its order.
    fn child_track(&mut self, d: usize, name: &str, counter: Option<CounterUnit>) -> Result<u64> {
        let spec = TrackSpec {
            rank: Some(self.rank(d)),
            counter,
            ..TrackSpec::child(self.devices[d].uuid, name)
        };
        self.trace()?.named_track(&spec).map_err(typed)
    }

    /// The uuid of lane `lane` of the CPU track (`queue` `None`) or of a
    /// queue's track, writing the lane's track when new.
    fn lane_uuid(&mut self, d: usize, queue: Option<usize>, lane: usize) -> Result<u64> {
        let tracks = match queue {
            None => &self.devices[d].cpu,
            Some(q) => &self.devices[d].queues[q].slices,
        };
        if let Some(&u) = tracks.uuids.get(lane) {
            return Ok(u);
        }
        // Lanes are created one at a time, in order.
        let name = match tracks.uuids.len() {
            0 => tracks.name.clone(),
            n => format!("{} (overlap {n})", tracks.name),
        };
        let uuid = self.child_track(d, &name, None)?;
        let tracks = match queue {
            None => &mut self.devices[d].cpu,
            Some(q) => &mut self.devices[d].queues[q].slices,
        };
        tracks.uuids.push(uuid);
        Ok(uuid)
    }

    /// Writes the counter track of statistic `k` on queue `q` of device `d`.
    fn counter_track(&mut self, d: usize, q: usize, k: usize) -> Result<u64> {
        let stat = CounterResultStatistic::default().named()[k].0;
        let name = format!("{} {stat}", self.devices[d].queues[q].slices.name);
        let uuid = self.child_track(d, &name, Some(CounterUnit::Count))?;
        self.devices[d].queues[q].counters[k] = Some(uuid);
        Ok(uuid)
    }

    fn interval_begin(
        &mut self,
        uuid: u64,
        at: u64,
        frame: u64,
        i: &TimelineInterval,
    ) -> Result<()> {
        use AnnotationValue::Uint;
        let mut a = Vec::with_capacity(9 + CounterResultStatistic::FIELDS);
        a.push(("frame", Uint(frame)));
        a.push(("depth", Uint(u64::from(i.depth))));
        if let Some(thread) = &i.thread {
            a.push(("thread", AnnotationValue::Str(thread)));
        }
        a.push(("start_ns", Uint(i.start_ns)));
        a.push(("end_ns", Uint(i.end_ns)));
        a.push(("duration_ns", Uint(i.duration_ns())));
        a.push(("start_ticks", Uint(i.start_ticks)));
        a.push(("end_ticks", Uint(i.end_ticks)));
        a.push(("error_bound_ns", Uint(i.error_bound_ns)));
        if let Some(stats) = &i.statistics {
            a.extend(stats.named().map(|(name, value)| (name, Uint(value))));
        }
        let slice = Slice {
            name: &i.label,
            intern_name: true,
            category: Some(i.kind.name()),
            launched: None,
            annotations: &a,
        };
        self.trace()?.begin_slice(uuid, at, &slice).map_err(typed)
    }

    fn frame_begin(&mut self, uuid: u64, at: u64, frame: &TimelineFrame) -> Result<()> {
        use AnnotationValue::Uint;
        let mut a = vec![
            ("frame", Uint(frame.index)),
            ("cpu_submit_ns", Uint(frame.cpu_submit_ns)),
            ("cpu_complete_ns", Uint(frame.cpu_complete_ns)),
            (
                "duration_ns",
                Uint(frame.cpu_complete_ns.saturating_sub(frame.cpu_submit_ns)),
            ),
            ("intervals", Uint(frame.intervals.len() as u64)),
        ];
        if let (Some(s), Some(end)) = (
            frame.intervals.iter().map(|i| i.start_ns).min(),
            frame.intervals.iter().map(|i| i.end_ns).max(),
        ) {
            a.push(("gpu_start_ns", Uint(s)));
            a.push(("gpu_end_ns", Uint(end)));
        }
        // A name used once is smaller inline.
        let name = format!("frame {}", frame.index);
        let slice = Slice {
            name: &name,
            intern_name: false,
            category: Some("cpu"),
            launched: None,
            annotations: &a,
        };
        self.trace()?.begin_slice(uuid, at, &slice).map_err(typed)
    }

    fn slice_end(&mut self, uuid: u64, at: u64) -> Result<()> {
        self.trace()?.slice_end(uuid, at).map_err(typed)
    }
}
