//! Making and unmaking what the layer keeps: `vkCreateInstance`,
//! `vkDestroyInstance` and `vkCreateDevice` (the layer's part of each), a
//! timed device's registration, its release at `vkDestroyDevice`, and the
//! exit sequence's part for devices.
//!
//! `vkCreateDevice` turns on what the layer needs where the
//! driver offers it and the application did not ask for it:
//!
//! - a calibrated-timestamps extension (`VK_EXT_` or `VK_KHR_`
//!   `calibrated_timestamps`), to put GPU times on the CPU clock;
//! - host query reset (the `hostQueryReset` feature of Vulkan 1.2, or
//!   `VK_EXT_host_query_reset` below 1.2), to reset the layer's queries on
//!   the CPU once their results are read, so that most executions need no
//!   reset on the GPU;
//! - with statistics asked for, `pipelineStatisticsQuery`.
//!
//! The application sees none of it: what it queries of the physical device
//! is unchanged, and the layer's `vkGetDeviceProcAddr` hides the commands
//! of extensions it added. A feature is set in the application's own
//! structure for the duration of the call and restored after it; where the
//! chain has no structure for it, the layer chains one of its own in front.
//! If the driver refuses the device with the layer's additions, the
//! application's own request is made instead, untimed.

use crate::blocks::BlockPool;
use crate::device::{
    load_device, send_clock, Active, Clocks, DeviceData, DeviceSetup, Family, HostReset,
};
use crate::instance::{load, Caps, Gdpa, Gipa, InstanceData};
use crate::queue::QueueData;
use crate::recorded::{STAT_BLOCK, TS_BLOCK};
use crate::sink::stat;
use crate::{chain, global, retire, sink};
use ash::vk;
use gpu_counters_hal::{Calibration, CalibrationMethod};
use gpu_counters_record::protocol::{Record, Seq, VkDevice as VkDeviceRecord, VkStatNames};
use gpu_counters_vulkan::CalibratedClock;
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

static NEXT_DEVICE: AtomicU32 = AtomicU32::new(1);

