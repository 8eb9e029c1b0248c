//! Profiles a few frames of CUDA kernels with gpu-counters' profiler and
//! writes a Chrome trace (open it in <https://ui.perfetto.dev>).
//!
//! ```text
//! cargo run -p gpu-counters-cuda --example profile_kernels [TRACE.json]
//! ```
//!
//! Each frame is an outer scope around two scopes of kernels launched with
//! cudarc on the device's stream; with CUPTI on the library path, each scope
//! also counts its kernels' invocations exactly. Without a CUDA driver it
//! says so and exits 1.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_counters_cuda::{Device, DeviceOptions};
use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{export, Profiler, ProfilerOptions};
use std::error::Error;
use std::time::Duration;

/// The caller's kernel: each thread spins `n` iterations.
const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u32 n)
{
    .reg .b32 %r<3>;
    .reg .pred %p;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, %r1;
    @%p bra LOOP;
    ret;
}
"#;

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/gpu_counters_cuda.json".into());
    let options = DeviceOptions {
        statistics: true,
        ..DeviceOptions::default()
    };
    let device = match Device::open_with(0, &options) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let statistics = device.statistics_unavailable().is_none();
    if let Some(why) = device.statistics_unavailable() {
        eprintln!("timestamps only: {why}");
    }
    let module = device
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let spin = module.load_function("spin")?;
    let profiler = Profiler::new(
        &device,
        ProfilerOptions {
            statistics,
            ..Default::default()
        },
    )?;
    let launch = |grid: u32, n: u32| -> Result<(), Box<dyn Error>> {
        let mut l = device.stream().launch_builder(&spin);
        l.arg(&n);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `spin` takes one u32, given; it touches no memory.
        unsafe { l.launch(cfg) }?;
        Ok(())
    };
    let mut frames = Vec::new();
    for _ in 0..8 {
        let frame = profiler.begin_frame()?;
        let mut rec = device.recorder();
        let outer = frame.scope(&mut rec, "frame", PassKind::Scope)?;
        for (label, grid, n) in [("small kernels", 4, 1_000), ("large kernels", 64, 20_000)] {
            let scope = frame.scope(&mut rec, label, PassKind::Compute)?;
            for _ in 0..3 {
                launch(grid, n)?;
            }
            scope.end(&mut rec)?;
        }
        outer.end(&mut rec)?;
        let submission = device.submit(rec)?;
        profiler.end_frame(frame, [&submission])?;
        frames.extend(profiler.collect()?);
    }
    frames.extend(profiler.wait_collect_all(Duration::from_secs(10))?);
    for f in &frames {
        for s in &f.scopes {
            println!(
                "frame {} {:>14}: {:>9} ns ± {} ns{}",
                f.index,
                s.label,
                s.duration_ns,
                s.error_bound_ns,
                s.statistics
                    .as_deref()
                    .map(|st| format!(", {} invocations", st.compute_kernel_invocations))
                    .unwrap_or_default()
            );
        }
    }
    export::write_chrome_trace(
        &profiler.timeline(&frames),
        &mut std::io::BufWriter::new(std::fs::File::create(&path)?),
    )?;
    println!("wrote {path}");
    Ok(())
}
