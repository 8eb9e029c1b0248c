//! Compute passes: exact kernel invocation counts, calibrated timestamps.
mod common;

use gpu_counters_hal::{
    CommonCounterSet, CounterResultStatistic, CounterResultTimestamp,
    CounterSampleBufferDescriptor, SampleValue,
};
use gpu_counters_vulkan::{CommandBuffer, ComputePassDescriptor, PassSampleBufferAttachment};
use gpu_counters_workloads::ComputeWorkload;

fn check(dispatches: u32, workgroups: u32, size: u32) {
    let device = common::device();
    let stats = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "stats",
            2,
        ))
        .unwrap();
    let times = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "times",
            2,
        ))
        .unwrap();
    let mut work = ComputeWorkload::new(&common::ctx(&device), size, workgroups, 3).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &[
                PassSampleBufferAttachment {
                    sample_buffer: &stats,
                    start_of_encoder_sample_index: Some(0),
                    end_of_encoder_sample_index: Some(1),
                },
                PassSampleBufferAttachment {
                    sample_buffer: &times,
                    start_of_encoder_sample_index: Some(0),
                    end_of_encoder_sample_index: Some(1),
                },
            ],
        })
        .unwrap();
    for _ in 0..dispatches {
        // SAFETY: `pass.raw()` is recording outside any render pass (a compute encoder)
        // on `device`, where the workload was built; the GPU is done with it
        // (`common::run` waits) before it is destroyed.
        unsafe {
            work.record_dispatch(device.raw(), pass.raw());
            work.record_barrier(device.raw(), pass.raw());
        }
    }
    pass.end_encoding().unwrap();
    let (submit, complete) = common::run(cmd);
    let calibration = device.calibration().unwrap();

    let s = stats.resolve_counter_range(0..2).unwrap();
    assert!(s.all_written(), "{:?}", s.statuses());
    let st = s.statistics().unwrap();
    let counted = st[1].since(&st[0]);
    assert_eq!(
        counted.compute_kernel_invocations,
        dispatches as u64 * workgroups as u64 * size as u64,
        "D={dispatches} W={workgroups} S={size}"
    );
    assert_eq!(
        counted.compute_kernel_invocations,
        work.expected_invocations(dispatches)
    );
    assert_eq!(counted.vertex_invocations, 0);
    assert_eq!(counted.fragment_invocations, 0);
    assert_eq!(
        st[0].compute_kernel_invocations, 0,
        "chain start is the baseline"
    );

    let t = times.resolve_counter_range(0..2).unwrap();
    let (SampleValue::Value(start), SampleValue::Value(end)) = (
        t.sample::<CounterResultTimestamp>(0).unwrap(),
        t.sample::<CounterResultTimestamp>(1).unwrap(),
    ) else {
        panic!("timestamps not written: {:?}", t.statuses())
    };
    assert!(
        calibration
            .interval_ns(start.timestamp, end.timestamp)
            .is_some(),
        "start > end"
    );
    for ts in [start, end] {
        let c = calibration.to_cpu_ns(ts.timestamp).unwrap();
        assert!(
            c.ns + c.error_bound_ns >= submit && c.ns <= complete + c.error_bound_ns,
            "{c:?} outside [{submit}, {complete}]"
        );
    }
    let _: &[CounterResultStatistic] = st;
    // SAFETY: the device finished every command buffer that used the workload
    // (`common::run` waits), which was built on `device`.
    unsafe { work.destroy(device.raw()) };
    common::assert_no_validation_messages(&device);
}

#[test]
fn one_invocation() {
    check(1, 1, 1);
}

#[test]
fn odd_sizes() {
    check(3, 7, 13);
}

#[test]
fn many_dispatches() {
    check(5, 17, 64);
}

#[test]
fn large_workgroups() {
    check(2, 33, 255);
}

/// More end-of-pass timestamps than a pass keeps inline (four): all six are
/// written, each at or after its own start of the pass.
#[test]
fn six_end_attachments_spill_and_are_all_written() {
    let device = common::device();
    let buffers: Vec<_> = (0..6)
        .map(|i| {
            device
                .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
                    CommonCounterSet::Timestamp,
                    format!("end {i}"),
                    2,
                ))
                .unwrap()
        })
        .collect();
    let attachments: Vec<_> = buffers
        .iter()
        .map(|b| PassSampleBufferAttachment {
            sample_buffer: b,
            start_of_encoder_sample_index: Some(0),
            end_of_encoder_sample_index: Some(1),
        })
        .collect();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = cmd
        .compute_encoder(&ComputePassDescriptor {
            sample_buffer_attachments: &attachments,
        })
        .unwrap();
    pass.end_encoding().unwrap();
    common::run(cmd);
    for b in &buffers {
        let r = b.resolve_counter_range(0..2).unwrap();
        assert!(r.all_written(), "{}: {:?}", b.label(), r.statuses());
        let t = r.timestamps().unwrap();
        assert!(t[0].timestamp <= t[1].timestamp, "{}: {t:?}", b.label());
    }
    common::assert_no_validation_messages(&device);
}
