//! Perfetto's native protobuf trace, written frame by frame.
//!
//! Open the file in <https://ui.perfetto.dev> (or `trace_processor`). Unlike
//! the Chrome JSON export, which Perfetto imports "best effort", this is the
//! format Perfetto itself records, so large traces and overlapping intervals
//! load as they are.
//!
//! # Layout
//!
//! Every packet is on one trusted sequence and stamped on
//! `BUILTIN_CLOCK_MONOTONIC`, the clock of the timeline; a clock snapshot
//! first names it the trace's primary clock, so the times Perfetto shows are
//! the timeline's `CLOCK_MONOTONIC` nanoseconds, unconverted.
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
//! [`PerfettoWriter`] encodes each frame's packets as the frame arrives (in
//! batches of at most [`BATCH_PACKETS`] packets, each batch one `Trace`
//! message: concatenated `Trace` messages are one trace) and writes them
//! through a buffer of [`BUFFER_BYTES`](super::BUFFER_BYTES), so a frame
//! costs about what a `BufWriter` write does, whatever the writer; the
//! buffer reaches the writer when full, at [`PerfettoWriter::flush`] and at
//! [`PerfettoWriter::finish`]. What it keeps between frames is per track
//! (devices, queues, overlap lanes, counter tracks: one entry per distinct
//! name it was given) and a table of interned slice names: at most
//! [`MAX_INTERNED_NAMES`] names of at most [`MAX_INTERNED_NAME_BYTES`]
//! bytes each (under 24 MiB with the table's own overhead; other names are
//! written inline in their events). A trace of any number of frames is
//! written in memory bounded by the largest frame, the tracks and that
//! table.
//!
//! # Why `perfetto_protos`
//!
//! The messages are those of the `perfetto_protos` crate: Rust bindings
//! generated at build time (by rust-protobuf, with a vendored `protoc`) from
//! Perfetto's own, unmodified `.proto` files (Perfetto v51). It is the one
//! crate on crates.io that ships Perfetto's trace schema as plain messages;
//! `perfetto-sdk` (Google's) records live in-process through the Perfetto C
//! library rather than writing a trace from data we already hold, and the
//! other crates bundle hand-picked subsets inside unrelated frameworks. No
//! protobuf encoding is written by hand here.