/// Families a test asks to treat as untimed
/// (`GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES=0,2`): the layer then does what
/// it does on a driver whose family has `timestampValidBits` 0.
fn untimed_families() -> Vec<u32> {
    std::env::var("GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_default()
}

pub(crate) unsafe extern "system" fn create_instance(
    info: *const vk::InstanceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    // SAFETY: the loader passes a valid create info.
    let Some(gipa) = (unsafe { chain::instance_link(&*info) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the next layer's global command.
    let Some(create) = (unsafe {
        load::<vk::PFN_vkCreateInstance>(gipa, vk::Instance::null(), c"vkCreateInstance")
    }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's arguments, passed on.
    let r = unsafe { create(info, alloc, out) };
    if r != vk::Result::SUCCESS {
        return r;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the instance was just created by the chain below; `info`
        // is the application's valid create info.
        unsafe { register_instance(gipa, *out, &*info) }
    });
    r
}

/// Keeps what the layer needs of a new instance.
///
/// # Safety
///
/// `handle` was created by the next layer's `vkCreateInstance` with `info`.
unsafe fn register_instance(gipa: Gipa, handle: vk::Instance, info: &vk::InstanceCreateInfo<'_>) {
    // SAFETY: the next layer's vkGetInstanceProcAddr serves both.
    let (entry, instance) = unsafe {
        // Only the instance-level lookup: the next layer's global commands
        // are not looked up with a null instance (some layers do not
        // answer that), and the layer calls none of them.
        let none = |_: &CStr| std::ptr::null::<std::ffi::c_void>();
        let entry = ash::Entry::from_parts_1_1(
            ash::StaticFn {
                get_instance_proc_addr: gipa,
            },
            ash::EntryFnV1_0::load(none),
            ash::EntryFnV1_1::load(none),
        );
        let instance = ash::Instance::load_with(
            |name| {
                std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(gipa(
                    handle,
                    name.as_ptr(),
                ))
            },
            handle,
        );
        (entry, instance)
    };
    // SAFETY: a valid create info's application info and extension names.
    let (api_version, exts) = unsafe {
        let api = if info.p_application_info.is_null() {
            vk::API_VERSION_1_0
        } else {
            (*info.p_application_info)
                .api_version
                .max(vk::API_VERSION_1_0)
        };
        let exts: Vec<&CStr> = (0..info.enabled_extension_count as usize)
            .map(|i| CStr::from_ptr(*info.pp_enabled_extension_names.add(i)))
            .collect();
        (api, exts)
    };
    let (p2, f2): (&CStr, &CStr) = if api_version >= vk::API_VERSION_1_1 {
        (
            c"vkGetPhysicalDeviceProperties2",
            c"vkGetPhysicalDeviceFeatures2",
        )
    } else {
        (
            c"vkGetPhysicalDeviceProperties2KHR",
            c"vkGetPhysicalDeviceFeatures2KHR",
        )
    };
    let properties2 = if api_version >= vk::API_VERSION_1_1
        || exts.contains(&ash::khr::get_physical_device_properties2::NAME)
    {
        // SAFETY: the commands' types.
        unsafe { load(gipa, handle, p2).zip(load(gipa, handle, f2)) }
    } else {
        None
    };
    let active = sink::get().is_some();
    // SAFETY: the commands' types.
    let labels = unsafe {
        (
            load(gipa, handle, c"vkCmdBeginDebugUtilsLabelEXT"),
            load(gipa, handle, c"vkCmdEndDebugUtilsLabelEXT"),
        )
    };
    // SAFETY: a dispatchable handle the loader made.
    let k = unsafe { global::key(handle) };
    global::add_instance(
        k,
        Arc::new(InstanceData {
            handle,
            gipa,
            entry,
            instance,
            api_version,
            properties2,
            labels,
            active,
        }),
    );
}

pub(crate) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    // SAFETY: a valid instance handle of the application.
    let k = unsafe { global::key(instance) };
    if let Some(data) = global::remove_instance(k) {
        // SAFETY: the application's call, passed on.
        unsafe { (data.instance.fp_v1_0().destroy_instance)(instance, alloc) };
    }
}

/// A `VkBool32` the layer set in the application's structure, to restore.
struct Restore(*mut vk::Bool32, vk::Bool32);

/// A structure header of a `pNext` chain.
#[repr(C)]
struct BaseOut {
    s_type: vk::StructureType,
    p_next: *mut std::ffi::c_void,
}

/// The first structure of `s_type` in the chain from `p_next`.
///
/// # Safety
///
/// `p_next` is null or a valid `pNext` chain.
unsafe fn find_mut(p_next: *const std::ffi::c_void, s_type: vk::StructureType) -> *mut BaseOut {
    let mut p = p_next as *mut BaseOut;
    // SAFETY: the caller's promise: each structure starts with sType, pNext.
    unsafe {
        while !p.is_null() {
            if (*p).s_type == s_type {
                return p;
            }
            p = (*p).p_next as *mut BaseOut;
        }
    }
    std::ptr::null_mut()
}

pub(crate) unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    // SAFETY: the loader passes a valid physical device and create info.
    let (inst, link) = unsafe {
        (
            global::instance(global::key(pd)),
            chain::device_link(&*info),
        )
    };
    let (Some(inst), Some((gipa, gdpa, set_data))) = (inst, link) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the next layer's instance command.
    let Some(create) =
        (unsafe { load::<vk::PFN_vkCreateDevice>(gipa, inst.handle, c"vkCreateDevice") })
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if !inst.active {
        // SAFETY: the application's arguments, passed on.
        let r = unsafe { create(pd, info, alloc, out) };
        if r == vk::Result::SUCCESS {
            // SAFETY: the device was just created.
            unsafe { register_passthrough(*out, gdpa) };
        }
        return r;
    }
    // SAFETY: the application's valid arguments.
    let app = unsafe { &*info };
    let config = sink::get().map(|s| s.config).unwrap_or_default();
    // SAFETY: `pd` belongs to the instance.
    // SAFETY: `pd` belongs to the instance.
    let caps = std::panic::catch_unwind(|| unsafe { Caps::query(&inst, pd) }).unwrap_or_default();

    // What to add.
    let mut extensions: Vec<*const c_char> = (0..app.enabled_extension_count as usize)
        // SAFETY: a valid create info's extension array.
        .map(|i| unsafe { *app.pp_enabled_extension_names.add(i) })
        .collect();
    let app_has = |name: &CStr| {
        extensions
            .iter()
            // SAFETY: the application's valid NUL-terminated names.
            .any(|&p| unsafe { CStr::from_ptr(p) } == name)
    };
    let mut added: Vec<&'static CStr> = Vec::new();
    let calibration = match caps.calibration {
        Some(ext) if app_has(ash::ext::calibrated_timestamps::NAME) => {
            let _ = ext;
            Some(gpu_counters_vulkan::CalibratedTimestamps::Ext)
        }
        Some(_) if app_has(ash::khr::calibrated_timestamps::NAME) => {
            Some(gpu_counters_vulkan::CalibratedTimestamps::Khr)
        }
        Some(ext) => {
            added.push(ext.name());
            Some(ext)
        }
        None => None,
    };
    let mut restore: Vec<Restore> = Vec::new();
    let mut ours_hqr = vk::PhysicalDeviceHostQueryResetFeatures::default().host_query_reset(true);
    let mut features_copy: vk::PhysicalDeviceFeatures;
    let mut modified = *app;
    let host_reset = if caps.host_query_reset == HostReset::None {
        HostReset::None
    } else {
        let mode = caps.host_query_reset;
        // SAFETY: the application's valid chain; the structures found are
        // the application's, set for the call and restored after it.
        unsafe {
            let v12 = find_mut(
                app.p_next,
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
            ) as *mut vk::PhysicalDeviceVulkan12Features<'_>;
            let hqr = find_mut(
                app.p_next,
                vk::StructureType::PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES,
            ) as *mut vk::PhysicalDeviceHostQueryResetFeatures<'_>;
            let core = mode == HostReset::Core;
            if !v12.is_null() {
                if core {
                    restore.push(Restore(
                        &mut (*v12).host_query_reset,
                        (*v12).host_query_reset,
                    ));
                    (*v12).host_query_reset = vk::TRUE;
                    HostReset::Core
                } else {
                    HostReset::None
                }
            } else if !hqr.is_null() {
                if !core && !app_has(ash::ext::host_query_reset::NAME) {
                    added.push(ash::ext::host_query_reset::NAME);
                }
                restore.push(Restore(
                    &mut (*hqr).host_query_reset,
                    (*hqr).host_query_reset,
                ));
                (*hqr).host_query_reset = vk::TRUE;
                mode
            } else {
                if !core && !app_has(ash::ext::host_query_reset::NAME) {
                    added.push(ash::ext::host_query_reset::NAME);
                }
                ours_hqr.p_next = modified.p_next as *mut _;
                modified.p_next =
                    (&mut ours_hqr as *mut vk::PhysicalDeviceHostQueryResetFeatures<'_>).cast();
                mode
            }
        }
    };
    let mut statistics = false;
    if config.statistics && caps.pipeline_statistics {
        statistics = true;
        if !app.p_enabled_features.is_null() {
            // SAFETY: the application's valid features.
            features_copy = unsafe { *app.p_enabled_features };
            features_copy.pipeline_statistics_query = vk::TRUE;
            modified.p_enabled_features = &features_copy;
        } else {
            // SAFETY: the application's valid chain.
            let f2 = unsafe { find_mut(app.p_next, vk::StructureType::PHYSICAL_DEVICE_FEATURES_2) }
                as *mut vk::PhysicalDeviceFeatures2<'_>;
            if f2.is_null() {
                features_copy =
                    vk::PhysicalDeviceFeatures::default().pipeline_statistics_query(true);
                modified.p_enabled_features = &features_copy;
            } else {
                // SAFETY: a structure of the application's valid chain.
                unsafe {
                    restore.push(Restore(
                        &mut (*f2).features.pipeline_statistics_query,
                        (*f2).features.pipeline_statistics_query,
                    ));
                    (*f2).features.pipeline_statistics_query = vk::TRUE;
                }
            }
        }
    }
    for a in &added {
        extensions.push(a.as_ptr());
    }
    modified.enabled_extension_count = extensions.len() as u32;
    modified.pp_enabled_extension_names = extensions.as_ptr();
    // SAFETY: the application's create info with the layer's additions,
    // every pointer alive for the call.
    let mut r = unsafe { create(pd, &modified, alloc, out) };
    for Restore(p, v) in restore.drain(..).rev() {
        // SAFETY: restores the application's own value where the layer set it.
        unsafe { *p = v };
    }
    let mut setup = DeviceSetup {
        calibration,
        host_reset,
        statistics,
        added,
    };
    if r != vk::Result::SUCCESS && r != vk::Result::ERROR_DEVICE_LOST {
        // The driver refused the additions: the application's request, untimed.
        // SAFETY: the application's arguments, passed on.
        r = unsafe { create(pd, info, alloc, out) };
        setup = DeviceSetup {
            calibration: None,
            host_reset: HostReset::None,
            statistics: false,
            added: Vec::new(),
        };
    }
    if r != vk::Result::SUCCESS {
        return r;
    }
    // SAFETY: the device was just created from `pd` with `setup`.
    let device = unsafe { *out };
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the device was just made from `pd` of the instance as
        // `setup` says.
        unsafe { DeviceData::register(&inst, pd, device, gdpa, set_data, &caps, setup, app) }
    });
    // Registered after the driver's own exit handlers (made while the device
    // was created), so that it runs before them.
    sink::register_exit_handler();
    r
}

