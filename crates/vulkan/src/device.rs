//! The logical device: opened by gpu-counters or wrapped from the caller's.

use crate::clock::CalibratedClock;
use crate::instance::{CalibratedTimestamps, Capabilities, Instance, InstanceOptions};
use crate::resolve::ResolvePipeline;
use crate::util::vk_err;
use ash::vk;
use gpu_counters_hal::bookkeeping::Ticket;
use gpu_counters_hal::{
    CalibrationMethod, CommonCounterSet, CounterSamplingPoint, DeviceId, DeviceInfo, Error,
    InvalidInput, RenderStage, Result,
};
use std::ffi::CStr;
use std::sync::{Arc, Mutex, OnceLock};

/// Which optional features the caller enabled on a device they created
/// themselves ([`Device::from_raw`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnabledFeatures {
    /// `hostQueryReset` (Vulkan 1.2): required for sample buffers and heaps.
    pub host_query_reset: bool,
    /// `pipelineStatisticsQuery`: required for the statistic set.
    pub pipeline_statistics_query: bool,
    /// `occlusionQueryPrecise`: required for `fragments_passed`.
    pub occlusion_query_precise: bool,
    /// `tessellationShader`: enables the tessellation counters.
    pub tessellation_shader: bool,
    /// `synchronization2` (Vulkan 1.3): required.
    pub synchronization2: bool,
    /// `dynamicRendering` (Vulkan 1.3): required for render encoders with
    /// dynamic rendering targets.
    pub dynamic_rendering: bool,
    /// `VK_KHR_push_descriptor`: required for GPU resolves.
    pub push_descriptor: bool,
    /// Which calibrated-timestamps extension is enabled, if any: gpu-counters
    /// calibrates through that one.
    pub calibrated_timestamps: Option<CalibratedTimestamps>,
    /// `taskShader` of `VK_EXT_mesh_shader`: render encoders write
    /// timestamps after [`RenderStage::Object`].
    pub task_shader: bool,
    /// `meshShader` of `VK_EXT_mesh_shader`: render encoders write
    /// timestamps after [`RenderStage::Mesh`].
    pub mesh_shader: bool,
}

/// Device commands of Vulkan 1.2 and 1.3 that gpu-counters calls: a device
/// wrapped with [`Device::from_raw`] must have them all.
const REQUIRED_COMMANDS: [&CStr; 7] = [
    c"vkResetQueryPool",
    c"vkCmdWriteTimestamp2",
    c"vkCmdPipelineBarrier2",
    c"vkQueueSubmit2",
    c"vkCmdBeginRendering",
    c"vkCmdEndRendering",
    c"vkCmdBeginRenderPass2",
];

/// A Vulkan device with one graphics+compute queue, ready for counter
/// sampling. Cloning shares it.
#[derive(Clone)]
pub struct Device {
    pub(crate) shared: Arc<DeviceShared>,
}

pub(crate) struct DeviceShared {
    /// Tells devices apart, for refusing another device's objects.
    pub(crate) id: DeviceId,
    pub(crate) instance: Instance,
    pub(crate) caps: Capabilities,
    pub(crate) info: DeviceInfo,
    pub(crate) features: EnabledFeatures,
    pub(crate) device: ash::Device,
    pub(crate) queue: Mutex<vk::Queue>,
    /// Tickets of command buffers [`CommandBuffer::commit`](crate::CommandBuffer::commit)
    /// submitted and nobody has seen finish yet (pruned as they are): each
    /// pushed while the queue's lock is held, so that [`Device::wait_idle`]
    /// completes those it waited for.
    pub(crate) submitted: Mutex<Vec<Ticket>>,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    pub(crate) calibrated: Option<CalibratedClock>,
    pub(crate) push_descriptor: Option<ash::khr::push_descriptor::Device>,
    pub(crate) resolve: OnceLock<std::result::Result<ResolvePipeline, Error>>,
    /// `info.sampling_points` as flags indexed by `CounterSamplingPoint as
    /// usize`, so the per-sample check is one load.
    points: [bool; 5],
    owned: bool,
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // Every object made from this device holds an Arc to it, and every
        // command buffer or submission that recorded gpu-counters commands
        // holds the device until the GPU finished them (a caller's command
        // buffer by the contract of `CommandBuffer::from_raw`): no GPU work
        // of ours is pending here.
        if self.owned {
            // The queue is ours alone, and `&mut self` means no other thread
            // can reach its lock: waiting for idle is externally synchronized.
            let _queue = self.queue.get_mut();
            // SAFETY: see above; the device is valid until destroyed below.
            let _ = unsafe { self.device.device_wait_idle() };
        }
        // SAFETY: no GPU work uses the pipeline (see above); the device is
        // destroyed only when gpu-counters created it.
        unsafe {
            if let Some(Ok(p)) = self.resolve.get() {
                p.destroy(&self.device);
            }
            if self.owned {
                self.device.destroy_device(None);
            }
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.shared.info.name)
            .field("id", &self.shared.id)
            .finish()
    }
}

