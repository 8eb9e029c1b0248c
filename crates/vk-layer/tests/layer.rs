//! The layer on ordinary Vulkan programs (`apps`), on lavapipe, with the
//! Khronos validation layer below it (any message fails a test):
//!
//! - the workloads' known counts come out exact through the layer, their
//!   labels nest, and every time lies inside the CPU window around its
//!   submission (with its bound);
//! - hostile programs: secondary command buffers, re-recording every frame,
//!   one command buffer pending four times, a pool destroyed right after
//!   its work, a label across command buffers, two devices on two threads;
//! - a queue family without timestamps, a lost device (injected: lavapipe
//!   never loses one), and a million command buffers in bounded memory.

mod apps;
mod common;

use common::{record, scopes, stats_at, Run, Scope, Setup};

/// Where the test binary runs as an app: does nothing otherwise.
#[test]
fn app_entry() {
    if let Ok(name) = std::env::var(common::APP_VAR) {
        apps::run(&name, &common::app_args());
    }
}

fn window(run: &Run, key: &str) -> (u64, u64) {
    let l = run.app(key);
    (l[1].parse().unwrap(), l[2].parse().unwrap())
}

fn named<'a>(all: &'a [Scope], kind: &str, name: &str) -> Vec<&'a Scope> {
    all.iter()
        .filter(|s| s.kind == kind && s.name == name)
        .collect()
}

fn inside(inner: &Scope, outer: &Scope) -> bool {
    inner.start >= outer.start && inner.end <= outer.end
}

#[test]
fn the_workloads_known_counts_come_out_exact_through_the_layer() {
    let setup = Setup {
        level: "dispatch",
        statistics: true,
        ..Setup::default()
    };
    let run = record(common::app("workloads", &[]), &setup);
    run.assert_clean();
    let losses: Vec<_> = run.summary.drops.injected_losses().collect();
    assert!(losses.is_empty(), "{losses:?}");
    assert_eq!(run.summary.vulkan.executions, 2);
    let expect = run.app("expect");
    let (invocations, vertices, clipped): (f64, f64, f64) = (
        expect[1].parse().unwrap(),
        expect[2].parse().unwrap(),
        expect[3].parse().unwrap(),
    );
    let Some(d) = run.dump("the_workloads_known_counts_come_out_exact_through_the_layer") else {
        return;
    };
    let all = scopes(&d);
    let frame = named(&all, "label", "frame");
    assert_eq!(frame.len(), 1, "{all:#?}");
    let frame = frame[0];
    assert_eq!(frame.depth, 1);
    for (label, kind) in [
        ("compute-workload", "compute"),
        ("render-workload", "render pass"),
        ("copy-workload", "copy"),
    ] {
        let l = named(&all, "label", label);
        assert_eq!(l.len(), 1, "{label}");
        assert_eq!(l[0].depth, 2, "{label}");
        assert!(inside(l[0], frame), "{label} outside frame");
        let pass: Vec<_> = all.iter().filter(|s| s.kind == kind).collect();
        assert!(
            pass.iter().any(|p| inside(p, l[0]) && p.depth == 3),
            "{kind} in {label}"
        );
    }
    // Statistics: exactly what the workloads count.
    let compute = all
        .iter()
        .find(|s| s.kind == "compute" && inside(s, named(&all, "label", "compute-workload")[0]))
        .unwrap();
    let st = stats_at(&d, compute.end).expect("the compute run's statistics");
    assert_eq!(st["compute_kernel_invocations"], invocations);
    let pass = all.iter().find(|s| s.kind == "render pass").unwrap();
    let st = stats_at(&d, pass.end).expect("the render pass's statistics");
    assert_eq!(st["vertex_invocations"], vertices);
    assert_eq!(st["clipper_invocations"], clipped);
    // Dispatch level: each of the 5 dispatches of each submission, inside
    // its run.
    let dispatches: Vec<_> = all.iter().filter(|s| s.kind == "dispatch").collect();
    assert_eq!(dispatches.len(), 10);
    assert_eq!(dispatches.iter().filter(|s| inside(s, compute)).count(), 5);
    // Every time inside the CPU window of its submission, with its bound.
    let w1 = window(&run, "window1");
    let w2 = window(&run, "window2");
    let executions: Vec<_> = all.iter().filter(|s| s.kind == "command buffer").collect();
    assert_eq!(executions.len(), 2);
    for s in &all {
        let w = if s.frame == executions[0].frame {
            w1
        } else {
            w2
        };
        assert!(
            s.start + s.bound >= w.0 && s.end <= w.1 + s.bound,
            "{s:?} outside {w:?}"
        );
        assert!(s.end >= s.start);
    }
    let second = named(&all, "label", "second");
    assert_eq!(second.len(), 1);
    assert!(inside(second[0], executions[1]));
}

