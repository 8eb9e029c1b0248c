//! A streaming writer of Perfetto traces in Perfetto's own GPU model.
//!
//! [`GpuTraceWriter`] writes each packet as it is made, length-delimited
//! (`0x0A`, varint length, packet: one `Trace.packet` field), straight to
//! its output: it keeps no packets, so a trace of any length is written in
//! constant memory, and a file cut after any whole packet is a valid trace.
//!
//! # Layout
//!
//! All packets are on one trusted sequence (id 1). The first clears the
//! incremental state, sets `trace_packet_defaults.timestamp_clock_id =
//! BUILTIN_CLOCK_MONOTONIC`, and holds a clock snapshot of `MONOTONIC`,
//! `BOOTTIME` and `REALTIME` with `MONOTONIC` as the primary trace clock:
//! every time given to the writer is `CLOCK_MONOTONIC` nanoseconds and
//! Perfetto shows it unconverted. Later packets carry no clock id.
//!
//! - GPU work: a `GpuRenderStageEvent` per kernel, copy or memset
//!   ([`GpuTraceWriter::render_stage`]), on a hardware queue
//!   ([`GpuTraceWriter::queue`]) with a stage ([`GpuTraceWriter::stage`]):
//!   both are interned `InternedGpuRenderStageSpecification`s sharing one
//!   iid space, so a kernel's name and shape cost nothing per kernel after
//!   its first. Its `context` is an interned `InternedGraphicsContext`
//!   ([`GpuTraceWriter::graphics_context`]).
//! - CPU side: process and thread track descriptors, named tracks
//!   ([`GpuTraceWriter::named_track`]: top-level or child, ordered by
//!   rank, slice or counter tracks), slices (`TYPE_SLICE_BEGIN`/`END`,
//!   names and categories interned, debug annotations with interned
//!   names), and instants. A slice begin may name the render-stage event
//!   it launched:
//!   Perfetto v55+ joins the two through `TrackEvent` extension field 3000
//!   (`gpu_correlation.render_stage_submission_event_ids`), written here as
//!   an unknown field since the Rust schema predates it; older readers
//!   ignore it.
//! - Counters: counter tracks with int or double values, and
//!   `GpuCounterEvent`s whose descriptor goes in the first event for a GPU.
//!
//! # Caps
//!
//! Interned slice names are capped at [`MAX_INTERNED_NAMES`], categories and
//! debug annotation names at [`MAX_INTERNED_CATEGORIES`] each, and every
//! interned one of them at [`MAX_INTERNED_NAME_BYTES`]; other names go
//! inline (bigger, still correct), so the tables stay under about 26 MiB
//! however long a trace runs. The writer keeps no other per-event state;
//! callers cap their own tables of queues and stages.

use perfetto_protos::builtin_clock::BuiltinClock;
use perfetto_protos::clock_snapshot::{clock_snapshot::Clock, ClockSnapshot};
use perfetto_protos::counter_descriptor::{counter_descriptor::Unit, CounterDescriptor};
use perfetto_protos::debug_annotation::{debug_annotation, DebugAnnotation, DebugAnnotationName};
use perfetto_protos::gpu_counter_descriptor::{gpu_counter_descriptor, GpuCounterDescriptor};
use perfetto_protos::gpu_counter_event::{gpu_counter_event, GpuCounterEvent};
use perfetto_protos::gpu_render_stage_event::{
    gpu_render_stage_event, interned_gpu_render_stage_specification::RenderStageCategory,
    GpuRenderStageEvent, InternedGpuRenderStageSpecification, InternedGraphicsContext,
};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::process_descriptor::ProcessDescriptor;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::trace_packet_defaults::TracePacketDefaults;
use perfetto_protos::track_descriptor::{track_descriptor::ChildTracksOrdering, TrackDescriptor};
use perfetto_protos::track_event::{track_event, EventCategory, EventName, TrackEvent};
use protobuf::{EnumOrUnknown, Message, MessageField};
use std::collections::HashMap;
use std::io::{self, Write};

