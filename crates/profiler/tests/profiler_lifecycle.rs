//! Profiler frames and scopes that end badly, on the default Vulkan driver
//! (lavapipe in CI) with the validation layer on: a profiler dropped before
//! its command buffer, frames abandoned or never ended, leaked scope guards
//! and encoders, host resets while the GPU may still use the samples, and
//! frames done when their submissions are.

#[path = "common/vulkan.rs"]
mod vulkan;

use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::TimestampGranularity;
use gpu_counters_profiler::{DropCounts, FrameResult, Profiler, ProfilerError, WhenFull};
use gpu_counters_vulkan::{CommandBuffer, GpuBuffer, MemoryLocation};
use gpu_counters_workloads::CallerCommandBuffer;
use std::time::Duration;
use vulkan::*;

/// Soundness item 1: the profiler dropped before its frame's command buffer
/// is committed (a segfault before): the command buffer holds the ring's
/// sample buffers until the GPU is done with them.
#[test]
fn profiler_dropped_before_its_command_buffer_is_committed() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 4, true, WAIT)).unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let scope = frame.scope(&mut cmd, "outlives", PassKind::Scope).unwrap();
    scope.end(&mut cmd).unwrap();
    drop(frame);
    drop(profiler);
    cmd.commit().unwrap().wait().unwrap();
    assert_no_validation_messages(&device);
}

/// Soundness item 14: a frame whose command buffer is dropped without being
/// submitted does not block later frames; its scopes are counted as
/// abandoned, and the ring neither grows nor stalls.
#[test]
fn abandoned_frame_does_not_block_later_frames() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 4, true, WhenFull::Grow)).unwrap();
    let mut results = Vec::new();
    for n in 0..6 {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
        let inner = frame.scope(&mut cmd, "inner", PassKind::Compute).unwrap();
        inner.end(&mut cmd).unwrap();
        outer.end(&mut cmd).unwrap();
        if n == 1 {
            drop(cmd);
            profiler.end_frame(frame, []).unwrap();
        } else {
            let submission = cmd.commit().unwrap();
            profiler.end_frame(frame, [&submission]).unwrap();
            submission.wait().unwrap();
        }
        results.extend(profiler.collect().unwrap());
    }
    results.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    assert_eq!(results.len(), 6, "every frame comes back once");
    for (n, r) in results.iter().enumerate() {
        assert_eq!(r.index, n as u64);
        if n == 1 {
            assert!(r.scopes.is_empty());
            assert_eq!(
                r.drops,
                DropCounts {
                    abandoned: 2,
                    ..DropCounts::default()
                }
            );
        } else {
            assert_eq!(r.scopes.len(), 2, "frame {n}");
            assert_eq!(r.drops, DropCounts::default(), "frame {n}");
        }
    }
    assert_eq!(
        profiler.ring_size(),
        2,
        "the abandoned frame did not grow the ring"
    );
    assert_eq!(profiler.dropped_scopes_total(), 2);
    drop(profiler);
    assert_no_validation_messages(&device);
}

