//! Scope nesting kept by each recorder (no frame lock while recording), on
//! the fake backend: recorders that move between threads with scopes open,
//! two frames open on one recorder, dropped scopes in the middle of a
//! nest, misuse, and many threads into one frame growing past its pages.

use gpu_counters_hal::fake::{FakeDevice, FakeRecorder};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{BackendRecorder, ScopeStack};
use gpu_counters_profiler::{
    DropCounts, Frame, FrameResult, Profiler, ProfilerError, ProfilerOptions, ScopeResult, WhenFull,
};
use std::time::Duration;

fn device() -> FakeDevice {
    FakeDevice::new("fake GPU", 64).unwrap()
}

fn options(ring: usize, scopes: u32, when_full: WhenFull) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: ring,
        max_scopes_per_frame: scopes,
        statistics: true,
        when_full,
        queue_name: Some("fake queue".into()),
    }
}

/// Timestamps only: statistic chains are per sample buffer on every
/// backend, so a scope whose nest samples another buffer (another frame's,
/// another page's) has no statistics; it is counted as failed.
fn timed_only(ring: usize, scopes: u32, when_full: WhenFull) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: ring,
        max_scopes_per_frame: scopes,
        statistics: false,
        when_full,
        queue_name: Some("fake queue".into()),
    }
}

const WAIT: WhenFull = WhenFull::Wait {
    timeout: Duration::from_secs(10),
};

fn find<'a>(frame: &'a FrameResult, label: &str) -> (usize, &'a ScopeResult) {
    let i = frame
        .scopes
        .iter()
        .position(|s| s.label == label)
        .unwrap_or_else(|| panic!("no scope {label} in frame {}", frame.index));
    (i, &frame.scopes[i])
}

/// Submits `recorders`, ends `frames` with the submit time, runs the work
/// and collects every frame.
fn run(
    device: &FakeDevice,
    profiler: &Profiler<FakeDevice>,
    frames: Vec<Frame<'_, FakeDevice>>,
    recorders: Vec<FakeRecorder>,
) -> Vec<FrameResult> {
    let subs: Vec<_> = recorders
        .into_iter()
        .map(|r| device.submit(r).unwrap())
        .collect();
    for f in frames {
        profiler.end_frame(f, &subs).unwrap();
    }
    for s in &subs {
        s.wait();
    }
    profiler.wait_collect_all(Duration::from_secs(10)).unwrap()
}