/// Distinct slice names interned at most.
pub const MAX_INTERNED_NAMES: usize = 65_536;
/// Distinct categories interned at most; the same cap holds for debug
/// annotation names.
pub const MAX_INTERNED_CATEGORIES: usize = 4096;
/// Longest name, category or annotation name interned, in bytes; longer
/// ones are written inline in each of their events.
pub const MAX_INTERNED_NAME_BYTES: usize = 256;

/// The packet sequence every packet is on.
const SEQUENCE_ID: u32 = 1;
/// `TrackEvent` extension `gpu_correlation` (Perfetto v55+).
const GPU_CORRELATION_FIELD: u32 = 3000;
/// `GpuRenderStageEvent.name` (Perfetto v55+).
const RENDER_STAGE_NAME_FIELD: u32 = 17;
/// `InternedGraphicsContext.Api.CUDA` (Perfetto v55+).
pub const GRAPHICS_API_CUDA: i32 = 4;

/// A track's uuid.
pub type TrackUuid = u64;

/// What kind of work a render stage is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageCategory {
    /// Neither graphics nor compute (copies, memsets, markers).
    Other,
    /// Graphics work.
    Graphics,
    /// Compute work (kernels).
    Compute,
}

/// A counter's unit, for counter tracks and GPU counter descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterUnit {
    /// A plain count.
    Count,
    /// Bytes.
    Bytes,
    /// Nanoseconds.
    TimeNs,
    /// A percentage.
    Percent,
    /// Bytes per second.
    BytesPerSecond,
}

/// One GPU counter of a [`GpuTraceWriter::gpu_counters`] descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCounterSpec {
    /// The counter's id, unique in the trace.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// What it measures.
    pub description: String,
    /// Its unit.
    pub unit: CounterUnit,
}

/// One GPU work item: a kernel, copy or memset.
#[derive(Debug, Clone, Copy)]
pub struct RenderStage<'a> {
    /// Start, `CLOCK_MONOTONIC` ns.
    pub ts: u64,
    /// Duration, ns.
    pub duration: u64,
    /// Unique in the trace; launch slices name it to be joined with it.
    pub event_id: u64,
    /// From [`GpuTraceWriter::queue`].
    pub queue: u64,
    /// From [`GpuTraceWriter::stage`]; `None` writes `name` inline instead.
    pub stage: Option<u64>,
    /// From [`GpuTraceWriter::graphics_context`], if any.
    pub context: Option<u64>,
    /// The GPU's index; 0 is left out.
    pub gpu_id: i32,
    /// The name, written inline only when `stage` is `None`.
    pub name: &'a str,
    /// Extra key/value pairs (`extra_data`).
    pub extra: &'a [(&'a str, &'a str)],
}

/// A named track to write with [`GpuTraceWriter::named_track`].
#[derive(Debug, Clone, Copy)]
pub struct TrackSpec<'a> {
    /// Its name.
    pub name: &'a str,
    /// The track it belongs to; `None` for a top-level track.
    pub parent: Option<TrackUuid>,
    /// Its place among its parent's children, where the parent ranks them
    /// (`sibling_order_rank`).
    pub rank: Option<i32>,
    /// Whether its own children are shown in the order of their ranks.
    pub ranked_children: bool,
    /// A counter track of this unit; `None` for a slice track.
    pub counter: Option<CounterUnit>,
}

impl<'a> TrackSpec<'a> {
    /// A top-level slice track named `name`.
    pub fn root(name: &'a str) -> Self {
        Self {
            name,
            parent: None,
            rank: None,
            ranked_children: false,
            counter: None,
        }
    }

    /// A slice track named `name` under `parent`.
    pub fn child(parent: TrackUuid, name: &'a str) -> Self {
        Self {
            parent: Some(parent),
            ..Self::root(name)
        }
    }
}

/// A debug annotation's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AnnotationValue<'a> {
    /// An unsigned integer.
    Uint(u64),
    /// A signed integer.
    Int(i64),
    /// A string.
    Str(&'a str),
}

