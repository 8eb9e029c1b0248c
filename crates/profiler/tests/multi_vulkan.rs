//! Several Vulkan devices in one timeline, on lavapipe under the validation
//! layer: two logical devices of the one physical device, and a caller's
//! own device (wrapped with `Device::from_raw`) beside one gpu-counters
//! opened. One profiler per device (its own calibration and bound), a copy
//! on the first device that the host waits for before a kernel on the
//! second, the frames merged into one `MultiTimeline` and one Chrome trace
//! with a process per device. The tests run one at a time (the caller's
//! device is created and destroyed by the test itself).

use gpu_counters_hal::timeline::{IntervalRef, MultiTimeline, PassKind};
use gpu_counters_hal::CommonCounterSet;
use gpu_counters_profiler::{export, FrameResult, Profiler, ProfilerOptions, WhenFull};
use gpu_counters_vulkan::ash::vk;
use gpu_counters_vulkan::{
    BlitPassDescriptor, CommandBuffer, ComputePassDescriptor, Device, EnabledFeatures, Instance,
    InstanceOptions,
};
use gpu_counters_workloads::{ComputeWorkload, CopyWorkload, GpuContext};
use std::sync::Mutex;
use std::time::Duration;

/// Serializes the tests of this file.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn instance() -> Instance {
    Instance::new(&InstanceOptions { validation: true })
        .expect("a Vulkan instance with VK_LAYER_KHRONOS_validation")
}

fn assert_no_validation_messages(instance: &Instance) {
    let messages = instance.validation_messages();
    assert!(
        messages.is_empty(),
        "validation layer reported {} message(s):\n{}",
        messages.len(),
        messages.join("\n")
    );
}

fn options(queue: &str, device: &Device) -> ProfilerOptions {
    ProfilerOptions {
        frames_in_flight: 2,
        max_scopes_per_frame: 2,
        statistics: device
            .info()
            .counter_set(CommonCounterSet::Statistic)
            .is_some(),
        when_full: WhenFull::Wait {
            timeout: Duration::from_secs(30),
        },
        queue_name: Some(queue.into()),
    }
}

const FRAMES: u32 = 3;
const WORKGROUPS: u32 = 4;
const WORKGROUP_SIZE: u32 = 64;

/// `FRAMES` times: a copy on `a` in a profiler scope, submitted and waited
/// for by the host, then a kernel on `b` in a scope, submitted and waited
/// for. Returns each device's frames, merged into one timeline, and checks
/// everything the shared timeline must show.
fn copy_then_kernel(a: &Device, b: &Device) -> MultiTimeline {
    let pa = Profiler::new(a, options("transfer", a)).unwrap();
    let pb = Profiler::new(b, options("compute", b)).unwrap();
    let mut copy = CopyWorkload::new(&GpuContext::from_device(a), 1 << 20).unwrap();
    let mut kernel =
        ComputeWorkload::new(&GpuContext::from_device(b), WORKGROUP_SIZE, WORKGROUPS, 16).unwrap();
    let (mut ra, mut rb): (Vec<FrameResult>, Vec<FrameResult>) = (Vec::new(), Vec::new());
    for n in 0..FRAMES {
        // The copy on A.
        let frame = pa.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(a).unwrap();
        let scope = frame
            .scope(&mut cmd, &format!("copy {n}"), PassKind::Blit)
            .unwrap();
        let enc = cmd.blit_encoder(&BlitPassDescriptor::default()).unwrap();
        // SAFETY: `enc.raw()` is a recording command buffer of `a` outside
        // any render pass, on a graphics and compute queue family, with
        // synchronization2 enabled; the workload was built on `a` and is
        // destroyed only after `a` is idle, below.
        unsafe {
            copy.record_fill(a.raw(), enc.raw(), n);
            copy.record_copy(a.raw(), enc.raw());
        }
        enc.end_encoding().unwrap();
        scope.end(&mut cmd).unwrap();
        let submission = cmd.commit().unwrap();
        pa.end_frame(frame, [&submission]).unwrap();
        // The host waits for A before B's kernel is submitted.
        submission.wait().unwrap();
        ra.extend(pa.wait_collect_all(Duration::from_secs(30)).unwrap());

        // The kernel on B.
        let frame = pb.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(b).unwrap();
        let scope = frame
            .scope(&mut cmd, &format!("kernel {n}"), PassKind::Compute)
            .unwrap();
        let enc = cmd
            .compute_encoder(&ComputePassDescriptor::default())
            .unwrap();
        // SAFETY: `enc.raw()` is recording outside any render pass on `b`'s
        // graphics and compute family with synchronization2; the workload
        // was built on `b` and outlives the GPU's use (destroyed after `b`
        // is idle, below).
        unsafe {
            kernel.record_barrier(b.raw(), enc.raw());
            kernel.record_dispatch(b.raw(), enc.raw());
        }
        enc.end_encoding().unwrap();
        scope.end(&mut cmd).unwrap();
        let submission = cmd.commit().unwrap();
        pb.end_frame(frame, [&submission]).unwrap();
        submission.wait().unwrap();
        rb.extend(pb.wait_collect_all(Duration::from_secs(30)).unwrap());
    }
    let mut multi = MultiTimeline::new();
    pa.add_to(&mut multi, &ra);
    pb.add_to(&mut multi, &rb);
    drop((pa, pb));
    a.wait_idle().unwrap();
    b.wait_idle().unwrap();
    // SAFETY: both devices are idle: no pending work uses the workloads.
    unsafe {
        copy.destroy(a.raw());
        kernel.destroy(b.raw());
    }
    check(&multi, b);
    multi
}

