//! Leaked and slow frames and leaked scope guards on the fake backend: a
//! frame that is never ended (`mem::forget`) must not hold back the frames
//! behind it, under every `WhenFull`, and whatever it held is counted.

use gpu_counters_hal::fake::{FakeDevice, FakeRecorder};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{
    DropCounts, Frame, FrameResult, Profiler, ProfilerError, ProfilerOptions, WhenFull,
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

/// Records one scope around a dispatch of `n` invocations into a new recorder.
fn one_scope(
    device: &FakeDevice,
    frame: &Frame<'_, FakeDevice>,
    label: &str,
    n: u64,
) -> FakeRecorder {
    let mut cmd = device.recorder();
    let scope = frame.scope(&mut cmd, label, PassKind::Compute).unwrap();
    cmd.dispatch(n);
    scope.end(&mut cmd).unwrap();
    cmd
}

/// Submits `cmd`, runs it, and ends `frame` with its submit time.
fn run_frame(
    device: &FakeDevice,
    profiler: &Profiler<FakeDevice>,
    frame: Frame<'_, FakeDevice>,
    cmd: FakeRecorder,
) {
    let submission = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    submission.wait();
}

/// The invocation count of a frame's one scope.
fn count_of(f: &FrameResult) -> u64 {
    assert_eq!(f.scopes.len(), 1, "frame {}: {f:?}", f.index);
    f.scopes[0]
        .statistics
        .as_deref()
        .unwrap()
        .compute_kernel_invocations
}

/// Frame 0 is leaked after recording two scopes (whose work is submitted
/// and runs); frames 1..=8 are recorded, run and collected as usual. Under
/// `policy`, every frame comes back once, in order: frame 0 without scopes
/// and its two scopes counted, the others with their own exact counts.
/// The ring never grows, and the leaked frame's buffers are replaced once.
fn leaked_frame_is_abandoned(policy: WhenFull) {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 4, policy)).unwrap();
    let buffers = profiler.sample_buffer_count();
    let leaked = profiler.begin_frame().unwrap();
    let mut cmd = one_scope(&device, &leaked, "leaked a", 1000);
    let b = leaked
        .scope(&mut cmd, "leaked b", PassKind::Compute)
        .unwrap();
    cmd.dispatch(2000);
    b.end(&mut cmd).unwrap();
    std::mem::forget(leaked);
    // The leaked frame's work still runs, into the buffers it kept.
    device.submit(cmd).unwrap().wait();

    let mut frames = Vec::new();
    for n in 1..=8u64 {
        let frame = profiler
            .begin_frame()
            .unwrap_or_else(|e| panic!("frame {n}: {e}"));
        assert_eq!(frame.index(), n);
        assert!(frame.has_slot(), "frame {n} has a slot");
        let cmd = one_scope(&device, &frame, "work", n);
        run_frame(&device, &profiler, frame, cmd);
        frames.extend(profiler.collect().unwrap());
    }
    frames.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    let indices: Vec<u64> = frames.iter().map(|f| f.index).collect();
    assert_eq!(indices, (0..=8).collect::<Vec<_>>(), "{policy:?}");
    let f0 = &frames[0];
    assert!(f0.scopes.is_empty());
    assert_eq!(
        f0.drops,
        DropCounts {
            frame_abandoned: 2,
            ..DropCounts::default()
        },
        "{policy:?}"
    );
    assert_eq!(f0.dropped_scopes, 2, "{policy:?}: {f0:?}");
    for f in &frames[1..] {
        assert_eq!(count_of(f), f.index, "{policy:?}");
        assert_eq!(f.drops, DropCounts::default(), "{policy:?}");
    }
    assert_eq!(profiler.dropped_scopes_total(), 2, "{policy:?}");
    assert_eq!(profiler.ring_size(), 2, "{policy:?}: the ring did not grow");
    // One page of two buffers (timestamps, statistics) replaces the one the
    // leaked frame kept.
    assert_eq!(profiler.sample_buffer_count(), buffers + 2, "{policy:?}");
}

/// Issue 40, item 4, under `Grow`: before, nothing came back, nothing was
/// counted, and the ring grew.
#[test]
fn a_leaked_frame_under_grow_is_abandoned_on_the_fake_backend() {
    leaked_frame_is_abandoned(WhenFull::Grow);
}

