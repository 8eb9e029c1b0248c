//! `from_raw` checks what it relies on (soundness item 7), on devices
//! created the way a caller's renderer would. These tests create and destroy
//! instances of their own, without gpu-counters' validation set-up; they run
//! one at a time, in a test binary of their own (on the H200, NVIDIA 580 with
//! Debian 12's loader, such instances made concurrently with validated ones
//! in one process hung the process once in a few runs).

use gpu_counters_hal::{CounterErrorKind, Error, InvalidInput};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{CalibratedTimestamps, Device, EnabledFeatures, Instance};
use std::sync::Mutex;

/// Serializes the tests of this file.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn invalid(e: Error) -> InvalidInput {
    assert_eq!(e.kind(), CounterErrorKind::Invalid, "{e}");
    e.invalid().cloned().unwrap()
}

/// A logical device of the default physical device, created the way a
/// caller's renderer would, on an instance of `api_version`.
struct RawDevice {
    entry: ash::Entry,
    instance: ash::Instance,
    physical_device: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
}

impl RawDevice {
    fn new(api_version: u32, extensions: &[&std::ffi::CStr], vulkan_1_3: bool) -> Self {
        Self::create(api_version, extensions, vulkan_1_3, false)
    }

    /// As `new`, with `VK_EXT_mesh_shader`'s task and mesh shaders enabled
    /// when `mesh` (the caller names the extension).
    fn create(
        api_version: u32,
        extensions: &[&std::ffi::CStr],
        vulkan_1_3: bool,
        mesh: bool,
    ) -> Self {
        // SAFETY: plain instance and device creation with create-infos that
        // point at locals alive for each call.
        unsafe {
            let entry = ash::Entry::load().unwrap();
            let app = vk::ApplicationInfo::default().api_version(api_version);
            let instance = entry
                .create_instance(
                    &vk::InstanceCreateInfo::default().application_info(&app),
                    None,
                )
                .unwrap();
            let physical_device = instance.enumerate_physical_devices().unwrap()[0];
            let family = instance
                .get_physical_device_queue_family_properties(physical_device)
                .iter()
                .position(|f| {
                    f.queue_flags
                        .contains(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
                })
                .unwrap() as u32;
            let priorities = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&priorities)];
            let names: Vec<_> = extensions.iter().map(|e| e.as_ptr()).collect();
            let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
            let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
                .synchronization2(true)
                .dynamic_rendering(true);
            let mut info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_extension_names(&names);
            if vulkan_1_3 {
                info = info.push_next(&mut f12).push_next(&mut f13);
            }
            let mut mesh_features = vk::PhysicalDeviceMeshShaderFeaturesEXT::default()
                .task_shader(true)
                .mesh_shader(true);
            if mesh {
                info = info.push_next(&mut mesh_features);
            }
            let device = instance
                .create_device(physical_device, &info, None)
                .unwrap();
            Self {
                entry,
                instance,
                physical_device,
                device,
                family,
            }
        }
    }

    /// Wraps it. The caller (this test) keeps it alive longer.
    fn wrap(&self, features: EnabledFeatures) -> gpu_counters_hal::Result<Device> {
        // SAFETY: the instance and device outlive the wrapper (dropped
        // before `RawDevice`), the queue is of `family`, and `features` is
        // what `new` enabled (or more, for the check that refuses it).
        unsafe {
            let instance = Instance::from_raw(self.entry.clone(), self.instance.clone());
            let queue = self.device.get_device_queue(self.family, 0);
            Device::from_raw(
                instance,
                self.physical_device,
                self.device.clone(),
                self.family,
                queue,
                features,
            )
        }
    }
}

impl Drop for RawDevice {
    fn drop(&mut self) {
        // SAFETY: every wrapper and object made from it is gone.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn vulkan_1_3_features() -> EnabledFeatures {
    EnabledFeatures {
        host_query_reset: true,
        synchronization2: true,
        dynamic_rendering: true,
        ..EnabledFeatures::default()
    }
}

/// Item 7: `from_raw` on a device of a Vulkan 1.0 instance is a typed error
/// that says Vulkan 1.3 is needed (before: accepted, then a panic inside ash,
/// "Unable to load reset_query_pool"). Loaders that return no pointer for
/// the 1.2 and 1.3 commands (lavapipe's) are caught by name; others (NVIDIA
/// 580 returns them) by the features a 1.0 instance cannot report.
#[test]
fn from_raw_below_vulkan_1_3_is_refused() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let raw = RawDevice::new(vk::API_VERSION_1_0, &[], false);
    let e = raw.wrap(vulkan_1_3_features()).unwrap_err();
    assert!(
        matches!(invalid(e.clone()), InvalidInput::Unsupported(ref m) if m.contains("Vulkan 1.3")),
        "{e}"
    );
}

