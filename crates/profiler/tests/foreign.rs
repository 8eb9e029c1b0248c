//! A profiler frame used with another device's recorder: refused with
//! `ForeignObject` naming the recorder, before the frame claims or records
//! anything, on the fake backend and on lavapipe (validation on).

use gpu_counters_hal::fake::FakeDevice;
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_hal::{BackendDevice, BackendRecorder, Error, InvalidInput};
use gpu_counters_profiler::{Profiler, ProfilerError, ProfilerOptions};
use gpu_counters_vulkan::{CommandBuffer, Device, InstanceOptions};
use std::time::Duration;

/// What a profiler error's `ForeignObject` names.
fn foreign(e: ProfilerError) -> &'static str {
    match e {
        ProfilerError::Counters(Error::Invalid(InvalidInput::ForeignObject { what })) => what,
        other => panic!("expected ForeignObject, got {other:?}"),
    }
}

/// `frame`'s scopes on another device's recorder `other` are refused, with
/// statistics off and on: `scope` and `pass_scope`; then the frame's own
/// recorder `own` records a scope. Returns nothing: the caller submits
/// `own` and checks the frame.
fn refuse_foreign<D: BackendDevice>(
    frame: &gpu_counters_profiler::Frame<'_, D>,
    own: &mut gpu_counters_profiler::Recorder<D>,
    other: &mut gpu_counters_profiler::Recorder<D>,
) {
    assert_ne!(own.device_id(), other.device_id());
    assert_eq!(
        foreign(
            frame
                .scope(other, "foreign scope", PassKind::Scope)
                .unwrap_err()
        ),
        "recorder"
    );
    assert_eq!(
        foreign(
            frame
                .pass_scope(other, "foreign pass", PassKind::Compute)
                .unwrap_err()
        ),
        "recorder"
    );
    // Nothing was claimed for them: the frame's own scope is its first.
    let scope = frame.scope(own, "own", PassKind::Scope).unwrap();
    scope.end(own).unwrap();
    assert_eq!(frame.dropped_scopes(), 0);
}

#[test]
fn a_frame_refuses_another_fake_devices_recorder() {
    for statistics in [false, true] {
        let (a, b) = (
            FakeDevice::new("a", 64).unwrap(),
            FakeDevice::new("b", 64).unwrap(),
        );
        let profiler = Profiler::new(
            &a,
            ProfilerOptions {
                statistics,
                ..Default::default()
            },
        )
        .unwrap();
        let frame = profiler.begin_frame().unwrap();
        let (mut own, mut other) = (a.recorder(), b.recorder());
        refuse_foreign(&frame, &mut own, &mut other);
        let submission = a.submit(own).unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait();
        drop(other);
        let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
        assert_eq!(frames[0].scopes.len(), 1);
        assert_eq!(frames[0].scopes[0].label, "own");
        assert_eq!(frames[0].dropped_scopes, 0, "{:?}", frames[0].drops);
        assert_eq!(profiler.dropped_scopes_total(), 0);
    }
}

fn device() -> Device {
    Device::open_default(&InstanceOptions { validation: true })
        .expect("open the default Vulkan device with VK_LAYER_KHRONOS_validation")
}

fn assert_no_validation_messages(device: &Device) {
    let messages = device.instance().validation_messages();
    assert!(
        messages.is_empty(),
        "validation layer reported {} message(s):\n{}",
        messages.len(),
        messages.join("\n")
    );
}

/// On Vulkan the other device's command buffer was refused before too, by
/// its first sample (naming the profiler's sample buffer, with the scope
/// counted as failed); now the frame refuses it first, naming the
/// recorder, and counts nothing.
#[test]
fn a_frame_refuses_another_vulkan_devices_command_buffer() {
    let (a, b) = (device(), device());
    for statistics in [false, true] {
        let profiler = Profiler::new(
            &a,
            ProfilerOptions {
                statistics,
                ..Default::default()
            },
        )
        .unwrap();
        let frame = profiler.begin_frame().unwrap();
        let mut own = CommandBuffer::new(&a).unwrap();
        let mut other = CommandBuffer::new(&b).unwrap();
        refuse_foreign(&frame, &mut own, &mut other);
        let submission = own.commit().unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait().unwrap();
        drop(other);
        let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
        assert_eq!(frames[0].scopes.len(), 1);
        assert_eq!(frames[0].dropped_scopes, 0, "{:?}", frames[0].drops);
    }
    assert_no_validation_messages(&a);
    assert_no_validation_messages(&b);
}