/// A frame on gpu-counters' own command buffers is done once its submission
/// is seen finished, with no marker queued behind it. Held back on the GPU
/// by a gate after its scope, it is not collected (nor its queries reset);
/// once the gate opens and the submission is waited for, the next collect
/// returns it. A frame whose submission nobody waits for is collected after
/// `Device::wait_idle`, and by `wait_collect_all` (a marker behind it).
/// Under the validation layer.
#[test]
fn frames_are_done_when_their_submissions_are() {
    let device = device();
    let profiler = Profiler::new(&device, options(3, 4, true, WAIT)).unwrap();
    let gate = Gate::new(&device);
    let record = |label: &str, gated: bool| {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let scope = frame.scope(&mut cmd, label, PassKind::Scope).unwrap();
        scope.end(&mut cmd).unwrap();
        if gated {
            gate.record_wait(&cmd);
        }
        let submission = cmd.commit().unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission
    };
    let one = |frames: Vec<FrameResult>, label: &str| {
        assert_eq!(frames.len(), 1, "{label}: {frames:#?}");
        assert_eq!(frames[0].scopes.len(), 1);
        assert_eq!(frames[0].scopes[0].label, label);
        assert_eq!(frames[0].drops, DropCounts::default());
    };

    let gated = record("gated", true);
    for _ in 0..3 {
        assert!(profiler.collect().unwrap().is_empty());
    }
    assert!(!gated.is_done().unwrap());
    gate.open();
    gated.wait().unwrap();
    one(profiler.collect().unwrap(), "gated");

    let idle = record("after wait_idle", false);
    device.wait_idle().unwrap();
    one(profiler.collect().unwrap(), "after wait_idle");

    let unwatched = record("unwatched", false);
    one(
        profiler.wait_collect_all(Duration::from_secs(10)).unwrap(),
        "unwatched",
    );

    // A caller's command buffer (its ticket says nothing until signaled),
    // ended with no submit time and one scope left open: the collect after
    // its fence resolves the frame and queues a marker, the next resolves it
    // again once that signals; its drop is counted once.
    let mut caller = CallerCommandBuffer::new(&device).unwrap();
    let frame = profiler.begin_frame().unwrap();
    // SAFETY: `caller` is a recording primary command buffer of the
    // device's queue family; its completion is taken and signaled only
    // after it was waited for; statistics are ended before it is, and it is
    // submitted under the device's queue lock.
    let mut cmd = unsafe { CommandBuffer::from_raw(&device, caller.raw()) };
    let open = frame.scope(&mut cmd, "left open", PassKind::Scope).unwrap();
    let ended = frame.scope(&mut cmd, "ended", PassKind::Scope).unwrap();
    ended.end(&mut cmd).unwrap();
    drop(open);
    cmd.end_statistics().unwrap();
    let completion = cmd.completion();
    drop(cmd);
    caller.submit().unwrap();
    profiler.end_frame(frame, []).unwrap();
    caller.wait().unwrap();
    assert!(
        profiler.collect().unwrap().is_empty(),
        "its marker is queued"
    );
    completion.signal();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].scopes.len(), 1);
    assert_eq!(frames[0].scopes[0].label, "ended");
    assert_eq!(
        frames[0].drops,
        DropCounts {
            not_ended: 1,
            ..Default::default()
        }
    );
    assert_eq!(profiler.dropped_scopes_total(), 1);

    drop((gated, idle, unwatched, caller));
    drop(profiler);
    drop(gate);
    assert_no_validation_messages(&device);
}

/// A host reset of a frame's samples while its command buffer is in flight
/// (the buffer a pass scope hands out) is refused at once, and the scope,
/// which ran, comes back with its time inside the CPU window of its
/// submission. Before, on lavapipe, the reset waited for the GPU and went
/// through, and the scope was counted as abandoned though it ran.
#[test]
fn host_reset_of_a_frames_samples_in_flight_is_refused() {
    let device = device();
    let target = GpuBuffer::new(&device, 1 << 16, MemoryLocation::DeviceLocal).unwrap();
    let profiler = Profiler::new(&device, options(2, 4, false, WAIT)).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let pass = frame
        .pass_scope(&mut cmd, "pass", PassKind::Blit)
        .unwrap()
        .unwrap();
    let (buffer, start, end) = (
        pass.timestamps().clone(),
        pass.start_index(),
        pass.end_index(),
    );
    cmd.sample_counters(&buffer, start, TimestampGranularity::Precise)
        .unwrap();
    fill(&device, &cmd, &target, 7);
    cmd.sample_counters(&buffer, end, TimestampGranularity::Precise)
        .unwrap();
    pass.recorded();
    let submission = cmd.commit().unwrap();
    let before = submission.cpu_submit_ns();
    profiler.end_frame(frame, [&submission]).unwrap();
    let refused = buffer.reset_range(u64::from(start)..u64::from(end) + 1);
    assert!(
        matches!(
            refused.as_ref().map_err(|e| e.invalid()),
            Err(Some(gpu_counters_hal::InvalidInput::SampleIndexReuse { reason, .. }))
                if reason.contains("pending on the GPU")
        ),
        "{refused:?}"
    );
    let after = submission.wait().unwrap();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].drops, DropCounts::default(), "{:?}", frames[0]);
    let (_, s) = find(&frames[0], "pass");
    assert!(
        s.start_ns + s.error_bound_ns >= before && s.end_ns <= after + s.error_bound_ns,
        "[{}, {}] outside [{before}, {after}]",
        s.start_ns,
        s.end_ns
    );
    assert_eq!(profiler.dropped_scopes_total(), 0);
    drop(submission);
    drop(profiler);
    drop(target);
    assert_no_validation_messages(&device);
}