/// Registers a device of an inactive layer: only its next
/// `vkGetDeviceProcAddr`, for passing calls through.
///
/// # Safety
///
/// `device` was just created by the next layer.
unsafe fn register_passthrough(device: vk::Device, gdpa: Gdpa) {
    // SAFETY: the caller's promise.
    let k = unsafe { global::key(device) };
    global::add_device(k, Arc::new(DeviceData::passthrough(device, gdpa)));
}

impl DeviceData {
    /// Registers a device the layer times.
    ///
    /// # Safety
    ///
    /// `device` was just made by the next layer from `pd` of `inst`, as
    /// `setup` says; `app` is the application's create info.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn register(
        inst: &InstanceData,
        pd: vk::PhysicalDevice,
        device: vk::Device,
        gdpa: Gdpa,
        set_data: chain::SetDeviceLoaderData,
        caps: &Caps,
        setup: DeviceSetup,
        app: &vk::DeviceCreateInfo<'_>,
    ) {
        let _ = app;
        // SAFETY: the physical device belongs to the instance.
        let memory = unsafe { inst.instance.get_physical_device_memory_properties(pd) };
        let Some(sink) = sink::get() else {
            // SAFETY: the caller's promise.
            unsafe {
                global::add_device(
                    global::key(device),
                    Arc::new(Self::passthrough(device, gdpa)),
                )
            };
            return;
        };
        // The exit sequence retires this device's work first.
        sink::set_before_exit(exit_all);
        // SAFETY: the next layer's commands of this device.
        let ash_device = unsafe {
            ash::Device::load_with(
                |name| {
                    std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(gdpa(
                        device,
                        name.as_ptr(),
                    ))
                },
                device,
            )
        };
        let untimed = untimed_families();
        let families: Vec<Family> = caps
            .families
            .iter()
            .enumerate()
            .map(|(i, &(flags, bits))| Family {
                flags,
                valid_bits: if untimed.contains(&(i as u32)) {
                    0
                } else {
                    bits
                },
            })
            .collect();
        let host_reset: Option<vk::PFN_vkResetQueryPool> = match setup.host_reset {
            HostReset::None => None,
            HostReset::Core => Some(ash_device.fp_v1_2().reset_query_pool),
            // SAFETY: the command's type; the device is the next layer's.
            HostReset::Ext => unsafe {
                load_device::<vk::PFN_vkResetQueryPool>(gdpa, device, c"vkResetQueryPoolEXT")
            },
        };
        let id = NEXT_DEVICE.fetch_add(1, Ordering::Relaxed);
        // The instance's commands with this device's next
        // vkGetDeviceProcAddr (the loader's instance-level lookup of it may
        // give none), for loading the device's extension commands.
        // SAFETY: the next layer's lookups of this instance and device.
        let with_gdpa = unsafe {
            let (gipa, handle) = (inst.gipa, inst.handle);
            ash::Instance::load_with(
                |name| {
                    if name == c"vkGetDeviceProcAddr" {
                        gdpa as *const std::ffi::c_void
                    } else {
                        std::mem::transmute::<vk::PFN_vkVoidFunction, *const std::ffi::c_void>(
                            gipa(handle, name.as_ptr()),
                        )
                    }
                },
                handle,
            )
        };
        let clocks = setup.calibration.and_then(|ext| {
            // SAFETY: the extension was enabled on this device, whose
            // physical device offers the DEVICE and CLOCK_MONOTONIC domains.
            let clock = unsafe { CalibratedClock::new(&with_gdpa, &ash_device, ext, 64) };
            let pair = clock
                .read_best(gpu_counters_vulkan::CALIBRATION_BURST)
                .ok()?;
            let mut by_bits: Vec<(u32, Calibration)> = Vec::new();
            for f in &families {
                if f.valid_bits == 0 || by_bits.iter().any(|(b, _)| *b == f.valid_bits) {
                    continue;
                }
                if let Ok(c) = Calibration::new(
                    CalibrationMethod::CalibratedPair,
                    caps.period_ns,
                    f.valid_bits,
                    pair,
                ) {
                    by_bits.push((f.valid_bits, c));
                }
            }
            send_clock(sink, id, caps.period_ns, &pair);
            Some(Mutex::new(Clocks { clock, by_bits }))
        });
        let statistics = setup.statistics.then(|| {
            let mut flags = vk::QueryPipelineStatisticFlags::empty();
            for (f, _) in gpu_counters_vulkan::VK_STATISTICS {
                flags |= f;
            }
            (flags, gpu_counters_vulkan::VK_STATISTICS.len())
        });
        let max_blocks = sink.config.max_blocks;
        let active = Active {
            id,
            ash: ash_device,
            next: std::sync::OnceLock::new(),
            gdpa,
            device,
            labels: inst.labels,
            set_data,
            families,
            period_ns: caps.period_ns,
            memory,
            clocks,
            host_reset,
            statistics,
            level: sink.config.level,
            hidden: setup.added,
            ts_blocks: BlockPool::new(
                vk::QueryType::TIMESTAMP,
                vk::QueryPipelineStatisticFlags::empty(),
                TS_BLOCK,
                max_blocks,
            ),
            stat_blocks: statistics.map(|(flags, _)| {
                BlockPool::new(
                    vk::QueryType::PIPELINE_STATISTICS,
                    flags,
                    STAT_BLOCK,
                    max_blocks,
                )
            }),
            pools: Mutex::new(HashMap::new()),
            cbs: RwLock::new(HashMap::new()),
            multiview: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
            frames: Mutex::new(retire::Frames::default()),
            names: Mutex::new(HashMap::new()),
            retire_lock: Mutex::new(()),
            lost: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            next_queue: AtomicU32::new(1),
        };
        let name = sink.intern(&caps.name).unwrap_or(0);
        let driver = if caps.driver.is_empty() {
            0
        } else {
            sink.intern(&caps.driver).unwrap_or(0)
        };
        sink.push(&Record::VkDevice(VkDeviceRecord {
            id,
            uuid: caps.uuid,
            name,
            driver,
            api_version: caps.api_version,
            period_ps: (caps.period_ns * 1000.0).round() as u64,
            calibration: u8::from(active.clocks.is_some()),
        }));
        if statistics.is_some() {
            let ids: Vec<u32> = gpu_counters_vulkan::VK_STATISTICS
                .iter()
                .map(|(_, c)| sink.intern(c.name()).unwrap_or(0))
                .collect();
            sink.push(&Record::VkStatNames(VkStatNames {
                device: id,
                names: Seq::Slice(&ids),
            }));
        }
        // SAFETY: the caller's promise.
        let k = unsafe { global::key(device) };
        global::add_device(
            k,
            Arc::new(DeviceData {
                handle: device,
                gdpa,
                active: Some(active),
            }),
        );
        retire::start_thread();
    }
}

