//! The encoders' fast paths give what their general paths give: a pass with
//! one attachment whose indices this recording claimed clean, and a pass's
//! only relaxed heap write. Each case below takes the fast path where it
//! may and must fall back where it may not (an index written before in the
//! recording, out of range, attached twice, a second write or heap), with
//! the same samples and the same typed errors.
mod common;

use gpu_counters_hal::{
    CommonCounterSet, CounterErrorKind, CounterHeapDescriptor, Error, InvalidInput, SampleStatus,
    TimestampGranularity,
};
use gpu_counters_vulkan::{
    CommandBuffer, ComputePassDescriptor, CounterHeap, CounterSampleBuffer,
    PassSampleBufferAttachment,
};
use gpu_counters_workloads::ComputeWorkload;

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

fn attach(
    b: &CounterSampleBuffer,
    start: Option<u32>,
    end: Option<u32>,
) -> [PassSampleBufferAttachment<'_>; 1] {
    [PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: start,
        end_of_encoder_sample_index: end,
    }]
}

fn ticks(r: &gpu_counters_hal::ResolvedCounters) -> Vec<u64> {
    r.timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect()
}

#[test]
fn one_attachment_into_claimed_indices() {
    let device = common::device();
    let b = common::sample_buffer(&device, CommonCounterSet::Timestamp, "pairs", 100);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // Claims the block of indices 0..64 for this recording.
    cmd.sample_counters(&b, 0, TimestampGranularity::Precise)
        .unwrap();
    for i in 1..20 {
        let pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &attach(&b, Some(2 * i), Some(2 * i + 1)),
            })
            .unwrap();
        pass.end_encoding().unwrap();
    }
    // Attached twice, inside the claimed block: the general path's error.
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(50), Some(50)),
        })
        .err()
        .unwrap();
    assert!(matches!(
        invalid(e),
        InvalidInput::SampleIndexReuse {
            index: 50,
            reason: "is attached twice to the same pass",
            ..
        }
    ));
    // The end past the end of the buffer, the start clean: out of range,
    // and the start not written (nothing of a refused pass is recorded).
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(52), Some(100)),
        })
        .err()
        .unwrap();
    assert_eq!(
        invalid(e),
        InvalidInput::IndexOutOfRange {
            what: "sample",
            label: "pairs".into(),
            index: 100,
            count: 100,
        }
    );
    // The end written before in this recording (by the pass of i = 1): the
    // general path resets it inline and writes it again.
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(41), Some(3)),
        })
        .unwrap();
    pass.end_encoding().unwrap();
    // An end only, and a pass dropped without end_encoding: still sampled.
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, None, Some(60)),
        })
        .unwrap();
    drop(pass);
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(61), Some(62)),
        })
        .unwrap();
    drop(pass);
    common::run(cmd);

    let r = b.resolve_counter_range(0..100).unwrap();
    let t = ticks(&r);
    for (i, s) in r.statuses().iter().enumerate() {
        let written = i == 0 || (2..40).contains(&i) || i == 41 || (60..=62).contains(&i);
        let expected = if written {
            SampleStatus::Written
        } else {
            SampleStatus::NotWritten
        };
        assert_eq!(*s, expected, "sample {i}");
    }
    for i in 1..20usize {
        if i != 1 {
            assert!(t[2 * i] <= t[2 * i + 1], "pass {i}: {t:?}");
        }
        assert!(t[0] <= t[2 * i], "pass {i} after sample 0");
    }
    // Sample 3 is the rewritten pass's end: after that pass's start and
    // after every earlier pass.
    assert!(t[41] <= t[3] && t[39] <= t[3], "{t:?}");
    assert!(t[61] <= t[62], "{t:?}");
    common::assert_no_validation_messages(&device);
}

fn heap(device: &gpu_counters_vulkan::Device, n: u32) -> CounterHeap {
    device
        .make_counter_heap(&CounterHeapDescriptor::timestamp(n))
        .unwrap()
}