/// Issue 40, item 4, under `Wait`: before, frame 2 failed with `RingFull`
/// and the finished frames were never returned. The timeout is short: a
/// leaked frame never ends, however long `begin_frame` waits.
#[test]
fn a_leaked_frame_under_wait_is_abandoned_on_the_fake_backend() {
    leaked_frame_is_abandoned(WhenFull::Wait {
        timeout: Duration::from_millis(1),
    });
}

/// Issue 40, item 4, under `Drop`: before, the finished frames behind the
/// leaked one were never returned nor counted.
#[test]
fn a_leaked_frame_under_drop_is_abandoned_on_the_fake_backend() {
    leaked_frame_is_abandoned(WhenFull::Drop);
}

/// Every frame leaked, under each policy: the ring stays at its size, and
/// every frame but the last two (the ring's, still being recorded) comes
/// back, its scope counted.
#[test]
fn every_frame_leaked_keeps_the_ring_bounded_on_the_fake_backend() {
    for policy in [
        WhenFull::Grow,
        WhenFull::Drop,
        WhenFull::Wait {
            timeout: Duration::from_millis(1),
        },
    ] {
        let device = device();
        let profiler = Profiler::new(&device, options(2, 4, policy)).unwrap();
        let mut frames = Vec::new();
        for n in 0..50u64 {
            let frame = profiler.begin_frame().unwrap();
            assert!(frame.has_slot(), "{policy:?}: frame {n}");
            let cmd = one_scope(&device, &frame, "leaked", n);
            std::mem::forget(frame);
            device.submit(cmd).unwrap().wait();
            frames.extend(profiler.collect().unwrap());
            assert_eq!(profiler.ring_size(), 2, "{policy:?}: frame {n}");
        }
        let indices: Vec<u64> = frames.iter().map(|f| f.index).collect();
        assert_eq!(indices, (0..48).collect::<Vec<_>>(), "{policy:?}");
        for f in &frames {
            assert!(f.scopes.is_empty());
            assert_eq!(
                f.drops,
                DropCounts {
                    frame_abandoned: 1,
                    ..DropCounts::default()
                },
                "{policy:?}"
            );
        }
        assert_eq!(profiler.dropped_scopes_total(), 48, "{policy:?}");
    }
}

/// A frame that is only slow: still being recorded when the ring comes
/// back to its slot, it is abandoned, counted (its ended scope and its open
/// one), and every later use of it is a typed error: a new scope or pass
/// scope is refused, and ending the frame fails (its open scope still ends
/// in its recorder, with no result). Its
/// work, run after the frame that took its slot was recorded, writes its
/// own buffers only: that frame's scope counts exactly its own work. Ending
/// it counts nothing twice.
#[test]
fn a_slow_frame_is_abandoned_and_later_uses_fail_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 4, WhenFull::Grow)).unwrap();
    let slow = profiler.begin_frame().unwrap();
    let mut slow_cmd = one_scope(&device, &slow, "slow ended", 1000);
    let open = slow
        .scope(&mut slow_cmd, "slow open", PassKind::Compute)
        .unwrap();
    slow_cmd.dispatch(2000);

    let frame = profiler.begin_frame().unwrap();
    let cmd = one_scope(&device, &frame, "one", 1);
    run_frame(&device, &profiler, frame, cmd);
    assert!(!slow.is_abandoned());
    // The ring comes back to the slow frame's slot.
    let frame = profiler.begin_frame().unwrap();
    assert!(slow.is_abandoned());
    let two = one_scope(&device, &frame, "two", 2);
    let two = device.submit(two).unwrap();
    profiler.end_frame(frame, [&two]).unwrap();

    let refused = slow
        .scope(&mut slow_cmd, "too late", PassKind::Compute)
        .map(|_| ());
    assert!(
        matches!(refused, Err(ProfilerError::FrameAbandoned { frame: 0 })),
        "{refused:?}"
    );
    let refused = slow
        .pass_scope(&mut slow_cmd, "too late", PassKind::Compute)
        .map(|_| ());
    assert!(
        matches!(refused, Err(ProfilerError::FrameAbandoned { frame: 0 })),
        "{refused:?}"
    );
    // Its open scope still ends in its recorder, without a result.
    open.end(&mut slow_cmd).unwrap();
    // Its work runs (after the frame in its old slot was recorded), then
    // that frame's.
    let slow_submission = device.submit(slow_cmd).unwrap();
    let ended = profiler.end_frame(slow, [&slow_submission]);
    assert!(
        matches!(ended, Err(ProfilerError::FrameAbandoned { frame: 0 })),
        "{ended:?}"
    );
    slow_submission.wait();
    two.wait();

    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    let indices: Vec<u64> = frames.iter().map(|f| f.index).collect();
    assert_eq!(indices, [0, 1, 2]);
    assert!(frames[0].scopes.is_empty());
    assert_eq!(
        frames[0].drops,
        DropCounts {
            frame_abandoned: 2,
            ..DropCounts::default()
        }
    );
    assert_eq!(count_of(&frames[1]), 1);
    assert_eq!(count_of(&frames[2]), 2);
    assert_eq!(frames[2].scopes[0].label, "two");
    assert_eq!(profiler.dropped_scopes_total(), 2);
    assert_eq!(profiler.ring_size(), 2);
}