use super::lanes::{frame_queues, queue_items, LaneEvent, Lanes};
use gpu_counters_hal::timeline::{Timeline, TimelineFrame, TimelineInterval};
use gpu_counters_hal::CounterResultStatistic;
use perfetto_protos::builtin_clock::BuiltinClock;
use perfetto_protos::clock_snapshot::{clock_snapshot::Clock, ClockSnapshot};
use perfetto_protos::counter_descriptor::{counter_descriptor::Unit, CounterDescriptor};
use perfetto_protos::debug_annotation::{debug_annotation, DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::trace::Trace;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::{track_descriptor, TrackDescriptor};
use perfetto_protos::track_event::{track_event, EventCategory, EventName, TrackEvent};
use protobuf::{EnumOrUnknown, Message, MessageField};
use std::collections::HashMap;
use std::io::{self, Write};
use thiserror::Error;

pub use super::chrome::CPU_TRACK_NAME;

/// Packets written per `Trace` message at most.
pub const BATCH_PACKETS: usize = 4096;

/// Distinct slice names interned at most; names first seen after the table
/// is full are written inline in their events.
pub const MAX_INTERNED_NAMES: usize = 65_536;

/// Longest slice name interned, in bytes; longer names are written inline
/// in each of their events, so the table of interned names stays under
/// [`MAX_INTERNED_NAMES`] times this.
pub const MAX_INTERNED_NAME_BYTES: usize = 256;

/// The packet sequence every packet is on.
const SEQUENCE_ID: u32 = 1;

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

/// The result type of this module.
pub type Result<T, E = PerfettoError> = std::result::Result<T, E>;

/// Names of the debug annotations, interned once per trace; an annotation's
/// iid is its index here plus one.
const ANNOTATIONS: [&str; 14] = [
    "frame",
    "depth",
    "thread",
    "start_ns",
    "end_ns",
    "duration_ns",
    "start_ticks",
    "end_ticks",
    "error_bound_ns",
    "cpu_submit_ns",
    "cpu_complete_ns",
    "intervals",
    "gpu_start_ns",
    "gpu_end_ns",
];
/// The statistics' annotations come after [`ANNOTATIONS`].
const STATISTICS_IID: u64 = ANNOTATIONS.len() as u64 + 1;

fn annotation_iid(name: &str) -> u64 {
    ANNOTATIONS
        .iter()
        .position(|a| *a == name)
        .map_or(0, |i| i as u64 + 1)
}

/// Categories, interned once per trace: the pass kinds and `cpu`.
const CATEGORIES: [&str; 5] = ["compute", "render", "blit", "scope", "cpu"];

fn category_iid(name: &str) -> u64 {
    CATEGORIES
        .iter()
        .position(|c| *c == name)
        .map_or(0, |i| i as u64 + 1)
}

/// One logical track and its overlap lanes (lane 0 is the track itself).
#[derive(Debug)]
struct LaneTracks {
    name: String,
    uuids: Vec<u64>,
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
    counters: [Option<u64>; CounterResultStatistic::FIELDS],
}

#[derive(Debug)]
struct DeviceTracks {
    name: String,
    uuid: u64,
    cpu: LaneTracks,
    queues: Vec<QueueTracks>,
    /// Next `sibling_order_rank` of a child track.
    next_rank: i32,
}

/// A streaming Perfetto trace writer (see the [module documentation](self)
/// for the layout): [`PerfettoWriter::write_frame`] as frames arrive, then
/// [`PerfettoWriter::finish`].
#[derive(Debug)]
pub struct PerfettoWriter<W: Write> {
    out: io::BufWriter<super::Fused<W>>,
    batch: Trace,
    started: bool,
    next_uuid: u64,
    devices: Vec<DeviceTracks>,
    names: HashMap<String, u64>,
    packets: u64,
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

fn uint(iid: u64, value: u64) -> DebugAnnotation {
    let mut a = DebugAnnotation::new();
    a.name_field = Some(debug_annotation::Name_field::NameIid(iid));
    a.value = Some(debug_annotation::Value::UintValue(value));
    a
}

fn string(iid: u64, value: &str) -> DebugAnnotation {
    let mut a = DebugAnnotation::new();
    a.name_field = Some(debug_annotation::Name_field::NameIid(iid));
    a.value = Some(debug_annotation::Value::StringValue(value.to_string()));
    a
}

fn track(uuid: u64, parent: Option<u64>, name: &str, rank: Option<i32>) -> TrackDescriptor {
    let mut t = TrackDescriptor::new();
    t.uuid = Some(uuid);
    t.parent_uuid = parent;
    t.static_or_dynamic_name = Some(track_descriptor::Static_or_dynamic_name::Name(
        name.to_string(),
    ));
    t.sibling_order_rank = rank;
    t
}

impl<W: Write> PerfettoWriter<W> {
    /// A writer that writes to `out` through its buffer; nothing is
    /// written before the first frame (or [`PerfettoWriter::finish`]).
    pub fn new(out: W) -> Self {
        Self {
            out: super::buffered(out),
            batch: Trace::new(),
            started: false,
            next_uuid: FIRST_UUID,
            devices: Vec::new(),
            names: HashMap::new(),
            packets: 0,
        }
    }

    /// Packets written so far (including those still buffered).
    pub fn packets(&self) -> u64 {
        self.packets
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
                LaneEvent::Begin { at, .. } => self.frame_begin(uuid, at, frame),
                LaneEvent::End { at, .. } => self.slice_end(uuid, at),
            }
            self.maybe_flush()?;
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
                        self.interval_begin(uuid, at, frame.index, &frame.intervals[item])
                    }
                    LaneEvent::End { at, .. } => self.slice_end(uuid, at),
                }
                self.maybe_flush()?;
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
                    self.counter(uuid, t, v);
                    self.maybe_flush()?;
                }
            }
        }
        self.flush_batch()
    }

    /// Writes what is buffered and flushes the output: what the output
    /// holds is then a trace of the frames written so far (empty before
    /// the first frame).
    pub fn flush(&mut self) -> Result<()> {
        self.flush_batch()?;
        self.out.flush()?;
        Ok(())
    }

    /// Writes what is buffered, flushes the output and returns it. A
    /// writer given no frame writes a trace with just its clock snapshot.
    pub fn finish(mut self) -> Result<W> {
        self.start(0)?;
        self.flush()?;
        let out = self.out.into_inner().map_err(|e| e.into_error())?;
        Ok(out.into_inner())
    }

    fn push(&mut self, mut packet: TracePacket) {
        packet.set_trusted_packet_sequence_id(SEQUENCE_ID);
        self.batch.packet.push(packet);
        self.packets += 1;
    }

    fn maybe_flush(&mut self) -> Result<()> {
        if self.batch.packet.len() >= BATCH_PACKETS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<()> {
        if !self.batch.packet.is_empty() {
            self.batch.write_to_writer(&mut self.out)?;
            self.batch.packet.clear();
        }
        Ok(())
    }

    /// The first packet: the clock snapshot that makes `CLOCK_MONOTONIC`
    /// the trace's clock, and the interned annotation names and categories.
    fn start(&mut self, now_ns: u64) -> Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let mut snapshot = ClockSnapshot::new();
        let mut clock = Clock::new();
        clock.clock_id = Some(BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32);
        clock.timestamp = Some(now_ns);
        snapshot.clocks.push(clock);
        snapshot.primary_trace_clock =
            Some(EnumOrUnknown::new(BuiltinClock::BUILTIN_CLOCK_MONOTONIC));
        let mut interned = InternedData::new();
        let statistics = CounterResultStatistic::default().named();
        for (n, name) in ANNOTATIONS
            .iter()
            .copied()
            .chain(statistics.iter().map(|(name, _)| *name))
            .enumerate()
        {
            let mut a = DebugAnnotationName::new();
            a.iid = Some(n as u64 + 1);
            a.name = Some(name.to_string());
            interned.debug_annotation_names.push(a);
        }
        for (n, name) in CATEGORIES.iter().enumerate() {
            let mut c = EventCategory::new();
            c.iid = Some(n as u64 + 1);
            c.name = Some(name.to_string());
            interned.event_categories.push(c);
        }
        let mut packet = TracePacket::new();
        packet.timestamp = Some(now_ns);
        packet.timestamp_clock_id = Some(BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32);
        packet.set_clock_snapshot(snapshot);
        packet.interned_data = MessageField::some(interned);
        packet.sequence_flags = Some(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
        packet.first_packet_on_sequence = Some(true);
        self.push(packet);
        Ok(())
    }

    fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    fn descriptor(&mut self, t: TrackDescriptor) {
        let mut packet = TracePacket::new();
        packet.set_track_descriptor(t);
        self.push(packet);
    }

    /// The device's index, writing its track (and its CPU track's) when new.
    fn device(&mut self, name: &str) -> Result<usize> {
        if let Some(d) = self.devices.iter().position(|d| d.name == name) {
            return Ok(d);
        }
        let uuid = self.uuid();
        let mut t = track(uuid, None, &format!("GPU {name}"), None);
        t.child_ordering = Some(EnumOrUnknown::new(
            track_descriptor::ChildTracksOrdering::EXPLICIT,
        ));
        self.descriptor(t);
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
        let uuid = self.uuid();
        let rank = self.rank(d);
        let parent = self.devices[d].uuid;
        self.descriptor(track(uuid, Some(parent), &name, Some(rank)));
        let tracks = match queue {
            None => &mut self.devices[d].cpu,
            Some(q) => &mut self.devices[d].queues[q].slices,
        };
        tracks.uuids.push(uuid);
        Ok(uuid)
    }

    /// Writes the counter track of statistic `k` on queue `q` of device `d`.
    fn counter_track(&mut self, d: usize, q: usize, k: usize) -> Result<u64> {
        let uuid = self.uuid();
        let rank = self.rank(d);
        let parent = self.devices[d].uuid;
        let stat = CounterResultStatistic::default().named()[k].0;
        let name = format!("{} {stat}", self.devices[d].queues[q].slices.name);
        let mut t = track(uuid, Some(parent), &name, Some(rank));
        let mut c = CounterDescriptor::new();
        c.unit = Some(EnumOrUnknown::new(Unit::UNIT_COUNT));
        t.counter = MessageField::some(c);
        self.descriptor(t);
        self.devices[d].queues[q].counters[k] = Some(uuid);
        Ok(uuid)
    }

    fn event_packet(&mut self, at: u64, event: TrackEvent, interned: Option<InternedData>) {
        let mut packet = TracePacket::new();
        packet.timestamp = Some(at);
        packet.timestamp_clock_id = Some(BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32);
        packet.sequence_flags = Some(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        if let Some(i) = interned {
            packet.interned_data = MessageField::some(i);
        }
        packet.set_track_event(event);
        self.push(packet);
    }

    /// Sets the event's name, interned when the table has room (the new
    /// name's interned data is returned, for the event's packet).
    fn name(&mut self, event: &mut TrackEvent, name: &str) -> Option<InternedData> {
        if let Some(&iid) = self.names.get(name) {
            event.name_field = Some(track_event::Name_field::NameIid(iid));
            return None;
        }
        if self.names.len() >= MAX_INTERNED_NAMES || name.len() > MAX_INTERNED_NAME_BYTES {
            event.name_field = Some(track_event::Name_field::Name(name.to_string()));
            return None;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), iid);
        event.name_field = Some(track_event::Name_field::NameIid(iid));
        let mut n = EventName::new();
        n.iid = Some(iid);
        n.name = Some(name.to_string());
        let mut interned = InternedData::new();
        interned.event_names.push(n);
        Some(interned)
    }

    fn begin_event(track_uuid: u64, category: &str) -> TrackEvent {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_SLICE_BEGIN));
        e.track_uuid = Some(track_uuid);
        e.category_iids.push(category_iid(category));
        e
    }

    fn interval_begin(&mut self, uuid: u64, at: u64, frame: u64, i: &TimelineInterval) {
        let mut e = Self::begin_event(uuid, i.kind.name());
        let interned = self.name(&mut e, &i.label);
        let a = &mut e.debug_annotations;
        a.push(uint(annotation_iid("frame"), frame));
        a.push(uint(annotation_iid("depth"), u64::from(i.depth)));
        if let Some(thread) = &i.thread {
            a.push(string(annotation_iid("thread"), thread));
        }
        a.push(uint(annotation_iid("start_ns"), i.start_ns));
        a.push(uint(annotation_iid("end_ns"), i.end_ns));
        a.push(uint(annotation_iid("duration_ns"), i.duration_ns()));
        a.push(uint(annotation_iid("start_ticks"), i.start_ticks));
        a.push(uint(annotation_iid("end_ticks"), i.end_ticks));
        a.push(uint(annotation_iid("error_bound_ns"), i.error_bound_ns));
        if let Some(stats) = &i.statistics {
            for (k, value) in stats.to_array().into_iter().enumerate() {
                a.push(uint(STATISTICS_IID + k as u64, value));
            }
        }
        self.event_packet(at, e, interned);
    }

    fn frame_begin(&mut self, uuid: u64, at: u64, frame: &TimelineFrame) {
        let mut e = Self::begin_event(uuid, "cpu");
        e.name_field = Some(track_event::Name_field::Name(format!(
            "frame {}",
            frame.index
        )));
        let a = &mut e.debug_annotations;
        a.push(uint(annotation_iid("frame"), frame.index));
        a.push(uint(annotation_iid("cpu_submit_ns"), frame.cpu_submit_ns));
        a.push(uint(
            annotation_iid("cpu_complete_ns"),
            frame.cpu_complete_ns,
        ));
        a.push(uint(
            annotation_iid("duration_ns"),
            frame.cpu_complete_ns.saturating_sub(frame.cpu_submit_ns),
        ));
        a.push(uint(
            annotation_iid("intervals"),
            frame.intervals.len() as u64,
        ));
        if let (Some(s), Some(end)) = (
            frame.intervals.iter().map(|i| i.start_ns).min(),
            frame.intervals.iter().map(|i| i.end_ns).max(),
        ) {
            a.push(uint(annotation_iid("gpu_start_ns"), s));
            a.push(uint(annotation_iid("gpu_end_ns"), end));
        }
        self.event_packet(at, e, None);
    }

    fn slice_end(&mut self, uuid: u64, at: u64) {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_SLICE_END));
        e.track_uuid = Some(uuid);
        self.event_packet(at, e, None);
    }

    fn counter(&mut self, uuid: u64, at: u64, value: i64) {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_COUNTER));
        e.track_uuid = Some(uuid);
        e.counter_value_field = Some(track_event::Counter_value_field::CounterValue(value));
        self.event_packet(at, e, None);
    }
}

fn lane_of<T>(e: &LaneEvent<T>) -> usize {
    match e {
        LaneEvent::Begin { lane, .. } | LaneEvent::End { lane, .. } => *lane,
    }
}
