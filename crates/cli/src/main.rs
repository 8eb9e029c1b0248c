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
//! from its expected count, a validation-layer message, an output or stdout
//! that cannot be written), 2 bad input (nothing run, no file written), 141
//! stdout a closed pipe (`gpu-counters ... | head`: the command ends
//! quietly, as a Unix tool killed by SIGPIPE does). Every error is one
//! `error:` line on stderr (none for a closed pipe), the argument parser's
//! (clap's) included: its usage and `--help` hint are left out, and a
//! command with no subcommand is one such line too. See `stdio` for how
//! stdout and stderr are written.

// The clap help texts are doc comments that name Vulkan limits with their
// array index (`maxComputeWorkGroupCount[0]`), which rustdoc would read as
// links.
#![allow(rustdoc::broken_intra_doc_links)]

mod choice;
mod cli;
mod devices;
mod error;
mod measure;
mod multi;
mod output;
mod plan;
mod progress;
mod record;
mod report;
mod run;
mod run_cuda;
mod run_vulkan;
mod run_wgpu;
mod stdio;

use error::CliError;
use stdio::outln;

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
        outln!("{json}")?;
    } else {
        stdio::out_with(|w| gpu_counters_bench::write_human(&report, w))?;
    }
    Ok(())
}

use clap::error::{ContextValue, ErrorKind};
use clap::Parser;
use std::process::ExitCode;

/// What clap's error `e` makes of the command: help and the version written
/// to stdout, or a usage error (exit 2) of one line.
fn parse_error(mut e: clap::Error) -> Result<(), CliError> {
    if !e.use_stderr() {
        // Styled as clap styles it on a terminal (unless NO_COLOR is set).
        use std::io::IsTerminal;
        let styled = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let text = if styled {
            e.render().ansi().to_string()
        } else {
            e.render().to_string()
        };
        return stdio::out_str(&text);
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return Err(CliError::Usage(
            "a subcommand is needed: devices, run or bench (see `gpu-counters --help`)".into(),
        ));
    }
    // The user's text in the message (a value, an unknown option or
    // subcommand) shown escaped, then clap's paragraphs on one line, less
    // its usage and `--help` hint.
    let escaped: Vec<_> = e
        .context()
        .filter_map(|(kind, value)| match value {
            ContextValue::String(s) => Some((kind, ContextValue::String(stdio::one_line(s)))),
            ContextValue::Strings(v) => Some((
                kind,
                ContextValue::Strings(v.iter().map(|s| stdio::one_line(s)).collect()),
            )),
            _ => None,
        })
        .collect();
    for (kind, value) in escaped {
        e.insert(kind, value);
    }
    let rendered = e.render().to_string();
    let paragraphs: Vec<String> = rendered
        .split("\n\n")
        .filter(|p| {
            let p = p.trim_start();
            !p.is_empty() && !p.starts_with("Usage:") && !p.starts_with("For more information")
        })
        .map(|p| {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let message = paragraphs.join("; ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    Err(CliError::Usage(message.to_string()))
}

fn main() -> ExitCode {
    let result = match cli::Cli::try_parse() {
        Ok(cli) => match &cli.command {
            cli::Command::Devices(args) => devices::run(args),
            cli::Command::Run(args) => run::run(args),
            cli::Command::Bench(args) => bench(args),
            cli::Command::Record(args) => return record::run(args),
        },
        Err(e) => parse_error(e),
    };
    // What stdout still buffers fails here, not silently at exit.
    match result.and_then(|()| stdio::flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_closed_pipe() {
                stdio::errln!("error: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}
