//! `gpu-counters`: the command line of gpu-counters.
//!
//! - `gpu-counters devices [--json] [--backend vulkan|wgpu|cuda|all]`:
//!   every Vulkan device (or wgpu adapter, or CUDA device), its counter
//!   sets, sampling points, timestamp period and calibration.
//! - `gpu-counters run <compute|render|mixed> [--backend vulkan|wgpu|cuda] [...]`:
//!   a built-in workload for some frames, every pass sampled (timestamps and
//!   statistics), the statistics checked against the counts known in
//!   advance, with tables or `--json` on stdout and optional Chrome trace,
//!   CSV and SVG exports; on a Vulkan device, or with `--backend wgpu` on a
//!   wgpu adapter (compute and render only, each pass a profiled pass), or
//!   with `--backend cuda` on a CUDA device (compute only, its kernel
//!   launches inside a profiler scope).
//! - `gpu-counters bench [--json] [--samples N] [--reps R]`: the cost of
//!   sampling against raw Vulkan, wgpu and wgpu-profiler in one run; with
//!   `--backend cuda`, gpu-counters-cuda's placements (kernel timestamps,
//!   zero-intrusion CUPTI activity) against raw CUDA events, a raw
//!   `%globaltimer` kernel and raw CUPTI activity.
//!
//! Exit codes: 0 success, 1 failure (a Vulkan, wgpu or CUDA error, no CUDA
//! driver for `--backend cuda`, a statistic that differs
//! from its expected count, a validation-layer message), 2 bad input (one
//! `error:` line on stderr; nothing run, no file written).

// The clap help texts are doc comments that name Vulkan limits with their
// array index (`maxComputeWorkGroupCount[0]`), which rustdoc would read as
// links.
#![allow(rustdoc::broken_intra_doc_links)]

mod cli;
mod devices;
mod error;
mod multi;
mod output;
mod record;
mod report;
mod run;
mod run_cuda;
mod run_vulkan;
mod run_wgpu;

use error::CliError;

/// `gpu-counters bench`: runs the benchmark and prints its table, or one JSON
/// object with `--json`.
fn bench(args: &gpu_counters_bench::BenchArgs) -> Result<(), CliError> {
    let report = gpu_counters_bench::run(args).map_err(|e| match e {
        gpu_counters_bench::BenchError::InvalidArgument(m) => CliError::Usage(m),
        e => CliError::Failure(e.to_string()),
    })?;
    if args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Failure(format!("serializing the report: {e}")))?;
        println!("{json}");
    } else {
        gpu_counters_bench::print_human(&report);
    }
    Ok(())
}

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Usage errors (unknown subcommand, workload or option, a bad value)
    // print clap's message, whose first line names the problem, and exit 2.
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Devices(args) => devices::run(args),
        cli::Command::Run(args) => run::run(args),
        cli::Command::Bench(args) => bench(args),
        cli::Command::Record(args) => return record::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
