#!/usr/bin/env python3
"""Decodes a Perfetto trace with Perfetto's own schema and prints it as JSON.

Usage: perfetto_dump.py TRACE

Uses `perfetto_trace_pb2` from the `perfetto` package on PyPI (scripts/setup.sh
installs a pinned version into .venv-perfetto/). Prints one JSON object:

- "packets": how many packets the trace holds;
- "primary_clock": the clock snapshot's primary trace clock, if any;
- "tracks": every track descriptor (uuid, parent, name, counter, rank);
- "slices": every slice, rebuilt from TYPE_SLICE_BEGIN/END per track in file
  order: track name, name, category, ts, dur, depth, parent (an index into
  "slices") and its debug annotations by name;
- "counters": every counter event (track name, ts, value);
- "errors": what does not follow the rules the tests rely on (an event on an
  unknown track, an interned name never defined, an end without a begin, a
  slice left open, a track's events going back in time, a packet off the
  sequence or on another clock than CLOCK_MONOTONIC: a packet's own
  timestamp_clock_id, else its sequence's packet defaults').
"""
import json
import sys

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    BuiltinClock,
    Trace,
    TracePacket,
    TrackEvent,
)


def annotation_value(a):
    kind = a.WhichOneof("value")
    return getattr(a, kind) if kind else None


def main(path):
    trace = Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())

    errors = []
    tracks = {}
    names, annotation_names, categories = {}, {}, {}
    slices, counters = [], []
    open_slices = {}  # track uuid -> stack of slice indices
    last_ts = {}  # track uuid -> last event time
    primary_clock = None
    cleared = False
    default_clock = None  # the sequence's trace_packet_defaults clock

    for n, p in enumerate(trace.packet):
        if p.trusted_packet_sequence_id != 1:
            errors.append(f"packet {n}: sequence id {p.trusted_packet_sequence_id}")
        if p.sequence_flags & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            cleared = True
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            if d.HasField("timestamp_clock_id"):
                default_clock = d.timestamp_clock_id
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else default_clock
        if p.HasField("interned_data"):
            i = p.interned_data
            names.update({e.iid: e.name for e in i.event_names})
            annotation_names.update({e.iid: e.name for e in i.debug_annotation_names})
            categories.update({e.iid: e.name for e in i.event_categories})
        data = p.WhichOneof("data")
        if data == "clock_snapshot":
            primary_clock = BuiltinClock.Name(p.clock_snapshot.primary_trace_clock)
        elif data == "track_descriptor":
            t = p.track_descriptor
            tracks[t.uuid] = {
                "uuid": t.uuid,
                "parent": t.parent_uuid if t.HasField("parent_uuid") else None,
                "name": t.name,
                "counter": t.HasField("counter"),
                "rank": t.sibling_order_rank if t.HasField("sibling_order_rank") else None,
            }
        elif data == "track_event":
            e = p.track_event
            if clock != BuiltinClock.BUILTIN_CLOCK_MONOTONIC:
                errors.append(f"packet {n}: clock {clock}")
            if not cleared:
                errors.append(f"packet {n}: event before the incremental state was cleared")
            if e.track_uuid not in tracks:
                errors.append(f"packet {n}: unknown track {e.track_uuid}")
                continue
            track = tracks[e.track_uuid]["name"]
            ts = p.timestamp
            if ts < last_ts.get(e.track_uuid, 0):
                errors.append(f"packet {n}: track {track!r} goes back in time")
            last_ts[e.track_uuid] = ts
            stack = open_slices.setdefault(e.track_uuid, [])
            if e.type == TrackEvent.TYPE_SLICE_BEGIN:
                if e.HasField("name_iid"):
                    if e.name_iid not in names:
                        errors.append(f"packet {n}: name iid {e.name_iid} never interned")
                    name = names.get(e.name_iid)
                else:
                    name = e.name
                args = {}
                for a in e.debug_annotations:
                    key = annotation_names.get(a.name_iid) if a.HasField("name_iid") else a.name
                    if key is None:
                        errors.append(f"packet {n}: annotation iid {a.name_iid} never interned")
                    args[key] = annotation_value(a)
                cats = [categories.get(c) for c in e.category_iids] + list(e.categories)
                slices.append({
                    "track": track,
                    "name": name,
                    "category": cats[0] if cats else None,
                    "ts": ts,
                    "dur": None,
                    "depth": len(stack),
                    "parent": stack[-1] if stack else None,
                    "args": args,
                })
                stack.append(len(slices) - 1)
            elif e.type == TrackEvent.TYPE_SLICE_END:
                if not stack:
                    errors.append(f"packet {n}: end without a begin on {track!r}")
                    continue
                s = slices[stack.pop()]
                s["dur"] = ts - s["ts"]
            elif e.type == TrackEvent.TYPE_COUNTER:
                if not tracks[e.track_uuid]["counter"]:
                    errors.append(f"packet {n}: counter value on slice track {track!r}")
                counters.append({"track": track, "ts": ts, "value": e.counter_value})
            else:
                errors.append(f"packet {n}: event type {e.type}")
    for uuid, stack in open_slices.items():
        if stack:
            errors.append(f"track {tracks[uuid]['name']!r}: {len(stack)} slice(s) never ended")

    json.dump({
        "packets": len(trace.packet),
        "primary_clock": primary_clock,
        "tracks": list(tracks.values()),
        "slices": slices,
        "counters": counters,
        "errors": errors,
    }, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: perfetto_dump.py TRACE")
    main(sys.argv[1])
