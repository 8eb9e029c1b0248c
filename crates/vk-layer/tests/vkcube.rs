//! An unmodified program no one here wrote, `vkcube` (vulkan-tools), under
//! the layer on a virtual X display for a fixed number of frames, with the
//! Khronos validation layer below the layer: every presented frame and
//! every render pass is in the trace; every frame ends after it begins (on
//! the CPU and on the GPU); every pass lies inside its frame; every time
//! carries its bound; the validation layer says nothing (and the same
//! harness does catch its messages: vkcube's `--force_errors`).

mod common;

use common::{gpu_frames, record, scopes, Setup, Xvfb};
use std::process::Command;

const FRAMES: u64 = 300;

fn vkcube(display: &str, args: &[&str]) -> Command {
    let mut c = Command::new("vkcube");
    c.args(args).env("DISPLAY", display);
    c
}

#[test]
fn vkcube_frames_and_passes_are_all_in_the_trace() {
    assert!(
        common::on_path("vkcube") && common::on_path("Xvfb"),
        "vkcube and Xvfb are needed (apt-get install vulkan-tools xvfb; scripts/setup.sh installs them)"
    );
    let x = Xvfb::start();
    let frames = FRAMES.to_string();
    let run = record(vkcube(&x.display, &["--c", &frames]), &Setup::default());
    run.assert_clean();
    let s = &run.summary;
    assert!(s.vulkan_initialized);
    let v = &s.vulkan;
    let losses: Vec<_> = s.drops.injected_losses().collect();
    assert!(losses.is_empty(), "{losses:?}");
    assert_eq!(v.untimed_scopes, 0);
    let passes = v.passes.iter().find(|p| p.name == "render pass").unwrap();
    assert_eq!(passes.count, FRAMES, "{v:#?}");

    let Some(d) = run.dump("vkcube_frames_and_passes_are_all_in_the_trace") else {
        return;
    };
    let frames = gpu_frames(&d);
    let presented: Vec<_> = frames.iter().filter(|f| f.4).collect();
    assert_eq!(presented.len() as u64, FRAMES, "{frames:?}");
    // Every frame the layer sent (the presented ones and vkcube's set-up
    // submission before its first present) ends after it begins.
    assert_eq!(frames.len() as u64, v.frames, "{frames:?}");
    for &(n, start, end, bound, _) in &frames {
        assert!(end > start, "frame {n}: GPU {start}..{end}");
        assert!(bound > 0, "frame {n}: no bound");
    }
    let cpu: Vec<&serde_json::Value> = d["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["track"]
                .as_str()
                .is_some_and(|t| t.starts_with("Vulkan frames (CPU)"))
        })
        .collect();
    assert_eq!(cpu.len() as u64, v.frames);
    for f in &cpu {
        assert!(f["dur"].as_u64().unwrap() > 0, "{f}");
    }
    // Every pass lies inside its frame (both with their bounds, which the
    // layer states and the calibration guarantees).
    let all = scopes(&d);
    let passes: Vec<_> = all.iter().filter(|s| s.kind == "render pass").collect();
    assert_eq!(passes.len() as u64, FRAMES);
    for p in &passes {
        let f = frames
            .iter()
            .find(|f| f.0 == p.frame)
            .unwrap_or_else(|| panic!("pass of frame {} has no frame", p.frame));
        assert!(p.end > p.start, "{p:?}");
        assert!(
            p.start >= f.1 && p.end <= f.2,
            "pass {}..{} outside its frame {}..{}",
            p.start,
            p.end,
            f.1,
            f.2
        );
    }
    for s in &all {
        assert!(s.bound > 0 && s.bound < 1_000_000, "{s:?}");
    }
}

/// The harness catches the validation layer's messages: vkcube's
/// `--force_errors` makes some, and they are reported.
#[test]
fn the_harness_sees_validation_messages() {
    assert!(common::on_path("vkcube") && common::on_path("Xvfb"));
    let x = Xvfb::start();
    let run = record(
        vkcube(&x.display, &["--c", "2", "--force_errors"]),
        &Setup::default(),
    );
    assert!(!run.validation.is_empty(), "{}\n{}", run.stdout, run.stderr);
}