impl Device {
    /// Opens the default device (the first hardware GPU, else lavapipe) on a
    /// new instance.
    pub fn open_default(options: &InstanceOptions) -> Result<Self> {
        let instance = Instance::new(options)?;
        let index = instance.default_device_index()?;
        Self::open(&instance, index)
    }

    /// Opens device `index` of [`Instance::devices`].
    pub fn open(instance: &Instance, index: usize) -> Result<Self> {
        let pds = instance.physical_devices()?;
        let pd = *pds.get(index).ok_or_else(|| {
            Error::from(InvalidInput::Argument(format!(
                "device index {index} does not exist: there are {} devices (0..{})",
                pds.len(),
                pds.len()
            )))
        })?;
        let caps = Capabilities::query(instance, pd)?;
        let raw = instance.raw();
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(caps.queue_family_index)
            .queue_priorities(&priorities)];
        let mut extensions = Vec::new();
        if caps.push_descriptor {
            extensions.push(ash::khr::push_descriptor::NAME.as_ptr());
        }
        if let (CalibrationMethod::CalibratedPair, Some(ext)) =
            (caps.calibration, caps.calibration_ext)
        {
            extensions.push(ext.name().as_ptr());
        }
        let features = vk::PhysicalDeviceFeatures::default()
            .pipeline_statistics_query(caps.pipeline_statistics)
            .occlusion_query_precise(caps.occlusion_precise)
            .tessellation_shader(caps.tessellation);
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
            .synchronization2(true)
            .dynamic_rendering(true);
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_extension_names(&extensions)
            .enabled_features(&features)
            .push_next(&mut f12)
            .push_next(&mut f13);
        if !caps.host_query_reset {
            return Err(InvalidInput::Unsupported(format!(
                "device `{}` lacks hostQueryReset, which counter sample buffers need",
                caps.name
            ))
            .into());
        }
        // SAFETY: `info` only points at locals alive for the call; the features
        // and extensions were checked to be supported above.
        let device =
            unsafe { raw.create_device(pd, &info, None) }.map_err(vk_err("vkCreateDevice"))?;
        // SAFETY: the queue family and index 0 were requested in `info`.
        let queue = unsafe { device.get_device_queue(caps.queue_family_index, 0) };
        let enabled = EnabledFeatures {
            host_query_reset: true,
            pipeline_statistics_query: caps.pipeline_statistics,
            occlusion_query_precise: caps.occlusion_precise,
            tessellation_shader: caps.tessellation,
            synchronization2: true,
            dynamic_rendering: true,
            push_descriptor: caps.push_descriptor,
            calibrated_timestamps: caps
                .calibration_ext
                .filter(|_| caps.calibration == CalibrationMethod::CalibratedPair),
            task_shader: false,
            mesh_shader: false,
        };
        Ok(Self::assemble(
            instance.clone(),
            caps,
            index,
            device,
            queue,
            enabled,
            true,
        ))
    }

    /// Wraps a device the caller created, so counter sampling fits into an
    /// existing renderer. gpu-counters never destroys it.
    ///
    /// Checks what it relies on: the Vulkan 1.2 and 1.3 commands it calls
    /// must be loadable (the instance was created with `apiVersion` 1.3 or
    /// later), `synchronization2` and `hostQueryReset` enabled, the queue
    /// family present, and the calibrated-timestamps extension named in
    /// `features` supported. Each lack is a typed
    /// [`InvalidInput::Unsupported`] or [`InvalidInput::Argument`] error.
    ///
    /// # Safety
    /// - `device` must have been created from `physical_device` of
    ///   `instance` with the features and extensions `features` claims, and
    ///   `queue` must be a queue of `queue_family_index` of it.
    /// - `instance`, `device` and `queue` must outlive the returned value and
    ///   every object made from it (sample buffers, heaps, command buffers,
    ///   submissions, profilers), which keep the returned value alive.
    /// - gpu-counters submits to `queue` in [`crate::CommandBuffer::commit`],
    ///   bracketing calibration and the profiler's frame marker, and waits on
    ///   the whole device in [`Device::wait_idle`], each under the lock of
    ///   [`Device::queue`]. Every other use of `queue` (your own submits and
    ///   presents) must hold that same lock, and no other queue of `device`
    ///   may be used during [`Device::wait_idle`].
    pub unsafe fn from_raw(
        instance: Instance,
        physical_device: vk::PhysicalDevice,
        device: ash::Device,
        queue_family_index: u32,
        queue: vk::Queue,
        features: EnabledFeatures,
    ) -> Result<Self> {
        for name in REQUIRED_COMMANDS {
            // SAFETY: `device` is a valid device of `instance` (the caller's
            // contract) and `name` is a NUL-terminated command name.
            let f = unsafe {
                instance
                    .raw()
                    .get_device_proc_addr(device.handle(), name.as_ptr())
            };
            if f.is_none() {
                return Err(InvalidInput::Unsupported(format!(
                    "the device has no {}: gpu-counters needs Vulkan 1.3 (create the instance with apiVersion 1.3 or later)",
                    name.to_string_lossy()
                ))
                .into());
            }
        }
        let mut caps = Capabilities::query(&instance, physical_device)?;
        // SAFETY: the caller's physical device belongs to `instance`.
        let families = unsafe {
            instance
                .raw()
                .get_physical_device_queue_family_properties(physical_device)
        };
        let family = families.get(queue_family_index as usize).ok_or_else(|| {
            Error::from(InvalidInput::Argument(format!(
                "queue_family_index {queue_family_index} does not exist ({} families)",
                families.len()
            )))
        })?;
        caps.queue_family_index = queue_family_index;
        caps.timestamp_valid_bits = family.timestamp_valid_bits;
        caps.pipeline_statistics &= features.pipeline_statistics_query
            && family.queue_flags.contains(vk::QueueFlags::GRAPHICS);
        caps.occlusion_precise &= features.occlusion_query_precise;
        caps.tessellation &= features.tessellation_shader;
        caps.host_query_reset &= features.host_query_reset;
        caps.push_descriptor &= features.push_descriptor;
        match features.calibrated_timestamps {
            None => {
                caps.calibration = CalibrationMethod::Bracketing;
                caps.calibration_ext = None;
            }
            Some(ext) => {
                // SAFETY: plain enumeration on the caller's physical device.
                let exts = unsafe {
                    instance
                        .raw()
                        .enumerate_device_extension_properties(physical_device)
                }
                .map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
                if !exts
                    .iter()
                    .any(|e| e.extension_name_as_c_str().ok() == Some(ext.name()))
                {
                    return Err(InvalidInput::Unsupported(format!(
                        "features.calibrated_timestamps names {}, which the device does not support",
                        ext.name().to_string_lossy()
                    ))
                    .into());
                }
                // Calibrate through the extension the caller enabled; where
                // the device cannot calibrate its clocks (no DEVICE or
                // CLOCK_MONOTONIC domain) bracketing stays.
                caps.calibration_ext = Some(ext);
            }
        }
        if features.task_shader || features.mesh_shader {
            check_mesh_shader_features(&instance, physical_device, features)?;
        }
        if !features.synchronization2 || !caps.host_query_reset {
            return Err(InvalidInput::Unsupported(
                "gpu-counters needs Vulkan 1.3 with synchronization2 and hostQueryReset enabled on the device (create the instance with apiVersion 1.3 or later)"
                    .into(),
            )
            .into());
        }
        let index = instance
            .physical_devices()?
            .iter()
            .position(|&p| p == physical_device)
            .unwrap_or(0);
        Ok(Self::assemble(
            instance, caps, index, device, queue, features, false,
        ))
    }

    fn assemble(
        instance: Instance,
        caps: Capabilities,
        index: usize,
        device: ash::Device,
        queue: vk::Queue,
        features: EnabledFeatures,
        owned: bool,
    ) -> Self {
        let raw = instance.raw();
        let calibrated = match (caps.calibration, caps.calibration_ext) {
            (CalibrationMethod::Bracketing, _) | (_, None) => None,
            (_, Some(ext)) => {
                let bits = caps.timestamp_valid_bits;
                // SAFETY: the extension is enabled on the device (opened so,
                // or the caller's promise of `from_raw`) and its domains
                // were checked.
                Some(unsafe { CalibratedClock::new(raw, &device, ext, bits) })
            }
        };
        let push_descriptor = caps
            .push_descriptor
            .then(|| ash::khr::push_descriptor::Device::new(raw, &device));
        // SAFETY: the physical device belongs to the instance.
        let memory = unsafe { raw.get_physical_device_memory_properties(caps.physical_device) };
        let info = caps.info(index);
        let mut points = [false; 5];
        for p in CounterSamplingPoint::ALL {
            points[p as usize] = info.supports_counter_sampling(p);
        }
        Self {
            shared: Arc::new(DeviceShared {
                id: DeviceId::allocate(),
                instance,
                caps,
                info,
                features,
                device,
                queue: Mutex::new(queue),
                submitted: Mutex::new(Vec::new()),
                memory,
                calibrated,
                push_descriptor,
                resolve: OnceLock::new(),
                points,
                owned,
            }),
        }
    }

    /// Everything gpu-counters reports about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The instance the device belongs to.
    pub fn instance(&self) -> &Instance {
        &self.shared.instance
    }

    /// The ash device.
    pub fn raw(&self) -> &ash::Device {
        &self.shared.device
    }

    /// The physical device.
    pub fn physical_device(&self) -> vk::PhysicalDevice {
        self.shared.caps.physical_device
    }

    /// The queue family gpu-counters records for and submits to.
    pub fn queue_family_index(&self) -> u32 {
        self.shared.caps.queue_family_index
    }

    /// The queue. Lock it while submitting from several threads.
    pub fn queue(&self) -> &Mutex<vk::Queue> {
        &self.shared.queue
    }

    /// The features gpu-counters uses on this device.
    pub fn enabled_features(&self) -> EnabledFeatures {
        self.shared.features
    }

    /// Whether the device can sample at `point` (Metal's `supportsCounterSampling`).
    pub fn supports_counter_sampling(&self, point: CounterSamplingPoint) -> bool {
        self.shared.points[point as usize]
    }

    /// The timestamp frequency in ticks per second
    /// (`MTLDevice.queryTimestampFrequency`).
    pub fn timestamp_frequency(&self) -> f64 {
        1e9 / self.shared.caps.timestamp_period_ns
    }

    pub(crate) fn id(&self) -> DeviceId {
        self.shared.id
    }

    pub(crate) fn require_set(&self, set: CommonCounterSet) -> Result<()> {
        if self.shared.info.counter_set(set).is_none() {
            return Err(InvalidInput::UnsupportedCounterSet {
                set,
                device: self.shared.info.name.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// Whether render encoders of this device can write a timestamp after
    /// `stage` ([`RenderEncoder::write_timestamp`](crate::RenderEncoder::write_timestamp)):
    /// vertex and fragment always; object and mesh where `VK_EXT_mesh_shader`'s
    /// `taskShader` and `meshShader` are enabled (only on a device wrapped
    /// with [`Device::from_raw`]: gpu-counters opens devices without them);
    /// tile never, as Vulkan has no tile shaders.
    pub fn supports_render_stage(&self, stage: RenderStage) -> bool {
        match stage {
            RenderStage::Vertex | RenderStage::Fragment => true,
            RenderStage::Tile => false,
            RenderStage::Object => self.shared.features.task_shader,
            RenderStage::Mesh => self.shared.features.mesh_shader,
        }
    }

    /// The pipeline stage a timestamp after `stage` waits for: vertex
    /// `VERTEX_SHADER`, fragment `FRAGMENT_SHADER`, object `TASK_SHADER_EXT`,
    /// mesh `MESH_SHADER_EXT`.
    ///
    /// # Errors
    /// [`InvalidInput::UnsupportedRenderStage`] for a stage the device lacks
    /// ([`Device::supports_render_stage`]).
    #[inline(always)]
    pub(crate) fn render_stage_flags(&self, stage: RenderStage) -> Result<vk::PipelineStageFlags2> {
        match stage {
            RenderStage::Vertex => Ok(vk::PipelineStageFlags2::VERTEX_SHADER),
            RenderStage::Fragment => Ok(vk::PipelineStageFlags2::FRAGMENT_SHADER),
            _ => self.other_render_stage_flags(stage),
        }
    }

    #[cold]
    #[inline(never)]
    fn other_render_stage_flags(&self, stage: RenderStage) -> Result<vk::PipelineStageFlags2> {
        let features = &self.shared.features;
        Ok(match stage {
            RenderStage::Vertex => vk::PipelineStageFlags2::VERTEX_SHADER,
            RenderStage::Fragment => vk::PipelineStageFlags2::FRAGMENT_SHADER,
            RenderStage::Object if features.task_shader => vk::PipelineStageFlags2::TASK_SHADER_EXT,
            RenderStage::Mesh if features.mesh_shader => vk::PipelineStageFlags2::MESH_SHADER_EXT,
            RenderStage::Object | RenderStage::Mesh | RenderStage::Tile => {
                return Err(InvalidInput::UnsupportedRenderStage {
                    stage,
                    device: self.shared.info.name.clone(),
                }
                .into())
            }
        })
    }

    pub(crate) fn require_point(&self, point: CounterSamplingPoint) -> Result<()> {
        if !self.supports_counter_sampling(point) {
            return Err(InvalidInput::UnsupportedSamplingPoint {
                point,
                device: self.shared.info.name.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// Waits until the device is idle. Holds [`Device::queue`]'s lock while
    /// it waits, since `vkDeviceWaitIdle` needs every queue of the device
    /// externally synchronized (for a device wrapped with
    /// [`Device::from_raw`], the caller must not use its other queues
    /// meanwhile). Every command buffer [`CommandBuffer::commit`](crate::CommandBuffer::commit)
    /// submitted before is then known finished, as if its
    /// [`Submission`](crate::Submission) had been waited for.
    pub fn wait_idle(&self) -> Result<()> {
        let _queue = self
            .queue()
            .lock()
            .map_err(|_| Error::Internal("queue lock poisoned".into()))?;
        // SAFETY: the device is valid, and its queue is locked above.
        unsafe { self.raw().device_wait_idle() }.map_err(vk_err("vkDeviceWaitIdle"))?;
        // Each was pushed under the queue's lock, after its submission:
        // all of them were submitted before the wait began.
        let finished = std::mem::take(&mut *self.shared.submitted_list());
        for t in finished {
            t.complete();
        }
        Ok(())
    }

    /// Notes the ticket of a command buffer just submitted; called with the
    /// queue's lock held.
    pub(crate) fn note_submitted(&self, ticket: &Ticket) {
        let mut list = self.shared.submitted_list();
        // Those seen finished (their submission waited for or dropped) go
        // once the list doubles: it stays about as long as what is in flight.
        if list.len() >= 64 && list.len() == list.capacity() {
            list.retain(|t| !t.is_done());
        }
        list.push(ticket.clone());
    }

    /// The tickets of command buffers submitted to the queue and not seen
    /// finished; called with the queue's lock held, so that each was
    /// submitted before what the caller submits next.
    pub(crate) fn submitted_unfinished(&self) -> Vec<Ticket> {
        let list = self.shared.submitted_list();
        list.iter().filter(|t| !t.is_done()).cloned().collect()
    }

    /// The pipeline of GPU resolves, created on first use.
    ///
    /// # Errors
    /// [`InvalidInput::Unsupported`] without `VK_KHR_push_descriptor`; the
    /// pipeline's creation errors otherwise.
    pub(crate) fn resolve_pipeline(&self) -> Result<&ResolvePipeline> {
        self.shared
            .resolve
            .get_or_init(|| {
                if self.shared.push_descriptor.is_none() {
                    return Err(InvalidInput::Unsupported(
                        "GPU resolve needs VK_KHR_push_descriptor, which this device lacks".into(),
                    )
                    .into());
                }
                ResolvePipeline::new(self.raw())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub(crate) fn memory_type(&self, bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        let m = &self.shared.memory;
        (0..m.memory_type_count).find(|&i| {
            bits & (1 << i) != 0 && m.memory_types[i as usize].property_flags.contains(flags)
        })
    }
}

impl DeviceShared {
    fn submitted_list(&self) -> std::sync::MutexGuard<'_, Vec<Ticket>> {
        // Tickets only: a panic elsewhere leaves the list consistent.
        self.submitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn require_timestamps(&self) -> Result<()> {
        if self.caps.timestamp_valid_bits == 0 {
            return Err(InvalidInput::UnsupportedCounterSet {
                set: CommonCounterSet::Timestamp,
                device: self.info.name.clone(),
            }
            .into());
        }
        Ok(())
    }
}

pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Fails unless `physical_device` has `VK_EXT_mesh_shader` with the task and
/// mesh shader features that `features` claims enabled.
fn check_mesh_shader_features(
    instance: &Instance,
    physical_device: vk::PhysicalDevice,
    features: EnabledFeatures,
) -> Result<()> {
    let name = ash::ext::mesh_shader::NAME;
    // SAFETY: plain enumeration on the caller's physical device.
    let exts = unsafe {
        instance
            .raw()
            .enumerate_device_extension_properties(physical_device)
    }
    .map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
    if !exts
        .iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
    {
        return Err(InvalidInput::Unsupported(format!(
            "features.task_shader or features.mesh_shader claims {}, which the device does not support",
            name.to_string_lossy()
        ))
        .into());
    }
    let mut mesh = vk::PhysicalDeviceMeshShaderFeaturesEXT::default();
    let mut all = vk::PhysicalDeviceFeatures2::default().push_next(&mut mesh);
    // SAFETY: the device supports the extension whose feature structure is
    // chained, on an instance of Vulkan 1.1 or later (checked by the caller
    // of this function before: the 1.3 commands were found).
    unsafe {
        instance
            .raw()
            .get_physical_device_features2(physical_device, &mut all)
    };
    for (claimed, supported, feature) in [
        (features.task_shader, mesh.task_shader, "taskShader"),
        (features.mesh_shader, mesh.mesh_shader, "meshShader"),
    ] {
        if claimed && supported == vk::FALSE {
            return Err(InvalidInput::Unsupported(format!(
                "features claims {feature} of {}, which the device does not support",
                name.to_string_lossy()
            ))
            .into());
        }
    }
    Ok(())
}