/// Runs `record(thread, frame, recorder)` on `threads` threads named
/// `{name} {thread}` at once, each with a recorder of its own, and returns
/// the recorders.
fn on_threads(
    device: &FakeDevice,
    frame: &Frame<'_, FakeDevice>,
    threads: u64,
    name: &str,
    record: impl Fn(u64, &Frame<'_, FakeDevice>, &mut FakeRecorder) + Sync,
) -> Vec<FakeRecorder> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let record = &record;
                std::thread::Builder::new()
                    .name(format!("{name} {t}"))
                    .spawn_scoped(s, move || {
                        let mut cmd = device.recorder();
                        record(t, frame, &mut cmd);
                        cmd
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A recorder moved to another thread with a scope open: the scope's
/// nesting goes with it, and inner scopes begun there nest inside.
#[test]
fn a_recorder_carries_its_open_scopes_to_another_thread() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    cmd.dispatch(1);
    let cmd = std::thread::scope(|s| {
        let frame = &frame;
        s.spawn(move || {
            let mut cmd = cmd;
            let inner = frame.scope(&mut cmd, "inner", PassKind::Compute).unwrap();
            cmd.dispatch(20);
            inner.end(&mut cmd).unwrap();
            outer.end(&mut cmd).unwrap();
            cmd
        })
        .join()
        .unwrap()
    });
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    let f = &frames[0];
    assert_eq!(f.drops, DropCounts::default());
    let (o, outer) = find(f, "outer");
    let (_, inner) = find(f, "inner");
    assert_eq!((outer.depth, outer.parent), (0, None));
    assert_eq!((inner.depth, inner.parent), (1, Some(o)));
    assert_eq!(
        outer
            .statistics
            .as_deref()
            .unwrap()
            .compute_kernel_invocations,
        21
    );
    assert_eq!(
        inner
            .statistics
            .as_deref()
            .unwrap()
            .compute_kernel_invocations,
        20
    );
    assert_ne!(outer.thread, inner.thread, "begun on two threads");
}

/// Scopes of two frames open on one recorder at once nest per frame: a
/// scope of frame 0 begun inside one of frame 1 is still the child of
/// frame 0's scope.
#[test]
fn two_frames_open_on_one_recorder_nest_per_frame() {
    let device = device();
    let profiler = Profiler::new(&device, timed_only(2, 16, WAIT)).unwrap();
    let f0 = profiler.begin_frame().unwrap();
    let f1 = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let a = f0.scope(&mut cmd, "a", PassKind::Scope).unwrap();
    let b = f1.scope(&mut cmd, "b", PassKind::Scope).unwrap();
    let c = f0.scope(&mut cmd, "c", PassKind::Compute).unwrap();
    cmd.dispatch(5);
    // Ending frame 1's scope does not need frame 0's inner one ended.
    b.end(&mut cmd).unwrap();
    c.end(&mut cmd).unwrap();
    a.end(&mut cmd).unwrap();
    let frames = run(&device, &profiler, vec![f0, f1], vec![cmd]);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].scopes.len(), 2);
    assert_eq!(frames[1].scopes.len(), 1);
    let (ia, a) = find(&frames[0], "a");
    let (_, c) = find(&frames[0], "c");
    assert_eq!((a.depth, a.parent), (0, None));
    assert_eq!((c.depth, c.parent), (1, Some(ia)));
    let (_, b) = find(&frames[1], "b");
    assert_eq!((b.depth, b.parent), (0, None));
    for f in &frames {
        assert_eq!(f.drops, DropCounts::default());
    }
}

/// A scope dropped unended in the middle of a nest: scopes begun after it
/// nest in its parent, scopes begun inside it get the nearest enclosing
/// scope that has a result, and it is counted as not ended.
#[test]
fn a_dropped_scope_in_a_nest_is_skipped_and_counted() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    let lost = frame.scope(&mut cmd, "lost", PassKind::Scope).unwrap();
    let inside = frame
        .scope(&mut cmd, "inside lost", PassKind::Compute)
        .unwrap();
    cmd.dispatch(3);
    inside.end(&mut cmd).unwrap();
    drop(lost);
    let after = frame
        .scope(&mut cmd, "after lost", PassKind::Compute)
        .unwrap();
    cmd.dispatch(4);
    after.end(&mut cmd).unwrap();
    // A scope dropped while a scope inside it is open: the inner one still
    // ends, and the outer one after it.
    let lost2 = frame.scope(&mut cmd, "lost 2", PassKind::Scope).unwrap();
    let inner2 = frame
        .scope(&mut cmd, "inside lost 2", PassKind::Compute)
        .unwrap();
    drop(lost2);
    cmd.dispatch(6);
    inner2.end(&mut cmd).unwrap();
    // A scope dropped right inside the one that ends next: the recorder's
    // innermost scope is the dropped one, and the outer one still ends.
    let lost3 = frame.scope(&mut cmd, "lost 3", PassKind::Scope).unwrap();
    drop(lost3);
    outer.end(&mut cmd).unwrap();
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    let f = &frames[0];
    assert_eq!(
        f.drops,
        DropCounts {
            not_ended: 3,
            ..Default::default()
        }
    );
    assert_eq!(f.scopes.len(), 4);
    let (o, outer) = find(f, "outer");
    assert_eq!(
        outer
            .statistics
            .as_deref()
            .unwrap()
            .compute_kernel_invocations,
        13
    );
    for (label, count) in [("inside lost", 3), ("after lost", 4), ("inside lost 2", 6)] {
        let (_, s) = find(f, label);
        assert_eq!((s.depth, s.parent), (1, Some(o)), "{label}");
        assert_eq!(
            s.statistics.as_deref().unwrap().compute_kernel_invocations,
            count
        );
    }
}