/// A slice to begin with [`GpuTraceWriter::begin_slice`].
#[derive(Debug, Clone, Copy)]
pub struct Slice<'a> {
    /// Its name.
    pub name: &'a str,
    /// Whether the name is interned (within the caps); a name used once,
    /// such as `frame 12`, is smaller inline.
    pub intern_name: bool,
    /// Its category, interned.
    pub category: Option<&'a str>,
    /// The render-stage event (its `event_id`) this slice launched, joined
    /// by Perfetto v55+.
    pub launched: Option<u64>,
    /// Debug annotations, their names interned.
    pub annotations: &'a [(&'a str, AnnotationValue<'a>)],
}

/// Streams a Perfetto trace to `W`; see the module documentation.
pub struct GpuTraceWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    bytes: u64,
    packets: u64,
    next_uuid: u64,
    next_spec_iid: u64,
    next_context_iid: u64,
    names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    annotation_names: HashMap<String, u64>,
    pending: Option<InternedData>,
}

impl<W: Write> std::fmt::Debug for GpuTraceWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuTraceWriter")
            .field("bytes", &self.bytes)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

/// The clocks of a clock snapshot, read by the caller at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReadings {
    /// `CLOCK_MONOTONIC`, ns: the trace's clock.
    pub monotonic_ns: u64,
    /// `CLOCK_BOOTTIME`, ns, if read.
    pub boottime_ns: Option<u64>,
    /// `CLOCK_REALTIME`, ns, if read.
    pub realtime_ns: Option<u64>,
}

fn unit(u: CounterUnit) -> Unit {
    match u {
        CounterUnit::Count | CounterUnit::Percent | CounterUnit::BytesPerSecond => Unit::UNIT_COUNT,
        CounterUnit::Bytes => Unit::UNIT_SIZE_BYTES,
        CounterUnit::TimeNs => Unit::UNIT_TIME_NS,
    }
}

fn measure(u: CounterUnit) -> (Vec<i32>, Vec<i32>) {
    use gpu_counter_descriptor::MeasureUnit as M;
    match u {
        CounterUnit::Count => (vec![], vec![]),
        CounterUnit::Bytes => (vec![M::BYTE as i32], vec![]),
        CounterUnit::TimeNs => (vec![M::NANOSECOND as i32], vec![]),
        CounterUnit::Percent => (vec![M::PERCENT as i32], vec![]),
        CounterUnit::BytesPerSecond => (vec![M::BYTE as i32], vec![M::SECOND as i32]),
    }
}

