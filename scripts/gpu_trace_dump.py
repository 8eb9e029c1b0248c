#!/usr/bin/env python3
"""Decodes a `gpu-counters record` trace (Perfetto's GPU model) with Perfetto's
own schema and prints it as JSON.

Usage: gpu_trace_dump.py TRACE [--counts] [--prefixes]

Uses `perfetto_trace_pb2` from the `perfetto` package on PyPI (scripts/setup.sh
installs a pinned version into .venv-perfetto/). Prints one JSON object:

- "packets", "bytes": the trace's size;
- "clock": the first packet's defaults clock id and clock snapshot (primary
  clock, clock ids), and how many snapshots the trace holds;
- "processes" (pid -> name, cmdline), "threads" (uuid -> pid, tid, name),
  "tracks" (uuid -> name, parent) of named child tracks, "counter_tracks";
- "specs" (iid -> name, description, category) of interned render-stage
  specifications (hardware queues and stages), "contexts" (iid -> pid, api);
- "render_stages": every GpuRenderStageEvent (ts, dur, event_id, queue and
  stage names, description, category, context pid, gpu_id, extra data, the
  inline name of field 17 when present);
- "slices": every slice rebuilt from SLICE_BEGIN/END per track in file
  order (track, name, category, ts, dur, depth, and "launched": the event
  ids of TrackEvent extension field 3000, gpu_correlation);
- "instants", "counters" (track event counters), "gpu_counters" (ts,
  gpu_id, {name: value}) and "gpu_counter_specs" (id -> name), with
  "gpu_counter_units" (name -> numerator and denominator unit names);
- "errors": what breaks the rules (a packet off sequence 1 or before the
  incremental state was cleared, a packet on a clock other than
  CLOCK_MONOTONIC, an iid never interned, an event on an unknown track, an
  end without a begin, a slice left open).

With --counts, the lists are replaced by their lengths (for big traces).
With --prefixes, the trace cut after every packet is parsed too, and
"prefix_errors" lists the cuts that failed to parse.
"""
import json
import sys

from google.protobuf import unknown_fields
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    BuiltinClock,
    GpuCounterDescriptor,
    GpuCounterEvent,
    InternedGpuRenderStageSpecification,
    InternedGraphicsContext,
    Trace,
    TracePacket,
    TrackEvent,
)


def varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of a protobuf message's bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = int.from_bytes(b[i:i + 8], "little")
            i += 8
        elif wt == 5:
            v = int.from_bytes(b[i:i + 4], "little")
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, wt, v))
    return out


def unknown(msg, number):
    """The raw values of unknown field `number` of `msg`."""
    return [f.data for f in unknown_fields.UnknownFieldSet(msg) if f.field_number == number]


def packet_boundaries(data):
    """Byte offsets after each whole Trace.packet field."""
    out, i = [], 0
    while i < len(data):
        key, j = varint(data, i)
        if key != 0x0A:
            raise ValueError(f"byte {i}: key {key:#x}, not Trace.packet")
        n, j = varint(data, j)
        i = j + n
        out.append(i)
    return out