/// Item 7: calibration goes through the calibrated-timestamps extension the
/// caller enabled, and an extension the device lacks is refused.
#[test]
fn from_raw_calibrates_with_the_callers_extension() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let probe = RawDevice::new(vk::API_VERSION_1_3, &[], true);
    // SAFETY: plain enumeration on a valid physical device.
    let exts = unsafe {
        probe
            .instance
            .enumerate_device_extension_properties(probe.physical_device)
            .unwrap()
    };
    drop(probe);
    let has = |name: &std::ffi::CStr| {
        exts.iter()
            .any(|e| e.extension_name_as_c_str().ok() == Some(name))
    };
    let mut tried = 0;
    for (ext, name) in [
        (
            CalibratedTimestamps::Khr,
            ash::khr::calibrated_timestamps::NAME,
        ),
        (
            CalibratedTimestamps::Ext,
            ash::ext::calibrated_timestamps::NAME,
        ),
    ] {
        let features = EnabledFeatures {
            calibrated_timestamps: Some(ext),
            ..vulkan_1_3_features()
        };
        if has(name) {
            let raw = RawDevice::new(vk::API_VERSION_1_3, &[name], true);
            let device = raw.wrap(features).unwrap();
            let calibration = device.calibration().unwrap();
            if device.info().calibration != gpu_counters_hal::CalibrationMethod::Bracketing {
                assert_eq!(
                    calibration.method(),
                    gpu_counters_hal::CalibrationMethod::CalibratedPair
                );
                assert_eq!(
                    device.info().calibration_source,
                    name.to_string_lossy(),
                    "calibrates through the extension the caller enabled"
                );
            }
            tried += 1;
        } else {
            let raw = RawDevice::new(vk::API_VERSION_1_3, &[], true);
            let e = raw.wrap(features).unwrap_err();
            assert!(
                matches!(invalid(e.clone()), InvalidInput::Unsupported(ref m) if m.contains(&*name.to_string_lossy())),
                "{e}"
            );
        }
    }
    assert!(tried >= 1, "lavapipe has VK_EXT_calibrated_timestamps");
}

/// Object and mesh stages need `VK_EXT_mesh_shader`'s `taskShader` and
/// `meshShader`, which only a caller's device has: claimed on a device
/// without them, `from_raw` refuses naming the extension; without the
/// claim, timestamps after them are typed errors; claimed on a device that
/// has them (NVIDIA), precise timestamps after both lie between a sample
/// before the pass and one after it, and relaxed ones share the pass's end.
#[test]
fn from_raw_object_and_mesh_stages_follow_the_mesh_shader_features() {
    use gpu_counters_hal::RenderStage::{Fragment, Mesh, Object, Tile, Vertex};
    use gpu_counters_hal::TimestampGranularity::{Precise, Relaxed};
    use gpu_counters_hal::{CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let name = ash::ext::mesh_shader::NAME;
    let probe = RawDevice::new(vk::API_VERSION_1_3, &[], true);
    // SAFETY: plain enumeration on a valid physical device.
    let has_mesh = unsafe {
        probe
            .instance
            .enumerate_device_extension_properties(probe.physical_device)
            .unwrap()
    }
    .iter()
    .any(|e| e.extension_name_as_c_str().ok() == Some(name));
    let plain = probe.wrap(vulkan_1_3_features()).unwrap();
    for stage in [Object, Mesh, Tile] {
        assert!(!plain.supports_render_stage(stage), "{stage}");
    }
    assert!(plain.supports_render_stage(Vertex) && plain.supports_render_stage(Fragment));
    drop(plain);
    if !has_mesh {
        for features in [
            EnabledFeatures {
                task_shader: true,
                ..vulkan_1_3_features()
            },
            EnabledFeatures {
                mesh_shader: true,
                ..vulkan_1_3_features()
            },
        ] {
            let e = probe.wrap(features).unwrap_err();
            assert!(
                matches!(invalid(e.clone()), InvalidInput::Unsupported(ref m) if m.contains(&*name.to_string_lossy())),
                "{e}"
            );
        }
        return;
    }
    drop(probe);
    let raw = RawDevice::create(vk::API_VERSION_1_3, &[name], true, true);
    let device = raw
        .wrap(EnabledFeatures {
            task_shader: true,
            mesh_shader: true,
            ..vulkan_1_3_features()
        })
        .unwrap();
    assert!(device.supports_render_stage(Object) && device.supports_render_stage(Mesh));
    assert!(!device.supports_render_stage(Tile));
    let heap = device
        .make_counter_heap(&gpu_counters_hal::CounterHeapDescriptor::timestamp(4))
        .unwrap();
    let bounds = device
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "bounds",
            2,
        ))
        .unwrap();
    let mut cmd = gpu_counters_vulkan::CommandBuffer::new(&device).unwrap();
    cmd.sample_counters(&bounds, 0, Precise).unwrap();
    let info = vk::RenderingInfo::default()
        .render_area(vk::Rect2D {
            offset: vk::Offset2D { x: 0, y: 0 },
            extent: vk::Extent2D {
                width: 16,
                height: 16,
            },
        })
        .layer_count(1);
    // SAFETY: a rendering instance without attachments over a 16x16 area
    // in one layer (valid with dynamic rendering, which the device
    // enables); `info` outlives the call.
    let mut pass = unsafe {
        cmd.render_encoder(&gpu_counters_vulkan::RenderPassDescriptor {
            target: gpu_counters_vulkan::RenderTarget::Dynamic(&info),
            sample_buffer_attachments: &[],
        })
    }
    .unwrap();
    pass.write_timestamp(Precise, Object, &heap, 0).unwrap();
    pass.write_timestamp(Precise, Mesh, &heap, 1).unwrap();
    pass.write_timestamp(Relaxed, Object, &heap, 2).unwrap();
    pass.write_timestamp(Relaxed, Mesh, &heap, 3).unwrap();
    pass.end_encoding().unwrap();
    cmd.sample_counters(&bounds, 1, Precise).unwrap();
    cmd.commit().unwrap().wait().unwrap();
    let b = bounds.resolve_counter_range(0..2).unwrap();
    assert_eq!(b.statuses(), &[SampleStatus::Written; 2]);
    let b = b.timestamps().unwrap();
    let h = heap.resolve_counter_range(0..4).unwrap();
    assert_eq!(h.statuses(), &[SampleStatus::Written; 4]);
    let h: Vec<u64> = h
        .timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect();
    for t in &h[..2] {
        assert!(b[0].timestamp <= *t && *t <= h[2], "{b:?} {h:?}");
    }
    assert_eq!(h[2], h[3]);
    assert!(h[2] <= b[1].timestamp, "{b:?} {h:?}");
}
