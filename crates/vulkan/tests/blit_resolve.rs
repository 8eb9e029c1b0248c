//! GPU resolves inside a blit pass (Metal's blit `resolveCounters`): what
//! was written before the resolve, this pass's start samples included,
//! resolves as the CPU resolve does; an index the pass writes when it ends
//! is refused, naming it, since the resolve would wait on the GPU for a
//! write recorded after it.
mod common;

use gpu_counters_hal::{CommonCounterSet, CounterErrorKind, Error, InvalidInput, SampleStatus};
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, CounterSampleBuffer, GpuBuffer,
    MemoryLocation, PassSampleBufferAttachment,
};

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

fn attach(
    b: &CounterSampleBuffer,
    start: Option<u32>,
    end: Option<u32>,
) -> PassSampleBufferAttachment<'_> {
    PassSampleBufferAttachment {
        sample_buffer: b,
        start_of_encoder_sample_index: start,
        end_of_encoder_sample_index: end,
    }
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// The index the refusal names, with the buffer's label.
fn refused_index(e: Error) -> (u32, String) {
    match invalid(e.clone()) {
        InvalidInput::SampleIndexReuse {
            index,
            label,
            reason,
        } => {
            assert!(reason.contains("end_encoding"), "{e}");
            (index, label)
        }
        other => panic!("not a refusal naming the index: {other:?}"),
    }
}

/// A compute pass writes 0 and 1; a blit pass samples 2 at its start and 3
/// at its end, and resolves inside the pass. Its one attachment, in the
/// block the compute pass claimed, takes the fast path that notes the end
/// as written when the pass begins: a resolve reading 3 would wait on the
/// GPU for a write recorded after it, and is refused naming 3. The resolve
/// of 0..3 gives the CPU resolve's values, and 3 resolves after the pass.
#[test]
fn a_blit_pass_resolves_what_was_written_before_it() {
    let device = common::device();
    let times = common::sample_buffer(&device, CommonCounterSet::Timestamp, "blit times", 4);
    let dst = GpuBuffer::new(&device, 4 * 8, MemoryLocation::HostVisible).unwrap();
    dst.write(0, &[0xAB; 32]).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.compute_encoder(&ComputePassDescriptor {
        sample_buffer_attachments: &[attach(&times, Some(0), Some(1))],
    })
    .unwrap()
    .end_encoding()
    .unwrap();
    let mut blit = cmd
        .blit_encoder(&BlitPassDescriptor {
            sample_buffer_attachments: &[attach(&times, Some(2), Some(3))],
        })
        .unwrap();
    for range in [0..4, 3..4, 2..4] {
        let e = blit.resolve_counters(&times, range, &dst, 0).unwrap_err();
        assert_eq!(refused_index(e), (3, "blit times".into()));
    }
    blit.resolve_counters(&times, 0..3, &dst, 0).unwrap();
    blit.end_encoding().unwrap();
    cmd.resolve_counters(&times, 3..4, &dst, 24).unwrap();
    common::run(cmd);

    let cpu = times.resolve_counter_range(0..4).unwrap();
    assert_eq!(cpu.statuses(), &[SampleStatus::Written; 4]);
    assert_eq!(words(&dst.read(0, 32).unwrap()), words(cpu.as_bytes()));
    common::assert_no_validation_messages(&device);
}

