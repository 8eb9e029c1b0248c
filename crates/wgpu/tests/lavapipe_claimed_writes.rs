//! The wgpu backend on lavapipe, through wgpu's Vulkan backend, with wgpu's
//! validation (and the Khronos validation layer where installed) on: any
//! validation error captured fails the test.
//!
//! Pass timestamp writes over claimed indices: pending until submitted,
//! range resets, other recorders and threads, abandoned and reordered
//! recorders.

mod common;

use common::*;

fn reuse_reason(e: Error) -> &'static str {
    match e.invalid().cloned() {
        Some(InvalidInput::SampleIndexReuse { reason, .. }) => reason,
        other => panic!("expected SampleIndexReuse, got {other:?} ({e})"),
    }
}

/// Pass timestamp writes over several blocks of claimed indices (most
/// noted without the bookkeeping lock), the last block partial: not ready
/// and not resettable until submitted, then every one written, each pass's
/// end at or after its start, in recording order.
#[test]
fn claimed_pass_writes_are_pending_until_submitted() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let n = 4 * 64 + 18;
    let buffer = timestamps(d, n);
    let mut rec = d.recorder(Some("claimed writes"));
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    let before = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert_eq!(before.count(SampleStatus::NotReady), n as usize);
    assert!(buffer.reset().is_err(), "recorded, not submitted");
    d.submit(rec).unwrap().wait().unwrap();
    let after = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(after.all_written(), "{:?}", after.statuses());
    let t = after.timestamps().unwrap();
    assert!(t.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    // Reset and written again, by a new recording, through new claims.
    buffer.reset().unwrap();
    let mut rec = d.recorder(None);
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    d.submit(rec).unwrap().wait().unwrap();
    let again = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(again.all_written(), "{:?}", again.statuses());
    assert!(again.timestamps().unwrap()[0].timestamp >= t[n as usize - 1].timestamp);
    gpu.check();
}

/// A host reset of part of a sample buffer (`reset_range`, what the
/// profiler resets of a page after a frame) resets exactly that range, is
/// refused while an index of it is pending, and leaves the rest as it was.
#[test]
fn range_reset_resets_only_its_range() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 6);
    let mut rec = d.recorder(Some("range reset"));
    timed_pass(&mut rec, &buffer, 0).unwrap();
    timed_pass(&mut rec, &buffer, 2).unwrap();
    match buffer.reset_range(2..4).unwrap_err() {
        Error::Invalid(InvalidInput::SampleIndexReuse { index: 2, .. }) => {}
        e => panic!("expected SampleIndexReuse of index 2, got {e:?}"),
    }
    d.submit(rec).unwrap().wait().unwrap();
    // Ranges past the end and empty ones are refused, as by resolves.
    for (range, start, end) in [(4..7, 4, 7), (3..3, 3, 3)] {
        match buffer.reset_range(range).unwrap_err() {
            Error::Invalid(InvalidInput::RangeOutOfBounds {
                start: s,
                end: e,
                count: 6,
                ..
            }) => assert_eq!((s, e), (start, end)),
            e => panic!("expected RangeOutOfBounds, got {e:?}"),
        }
    }
    buffer.reset_range(0..2).unwrap();
    let resolved = buffer.resolve_counter_range(0..6).unwrap();
    assert_eq!(
        resolved.statuses(),
        &[
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten,
        ]
    );
    gpu.check();
}