/// Misuse is a typed error naming the scopes, and the misused scope is
/// counted as not ended: ending out of order, on another recorder, and a
/// scope of one frame ended on a recorder that only has another frame's.
#[test]
fn misuse_on_recorders_is_a_typed_error() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, WAIT)).unwrap();
    let f0 = profiler.begin_frame().unwrap();
    let f1 = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let mut other = device.recorder();
    let outer = f0.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    let inner = f0.scope(&mut cmd, "inner", PassKind::Compute).unwrap();
    let elsewhere = f1
        .scope(&mut other, "elsewhere", PassKind::Compute)
        .unwrap();
    assert!(matches!(
        outer.end(&mut cmd),
        Err(ProfilerError::ScopeOrder { ref label, ref open }) if label == "outer" && open == "inner"
    ));
    assert!(matches!(
        inner.end(&mut other),
        Err(ProfilerError::WrongCommandBuffer { ref label }) if label == "inner"
    ));
    assert!(matches!(
        elsewhere.end(&mut cmd),
        Err(ProfilerError::WrongCommandBuffer { ref label }) if label == "elsewhere"
    ));
    // The recorders are still usable for new scopes, outermost again.
    let fresh = f0.scope(&mut cmd, "fresh", PassKind::Compute).unwrap();
    cmd.dispatch(2);
    fresh.end(&mut cmd).unwrap();
    let frames = run(&device, &profiler, vec![f0, f1], vec![cmd, other]);
    assert_eq!(
        frames[0].drops,
        DropCounts {
            not_ended: 2,
            ..Default::default()
        }
    );
    let (_, fresh) = find(&frames[0], "fresh");
    assert_eq!((fresh.depth, fresh.parent), (0, None));
    assert_eq!(
        fresh
            .statistics
            .as_deref()
            .unwrap()
            .compute_kernel_invocations,
        2
    );
    assert_eq!(
        frames[1].drops,
        DropCounts {
            not_ended: 1,
            ..Default::default()
        }
    );
    assert_eq!(profiler.dropped_scopes_total(), 3);
}

