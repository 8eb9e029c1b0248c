//! The validation capture counts only the validation layer's messages: with
//! `VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation` in the environment, the
//! Vulkan loader reports "env var ... defined" notices (GENERAL type,
//! `Loader Message`) through the same messenger, and they must not count.
//!
//! Environment variables are process-wide and the test harness runs tests
//! on several threads, so the variable is set only for a child process: this
//! test binary, re-run on the single test below with a marker variable.

mod common;

use std::process::Command;

/// Set in the child process; its value is the name of the test to run.
const CHILD: &str = "GPU_COUNTERS_LOADER_MESSAGES_CHILD";

/// In the child: a validated instance and device, some work, and no
/// validation message although the loader saw `VK_INSTANCE_LAYERS`.
fn child() {
    let device = common::device();
    let calibration = device.calibration().expect("calibration");
    assert!(calibration.interval_ns(0, 1).is_some());
    common::assert_no_validation_messages(&device);
}

#[test]
fn vk_instance_layers_env_notices_are_not_validation_messages() {
    let name = "vk_instance_layers_env_notices_are_not_validation_messages";
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
        .output()
        .expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    // The child really ran the test (not zero tests by a wrong filter).
    assert!(stdout.contains("1 passed"), "{stdout}");
}