/// An index one recorder noted without the lock is refused to another
/// while the first is open; the other's write of a clean index of the same
/// claimed block is then refused to the first. Both submit; exactly the
/// indices written read as written.
#[test]
fn claimed_pass_writes_are_refused_to_other_recorders() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 64);
    let mut first = d.recorder(Some("first"));
    timed_pass(&mut first, &buffer, 0).unwrap(); // locked: claims the block
    timed_pass(&mut first, &buffer, 2).unwrap(); // claimed
    let mut second = d.recorder(Some("second"));
    let e = timed_pass(&mut second, &buffer, 2).unwrap_err();
    assert_eq!(
        reuse_reason(e),
        gpu_counters_hal::bookkeeping::RECORDED_ELSEWHERE
    );
    // Clean in the first's claim: the second may write it, and the first
    // may not any more.
    timed_pass(&mut second, &buffer, 10).unwrap();
    let e = timed_pass(&mut first, &buffer, 10).unwrap_err();
    assert_eq!(
        reuse_reason(e),
        gpu_counters_hal::bookkeeping::RECORDED_ELSEWHERE
    );
    timed_pass(&mut first, &buffer, 12).unwrap();
    d.submit(first).unwrap().wait().unwrap();
    d.submit(second).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..64).unwrap();
    for (i, st) in r.statuses().iter().enumerate() {
        let written = matches!(i, 0..=3 | 10..=13);
        assert_eq!(*st == SampleStatus::Written, written, "index {i}: {st:?}");
    }
    gpu.check();
}

/// A recorder dropped after claimed writes: they never ran, so they read
/// as never written, and another recorder may write them.
#[test]
fn abandoned_claimed_pass_writes_are_forgotten() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let n = 2 * 64;
    let buffer = timestamps(d, n);
    let mut dropped = d.recorder(Some("dropped"));
    for start in (0..n).step_by(2) {
        timed_pass(&mut dropped, &buffer, start).unwrap();
    }
    drop(dropped);
    let r = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert_eq!(r.count(SampleStatus::NotWritten), n as usize);
    let mut rec = d.recorder(None);
    for start in (0..n).step_by(2) {
        timed_pass(&mut rec, &buffer, start).unwrap();
    }
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..u64::from(n)).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    gpu.check();
}

/// Recorders on two threads: writing disjoint halves of one block, both
/// submit and every index is written; racing for the same indices while
/// both are open, never do both record every pass and submit (the loser is
/// refused at a write, or at submission after a true race).
#[test]
fn threads_writing_claimed_indices() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 64);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for half in [0u32, 32] {
            let (buffer, barrier) = (&buffer, &barrier);
            s.spawn(move || {
                let mut rec = d.recorder(None);
                barrier.wait();
                for start in (half..half + 32).step_by(2) {
                    timed_pass(&mut rec, buffer, start).unwrap();
                }
                d.submit(rec).unwrap().wait().unwrap();
            });
        }
    });
    let r = buffer.resolve_counter_range(0..64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());

    for round in 0..20 {
        buffer.reset().unwrap();
        let outcomes: Vec<bool> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let (buffer, barrier) = (&buffer, &barrier);
                    s.spawn(move || {
                        let mut rec = d.recorder(None);
                        barrier.wait();
                        let all = (0..64)
                            .step_by(2)
                            .all(|start| timed_pass(&mut rec, buffer, start).is_ok());
                        // Both still open here: each index was written by
                        // both while both were open, or refused to one.
                        barrier.wait();
                        let submitted = d.submit(rec).map(|s| s.wait().unwrap());
                        all && submitted.is_ok()
                    })
                })
                .collect();
            racers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            !(outcomes[0] && outcomes[1]),
            "round {round}: both recorders wrote every index and submitted"
        );
        d.wait_idle().unwrap();
    }
    gpu.check();
}

/// Two recorders with claims on different blocks of one buffer, submitted
/// in the reverse of their recording order: both submit, every index is
/// written, and the one submitted first ran first on the GPU.
#[test]
fn claimed_pass_writes_submitted_in_reverse_order() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 4 * 64);
    let mut first = d.recorder(Some("recorded first"));
    let mut second = d.recorder(Some("recorded second"));
    for start in (0..2 * 64).step_by(2) {
        timed_pass(&mut first, &buffer, start).unwrap();
        timed_pass(&mut second, &buffer, 2 * 64 + start).unwrap();
    }
    let s2 = d.submit(second).unwrap();
    let s1 = d.submit(first).unwrap();
    s2.wait().unwrap();
    s1.wait().unwrap();
    let r = buffer.resolve_counter_range(0..4 * 64).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    let t = r.timestamps().unwrap();
    // Submitted first, so run first: the second recorder's samples come
    // before the first's on the GPU.
    assert!(t[2 * 64 - 1].timestamp >= t[2 * 64].timestamp);
    gpu.check();
}