fn snapshot_into(packet: &mut TracePacket, clocks: ClockReadings) {
    let mut snapshot = ClockSnapshot::new();
    for (id, t) in [
        (
            BuiltinClock::BUILTIN_CLOCK_MONOTONIC,
            Some(clocks.monotonic_ns),
        ),
        (BuiltinClock::BUILTIN_CLOCK_BOOTTIME, clocks.boottime_ns),
        (BuiltinClock::BUILTIN_CLOCK_REALTIME, clocks.realtime_ns),
    ] {
        if let Some(t) = t {
            let mut clock = Clock::new();
            clock.clock_id = Some(id as u32);
            clock.timestamp = Some(t);
            snapshot.clocks.push(clock);
        }
    }
    snapshot.primary_trace_clock = Some(EnumOrUnknown::new(BuiltinClock::BUILTIN_CLOCK_MONOTONIC));
    packet.timestamp = Some(clocks.monotonic_ns);
    packet.timestamp_clock_id = Some(BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32);
    packet.set_clock_snapshot(snapshot);
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl<W: Write> GpuTraceWriter<W> {
    /// Starts a trace on `out`, writing its first packet (defaults, clock
    /// snapshot of `clocks`) at once. Track uuids count up from 1.
    pub fn new(out: W, clocks: ClockReadings) -> io::Result<Self> {
        Self::with_first_uuid(out, clocks, 1)
    }

    /// [`GpuTraceWriter::new`] with track uuids counting up from
    /// `first_uuid` (a trace meant to be merged with others picks a range
    /// of its own).
    pub fn with_first_uuid(out: W, clocks: ClockReadings, first_uuid: u64) -> io::Result<Self> {
        let mut w = GpuTraceWriter {
            out,
            buf: Vec::with_capacity(256),
            bytes: 0,
            packets: 0,
            next_uuid: first_uuid,
            next_spec_iid: 1,
            next_context_iid: 1,
            names: HashMap::new(),
            categories: HashMap::new(),
            annotation_names: HashMap::new(),
            pending: None,
        };
        let mut packet = TracePacket::new();
        packet.sequence_flags = Some(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
        packet.first_packet_on_sequence = Some(true);
        let mut defaults = TracePacketDefaults::new();
        defaults.timestamp_clock_id = Some(BuiltinClock::BUILTIN_CLOCK_MONOTONIC as u32);
        packet.trace_packet_defaults = MessageField::some(defaults);
        snapshot_into(&mut packet, clocks);
        w.write_packet(packet)?;
        Ok(w)
    }

    /// Writes a clock snapshot (Perfetto re-syncs its clocks on it; write
    /// one every few seconds in long traces).
    pub fn clock_snapshot(&mut self, clocks: ClockReadings) -> io::Result<()> {
        let mut packet = TracePacket::new();
        snapshot_into(&mut packet, clocks);
        self.write_packet(packet)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Packets written so far.
    pub fn packets_written(&self) -> u64 {
        self.packets
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the output.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    fn interned(&mut self) -> &mut InternedData {
        self.pending.get_or_insert_with(InternedData::new)
    }

    /// Writes `packet` on the sequence, with the interned data made since
    /// the last packet.
    fn write_packet(&mut self, mut packet: TracePacket) -> io::Result<()> {
        packet.set_trusted_packet_sequence_id(SEQUENCE_ID);
        if packet.sequence_flags.is_none() {
            packet.sequence_flags = Some(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        }
        if let Some(i) = self.pending.take() {
            packet.interned_data = MessageField::some(i);
        }
        self.buf.clear();
        let len = packet.compute_size();
        self.buf.push(0x0A);
        varint(len, &mut self.buf);
        packet
            .write_to_vec(&mut self.buf)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        self.packets += 1;
        Ok(())
    }

    fn uuid(&mut self) -> TrackUuid {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    fn descriptor(&mut self, t: TrackDescriptor) -> io::Result<()> {
        let mut packet = TracePacket::new();
        packet.set_track_descriptor(t);
        self.write_packet(packet)
    }

    /// Writes a process track and returns its uuid.
    pub fn process(&mut self, pid: i32, name: &str, cmdline: &[&str]) -> io::Result<TrackUuid> {
        let uuid = self.uuid();
        let mut p = ProcessDescriptor::new();
        p.pid = Some(pid);
        if !name.is_empty() {
            p.process_name = Some(name.to_string());
        }
        p.cmdline = cmdline.iter().map(|s| s.to_string()).collect();
        let mut t = TrackDescriptor::new();
        t.uuid = Some(uuid);
        t.process = MessageField::some(p);
        self.descriptor(t)?;
        Ok(uuid)
    }

    /// Writes a thread track (of process `pid`) and returns its uuid.
    pub fn thread(&mut self, pid: i32, tid: i32, name: Option<&str>) -> io::Result<TrackUuid> {
        let uuid = self.uuid();
        self.thread_descriptor(uuid, pid, tid, name)?;
        Ok(uuid)
    }

    /// Writes thread track `uuid`'s descriptor again with a (new) name.
    pub fn thread_descriptor(
        &mut self,
        uuid: TrackUuid,
        pid: i32,
        tid: i32,
        name: Option<&str>,
    ) -> io::Result<()> {
        let mut th = ThreadDescriptor::new();
        th.pid = Some(pid);
        th.tid = Some(tid);
        th.thread_name = name.map(str::to_string);
        let mut t = TrackDescriptor::new();
        t.uuid = Some(uuid);
        t.thread = MessageField::some(th);
        self.descriptor(t)
    }

    /// Writes the track `spec` describes and returns its uuid.
    pub fn named_track(&mut self, spec: &TrackSpec<'_>) -> io::Result<TrackUuid> {
        let uuid = self.uuid();
        let mut t = TrackDescriptor::new();
        t.uuid = Some(uuid);
        t.parent_uuid = spec.parent;
        t.set_name(spec.name.to_string());
        t.sibling_order_rank = spec.rank;
        if spec.ranked_children {
            t.child_ordering = Some(EnumOrUnknown::new(ChildTracksOrdering::EXPLICIT));
        }
        if let Some(u) = spec.counter {
            let mut c = CounterDescriptor::new();
            c.unit = Some(EnumOrUnknown::new(unit(u)));
            t.counter = MessageField::some(c);
        }
        self.descriptor(t)?;
        Ok(uuid)
    }

    /// Writes a named track under `parent` and returns its uuid.
    pub fn track(&mut self, parent: TrackUuid, name: &str) -> io::Result<TrackUuid> {
        self.named_track(&TrackSpec::child(parent, name))
    }

    /// Writes a counter track under `parent` and returns its uuid.
    pub fn counter_track(
        &mut self,
        parent: TrackUuid,
        name: &str,
        unit: CounterUnit,
    ) -> io::Result<TrackUuid> {
        self.named_track(&TrackSpec {
            counter: Some(unit),
            ..TrackSpec::child(parent, name)
        })
    }

    /// Interns a graphics context of process `pid` with API `api` (e.g.
    /// [`GRAPHICS_API_CUDA`]) and returns its iid, unique in the trace. It
    /// is written with the next packet.
    pub fn graphics_context(&mut self, pid: i32, api: i32) -> u64 {
        let iid = self.next_context_iid;
        self.next_context_iid += 1;
        let mut c = InternedGraphicsContext::new();
        c.iid = Some(iid);
        c.pid = Some(pid);
        c.api = Some(EnumOrUnknown::from_i32(api));
        self.interned().graphics_contexts.push(c);
        iid
    }

    fn spec(&mut self, name: &str, description: Option<&str>, category: StageCategory) -> u64 {
        let iid = self.next_spec_iid;
        self.next_spec_iid += 1;
        let mut s = InternedGpuRenderStageSpecification::new();
        s.iid = Some(iid);
        s.name = Some(name.to_string());
        s.description = description.map(str::to_string);
        s.category = Some(EnumOrUnknown::new(match category {
            StageCategory::Other => RenderStageCategory::OTHER,
            StageCategory::Graphics => RenderStageCategory::GRAPHICS,
            StageCategory::Compute => RenderStageCategory::COMPUTE,
        }));
        self.interned().gpu_specifications.push(s);
        iid
    }

    /// Interns a hardware queue named `name` and returns its iid. The
    /// caller keeps the iid; each call makes a new one.
    pub fn queue(&mut self, name: &str) -> u64 {
        self.spec(name, None, StageCategory::Other)
    }

    /// Interns a render stage (`name`, `description`, `category`) and
    /// returns its iid. The caller keeps the iid; each call makes a new one.
    pub fn stage(&mut self, name: &str, description: &str, category: StageCategory) -> u64 {
        let d = (!description.is_empty()).then_some(description);
        self.spec(name, d, category)
    }

    /// Interned specs (queues and stages) so far.
    pub fn specs(&self) -> u64 {
        self.next_spec_iid - 1
    }

    /// Writes one GPU work item.
    pub fn render_stage(&mut self, r: &RenderStage<'_>) -> io::Result<()> {
        let mut e = GpuRenderStageEvent::new();
        e.event_id = Some(r.event_id);
        e.duration = Some(r.duration);
        e.hw_queue_iid = Some(r.queue);
        match r.stage {
            Some(s) => e.stage_iid = Some(s),
            None => e
                .special_fields
                .mut_unknown_fields()
                .add_length_delimited(RENDER_STAGE_NAME_FIELD, r.name.as_bytes().to_vec()),
        }
        if let Some(c) = r.context {
            e.context = Some(c);
        }
        if r.gpu_id != 0 {
            e.gpu_id = Some(r.gpu_id);
        }
        for (k, v) in r.extra {
            let mut x = gpu_render_stage_event::ExtraData::new();
            x.name = Some(k.to_string());
            x.value = Some(v.to_string());
            e.extra_data.push(x);
        }
        let mut packet = TracePacket::new();
        packet.timestamp = Some(r.ts);
        packet.set_gpu_render_stage_event(e);
        self.write_packet(packet)
    }

    fn name_iid(&mut self, name: &str) -> Option<u64> {
        if let Some(&iid) = self.names.get(name) {
            return Some(iid);
        }
        if self.names.len() >= MAX_INTERNED_NAMES || name.len() > MAX_INTERNED_NAME_BYTES {
            return None;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), iid);
        let mut n = EventName::new();
        n.iid = Some(iid);
        n.name = Some(name.to_string());
        self.interned().event_names.push(n);
        Some(iid)
    }

    fn category_iid(&mut self, name: &str) -> Option<u64> {
        if let Some(&iid) = self.categories.get(name) {
            return Some(iid);
        }
        if self.categories.len() >= MAX_INTERNED_CATEGORIES || name.len() > MAX_INTERNED_NAME_BYTES
        {
            return None;
        }
        let iid = self.categories.len() as u64 + 1;
        self.categories.insert(name.to_string(), iid);
        let mut c = EventCategory::new();
        c.iid = Some(iid);
        c.name = Some(name.to_string());
        self.interned().event_categories.push(c);
        Some(iid)
    }

    fn annotation_name_iid(&mut self, name: &str) -> Option<u64> {
        if let Some(&iid) = self.annotation_names.get(name) {
            return Some(iid);
        }
        if self.annotation_names.len() >= MAX_INTERNED_CATEGORIES
            || name.len() > MAX_INTERNED_NAME_BYTES
        {
            return None;
        }
        let iid = self.annotation_names.len() as u64 + 1;
        self.annotation_names.insert(name.to_string(), iid);
        let mut n = DebugAnnotationName::new();
        n.iid = Some(iid);
        n.name = Some(name.to_string());
        self.interned().debug_annotation_names.push(n);
        Some(iid)
    }

    fn annotation(&mut self, name: &str, value: AnnotationValue<'_>) -> DebugAnnotation {
        let mut a = DebugAnnotation::new();
        a.name_field = Some(match self.annotation_name_iid(name) {
            Some(iid) => debug_annotation::Name_field::NameIid(iid),
            None => debug_annotation::Name_field::Name(name.to_string()),
        });
        a.value = Some(match value {
            AnnotationValue::Uint(v) => debug_annotation::Value::UintValue(v),
            AnnotationValue::Int(v) => debug_annotation::Value::IntValue(v),
            AnnotationValue::Str(v) => debug_annotation::Value::StringValue(v.to_string()),
        });
        a
    }

    fn named_event(
        &mut self,
        ty: track_event::Type,
        track: TrackUuid,
        name: &str,
        intern: bool,
        category: Option<&str>,
    ) -> TrackEvent {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(ty));
        e.track_uuid = Some(track);
        let iid = if intern { self.name_iid(name) } else { None };
        e.name_field = Some(match iid {
            Some(iid) => track_event::Name_field::NameIid(iid),
            None => track_event::Name_field::Name(name.to_string()),
        });
        if let Some(c) = category {
            match self.category_iid(c) {
                Some(iid) => e.category_iids.push(iid),
                None => e.categories.push(c.to_string()),
            }
        }
        e
    }

    fn event(&mut self, ts: u64, e: TrackEvent) -> io::Result<()> {
        let mut packet = TracePacket::new();
        packet.timestamp = Some(ts);
        packet.set_track_event(e);
        self.write_packet(packet)
    }

    /// Begins a slice on `track`. `launched` names the render-stage event
    /// (its `event_id`) this slice launched, joined by Perfetto v55+.
    pub fn slice_begin(
        &mut self,
        track: TrackUuid,
        ts: u64,
        name: &str,
        category: Option<&str>,
        launched: Option<u64>,
    ) -> io::Result<()> {
        let slice = Slice {
            name,
            intern_name: true,
            category,
            launched,
            annotations: &[],
        };
        self.begin_slice(track, ts, &slice)
    }

    /// Begins `slice` on `track`.
    pub fn begin_slice(&mut self, track: TrackUuid, ts: u64, slice: &Slice<'_>) -> io::Result<()> {
        let mut e = self.named_event(
            track_event::Type::TYPE_SLICE_BEGIN,
            track,
            slice.name,
            slice.intern_name,
            slice.category,
        );
        if let Some(id) = slice.launched {
            let mut body = vec![0x08];
            varint(id, &mut body);
            e.special_fields
                .mut_unknown_fields()
                .add_length_delimited(GPU_CORRELATION_FIELD, body);
        }
        for &(name, value) in slice.annotations {
            let a = self.annotation(name, value);
            e.debug_annotations.push(a);
        }
        self.event(ts, e)
    }

    /// Ends the innermost open slice on `track`.
    pub fn slice_end(&mut self, track: TrackUuid, ts: u64) -> io::Result<()> {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_SLICE_END));
        e.track_uuid = Some(track);
        self.event(ts, e)
    }

    /// Writes an instant on `track`.
    pub fn instant(
        &mut self,
        track: TrackUuid,
        ts: u64,
        name: &str,
        category: Option<&str>,
    ) -> io::Result<()> {
        let e = self.named_event(track_event::Type::TYPE_INSTANT, track, name, true, category);
        self.event(ts, e)
    }

    /// Writes an integer value on counter track `track`.
    pub fn counter(&mut self, track: TrackUuid, ts: u64, value: i64) -> io::Result<()> {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_COUNTER));
        e.track_uuid = Some(track);
        e.counter_value_field = Some(track_event::Counter_value_field::CounterValue(value));
        self.event(ts, e)
    }

    /// Writes a floating-point value on counter track `track`.
    pub fn counter_f64(&mut self, track: TrackUuid, ts: u64, value: f64) -> io::Result<()> {
        let mut e = TrackEvent::new();
        e.type_ = Some(EnumOrUnknown::new(track_event::Type::TYPE_COUNTER));
        e.track_uuid = Some(track);
        e.counter_value_field = Some(track_event::Counter_value_field::DoubleCounterValue(value));
        self.event(ts, e)
    }

    /// Writes GPU counter values at `ts` (the end of the period they
    /// measure: values are backwards-looking). `descriptor`, when given,
    /// describes the counters (give it with the first event of each GPU).
    pub fn gpu_counters(
        &mut self,
        ts: u64,
        gpu_id: i32,
        descriptor: Option<&[GpuCounterSpec]>,
        values: &[(u32, f64)],
    ) -> io::Result<()> {
        let mut e = GpuCounterEvent::new();
        if let Some(specs) = descriptor {
            let mut d = GpuCounterDescriptor::new();
            for s in specs {
                let mut spec = gpu_counter_descriptor::GpuCounterSpec::new();
                spec.counter_id = Some(s.id);
                spec.name = Some(s.name.clone());
                spec.description = Some(s.description.clone());
                let (num, den) = measure(s.unit);
                spec.numerator_units = num.into_iter().map(EnumOrUnknown::from_i32).collect();
                spec.denominator_units = den.into_iter().map(EnumOrUnknown::from_i32).collect();
                d.specs.push(spec);
            }
            e.counter_descriptor = MessageField::some(d);
        }
        for &(id, v) in values {
            let mut c = gpu_counter_event::GpuCounter::new();
            c.counter_id = Some(id);
            c.set_double_value(v);
            e.counters.push(c);
        }
        if gpu_id != 0 {
            e.gpu_id = Some(gpu_id);
        }
        let mut packet = TracePacket::new();
        packet.timestamp = Some(ts);
        packet.set_gpu_counter_event(e);
        self.write_packet(packet)
    }
}