/// What a backend may do with the stacks its recorders hold (swap two
/// recorders' stacks, put a new one in, keep a value of another type in
/// one) loses the profiler's nesting on them, never its soundness: a scope
/// ended where its recorder's stack no longer holds it is a typed error and
/// counted as not ended, and the recorders go on with new scopes, each with
/// its own samples.
#[test]
fn stacks_a_backend_swaps_replaces_or_takes_over_are_typed_errors() {
    let device = device();
    let profiler = Profiler::new(&device, timed_only(2, 16, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let (mut a, mut b) = (device.recorder(), device.recorder());
    let sa = frame.scope(&mut a, "a", PassKind::Compute).unwrap();
    let sb = frame.scope(&mut b, "b", PassKind::Compute).unwrap();
    std::mem::swap(a.scope_stack(), b.scope_stack());
    assert!(matches!(
        sa.end(&mut a),
        Err(ProfilerError::WrongCommandBuffer { ref label }) if label == "a"
    ));
    assert!(matches!(
        sb.end(&mut b),
        Err(ProfilerError::WrongCommandBuffer { ref label }) if label == "b"
    ));
    *a.scope_stack() = ScopeStack::default();
    *b.scope_stack().state::<u64>() = 7;
    let a2 = frame.scope(&mut a, "a2", PassKind::Compute).unwrap();
    let b2 = frame.scope(&mut b, "b2", PassKind::Compute).unwrap();
    let inner = frame.scope(&mut b, "inner", PassKind::Compute).unwrap();
    inner.end(&mut b).unwrap();
    b2.end(&mut b).unwrap();
    a2.end(&mut a).unwrap();
    let frames = run(&device, &profiler, vec![frame], vec![a, b]);
    let f = &frames[0];
    assert_eq!(
        f.drops,
        DropCounts {
            not_ended: 2,
            ..Default::default()
        }
    );
    let mut labels: Vec<&str> = f.scopes.iter().map(|s| s.label.as_str()).collect();
    labels.sort_unstable();
    assert_eq!(labels, ["a2", "b2", "inner"]);
    let (b2_at, _) = find(f, "b2");
    let (_, inner) = find(f, "inner");
    assert_eq!(inner.parent, Some(b2_at));
    let (_, a2) = find(f, "a2");
    assert_eq!((a2.depth, a2.parent), (0, None));
    for s in &f.scopes {
        assert!(s.end_ns >= s.start_ns, "{s:?}");
    }
    assert_eq!(profiler.dropped_scopes_total(), 2);
}

/// Eight named threads, each on its own recorder, record 60 scopes each into
/// one frame whose pages hold 8 scopes, so the frame grows pages while they
/// record. Each thread cycles through more labels than a thread keeps at
/// hand. Every scope comes back with its label, thread and parent.
#[test]
fn eight_threads_grow_one_frame_with_exact_results() {
    const THREADS: u64 = 8;
    const PAIRS: u64 = 30;
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 8, WhenFull::Grow)).unwrap();
    let buffers_before = profiler.sample_buffer_count();
    let frame = profiler.begin_frame().unwrap();
    let recorders = on_threads(&device, &frame, THREADS, "recorder", |t, frame, cmd| {
        for k in 0..PAIRS {
            let outer = frame
                .scope(cmd, &format!("t{t} outer {}", k % 6), PassKind::Scope)
                .unwrap();
            let inner = frame
                .scope(cmd, &format!("t{t} inner {k}"), PassKind::Compute)
                .unwrap();
            cmd.dispatch(1000 * t + k);
            inner.end(cmd).unwrap();
            outer.end(cmd).unwrap();
        }
    });
    let frames = run(&device, &profiler, vec![frame], recorders);
    let f = &frames[0];
    assert_eq!(f.drops, DropCounts::default());
    assert_eq!(f.scopes.len() as u64, THREADS * PAIRS * 2);
    // 480 scopes in pages of 8: 60 pages of one buffer (timestamps).
    assert_eq!(profiler.sample_buffer_count() - buffers_before, 59);
    for t in 0..THREADS {
        for k in 0..PAIRS {
            let (_, inner) = find(f, &format!("t{t} inner {k}"));
            assert_eq!(inner.thread, format!("recorder {t}"));
            assert_eq!(inner.depth, 1);
            let parent = &f.scopes[inner.parent.unwrap()];
            assert_eq!(parent.label, format!("t{t} outer {}", k % 6));
            assert_eq!(parent.thread, format!("recorder {t}"));
            assert_eq!(parent.depth, 0);
            assert!(parent.start_ns <= inner.start_ns && inner.end_ns <= parent.end_ns);
        }
    }
    // The next frame reuses the grown pages: nothing more is allocated.
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    for k in 0..100 {
        let s = frame.scope(&mut cmd, "again", PassKind::Compute).unwrap();
        cmd.dispatch(k);
        s.end(&mut cmd).unwrap();
    }
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    assert_eq!(frames[0].scopes.len(), 100);
    assert_eq!(frames[0].drops, DropCounts::default());
    for s in &frames[0].scopes {
        assert_eq!(
            (s.depth, s.parent, s.statistics.as_deref()),
            (0, None, None)
        );
    }
    assert_eq!(profiler.sample_buffer_count() - buffers_before, 59);
}