#[test]
fn a_pass_with_one_relaxed_write() {
    use TimestampGranularity::{Precise, Relaxed};
    let device = common::device();
    let (h1, h2) = (heap(&device, 16), heap(&device, 4));
    let mut work = ComputeWorkload::new(&common::ctx(&device), 64, 16, 64).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // A: the first write of h2 in this recording (the heap not yet held).
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h2, 0).unwrap();
    pass.end_encoding().unwrap();
    // B: one index written relaxed twice: one timestamp.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 1).unwrap();
    pass.write_timestamp(Relaxed, &h1, 1).unwrap();
    pass.end_encoding().unwrap();
    // C: a precise write of the same index after the relaxed one wins; a
    // relaxed write after a dispatch takes the pass's end.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 2).unwrap();
    pass.write_timestamp(Precise, &h1, 2).unwrap();
    // SAFETY: `pass.raw()` is recording outside any render pass (a compute
    // encoder) on `device`, where the workload was built; the GPU is done
    // with it (`common::run` waits) before it is destroyed.
    unsafe {
        work.record_barrier(device.raw(), pass.raw());
        work.record_dispatch(device.raw(), pass.raw());
    }
    pass.write_timestamp(Relaxed, &h1, 3).unwrap();
    pass.end_encoding().unwrap();
    // D: relaxed writes into two heaps: the first is kept apart, the
    // second goes into the lists; each heap gets its timestamp.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 4).unwrap();
    pass.write_timestamp(Relaxed, &h2, 1).unwrap();
    pass.end_encoding().unwrap();
    // E: two indices of one heap (the first kept apart, the second in the
    // lists): coalesced into one timestamp.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 5).unwrap();
    pass.write_timestamp(Relaxed, &h1, 6).unwrap();
    pass.write_timestamp(Relaxed, &h1, 5).unwrap();
    pass.end_encoding().unwrap();
    // F: a precise write of another index leaves the relaxed one.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 7).unwrap();
    pass.write_timestamp(Precise, &h1, 8).unwrap();
    pass.end_encoding().unwrap();
    // G: dropped without end_encoding: still written. Out of range: the
    // typed error, and the pass's other write stands.
    let mut pass = cmd
        .compute_encoder(&ComputePassDescriptor::default())
        .unwrap();
    pass.write_timestamp(Relaxed, &h1, 9).unwrap();
    let e = pass.write_timestamp(Relaxed, &h1, 16).unwrap_err();
    assert!(matches!(
        invalid(e),
        InvalidInput::IndexOutOfRange {
            what: "heap entry",
            index: 16,
            count: 16,
            ..
        }
    ));
    drop(pass);
    common::run(cmd);

    let r1 = h1.resolve_counter_range(0..16).unwrap();
    let r2 = h2.resolve_counter_range(0..4).unwrap();
    use SampleStatus::{NotWritten, Written};
    let s1: Vec<_> = r1.statuses().to_vec();
    let expected1: Vec<_> = (0..16)
        .map(|i| {
            if (1..=9).contains(&i) {
                Written
            } else {
                NotWritten
            }
        })
        .collect();
    assert_eq!(s1, expected1);
    assert_eq!(r2.statuses(), &[Written, Written, NotWritten, NotWritten]);
    let (t1, t2) = (ticks(&r1), ticks(&r2));
    // C: the precise write came before the dispatch, the relaxed one's
    // timestamp after it: a relaxed write that had kept index 2 would have
    // given it index 3's timestamp.
    assert!(t1[2] < t1[3], "{t1:?}");
    assert!(t1[1] <= t1[2]);
    // D: both heaps' writes follow pass C's end.
    assert!(t1[3] <= t1[4] && t1[3] <= t2[1], "{t1:?} {t2:?}");
    assert!(t2[0] <= t1[1]);
    // E: coalesced.
    assert_eq!(t1[5], t1[6]);
    // F: the precise write before the pass's end.
    assert!(t1[6] <= t1[8] && t1[8] <= t1[7], "{t1:?}");
    assert!(t1[7] <= t1[9]);
    // SAFETY: the device finished every command buffer that used the
    // workload (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