def main(path, counts, prefixes):
    with open(path, "rb") as f:
        data = f.read()
    trace = Trace()
    trace.ParseFromString(data)

    errors = []
    processes, threads, tracks, counter_tracks = {}, {}, {}, {}
    specs, contexts, names, categories = {}, {}, {}, {}
    render_stages, slices, instants, counters, gpu_counters = [], [], [], [], []
    gpu_counter_specs = {}
    gpu_counter_units = {}
    open_slices = {}
    clock = {"defaults_clock_id": None, "primary": None, "clock_ids": [], "snapshots": 0}
    cleared = False
    default_clock = None

    def track_name(uuid):
        if uuid in threads:
            return threads[uuid]["name"] or f"thread {threads[uuid]['tid']}"
        if uuid in tracks:
            return tracks[uuid]["name"]
        if uuid in processes:
            return processes[uuid]["name"]
        if uuid in counter_tracks:
            return counter_tracks[uuid]["name"]
        return None

    for n, p in enumerate(trace.packet):
        if p.trusted_packet_sequence_id != 1:
            errors.append(f"packet {n}: sequence id {p.trusted_packet_sequence_id}")
        if p.sequence_flags & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            cleared = True
        elif not cleared:
            errors.append(f"packet {n}: before the incremental state was cleared")
        if p.HasField("trace_packet_defaults"):
            default_clock = p.trace_packet_defaults.timestamp_clock_id
            if n == 0:
                clock["defaults_clock_id"] = default_clock
        clock_id = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else default_clock
        if p.HasField("timestamp") and clock_id != BuiltinClock.BUILTIN_CLOCK_MONOTONIC:
            errors.append(f"packet {n}: clock {clock_id}")
        if p.HasField("interned_data"):
            i = p.interned_data
            names.update({e.iid: e.name for e in i.event_names})
            categories.update({e.iid: e.name for e in i.event_categories})
            for s in i.gpu_specifications:
                specs[s.iid] = {
                    "name": s.name,
                    "description": s.description,
                    "category": InternedGpuRenderStageSpecification.RenderStageCategory.Name(s.category),
                }
            for c in i.graphics_contexts:
                contexts[c.iid] = {"pid": c.pid, "api": c.api}
        data_kind = p.WhichOneof("data")
        if data_kind == "clock_snapshot":
            cs = p.clock_snapshot
            clock["snapshots"] += 1
            if clock["primary"] is None:
                clock["primary"] = BuiltinClock.Name(cs.primary_trace_clock)
                clock["clock_ids"] = [c.clock_id for c in cs.clocks]
        elif data_kind == "track_descriptor":
            t = p.track_descriptor
            if t.HasField("process"):
                processes[t.uuid] = {
                    "pid": t.process.pid,
                    "name": t.process.process_name,
                    "cmdline": list(t.process.cmdline),
                }
            elif t.HasField("thread"):
                threads[t.uuid] = {
                    "pid": t.thread.pid,
                    "tid": t.thread.tid,
                    "name": t.thread.thread_name,
                }
            elif t.HasField("counter"):
                counter_tracks[t.uuid] = {"name": t.name, "parent": t.parent_uuid}
            else:
                tracks[t.uuid] = {"name": t.name, "parent": t.parent_uuid}
        elif data_kind == "gpu_render_stage_event":
            e = p.gpu_render_stage_event
            if e.hw_queue_iid not in specs:
                errors.append(f"packet {n}: hw queue {e.hw_queue_iid} never interned")
            if e.HasField("stage_iid") and e.stage_iid not in specs:
                errors.append(f"packet {n}: stage {e.stage_iid} never interned")
            if e.HasField("context") and e.context not in contexts:
                errors.append(f"packet {n}: context {e.context} never interned")
            inline = [bytes(v).decode() for v in unknown(e, 17)]
            if not e.HasField("stage_iid") and not inline:
                errors.append(f"packet {n}: render stage without a stage or a name")
            stage = specs.get(e.stage_iid, {}) if e.HasField("stage_iid") else {}
            render_stages.append({
                "ts": p.timestamp,
                "dur": e.duration,
                "event_id": e.event_id,
                "queue": specs.get(e.hw_queue_iid, {}).get("name"),
                "stage": stage.get("name"),
                "description": stage.get("description"),
                "category": stage.get("category"),
                "name": inline[0] if inline else stage.get("name"),
                "context_pid": contexts.get(e.context, {}).get("pid") if e.HasField("context") else None,
                "gpu_id": e.gpu_id,
                "extra": {x.name: x.value for x in e.extra_data},
            })
        elif data_kind == "gpu_counter_event":
            e = p.gpu_counter_event
            if e.HasField("counter_descriptor"):
                for s in e.counter_descriptor.specs:
                    gpu_counter_specs[s.counter_id] = s.name
                    unit = lambda u: GpuCounterDescriptor.MeasureUnit.Name(u)
                    gpu_counter_units[s.name] = {
                        "numerator": [unit(u) for u in s.numerator_units],
                        "denominator": [unit(u) for u in s.denominator_units],
                    }
            values = {}
            for c in e.counters:
                if c.counter_id not in gpu_counter_specs:
                    errors.append(f"packet {n}: GPU counter {c.counter_id} without a descriptor")
                v = c.double_value if c.HasField("double_value") else c.int_value
                values[gpu_counter_specs.get(c.counter_id, str(c.counter_id))] = v
            gpu_counters.append({"ts": p.timestamp, "gpu_id": e.gpu_id, "values": values})
        elif data_kind == "track_event":
            e = p.track_event
            u = e.track_uuid
            if track_name(u) is None and u not in threads and u not in tracks and u not in processes:
                errors.append(f"packet {n}: unknown track {u}")
            name = None
            if e.HasField("name_iid"):
                if e.name_iid not in names:
                    errors.append(f"packet {n}: name iid {e.name_iid} never interned")
                name = names.get(e.name_iid)
            elif e.HasField("name"):
                name = e.name
            cats = [categories.get(c) for c in e.category_iids] + list(e.categories)
            for c in e.category_iids:
                if c not in categories:
                    errors.append(f"packet {n}: category iid {c} never interned")
            if e.type == TrackEvent.TYPE_SLICE_BEGIN:
                launched = []
                for raw in unknown(e, 3000):
                    launched += [v for (num, _, v) in fields(bytes(raw)) if num == 1]
                stack = open_slices.setdefault(u, [])
                slices.append({
                    "track": track_name(u),
                    "track_uuid": u,
                    "name": name,
                    "category": cats[0] if cats else None,
                    "ts": p.timestamp,
                    "dur": None,
                    "depth": len(stack),
                    "launched": launched,
                })
                stack.append(len(slices) - 1)
            elif e.type == TrackEvent.TYPE_SLICE_END:
                stack = open_slices.get(u, [])
                if not stack:
                    errors.append(f"packet {n}: end without a begin on {track_name(u)}")
                else:
                    s = slices[stack.pop()]
                    s["dur"] = p.timestamp - s["ts"]
                    if s["dur"] < 0:
                        errors.append(f"packet {n}: slice {s['name']} ends before it begins")
            elif e.type == TrackEvent.TYPE_INSTANT:
                instants.append({"track": track_name(u), "name": name, "ts": p.timestamp})
            elif e.type == TrackEvent.TYPE_COUNTER:
                v = e.double_counter_value if e.HasField("double_counter_value") else e.counter_value
                counters.append({"track": track_name(u), "ts": p.timestamp, "value": v})
    for u, stack in open_slices.items():
        for i in stack:
            errors.append(f"slice {slices[i]['name']} on {track_name(u)} left open")

    out = {
        "packets": len(trace.packet),
        "bytes": len(data),
        "clock": clock,
        "processes": {str(v["pid"]): v for v in processes.values()},
        "threads": {str(k): v for k, v in threads.items()},
        "tracks": {str(k): v for k, v in tracks.items()},
        "counter_tracks": {str(k): v for k, v in counter_tracks.items()},
        "specs": {str(k): v for k, v in specs.items()},
        "contexts": {str(k): v for k, v in contexts.items()},
        "render_stages": render_stages,
        "slices": slices,
        "instants": instants,
        "counters": counters,
        "gpu_counters": gpu_counters,
        "gpu_counter_specs": {str(k): v for k, v in gpu_counter_specs.items()},
        "gpu_counter_units": gpu_counter_units,
        "errors": errors,
    }
    if counts:
        for k in ["render_stages", "slices", "instants", "counters", "gpu_counters"]:
            out[k] = len(out[k])
    if prefixes:
        bad = []
        for cut in packet_boundaries(data):
            t = Trace()
            try:
                t.ParseFromString(data[:cut])
            except Exception as e:  # noqa: BLE001 - any parse failure is reported
                bad.append(f"{cut}: {e}")
        out["prefix_errors"] = bad
        out["prefixes"] = len(packet_boundaries(data))
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0], "--counts" in sys.argv, "--prefixes" in sys.argv)
