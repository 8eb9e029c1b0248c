//! What the profiler's Vulkan tests share: the default device under the
//! validation layer, profiler options, a host-set gate that holds the GPU
//! back, and a fill to record.
#![allow(dead_code)] // each test binary uses some of these

use gpu_counters_profiler::{FrameResult, ProfilerOptions, ScopeResult, WhenFull};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{CommandBuffer, Device, GpuBuffer, InstanceOptions};
use gpu_counters_workloads::GpuContext;
use std::time::Duration;

pub fn device() -> Device {
    Device::open_default(&InstanceOptions { validation: true })
        .expect("open the default Vulkan device with VK_LAYER_KHRONOS_validation")
}

pub fn assert_no_validation_messages(device: &Device) {
    let messages = device.instance().validation_messages();
    assert!(
        messages.is_empty(),
        "validation layer reported {} message(s):\n{}",
        messages.len(),
        messages.join("\n")
    );
}

pub fn ctx(device: &Device) -> GpuContext<'_> {
    GpuContext::from_device(device)
}

pub fn options(
    ring: usize,
    max_scopes: u32,
    statistics: bool,
    when_full: WhenFull,
) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: ring,
        max_scopes_per_frame: max_scopes,
        statistics,
        when_full,
        queue_name: Some("graphics".into()),
    }
}

pub const WAIT: WhenFull = WhenFull::Wait {
    timeout: Duration::from_secs(10),
};

pub fn find<'a>(frame: &'a FrameResult, label: &str) -> (usize, &'a ScopeResult) {
    frame
        .scopes
        .iter()
        .enumerate()
        .find(|(_, s)| s.label == label)
        .unwrap_or_else(|| panic!("no scope `{label}` in {:#?}", frame.scopes))
}

/// A host-set event that holds the GPU back until the test sets it.
pub struct Gate {
    event: vk::Event,
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
    pub fn record_wait(&self, cmd: &CommandBuffer) {
        let barriers = [vk::MemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::HOST)
            .src_access_mask(vk::AccessFlags2::HOST_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
            .dst_access_mask(vk::AccessFlags2::MEMORY_READ)];
        let deps = [vk::DependencyInfo::default().memory_barriers(&barriers)];
        // SAFETY: `cmd` is a gpu-counters command buffer of this device, recording
        // (they begin recording when made) outside any render pass; the event is
        // live until the gate drops, which the tests do after the GPU is done.
        unsafe {
            self.device
                .raw()
                .cmd_wait_events2(cmd.raw(), &[self.event], &deps)
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

/// Records a fill of `buffer` into `cmd`.
pub fn fill(device: &Device, cmd: &CommandBuffer, buffer: &GpuBuffer, value: u32) {
    // SAFETY: `cmd` is a gpu-counters command buffer of `device`, recording
    // outside any render pass; the tests' buffers have transfer-destination
    // usage and outlive the submissions (they are waited for first).
    unsafe {
        device
            .raw()
            .cmd_fill_buffer(cmd.raw(), buffer.raw(), 0, buffer.size(), value)
    };
}