#[test]
fn hostile_programs_are_timed_and_valid() {
    let run = record(
        common::app(
            "hostile",
            &[
                "secondary",
                "rerecord",
                "twice",
                "pool",
                "across",
                "devices",
            ],
        ),
        &Setup::default(),
    );
    run.assert_clean();
    // What the secondaries recorded is counted, not timed: a label in the
    // one in the render pass, a label and a run of dispatches in the other.
    assert_eq!(run.loss("vk_secondary_scopes"), 3);
    let other: Vec<_> = run
        .summary
        .drops
        .injected_losses()
        .filter(|(k, _)| *k != "vk_secondary_scopes")
        .collect();
    assert!(other.is_empty(), "{other:?}");
    let Some(d) = run.dump("hostile_programs_are_timed_and_valid") else {
        return;
    };
    let all = scopes(&d);
    assert!(named(&all, "label", "in-secondary").is_empty());
    assert_eq!(
        all.iter()
            .filter(|s| s.kind == "secondary command buffers")
            .count(),
        1
    );
    for i in 0..10 {
        assert_eq!(
            named(&all, "label", &format!("rerecorded-{i}")).len(),
            1,
            "{i}"
        );
    }
    let twice = named(&all, "label", "twice");
    assert_eq!(twice.len(), 4, "{twice:#?}");
    assert_eq!(named(&all, "label", "orphan").len(), 1);
    let across = named(&all, "label", "across");
    assert_eq!(across.len(), 1);
    let holder: Vec<_> = all
        .iter()
        .filter(|s| {
            s.kind == "command buffer" && s.frame == across[0].frame && s.queue == across[0].queue
        })
        .collect();
    assert_eq!(
        holder.len(),
        2,
        "the label's two command buffers: {holder:#?}\n{across:#?}"
    );
    assert!(across[0].start >= holder[0].start && across[0].end <= holder[1].end);
    let queues: std::collections::HashSet<&str> = all
        .iter()
        .filter(|s| s.name.starts_with("device-"))
        .map(|s| s.queue.as_str())
        .collect();
    assert_eq!(queues.len(), 2);
    for i in 0..2 {
        let l = named(&all, "label", &format!("device-{i}"));
        assert_eq!(l.len(), 20, "device {i}");
        assert!(l.iter().all(|s| s.queue == l[0].queue));
    }
    let timed_queues = run
        .summary
        .vulkan
        .queues
        .iter()
        .filter(|q| q.executions > 0)
        .count();
    assert_eq!(timed_queues, 2);
}

#[test]
fn a_family_without_timestamps_runs_and_is_named() {
    let setup = Setup {
        env: vec![("GPU_COUNTERS_VK_LAYER_UNTIMED_FAMILIES".into(), "0".into())],
        ..Setup::default()
    };
    let run = record(common::app("workloads", &[]), &setup);
    run.assert_clean();
    let v = &run.summary.vulkan;
    assert_eq!(v.executions, 0);
    assert_eq!(v.untimed_queues.len(), 1, "{v:#?}");
    assert!(v.untimed_queues[0].contains("queue family 0 index 0 (timestampValidBits 0)"));
    assert_eq!(run.loss("vk_untimed_queue"), 2);
    assert!(run.summary.render_text().contains("untimed queue:"));
}

#[test]
fn a_lost_device_is_reported_and_nothing_hangs() {
    let setup = Setup {
        env: vec![("GPU_COUNTERS_VK_LAYER_FAULT".into(), "device-lost".into())],
        timeout: std::time::Duration::from_secs(120),
        ..Setup::default()
    };
    let run = record(common::app("workloads", &[]), &setup);
    run.assert_clean();
    assert!(run.loss("vk_device_lost") >= 1, "{:#?}", run.summary.drops);
    assert!(
        run.summary
            .notices
            .iter()
            .any(|n| n.severity == "error" && n.text.contains("was lost")),
        "{:#?}",
        run.summary.notices
    );
}

/// A ring too small for what is in flight: the executions it cannot hold
/// are counted (every one is either timed or counted), and their queries
/// are still reset (the validation layer says nothing).
#[test]
fn a_full_ring_is_counted_never_silent() {
    let setup = Setup {
        ring_kb: Some(16),
        ..Setup::default()
    };
    let run = record(common::app("many", &["3000"]), &setup);
    run.assert_clean();
    let timed = run.summary.vulkan.executions;
    let full = run.loss("vk_ring_full");
    assert!(timed > 0 && full > 0, "{timed} timed, {full} not held");
    assert_eq!(timed + full, 3000);
    assert_eq!(run.summary.vulkan.untimed_scopes, full * 2);
}

/// A program that exits without destroying its device says goodbye, and
/// its one execution is either timed or counted as not read: nothing is
/// lost silently, and the layer makes no Vulkan call at exit.
#[test]
fn a_program_that_exits_without_cleaning_up_loses_nothing_silently() {
    let setup = Setup {
        validation: false,
        ..Setup::default()
    };
    let run = record(common::app("exit-early", &[]), &setup);
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.app("exiting").len(), 1);
    let p = &run.summary.processes;
    assert_eq!(p.len(), 1);
    assert!(p[0].goodbye, "{p:?}");
    let timed = run.summary.vulkan.executions;
    assert_eq!(timed + run.loss("vk_unretired"), 1, "{:#?}", run.summary);
    assert_eq!(run.summary.vulkan.frames, 1);
}

/// A million command buffers (recorded, submitted a thousand at a time and
/// freed) peak at the resident set of a hundred thousand: what the layer
/// keeps per command buffer goes with it. Each run is a fresh process.
#[test]
fn a_million_command_buffers_stay_in_bounded_memory() {
    let hwm = |n: u64| -> u64 {
        let setup = Setup {
            validation: false,
            timeout: std::time::Duration::from_secs(600),
            trace: false,
            ..Setup::default()
        };
        let run = record(common::app("many", &[&n.to_string()]), &setup);
        run.assert_clean();
        let l = run.app("many");
        assert_eq!(l[1].parse::<u64>().unwrap(), n);
        assert_eq!(run.summary.vulkan.executions, n);
        let losses: Vec<_> = run.summary.drops.injected_losses().collect();
        assert!(losses.is_empty(), "{losses:?}");
        l[2].parse().unwrap()
    };
    let small = hwm(100_000);
    let large = hwm(1_000_000);
    eprintln!("VmHWM: {small} kB for 100k command buffers, {large} kB for 1M");
    assert!(
        large <= small + small / 10 + 8 * 1024,
        "VmHWM grew from {small} kB to {large} kB"
    );
}