/// A recorder claims ids in blocks, but one recorder alone still fills its
/// frame exactly: 64 of 70 scopes fit in room for 64, 6 are counted.
#[test]
fn one_recorder_fills_its_frame_exactly() {
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 64, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let mut recorded = 0;
    for k in 0..70 {
        let s = frame
            .scope(&mut cmd, &format!("s{k}"), PassKind::Compute)
            .unwrap();
        recorded += u32::from(s.is_recorded());
        s.end(&mut cmd).unwrap();
    }
    assert_eq!(recorded, 64);
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    assert_eq!(frames[0].scopes.len(), 64);
    for (k, s) in frames[0].scopes.iter().enumerate() {
        assert_eq!(s.label, format!("s{k}"));
    }
    assert_eq!(
        frames[0].drops,
        DropCounts {
            over_capacity: 6,
            ..Default::default()
        }
    );
}

/// Eight recorders taking turns, each leaving part of its last block of ids
/// unused: every scope is in the results or counted, and the frame holds at
/// least its room less 7 ids a recorder (claims are at most the room left
/// over four times the recorders that claimed: 8 ids here).
#[test]
fn recorders_taking_turns_lose_little_room() {
    const ROOM: u32 = 256;
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, ROOM, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmds: Vec<FakeRecorder> = (0..8).map(|_| device.recorder()).collect();
    // Each recorder records 11 scopes (claims of 1, 2, 4, then 8 ids: 4
    // left unused), in turns.
    let mut recorded = 0u32;
    for k in 0..11 {
        for (r, cmd) in cmds.iter_mut().enumerate() {
            let s = frame
                .scope(cmd, &format!("r{r} s{k}"), PassKind::Compute)
                .unwrap();
            recorded += u32::from(s.is_recorded());
            s.end(cmd).unwrap();
        }
    }
    assert_eq!(recorded, 88);
    // Then one recorder records until the frame is full.
    let mut last = device.recorder();
    let mut more = 0u32;
    let mut dropped = 0u32;
    for k in 0..ROOM {
        let s = frame
            .scope(&mut last, &format!("last {k}"), PassKind::Compute)
            .unwrap();
        if s.is_recorded() {
            more += 1;
        } else {
            dropped += 1;
        }
        s.end(&mut last).unwrap();
    }
    assert!(
        recorded + more >= ROOM - 8 * 7,
        "{} scopes fit in room for {ROOM}",
        recorded + more
    );
    // Some room went unused: the blocks' leftovers (claims shrink with the
    // room left, to single ids when it is under 64).
    assert!(recorded + more < ROOM);
    assert_eq!(recorded + more + dropped, 88 + ROOM);
    cmds.push(last);
    let frames = run(&device, &profiler, vec![frame], cmds);
    let f = &frames[0];
    assert_eq!(f.scopes.len() as u32, recorded + more);
    assert_eq!(
        f.drops,
        DropCounts {
            over_capacity: dropped,
            ..Default::default()
        }
    );
    for r in 0..8 {
        for k in 0..11 {
            find(f, &format!("r{r} s{k}"));
        }
    }
}

/// Eight threads into one frame with room for all: ids come in blocks of
/// up to 32 per recorder, and every scope comes back once with its label,
/// thread and parent.
#[test]
fn eight_threads_claim_blocks_with_exact_results() {
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 4096, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let recorders = on_threads(&device, &frame, 8, "claimer", |t, frame, cmd| {
        for k in 0..100 {
            let outer = frame
                .scope(cmd, &format!("t{t} outer {k}"), PassKind::Scope)
                .unwrap();
            let inner = frame.scope(cmd, "inner", PassKind::Compute).unwrap();
            inner.end(cmd).unwrap();
            outer.end(cmd).unwrap();
        }
    });
    let frames = run(&device, &profiler, vec![frame], recorders);
    let f = &frames[0];
    assert_eq!(f.drops, DropCounts::default());
    assert_eq!(f.scopes.len(), 1600);
    let mut inners = 0;
    for s in &f.scopes {
        if s.label == "inner" {
            inners += 1;
            let p = &f.scopes[s.parent.unwrap()];
            assert!(p
                .label
                .starts_with(&format!("t{} outer", &s.thread["claimer ".len()..])));
            assert_eq!(p.thread, s.thread);
        } else {
            assert_eq!((s.depth, s.parent), (0, None));
        }
    }
    assert_eq!(inners, 800);
}