/// Passes on the general path (two attachments each: a timestamp buffer and
/// a statistics buffer), one after another in one command buffer, and one
/// dropped without `end_encoding`: each pass's end samples are its own
/// (they are kept in the command buffer while its encoder is open), with
/// exact invocation counts per pass. A pass leaked with its end samples
/// still pending keeps every later encoder out, so nothing else takes them.
#[test]
fn general_passes_end_with_their_own_samples() {
    let device = common::device();
    let times = common::sample_buffer(&device, CommonCounterSet::Timestamp, "times", 6);
    let stats = common::sample_buffer(&device, CommonCounterSet::Statistic, "stats", 6);
    let ctx = common::ctx(&device);
    let mut small = ComputeWorkload::new(&ctx, 7, 3, 1).unwrap();
    let mut big = ComputeWorkload::new(&ctx, 64, 5, 1).unwrap();
    let both = |i: u32| {
        [
            PassSampleBufferAttachment {
                sample_buffer: &times,
                start_of_encoder_sample_index: Some(2 * i),
                end_of_encoder_sample_index: Some(2 * i + 1),
            },
            PassSampleBufferAttachment {
                sample_buffer: &stats,
                start_of_encoder_sample_index: Some(2 * i),
                end_of_encoder_sample_index: Some(2 * i + 1),
            },
        ]
    };
    let mut cmd = CommandBuffer::new(&device).unwrap();
    for (i, work) in [(0, &mut small), (1, &mut big)] {
        let attachments = both(i);
        let pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &attachments,
            })
            .unwrap();
        // SAFETY: `pass.raw()` is recording outside any render pass (a
        // compute encoder) on `device`, where the workload was built; the GPU
        // is done with it (`common::run` waits) before it is destroyed.
        unsafe { work.record_dispatch(device.raw(), pass.raw()) };
        pass.end_encoding().unwrap();
    }
    {
        let attachments = both(2);
        let pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &attachments,
            })
            .unwrap();
        // SAFETY: as above.
        unsafe {
            big.record_dispatch(device.raw(), pass.raw());
            big.record_dispatch(device.raw(), pass.raw());
        }
        // Dropped: the pass ends, its end samples taken.
    }
    common::run(cmd);
    let t = times.resolve_counter_range(0..6).unwrap();
    assert!(t.all_written(), "{:?}", t.statuses());
    let t = ticks(&t);
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    let s = stats.resolve_counter_range(0..6).unwrap();
    assert!(s.all_written(), "{:?}", s.statuses());
    let s = s.statistics().unwrap();
    let invocations = |i: usize| s[2 * i + 1].since(&s[2 * i]).compute_kernel_invocations;
    assert_eq!(
        [invocations(0), invocations(1), invocations(2)],
        [21, 320, 640]
    );

    // Leaked with both end samples pending: no later encoder, no commit.
    times.reset().unwrap();
    stats.reset().unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let attachments = both(0);
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attachments,
        })
        .unwrap();
    std::mem::forget(pass);
    let e = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &both(1),
        })
        .err()
        .unwrap();
    assert!(matches!(invalid(e), InvalidInput::EncoderState(ref m) if m.contains("never ended")));
    assert!(cmd.commit().is_err());
    assert_eq!(
        times.resolve_counter_range(0..4).unwrap().statuses(),
        &[SampleStatus::NotWritten; 4]
    );
    // SAFETY: the device finished every command buffer that used the
    // workloads (`common::run` waits), which were built on `device`.
    unsafe {
        small.destroy(device.raw());
        big.destroy(device.raw());
    }
    common::assert_no_validation_messages(&device);
}

