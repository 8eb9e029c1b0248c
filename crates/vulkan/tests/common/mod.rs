//! Shared test set-up: a device on the default driver (lavapipe in CI) with
//! the Khronos validation layer, whose every message fails the test.
#![allow(dead_code)]

use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{CommandBuffer, Device, InstanceOptions};
use gpu_counters_workloads::GpuContext;

/// Opens the default device with validation on.
pub fn device() -> Device {
    Device::open_default(&InstanceOptions { validation: true })
        .expect("open the default Vulkan device with VK_LAYER_KHRONOS_validation")
}

/// Fails the test if the validation layer said anything.
pub fn assert_no_validation_messages(device: &Device) {
    let messages = device.instance().validation_messages();
    assert!(
        messages.is_empty(),
        "validation layer reported {} message(s):\n{}",
        messages.len(),
        messages.join("\n")
    );
}

/// A counter sample buffer of `n` samples of `set` on `device`.
pub fn sample_buffer(
    device: &Device,
    set: gpu_counters_hal::CommonCounterSet,
    label: &str,
    n: u32,
) -> gpu_counters_vulkan::CounterSampleBuffer {
    device
        .make_counter_sample_buffer(&gpu_counters_hal::CounterSampleBufferDescriptor::new(
            set, label, n,
        ))
        .expect("make a counter sample buffer")
}

/// The workloads' view of a device.
pub fn ctx(device: &Device) -> GpuContext<'_> {
    GpuContext::from_device(device)
}

/// Commits and waits; returns (CPU time before submit, CPU time after completion).
pub fn run(cmd: CommandBuffer) -> (u64, u64) {
    let submission = cmd.commit().expect("commit");
    let done = submission.wait().expect("wait");
    (submission.cpu_submit_ns(), done)
}

/// A host-set event, for holding the GPU back until the test says so.
pub struct Gate {
    pub event: vk::Event,
    device: Device,
}

impl Gate {
    pub fn new(device: &Device) -> Self {
        // SAFETY: a valid create-info on a live device; destroyed in `Drop`.
        let event = unsafe {
            device
                .raw()
                .create_event(&vk::EventCreateInfo::default(), None)
        }
        .expect("create event");
        Self {
            event,
            device: device.clone(),
        }
    }

    /// Records a wait for the host to set the event.
    pub fn record_wait(&self, cmd: vk::CommandBuffer) {
        let barriers = [vk::MemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::HOST)
            .src_access_mask(vk::AccessFlags2::HOST_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
            .dst_access_mask(vk::AccessFlags2::MEMORY_READ)];
        let deps = [vk::DependencyInfo::default().memory_barriers(&barriers)];
        // SAFETY: callers pass a recording command buffer of this device, outside
        // any render pass; the event is live until the gate drops, which the
        // tests do after the GPU is done.
        unsafe {
            self.device
                .raw()
                .cmd_wait_events2(cmd, &[self.event], &deps)
        };
    }

    pub fn open(&self) {
        // SAFETY: the event is a live event of this device; setting it from the host
        // is always allowed.
        unsafe { self.device.raw().set_event(self.event) }.expect("set event");
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // SAFETY: the tests drop the gate only after every submission that waits on
        // the event has finished.
        unsafe { self.device.raw().destroy_event(self.event, None) };
    }
}