/// Pass scopes (begun and ended at once, their two timestamps written by
/// the backend as a pass's): nested in the recorder's open scope, in
/// recording order, and every one lost is counted: dropped unrecorded (not
/// ended), failed, and past the frame's room (over capacity, nothing to
/// write).
#[test]
fn pass_scopes_nest_and_every_lost_one_is_counted() {
    use gpu_counters_hal::{BackendRecorder, TimestampGranularity::Precise};
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 6, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    assert!(!frame.samples_statistics());
    let mut cmd = device.recorder();
    let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    for (k, kind) in [PassKind::Compute, PassKind::Render]
        .into_iter()
        .enumerate()
    {
        let pass = frame
            .pass_scope(&mut cmd, &format!("pass {k}"), kind)
            .unwrap()
            .expect("room for it");
        assert_eq!(pass.end_index(), pass.start_index() + 1);
        let buffer = pass.timestamps();
        cmd.sample_counters(buffer, pass.start_index(), Precise)
            .unwrap();
        cmd.dispatch(1);
        cmd.sample_counters(buffer, pass.end_index(), Precise)
            .unwrap();
        pass.recorded();
    }
    let unrecorded = frame
        .pass_scope(&mut cmd, "unrecorded", PassKind::Compute)
        .unwrap()
        .unwrap();
    drop(unrecorded);
    let failing = frame
        .pass_scope(&mut cmd, "failing", PassKind::Compute)
        .unwrap()
        .unwrap();
    let e = failing.failed(gpu_counters_hal::Error::Internal("refused".into()));
    assert!(e.to_string().contains("refused"), "{e}");
    outer.end(&mut cmd).unwrap();
    // Room for 6: "outer", the two passes, the two lost ones, and "last".
    let last = frame
        .pass_scope(&mut cmd, "last", PassKind::Compute)
        .unwrap()
        .unwrap();
    let buffer = last.timestamps();
    cmd.sample_counters(buffer, last.start_index(), Precise)
        .unwrap();
    cmd.sample_counters(buffer, last.end_index(), Precise)
        .unwrap();
    last.recorded();
    assert!(frame
        .pass_scope(&mut cmd, "no room", PassKind::Compute)
        .unwrap()
        .is_none());
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    let f = &frames[0];
    assert_eq!(
        f.drops,
        DropCounts {
            not_ended: 1,
            failed: 1,
            over_capacity: 1,
            ..Default::default()
        }
    );
    let labels: Vec<&str> = f.scopes.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["outer", "pass 0", "pass 1", "last"]);
    let (o, outer) = find(f, "outer");
    for (k, kind) in [PassKind::Compute, PassKind::Render]
        .into_iter()
        .enumerate()
    {
        let (_, s) = find(f, &format!("pass {k}"));
        assert_eq!((s.depth, s.parent, s.kind), (1, Some(o), kind));
        assert!(outer.start_ticks <= s.start_ticks && s.end_ticks <= outer.end_ticks);
        assert!(s.start_ticks <= s.end_ticks, "{s:?}");
    }
    let (_, p0) = find(f, "pass 0");
    let (_, p1) = find(f, "pass 1");
    assert!(p0.end_ticks <= p1.start_ticks);
    let (_, last) = find(f, "last");
    assert_eq!((last.depth, last.parent), (0, None));
    assert!(outer.end_ticks <= last.start_ticks);
}

