//! Samples one Vulkan compute pass the way Metal does: sample buffers
//! attached to the pass's start and end (timestamps, and pipeline statistics
//! where the device has them), resolved on the CPU. Prints each sample's
//! status, the pass's duration on the CPU clock with its error bound, and
//! the compute invocations it ran against the number dispatched.
//!
//! ```text
//! cargo run -p gpu-counters --features vulkan --example vulkan_pass
//! ```
//!
//! Any Vulkan 1.3 driver runs it (lavapipe included). With
//! `GPU_COUNTERS_VALIDATION=1` it runs under the Khronos validation layer
//! and fails on any message the layer reports.

use gpu_counters::vulkan::ash::vk;
use gpu_counters::vulkan::{
    compile_wgsl, CommandBuffer, ComputePassDescriptor, Device, GpuBuffer, InstanceOptions,
    MemoryLocation, PassSampleBufferAttachment,
};
use gpu_counters::{
    CommonCounterSet, CounterResultTimestamp, CounterSampleBufferDescriptor, SampleValue,
};
use std::error::Error;

/// The work being timed: each invocation runs a few thousand steps of an
/// LCG and stores the result.
const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var x = id.x;
    for (var i = 0u; i < 4096u; i++) { x = x * 1664525u + 1013904223u; }
    data[id.x] = x;
}";
const WORKGROUPS: u32 = 64;
/// Invocations per workgroup (the shader's `@workgroup_size`).
const WORKGROUP_SIZE: u32 = 64;

fn main() -> Result<(), Box<dyn Error>> {
    let device = Device::open_default(&InstanceOptions::default())?;
    println!("device: {}", device.info().name);

    // Two samples per buffer: index 0 for the pass's start, 1 for its end.
    let buffer = |set, label| {
        device.make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(set, label, 2))
    };
    let times = buffer(CommonCounterSet::Timestamp, "compute pass times")?;
    // Pipeline statistics are optional in Vulkan: ask only where they exist.
    let has_statistics =
        (device.info().counter_sets.iter()).any(|s| s.set == CommonCounterSet::Statistic);
    let stats = if has_statistics {
        Some(buffer(
            CommonCounterSet::Statistic,
            "compute pass statistics",
        )?)
    } else {
        None
    };
    let words = u64::from(WORKGROUPS * WORKGROUP_SIZE);
    let data = GpuBuffer::new(&device, words * 4, MemoryLocation::HostVisible)?;
    let pipeline = Pipeline::new(&device, &data)?;

    // The attachments make the encoder write sample 0 when the pass begins
    // and sample 1 when it ends (Metal's `sampleBufferAttachments`).
    let attach = |sample_buffer| PassSampleBufferAttachment {
        sample_buffer,
        start_of_encoder_sample_index: Some(0),
        end_of_encoder_sample_index: Some(1),
    };
    let attachments: Vec<_> = std::iter::once(&times).chain(&stats).map(attach).collect();
    let mut cmd = CommandBuffer::new(&device)?;
    let pass = cmd.compute_encoder(&ComputePassDescriptor {
        sample_buffer_attachments: &attachments,
    })?;
    // SAFETY: `pass.raw()` is a command buffer of `device` in the recording
    // state, outside any render pass; the pipeline and the buffer it writes
    // outlive the submission, which is waited for below.
    unsafe { pipeline.dispatch(&device, pass.raw(), WORKGROUPS) };
    pass.end_encoding()?;
    cmd.commit()?.wait()?;

    // Resolve both samples; each has a status, and a sample without a value
    // (not written, not ready, a driver error) is never read as a zero.
    let resolved = times.resolve_counter_range(0..2)?;
    for (i, status) in resolved.statuses().iter().enumerate() {
        match resolved.sample::<CounterResultTimestamp>(i)? {
            SampleValue::Value(t) => println!("timestamp {i}: {status:?}, {} ticks", t.timestamp),
            lacking => println!("timestamp {i}: {status:?}, no value: {lacking:?}"),
        }
    }
    // The duration between them on the CPU's monotonic clock, converted with
    // the device's calibration, with the bound the conversion guarantees.
    match device.calibration()?.duration(&resolved, 0, 1)? {
        SampleValue::Value(d) => println!(
            "compute pass: {} ns ± {} ns (from {} to {} ns, CLOCK_MONOTONIC)",
            d.ns, d.error_bound_ns, d.start.ns, d.end.ns
        ),
        lacking => return Err(format!("no duration: {lacking:?}").into()),
    }
    if let Some(stats) = &stats {
        match stats
            .resolve_counter_range(0..2)?
            .statistics_between(0, 1)?
        {
            SampleValue::Value(s) => println!(
                "compute invocations: {} (dispatched {words})",
                s.compute_kernel_invocations
            ),
            lacking => return Err(format!("no statistics: {lacking:?}").into()),
        }
    } else {
        println!("compute invocations: no statistic counter set on this device");
    }

    // SAFETY: the submission was waited for: the GPU no longer uses them.
    unsafe { pipeline.destroy(&device) };
    let messages = device.instance().validation_messages();
    if !messages.is_empty() {
        return Err(format!("validation layer: {}", messages.join("\n")).into());
    }
    Ok(())
}

/// Stands in for the application's own compute pipeline: one storage
/// buffer, one entry point. Nothing here is gpu-counters'.
struct Pipeline {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
}

impl Pipeline {
    fn new(device: &Device, data: &GpuBuffer) -> Result<Self, Box<dyn Error>> {
        let d = device.raw();
        let words = compile_wgsl(SHADER)?;
        let binding = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)];
        // SAFETY: valid create infos on a live device; every object is
        // destroyed in `destroy`, and the shader module right after use.
        unsafe {
            let set_layout = d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding),
                None,
            )?;
            let layout = d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&[set_layout]),
                None,
            )?;
            let module =
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let created = d.create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(layout)],
                None,
            );
            d.destroy_shader_module(module, None);
            let pipeline = created.map_err(|(_, e)| e)?[0];
            let pool = d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&sizes),
                None,
            )?;
            let set = d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(pool)
                    .set_layouts(&[set_layout]),
            )?[0];
            let info = [vk::DescriptorBufferInfo::default()
                .buffer(data.raw())
                .range(vk::WHOLE_SIZE)];
            d.update_descriptor_sets(
                &[vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info)],
                &[],
            );
            Ok(Self {
                set_layout,
                layout,
                pipeline,
                pool,
                set,
            })
        }
    }

    /// Binds the pipeline and records `groups` workgroups into `cmd`.
    ///
    /// # Safety
    /// `cmd` is a command buffer of `device`, recording, outside a render
    /// pass; `self` and the buffer it writes live until its work is done.
    unsafe fn dispatch(&self, device: &Device, cmd: vk::CommandBuffer, groups: u32) {
        let d = device.raw();
        // SAFETY: as the caller promises; the objects were made on `device`.
        unsafe {
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[self.set],
                &[],
            );
            d.cmd_dispatch(cmd, groups, 1, 1);
        }
    }

    /// # Safety
    /// The GPU no longer uses the pipeline (its submissions are done).
    unsafe fn destroy(self, device: &Device) {
        let d = device.raw();
        // SAFETY: as the caller promises; each object is destroyed once.
        unsafe {
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_descriptor_pool(self.pool, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}