/// Two attachments take the general path, whose end samples are written
/// with every check when the pass ends: a resolve of either buffer reading
/// its end index is refused naming it, and one of another buffer's range,
/// or of a range without the end index, is taken. Samples the pass never
/// writes resolve to the error value.
#[test]
fn a_blit_pass_refuses_each_buffers_end_index() {
    let device = common::device();
    let a = common::sample_buffer(&device, CommonCounterSet::Timestamp, "a", 4);
    let b = common::sample_buffer(&device, CommonCounterSet::Timestamp, "b", 4);
    let dst = GpuBuffer::new(&device, 2 * 4 * 8, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let mut blit = cmd
        .blit_encoder(&BlitPassDescriptor {
            sample_buffer_attachments: &[attach(&a, Some(0), Some(1)), attach(&b, None, Some(2))],
        })
        .unwrap();
    assert_eq!(
        refused_index(blit.resolve_counters(&a, 0..4, &dst, 0).unwrap_err()),
        (1, "a".into())
    );
    assert_eq!(
        refused_index(blit.resolve_counters(&b, 1..3, &dst, 32).unwrap_err()),
        (2, "b".into())
    );
    blit.sample_counters(&a, 3, true).unwrap();
    // Index 0 (the start) and 3 (sampled above) were written before.
    blit.resolve_counters(&a, 2..4, &dst, 16).unwrap();
    blit.resolve_counters(&a, 0..1, &dst, 0).unwrap();
    blit.resolve_counters(&b, 0..2, &dst, 32).unwrap();
    blit.end_encoding().unwrap();
    common::run(cmd);

    let got = words(&dst.read(0, 64).unwrap());
    let ra = a.resolve_counter_range(0..4).unwrap();
    use SampleStatus::{NotWritten, Written};
    assert_eq!(ra.statuses(), &[Written, Written, NotWritten, Written]);
    let wa = words(ra.as_bytes());
    assert_eq!((got[0], got[2], got[3]), (wa[0], wa[2], wa[3]));
    let rb = b.resolve_counter_range(0..2).unwrap();
    assert_eq!(rb.statuses(), &[NotWritten, NotWritten]);
    assert_eq!(&got[4..6], &words(rb.as_bytes())[..]);
    common::assert_no_validation_messages(&device);
}

/// A blit pass that samples statistics has their query active: a resolve
/// inside it would count its own compute work, and is refused; after the
/// pass it is taken.
#[test]
fn a_blit_pass_sampling_statistics_refuses_a_resolve() {
    let device = common::device();
    let stats = common::sample_buffer(&device, CommonCounterSet::Statistic, "blit stats", 2);
    let times = common::sample_buffer(&device, CommonCounterSet::Timestamp, "times", 2);
    let dst = GpuBuffer::new(&device, 2 * 8, MemoryLocation::HostVisible).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&times, 0, gpu_counters_hal::TimestampGranularity::Precise)
        .unwrap();
    let mut blit = cmd
        .blit_encoder(&BlitPassDescriptor {
            sample_buffer_attachments: &[attach(&stats, Some(0), Some(1))],
        })
        .unwrap();
    let e = blit.resolve_counters(&times, 0..1, &dst, 0).unwrap_err();
    assert!(
        matches!(invalid(e.clone()), InvalidInput::EncoderState(ref m) if m.contains("statistics")),
        "{e}"
    );
    blit.end_encoding().unwrap();
    cmd.resolve_counters(&times, 0..1, &dst, 0).unwrap();
    common::run(cmd);
    let r = times.resolve_counter_range(0..1).unwrap();
    assert_eq!(words(&dst.read(0, 8).unwrap()), words(r.as_bytes()));
    let s = stats.resolve_counter_range(0..2).unwrap();
    let st = s.statistics().unwrap();
    // The blit pass did no shader work, and the resolve ran after it.
    assert_eq!(st[1].since(&st[0]).compute_kernel_invocations, 0);
    common::assert_no_validation_messages(&device);
}

/// Inside a blit pass, the resolve's checks are the command buffer's:
/// another device's sample buffer or destination is `ForeignObject` naming
/// which, a bad destination its typed error, and nothing is recorded.
#[test]
fn a_blit_pass_resolve_checks_its_arguments() {
    let a = common::device();
    let b = common::device();
    let times_a = common::sample_buffer(&a, CommonCounterSet::Timestamp, "a", 2);
    let times_b = common::sample_buffer(&b, CommonCounterSet::Timestamp, "b", 2);
    let dst_a = GpuBuffer::new(&a, 16, MemoryLocation::HostVisible).unwrap();
    let dst_b = GpuBuffer::new(&b, 16, MemoryLocation::HostVisible).unwrap();
    let foreign = |e: Error| match invalid(e) {
        InvalidInput::ForeignObject { what } => what,
        other => panic!("not ForeignObject: {other:?}"),
    };
    let mut cmd = CommandBuffer::new(&b).unwrap();
    let mut blit = cmd.blit_encoder(&BlitPassDescriptor::default()).unwrap();
    blit.sample_counters(&times_b, 0, true).unwrap();
    assert_eq!(
        foreign(
            blit.resolve_counters(&times_a, 0..1, &dst_b, 0)
                .unwrap_err()
        ),
        "counter sample buffer"
    );
    assert_eq!(
        foreign(
            blit.resolve_counters(&times_b, 0..1, &dst_a, 0)
                .unwrap_err()
        ),
        "destination buffer"
    );
    assert_eq!(
        invalid(
            blit.resolve_counters(&times_b, 0..1, &dst_b, 4)
                .unwrap_err()
        ),
        InvalidInput::DestinationOffsetUnaligned {
            offset: 4,
            alignment: 8
        }
    );
    assert_eq!(
        invalid(
            blit.resolve_counters(&times_b, 0..2, &dst_b, 8)
                .unwrap_err()
        ),
        InvalidInput::DestinationTooSmall {
            offset: 8,
            needed: 16,
            available: 8
        }
    );
    blit.resolve_counters(&times_b, 0..2, &dst_b, 0).unwrap();
    blit.end_encoding().unwrap();
    common::run(cmd);
    let r = times_b.resolve_counter_range(0..2).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::NotWritten]
    );
    assert_eq!(words(&dst_b.read(0, 16).unwrap()), words(r.as_bytes()));
    common::assert_no_validation_messages(&a);
    common::assert_no_validation_messages(&b);
}
