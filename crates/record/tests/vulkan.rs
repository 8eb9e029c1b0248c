//! The Vulkan layer's records through the collector's writer (with a CUDA
//! device of the same UUID: one GPU for both): queues (one
//! that cannot be timed, named in the summary), command buffer executions,
//! passes and labels as render stages with their bound, frame and depth,
//! statistics as GPU counters, frames, the `vkQueueSubmit` slice joined to
//! its execution, and the layer's counts in the summary's losses.

mod common;

use gpu_counters_record::collector::{write_frames, Caps};
use gpu_counters_record::protocol::*;

const PID: u32 = 4242;

fn frame_of(records: &[Record<'_>], seq: u32) -> Vec<u8> {
    let mut f = Vec::new();
    FrameHeader {
        flags: 0,
        pid: PID,
        seq,
    }
    .encode(&mut f);
    for r in records {
        r.encode(&mut f).expect("fits");
    }
    f
}

fn scope(
    kind: u8,
    status: u8,
    name: Name<'static>,
    span: (u64, u64),
    depth: u16,
) -> Record<'static> {
    Record::VkScope(VkScope {
        queue: 11,
        kind,
        status,
        depth,
        execution: 1,
        frame: 1,
        start_ns: span.0,
        end_ns: span.1,
        bound_ns: 25,
        name,
        stats: Seq::Slice(&[]),
    })
}