/// A pass scope marked recorded whose timestamps were not both written
/// gets no made-up time: neither written is counted as abandoned, one
/// written as failed.
#[test]
fn pass_scopes_without_their_writes_are_counted() {
    use gpu_counters_hal::{BackendRecorder, TimestampGranularity::Precise};
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 8, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    frame
        .pass_scope(&mut cmd, "neither", PassKind::Compute)
        .unwrap()
        .unwrap()
        .recorded();
    let start_only = frame
        .pass_scope(&mut cmd, "start only", PassKind::Compute)
        .unwrap()
        .unwrap();
    cmd.sample_counters(start_only.timestamps(), start_only.start_index(), Precise)
        .unwrap();
    start_only.recorded();
    let frames = run(&device, &profiler, vec![frame], vec![cmd]);
    let f = &frames[0];
    assert!(f.scopes.is_empty(), "{:?}", f.scopes);
    assert_eq!(
        f.drops,
        DropCounts {
            abandoned: 1,
            failed: 1,
            ..Default::default()
        }
    );
}

/// Recorders taking turns scope by scope get their scope ids in claims that
/// start at multiples of 128, smaller claims (a recorder's first few) never
/// crossing one: each group of 256 timestamps (four blocks of 64, which the
/// Vulkan and wgpu backends claim for one recording at a time, the first
/// with those ahead of it) is written by one recorder, but for the groups
/// that the recorders' first, smaller claims share. Every scope is in the
/// results.
#[test]
fn recorders_taking_turns_write_timestamp_blocks_of_their_own() {
    use gpu_counters_hal::bookkeeping::GROUP_INDICES;
    use gpu_counters_hal::{BackendRecorder, TimestampGranularity::Precise};
    use std::collections::{BTreeMap, BTreeSet};
    const RECORDERS: usize = 3;
    const EACH: u32 = 600;
    let device = device();
    let profiler = Profiler::new(&device, timed_only(1, 4096, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmds: Vec<FakeRecorder> = (0..RECORDERS).map(|_| device.recorder()).collect();
    // Which recorders wrote into each group of timestamps.
    let mut writers: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
    for k in 0..EACH {
        for (r, cmd) in cmds.iter_mut().enumerate() {
            let pass = frame
                .pass_scope(cmd, &format!("r{r} p{k}"), PassKind::Compute)
                .unwrap()
                .expect("room for it");
            for index in [pass.start_index(), pass.end_index()] {
                cmd.sample_counters(pass.timestamps(), index, Precise)
                    .unwrap();
                writers.entry(index / GROUP_INDICES).or_default().insert(r);
            }
            pass.recorded();
        }
    }
    // The first claims (1, 2, 4, ... 64 ids: 127 a recorder, 254
    // timestamps) share the groups of the segments they are carved from;
    // no other group is shared.
    let small = (RECORDERS as u32 * 254).div_ceil(GROUP_INDICES) as usize + 1;
    let shared: Vec<_> = writers.iter().filter(|(_, w)| w.len() > 1).collect();
    assert!(
        shared.len() <= small,
        "groups written by several recorders: {shared:?}"
    );
    assert!(
        writers.iter().filter(|(_, w)| w.len() == 1).count() >= 8,
        "groups of one recorder each: {writers:?}"
    );
    // 1800 scopes, 3600 timestamps: 15 groups of 256 at least, and at
    // most one more a recorder (each one's unused ids) and the small
    // claims' groups.
    assert!(writers.len() <= 3600 / GROUP_INDICES as usize + 1 + RECORDERS + small);
    let frames = run(&device, &profiler, vec![frame], cmds);
    assert_eq!(frames[0].scopes.len(), RECORDERS * EACH as usize);
    assert_eq!(frames[0].drops, DropCounts::default());
    for r in 0..RECORDERS {
        find(&frames[0], &format!("r{r} p{}", EACH - 1));
    }
}