/// A leaked frame that got no slot (`Drop`, the ring's one slot held by a
/// frame in flight), with a scope dropped for it: abandoned once
/// `frames_in_flight` frames begun after it have ended, it comes back with
/// that scope counted, and the frame after it too.
#[test]
fn a_leaked_frame_without_a_slot_is_abandoned_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(1, 4, WhenFull::Drop)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let cmd = one_scope(&device, &frame, "first", 1);
    let first = device.submit(cmd).unwrap();
    profiler.end_frame(frame, [&first]).unwrap();
    let leaked = profiler.begin_frame().unwrap();
    assert!(!leaked.has_slot());
    let cmd = one_scope(&device, &leaked, "no slot", 2);
    std::mem::forget(leaked);
    drop(cmd);
    first.wait();
    let frame = profiler.begin_frame().unwrap();
    assert!(frame.has_slot());
    let cmd = one_scope(&device, &frame, "third", 3);
    run_frame(&device, &profiler, frame, cmd);
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    let indices: Vec<u64> = frames.iter().map(|f| f.index).collect();
    assert_eq!(indices, [0, 1, 2]);
    assert_eq!(count_of(&frames[0]), 1);
    assert!(frames[1].scopes.is_empty());
    assert_eq!(
        frames[1].drops,
        DropCounts {
            no_slot: 1,
            ..DropCounts::default()
        }
    );
    assert_eq!(count_of(&frames[2]), 3);
    assert_eq!(profiler.dropped_scopes_total(), 1);
}

/// Scope and pass scope guards leaked with `mem::forget`: the scope around
/// a leaked one cannot end over it (a typed error naming both); the leaked
/// scope, the leaked pass scope and the outer one are counted as not
/// ended; the scope after them, and the other recorder's, have their exact
/// counts. Nothing hangs.
#[test]
fn leaked_scope_guards_are_counted_on_the_fake_backend() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 8, WhenFull::Grow)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = device.recorder();
    let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    let leaked = frame.scope(&mut cmd, "leaked", PassKind::Compute).unwrap();
    cmd.dispatch(5);
    std::mem::forget(leaked);
    let ended = outer.end(&mut cmd);
    assert!(
        matches!(ended, Err(ProfilerError::ScopeOrder { ref label, ref open }) if label == "outer" && open == "leaked"),
        "{ended:?}"
    );
    let pass = frame
        .pass_scope(&mut cmd, "leaked pass", PassKind::Compute)
        .unwrap()
        .unwrap();
    std::mem::forget(pass);
    let after = frame.scope(&mut cmd, "after", PassKind::Compute).unwrap();
    cmd.dispatch(7);
    after.end(&mut cmd).unwrap();
    let other = one_scope(&device, &frame, "other", 11);
    let submissions = [device.submit(cmd).unwrap(), device.submit(other).unwrap()];
    profiler.end_frame(frame, &submissions).unwrap();
    for s in &submissions {
        s.wait();
    }
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!(
        f.drops,
        DropCounts {
            not_ended: 3,
            ..DropCounts::default()
        }
    );
    let counts: Vec<(&str, u64)> = f
        .scopes
        .iter()
        .map(|s| {
            (
                s.label.as_str(),
                s.statistics.as_deref().unwrap().compute_kernel_invocations,
            )
        })
        .collect();
    assert_eq!(counts, [("after", 7), ("other", 11)]);
    assert_eq!(profiler.dropped_scopes_total(), 3);
}