#[test]
fn vulkan_records_make_queues_scopes_frames_and_a_summary() {
    let stats: &'static [u64] = &[36, 12, 12, 73_424, 0, 0, 0];
    let mut losses = [0u64; VK_STAT_FIELDS.len()];
    losses[0] = 1; // vk_executions
    losses[4] = 2; // vk_ring_full
    let records = vec![
        Record::Hello(Hello {
            ppid: 1,
            start_ns: 50,
            lib_version: 0x100,
            cupti_version: 0,
            driver_version: 0,
            flags: init::VULKAN,
            exe: Text::from_str("/usr/bin/vkcube"),
            cmdline: Text::from_str("vkcube\0--c\u{0}1"),
        }),
        Record::Str(Str {
            id: 1,
            text: Text::from_str("llvmpipe"),
        }),
        Record::Str(Str {
            id: 2,
            text: Text::from_str("render pass"),
        }),
        Record::Str(Str {
            id: 3,
            text: Text::from_str("command buffer"),
        }),
        Record::Str(Str {
            id: 4,
            text: Text::from_str("vkQueueSubmit"),
        }),
        Record::Str(Str {
            id: 5,
            text: Text::from_str("vertex_invocations"),
        }),
        Record::VkDevice(VkDevice {
            id: 1,
            uuid: [7; 16],
            name: 1,
            driver: 0,
            api_version: 4_206_822,
            period_ps: 1000,
            calibration: 1,
        }),
        // CUDA's view of the same GPU (the same UUID): one GPU in the trace.
        Record::Device(Device {
            ordinal: 0,
            uuid: [7; 16],
            sm_count: 132,
            cc_major: 9,
            cc_minor: 0,
            name: 1,
            chip: 0,
        }),
        Record::Kernel(Kernel {
            work: Work {
                correlation: 5,
                start_ns: 910,
                end_ns: 940,
                ..Work::default()
            },
            name: 2,
            ..Kernel::default()
        }),
        Record::VkQueue(VkQueue {
            id: 11,
            device: 1,
            family: 0,
            index: 0,
            flags: 7,
            valid_bits: 64,
        }),
        Record::VkQueue(VkQueue {
            id: 12,
            device: 1,
            family: 1,
            index: 0,
            flags: 4,
            valid_bits: 0,
        }),
        Record::VkStatNames(VkStatNames {
            device: 1,
            names: Seq::Slice(&[5, 5, 5, 5, 5, 5, 5]),
        }),
        Record::Api(Api {
            tid: PID,
            domain: 0,
            kind: api_kind::LAUNCH,
            cbid: 0,
            correlation: execution_correlation(1),
            enter_ns: 90,
            exit_ns: 95,
            result: 0,
            range_id: 0,
            name: 4,
        }),
        scope(
            scope_kind::COMMAND_BUFFER,
            scope_status::TIMED,
            Name::Id(3),
            (100, 900),
            0,
        ),
        Record::VkScope(VkScope {
            queue: 11,
            kind: scope_kind::RENDER_PASS,
            status: scope_status::TIMED,
            depth: 2,
            execution: 1,
            frame: 1,
            start_ns: 200,
            end_ns: 800,
            bound_ns: 25,
            name: Name::Id(2),
            stats: Seq::Slice(stats),
        }),
        scope(
            scope_kind::LABEL,
            scope_status::TIMED,
            Name::Text(Text::from_str("shadow")),
            (150, 850),
            1,
        ),
        scope(
            scope_kind::LABEL,
            scope_status::NOT_READY,
            Name::Text(Text::from_str("lost")),
            (0, 0),
            1,
        ),
        Record::VkFrame(VkFrame {
            device: 1,
            frame: 1,
            cpu_start_ns: 60,
            cpu_end_ns: 99,
            gpu_start_ns: 100,
            gpu_end_ns: 900,
            bound_ns: 25,
            executions: 1,
            untimed: 0,
            flags: frame_flags::PRESENTED,
        }),
        Record::VkStats(VkStats {
            values: Seq::Slice(&losses),
        }),
        Record::Goodbye(Goodbye {
            reason: goodbye::ATEXIT,
            unsent: 0,
        }),
    ];
    let frames = [frame_of(&records, 0)];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pftrace");
    let file = std::fs::File::create(&path).unwrap();
    let o = write_frames(
        frames.iter().map(Vec::as_slice),
        Some(file),
        Caps::default(),
    );
    assert!(o.write_error.is_none());
    let s = o.summary;
    assert!(s.vulkan_initialized && !s.cuda_initialized);
    assert!(s.processes[0].vulkan);
    let v = &s.vulkan;
    assert_eq!(v.queues.len(), 2);
    assert_eq!(v.untimed_queues.len(), 1, "{v:#?}");
    assert!(
        v.untimed_queues[0].contains("queue family 1 index 0 (timestampValidBits 0)"),
        "{v:#?}"
    );
    assert_eq!(
        (v.frames, v.frames_timed, v.frame_gpu_median_ns),
        (1, 1, Some(800))
    );
    assert_eq!((v.executions, v.untimed_scopes), (1, 1));
    assert_eq!(v.passes.len(), 1);
    assert_eq!(
        (v.passes[0].name.as_str(), v.passes[0].total_ns),
        ("render pass", 600)
    );
    assert_eq!(v.labels.len(), 1);
    assert_eq!(
        (v.labels[0].name.as_str(), v.labels[0].total_ns),
        ("shadow", 700)
    );
    assert_eq!(v.max_bound_ns, Some(25));
    assert_eq!(
        s.devices.len(),
        1,
        "Vulkan and CUDA share the GPU: {:#?}",
        s.devices
    );
    assert_eq!(s.kernels.count, 1);
    assert_eq!(s.gpu_busy[0].busy_ns, 800 + 30);
    let losses: Vec<(&str, u64)> = s.drops.injected_losses().collect();
    assert_eq!(losses, vec![("vk_ring_full", 2)]);
    let text = s.render_text();
    assert!(
        text.contains("untimed queue: pid 4242 GPU0 llvmpipe queue family 1 index 0"),
        "{text}"
    );
    assert!(text.contains("shadow"), "{text}");
    assert!(!text.contains(NO_CUDA_LINE), "{text}");

    let Some(py) = common::python("vulkan_records_make_queues_scopes_frames_and_a_summary") else {
        return;
    };
    let d = common::dump(&py, &path, &["--prefixes"]);
    let stages = d["render_stages"].as_array().unwrap();
    let on_queue: Vec<&serde_json::Value> = stages
        .iter()
        .filter(|r| r["queue"] == "GPU0 4242:queue 0.0")
        .collect();
    assert_eq!(on_queue.len(), 3, "{stages:#?}");
    let cb = on_queue
        .iter()
        .find(|r| r["name"] == "command buffer")
        .unwrap();
    let id = (u64::from(PID) << 32) | u64::from(execution_correlation(1));
    assert_eq!(cb["event_id"], id);
    assert_eq!(cb["extra"]["bound_ns"], "25");
    let pass = on_queue
        .iter()
        .find(|r| r["name"] == "render pass")
        .unwrap();
    assert_eq!(
        (pass["ts"].as_u64(), pass["dur"].as_u64()),
        (Some(200), Some(600))
    );
    assert_eq!(pass["category"], "GRAPHICS");
    assert_eq!(pass["extra"]["frame"], "1");
    let frame = stages
        .iter()
        .find(|r| r["queue"] == "GPU0 4242:frames")
        .unwrap();
    assert_eq!(frame["extra"]["presented"], "1");
    assert_eq!(
        (frame["ts"].as_u64(), frame["dur"].as_u64()),
        (Some(100), Some(800))
    );
    let submit = d["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "vkQueueSubmit")
        .unwrap();
    assert_eq!(submit["launched"], serde_json::json!([id]));
    let counters = d["gpu_counters"].as_array().unwrap();
    assert_eq!(counters.len(), 1);
    assert_eq!(counters[0]["ts"], 800);
    let cpu_frames = d["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "frame 1")
        .count();
    assert_eq!(cpu_frames, 1);
}

const NO_CUDA_LINE: &str = gpu_counters_record::summary::NO_CUDA;