/// Scope guards leaked with `mem::forget` on a Vulkan command buffer, with
/// and without statistics, in a frame ended without a submit time and
/// collected while its command buffer may still run: the scope around the
/// leaked one cannot end over it (a typed error naming both), the leaked
/// scope, the leaked pass scope and the outer one are counted as not
/// ended, the scope after them has its result, and nothing is reset while
/// the GPU may use it. A frame whose scopes were all leaked is counted the
/// same way and does not hold back the frame after it.
#[test]
fn leaked_scope_guards_are_counted_on_vulkan() {
    let device = device();
    let target = GpuBuffer::new(&device, 1 << 16, MemoryLocation::DeviceLocal).unwrap();
    for statistics in [false, true] {
        let profiler = Profiler::new(&device, options(2, 8, statistics, WAIT)).unwrap();
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
        let leaked = frame.scope(&mut cmd, "leaked", PassKind::Blit).unwrap();
        fill(&device, &cmd, &target, 1);
        std::mem::forget(leaked);
        assert!(
            matches!(
                outer.end(&mut cmd),
                Err(ProfilerError::ScopeOrder { ref label, ref open }) if label == "outer" && open == "leaked"
            ),
            "statistics {statistics}"
        );
        let pass = frame
            .pass_scope(&mut cmd, "leaked pass", PassKind::Blit)
            .unwrap()
            .unwrap();
        std::mem::forget(pass);
        let after = frame.scope(&mut cmd, "after", PassKind::Blit).unwrap();
        fill(&device, &cmd, &target, 2);
        after.end(&mut cmd).unwrap();
        let submission = cmd.commit().unwrap();
        profiler.end_frame(frame, []).unwrap();
        let mut frames = profiler.collect().unwrap();

        // All of this frame's scopes leaked.
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let leaked = frame.scope(&mut cmd, "all leaked", PassKind::Blit).unwrap();
        fill(&device, &cmd, &target, 3);
        std::mem::forget(leaked);
        let submission_2 = cmd.commit().unwrap();
        profiler.end_frame(frame, []).unwrap();
        frames.extend(profiler.collect().unwrap());

        submission.wait().unwrap();
        submission_2.wait().unwrap();
        frames.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
        assert_eq!(frames.len(), 2, "statistics {statistics}");
        let labels: Vec<&str> = frames[0].scopes.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["after"], "statistics {statistics}");
        let not_ended = |n| DropCounts {
            not_ended: n,
            ..Default::default()
        };
        assert_eq!(frames[0].drops, not_ended(3), "statistics {statistics}");
        assert!(frames[1].scopes.is_empty());
        assert_eq!(frames[1].drops, not_ended(1), "statistics {statistics}");
        assert_eq!(
            frames[0].scopes[0].statistics.is_some(),
            statistics,
            "statistics {statistics}"
        );
        assert_eq!(profiler.dropped_scopes_total(), 4);
        drop((submission, submission_2));
        drop(profiler);
    }
    drop(target);
    assert_no_validation_messages(&device);
}