/// A pass with one attachment notes its end as written when it begins, and
/// records the end's command when it ends: the first pass of a block (which
/// claims it) and later ones alike. Writing the end's index inside the
/// pass, leaking the pass, or an end in another block than the start must
/// each still give valid commands and honest samples.
#[test]
fn a_pass_end_noted_at_its_begin() {
    let device = common::device();
    let b = common::sample_buffer(&device, CommonCounterSet::Timestamp, "ends", 200);
    let pass_of = |cmd: &mut CommandBuffer, start: u32, end: u32| {
        cmd.compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(start), Some(end)),
        })
        .unwrap()
        .end_encoding()
        .unwrap();
    };
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // The first pass of block 0 claims it; the second takes the claim.
    pass_of(&mut cmd, 0, 1);
    pass_of(&mut cmd, 2, 3);
    // The end's index sampled inside the pass (the first pass of block 1,
    // then a later one): the inner sample is taken, and the pass's end
    // writes the index again after a reset of its own.
    for (start, end) in [(64, 65), (66, 67)] {
        let mut pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &attach(&b, Some(start), Some(end)),
            })
            .unwrap();
        pass.sample_counters(&b, end, true).unwrap();
        pass.end_encoding().unwrap();
    }
    // The start ending block 1 and the end beginning block 2.
    pass_of(&mut cmd, 127, 128);
    // The end written before in this recording (so not clean in the
    // claim): the pass's begin takes the lock, resets it and claims the
    // block again.
    cmd.sample_counters(&b, 190, TimestampGranularity::Precise)
        .unwrap();
    pass_of(&mut cmd, 129, 190);
    common::run(cmd);
    let r = b.resolve_counter_range(0..200).unwrap();
    let written = [0, 1, 2, 3, 64, 65, 66, 67, 127, 128, 129, 190];
    for (i, s) in r.statuses().iter().enumerate() {
        let expected = if written.contains(&(i as u32)) {
            SampleStatus::Written
        } else {
            SampleStatus::NotWritten
        };
        assert_eq!(*s, expected, "sample {i}");
    }
    // Each pass's end after its start (a later pass's start, taken at the
    // top of the pipe, is not ordered after an earlier end).
    let t = ticks(&r);
    for (a, c) in [(0, 1), (2, 3), (64, 65), (66, 67), (127, 128), (129, 190)] {
        assert!(t[a] <= t[c], "sample {c} before {a}: {t:?}");
    }

    // Leaked passes, the first of a block and a later one: no later
    // encoder, no commit, and none of their indices reads as written.
    b.reset().unwrap();
    for first in [true, false] {
        let mut cmd = CommandBuffer::new(&device).unwrap();
        if !first {
            pass_of(&mut cmd, 10, 11);
        }
        let pass = cmd
            .compute_encoder(&ComputePassDescriptor {
                sample_buffer_attachments: &attach(&b, Some(12), Some(13)),
            })
            .unwrap();
        std::mem::forget(pass);
        assert!(cmd.commit().is_err());
        assert_eq!(
            b.resolve_counter_range(10..14).unwrap().statuses(),
            &[SampleStatus::NotWritten; 4]
        );
        // The abandoned recording's marks are forgotten: the indices are
        // written by the next one.
        let mut cmd = CommandBuffer::new(&device).unwrap();
        pass_of(&mut cmd, 12, 13);
        common::run(cmd);
        assert!(b.resolve_counter_range(12..14).unwrap().all_written());
        b.reset().unwrap();
    }
    common::assert_no_validation_messages(&device);
}

/// While a pass whose end is noted is open, another recording (on another
/// thread, handed the moment by a channel) cannot write that end's index:
/// it is refused at once as another recording's, and the pass's own end is
/// written. Both command buffers then run, valid.
#[test]
fn a_noted_end_is_refused_to_other_recordings() {
    use std::sync::mpsc::channel;
    let device = common::device();
    let b = common::sample_buffer(&device, CommonCounterSet::Timestamp, "noted", 64);
    let mut cmd = CommandBuffer::new(&device).unwrap();
    // Claims block 0, so the pass below takes the noted path.
    cmd.sample_counters(&b, 0, TimestampGranularity::Precise)
        .unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attach(&b, Some(2), Some(3)),
        })
        .unwrap();
    let (open_tx, open_rx) = channel::<()>();
    let other = std::thread::scope(|s| {
        let (device, b) = (&device, &b);
        let other = s.spawn(move || {
            open_rx.recv().unwrap();
            let mut other = CommandBuffer::new(device).unwrap();
            let e = other
                .sample_counters(b, 3, TimestampGranularity::Precise)
                .unwrap_err();
            assert!(matches!(
                invalid(e),
                InvalidInput::SampleIndexReuse {
                    index: 3,
                    reason: gpu_counters_hal::bookkeeping::RECORDED_ELSEWHERE,
                    ..
                }
            ));
            // An index of the claimed block no one wrote: its write revokes
            // it from the claim, and it is this recording's.
            other
                .sample_counters(b, 5, TimestampGranularity::Precise)
                .unwrap();
            other
        });
        open_tx.send(()).unwrap();
        other.join().unwrap()
    });
    pass.end_encoding().unwrap();
    common::run(cmd);
    common::run(other);
    let r = b.resolve_counter_range(0..6).unwrap();
    use SampleStatus::{NotWritten, Written};
    assert_eq!(
        r.statuses(),
        &[Written, NotWritten, Written, Written, NotWritten, Written]
    );
    let t = ticks(&r);
    assert!(t[2] <= t[3], "{t:?}");
    common::assert_no_validation_messages(&device);
}