/// What the shared timeline of [`copy_then_kernel`] must show.
fn check(multi: &MultiTimeline, b: &Device) {
    assert_eq!(multi.devices.len(), 2);
    for dev in &multi.devices {
        assert_eq!(dev.timeline.frames.len(), FRAMES as usize);
        for frame in &dev.timeline.frames {
            assert_eq!(frame.intervals.len(), 1, "{frame:?}");
        }
        let clock = dev.clock.expect("a calibration per device");
        assert!(clock.anchors >= 1);
    }
    // Each device's intervals inside their CPU windows ± that device's
    // bound.
    assert_eq!(multi.outside_cpu_windows(), Vec::new());
    // The cross-device sequence, in order on the one CPU timeline, within
    // the two bounds.
    // The host ordered copy n, kernel n, copy n + 1, ...: each ends before
    // the next starts, as far as the two bounds tell. (Sorting by start time
    // need not give that order: a bracketed calibration's bound on
    // lavapipe, about a millisecond, is larger than the gaps.)
    let sequence: Vec<IntervalRef> = (0..FRAMES as usize)
        .flat_map(|n| {
            [0, 1].map(|device| IntervalRef {
                device,
                frame: n,
                interval: 0,
            })
        })
        .collect();
    for (k, r) in sequence.iter().enumerate() {
        let label = &multi.interval(*r).unwrap().label;
        let what = if r.device == 0 { "copy" } else { "kernel" };
        assert_eq!(label, &format!("{what} {}", k / 2));
    }
    for pair in sequence.windows(2) {
        let (x, y) = (
            multi.interval(pair[0]).unwrap(),
            multi.interval(pair[1]).unwrap(),
        );
        assert!(x.ends_before(y), "{x:?} then {y:?}");
    }
    if b.info().counter_set(CommonCounterSet::Statistic).is_some() {
        let kernel = &multi.devices[1].timeline.frames[0].intervals[0];
        assert_eq!(
            kernel.statistics.map(|s| s.compute_kernel_invocations),
            Some(u64::from(WORKGROUPS * WORKGROUP_SIZE))
        );
    }
    // One trace, a process per device, a track per queue.
    let trace = export::to_chrome_trace_json_multi(multi);
    let events = trace["traceEvents"].as_array().unwrap();
    let names = |name: &str, pid: u64| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (pid, queue) in [(1, "transfer"), (2, "compute")] {
        let label = multi.device_label(pid as usize - 1).unwrap();
        assert_eq!(names("process_name", pid), [format!("GPU {label}")]);
        assert_eq!(names("thread_name", pid), ["CPU submit→complete", queue]);
    }
    let slices: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "cpu")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Each device's slices in its own order (across devices the trace's
    // order is by start time, which the bounds may blur; see above).
    for (pid, what) in [(1, "copy"), (2, "kernel")] {
        let of: Vec<&str> = slices
            .iter()
            .filter(|(p, _)| *p == pid)
            .map(|(_, n)| n.as_str())
            .collect();
        let expected: Vec<String> = (0..FRAMES).map(|n| format!("{what} {n}")).collect();
        assert_eq!(of, expected, "process {pid}");
    }
    assert_eq!(slices.len(), 2 * FRAMES as usize);
}