/// Retires and releases what the layer made of `dev`; called by
/// `vkDestroyDevice` before the device goes.
///
/// # Safety
///
/// The application is destroying the device: no other call uses it.
pub unsafe fn destroy(a: &Active) {
    let _g = a.retire_lock.lock().unwrap_or_else(|e| e.into_inner());
    if a.destroyed.swap(true, Ordering::AcqRel) {
        return;
    }
    let queues: Vec<Arc<QueueData>> = a
        .queues
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    // SAFETY: the caller's promise; the retire lock is held.
    unsafe { retire::drain(a, &queues) };
    if let Some(s) = sink::get() {
        let open: u64 = queues.iter().map(|q| retire::unbalanced(q)).sum();
        s.counts.add(stat::LABEL_UNBALANCED, open);
    }
    retire::flush_frames(a, true);
    for q in &queues {
        // SAFETY: every submission of the layer's on the queue finished (or
        // was given up after the drain's deadline, when the device is
        // lost or the application destroys a device with work in flight).
        unsafe { q.destroy(&a.ash) };
    }
    a.cbs.write().unwrap_or_else(|e| e.into_inner()).clear();
    // SAFETY: as above: no work of the layer's is in flight; recordings
    // are gone, so the blocks are free.
    unsafe {
        a.ts_blocks.destroy(&a.ash);
        if let Some(b) = &a.stat_blocks {
            b.destroy(&a.ash);
        }
    }
    if let Some(s) = sink::get() {
        s.send_stats();
    }
}

/// At exit: every device's executions still in flight are counted as not
/// retired; no Vulkan call is made (the driver may be going away).
pub fn exit_all() {
    retire::EXITING.store(true, Ordering::Release);
    for d in global::devices() {
        let Some(a) = &d.active else { continue };
        // Wait (bounded) for a retire in progress to finish its calls.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
        let guard = loop {
            match a.retire_lock.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(_) if std::time::Instant::now() >= until => break None,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        };
        if a.destroyed.swap(true, Ordering::AcqRel) {
            continue;
        }
        let queues: Vec<Arc<QueueData>> = a
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut n = 0;
        for q in &queues {
            n += q.abandon();
        }
        if let Some(s) = sink::get() {
            s.counts.add(stat::UNRETIRED, n);
        }
        retire::flush_frames(a, true);
        // Keep the lock: no retire runs after this.
        std::mem::forget(guard);
    }
}