/// Frames that never end on the Vulkan backend, with statistics, under
/// validation: frame 0 is leaked with `mem::forget` after one scope; frame
/// 1 is only slow, a scope open on its command buffer. Both are abandoned
/// as the ring comes back to their slots, counted, and returned in order;
/// the slow frame's scope still ends in its command buffer (without a
/// result), and ending the frame fails with `FrameAbandoned`. Their command
/// buffers are committed and run last, into the buffers the frames kept:
/// every later frame has its own exact result, and the validation layer
/// says nothing.
#[test]
fn frames_that_never_end_are_abandoned_on_vulkan() {
    let device = device();
    let target = GpuBuffer::new(&device, 1 << 16, MemoryLocation::DeviceLocal).unwrap();
    let profiler = Profiler::new(&device, options(2, 4, true, WhenFull::Grow)).unwrap();
    let leaked = profiler.begin_frame().unwrap();
    let mut leaked_cmd = CommandBuffer::new(&device).unwrap();
    let scope = leaked
        .scope(&mut leaked_cmd, "leaked", PassKind::Blit)
        .unwrap();
    fill(&device, &leaked_cmd, &target, 1);
    scope.end(&mut leaked_cmd).unwrap();
    std::mem::forget(leaked);
    let slow = profiler.begin_frame().unwrap();
    let mut slow_cmd = CommandBuffer::new(&device).unwrap();
    let open = slow.scope(&mut slow_cmd, "slow", PassKind::Blit).unwrap();
    fill(&device, &slow_cmd, &target, 2);

    let mut results = Vec::new();
    for n in 2..6u64 {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let scope = frame
            .scope(&mut cmd, &format!("frame {n}"), PassKind::Blit)
            .unwrap();
        fill(&device, &cmd, &target, n as u32);
        scope.end(&mut cmd).unwrap();
        let submission = cmd.commit().unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait().unwrap();
        results.extend(profiler.collect().unwrap());
    }
    assert!(slow.is_abandoned());
    open.end(&mut slow_cmd).unwrap();
    assert!(matches!(
        profiler.end_frame(slow, []),
        Err(ProfilerError::FrameAbandoned { frame: 1 })
    ));
    for cmd in [leaked_cmd, slow_cmd] {
        cmd.commit().unwrap().wait().unwrap();
    }
    results.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    let indices: Vec<u64> = results.iter().map(|f| f.index).collect();
    assert_eq!(indices, (0..6).collect::<Vec<_>>());
    for f in &results[..2] {
        assert!(f.scopes.is_empty());
        assert_eq!(
            f.drops,
            DropCounts {
                frame_abandoned: 1,
                ..Default::default()
            },
            "frame {}",
            f.index
        );
    }
    for f in &results[2..] {
        assert_eq!(f.drops, DropCounts::default(), "frame {}", f.index);
        assert_eq!(f.scopes.len(), 1);
        assert_eq!(f.scopes[0].label, format!("frame {}", f.index));
        let st = f.scopes[0].statistics.as_deref().unwrap();
        assert_eq!(st.compute_kernel_invocations, 0);
    }
    assert_eq!(profiler.dropped_scopes_total(), 2);
    assert_eq!(profiler.ring_size(), 2);
    drop(profiler);
    drop(target);
    assert_no_validation_messages(&device);
}

/// An encoder leaked with `mem::forget` inside a profiler scope, with and
/// without statistics: ending the scope, and beginning one after it, fail
/// with the backend's leaked-encoder error and are counted as failed; the
/// commit fails, dropping the command buffer unsubmitted; the frame still
/// comes back at once. No validation message.
#[test]
fn an_encoder_leaked_inside_a_scope_is_counted() {
    let device = device();
    for statistics in [false, true] {
        let profiler = Profiler::new(&device, options(2, 4, statistics, WAIT)).unwrap();
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let around = frame.scope(&mut cmd, "around", PassKind::Scope).unwrap();
        let pass = cmd
            .compute_encoder(&gpu_counters_vulkan::ComputePassDescriptor::default())
            .unwrap();
        std::mem::forget(pass);
        let leaked_encoder = |r: Result<(), ProfilerError>| match r {
            Err(ProfilerError::Counters(e)) => matches!(
                e.invalid(),
                Some(gpu_counters_hal::InvalidInput::EncoderState(m)) if m.contains("never ended")
            ),
            _ => false,
        };
        assert!(
            leaked_encoder(around.end(&mut cmd)),
            "statistics {statistics}"
        );
        let after = frame.scope(&mut cmd, "after", PassKind::Scope).map(|_| ());
        assert!(leaked_encoder(after), "statistics {statistics}");
        assert!(cmd.commit().is_err());
        profiler.end_frame(frame, []).unwrap();
        let frames = profiler.collect().unwrap();
        assert_eq!(frames.len(), 1, "statistics {statistics}");
        assert!(frames[0].scopes.is_empty());
        assert_eq!(
            frames[0].drops,
            DropCounts {
                failed: 2,
                ..Default::default()
            },
            "statistics {statistics}"
        );
        assert_eq!(profiler.dropped_scopes_total(), 2);
    }
    assert_no_validation_messages(&device);
}