/// Two logical devices of the one physical device, both opened by
/// gpu-counters on one instance.
#[test]
fn two_logical_devices_of_one_gpu_in_one_timeline() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let instance = instance();
    let index = instance.default_device_index().unwrap();
    let a = Device::open(&instance, index).unwrap();
    let b = Device::open(&instance, index).unwrap();
    assert_ne!(a.raw().handle(), b.raw().handle());
    let multi = copy_then_kernel(&a, &b);
    // One name, two processes.
    assert_eq!(
        multi.devices[0].timeline.device,
        multi.devices[1].timeline.device
    );
    assert_ne!(multi.device_label(0), multi.device_label(1));
    drop((a, b));
    assert_no_validation_messages(&instance);
}

/// The caller's own logical device, created the way a renderer would and
/// wrapped with `Device::from_raw` (no calibrated-timestamps extension, so
/// calibrated by bracketing), beside one gpu-counters opened (calibrated as
/// the driver allows): each keeps its own calibration and bound.
#[test]
fn the_callers_device_and_one_of_gpu_counters_in_one_timeline() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let instance = instance();
    let index = instance.default_device_index().unwrap();
    let ours = Device::open(&instance, index).unwrap();
    let physical = ours.physical_device();
    let family = ours.queue_family_index();
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&priorities)];
    let stats = ours
        .info()
        .counter_set(CommonCounterSet::Statistic)
        .is_some();
    let features = vk::PhysicalDeviceFeatures::default().pipeline_statistics_query(stats);
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(true);
    let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
        .synchronization2(true)
        .dynamic_rendering(true);
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_features(&features)
        .push_next(&mut f12)
        .push_next(&mut f13);
    // SAFETY: the create-info points at locals alive for the call; the
    // features are ones gpu-counters found supported on this physical
    // device (it enabled them on `ours`).
    let raw = unsafe { instance.raw().create_device(physical, &info, None) }.unwrap();
    {
        // SAFETY: `raw` was created from `physical` of `instance` with the
        // features named; the queue is of `family`; `raw` outlives the
        // wrapper and everything made from it (this block), and the test
        // uses the queue only through gpu-counters.
        let callers = unsafe {
            let queue = raw.get_device_queue(family, 0);
            Device::from_raw(
                instance.clone(),
                physical,
                raw.clone(),
                family,
                queue,
                EnabledFeatures {
                    host_query_reset: true,
                    pipeline_statistics_query: stats,
                    synchronization2: true,
                    dynamic_rendering: true,
                    ..EnabledFeatures::default()
                },
            )
        }
        .unwrap();
        // The caller's device copies, gpu-counters' own runs the kernel.
        let multi = copy_then_kernel(&callers, &ours);
        let methods: Vec<&str> = multi
            .devices
            .iter()
            .map(|d| d.clock.unwrap().method.name())
            .collect();
        assert_eq!(methods[0], "bracketing");
        assert_eq!(methods[1], ours.info().calibration.name());
        drop(callers);
    }
    // SAFETY: the wrapper and every object made from it are gone, and the
    // device is idle (waited in `copy_then_kernel`).
    unsafe {
        raw.device_wait_idle().unwrap();
        raw.destroy_device(None);
    }
    drop(ours);
    assert_no_validation_messages(&instance);
}
