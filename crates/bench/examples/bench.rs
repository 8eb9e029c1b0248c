//! Runs the benchmark as `gpu-counters bench` will:
//! `cargo run --release -p gpu-counters-bench --example bench -- --samples 256 --reps 3`.

use clap::Parser;
use gpu_counters_bench::{print_human, run, BenchArgs};

#[derive(Parser)]
#[command(about = "Cost of GPU counter sampling against raw Vulkan, wgpu and wgpu-profiler")]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    match run(&cli.bench) {
        Ok(report) => {
            if cli.bench.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("error: {e}");
                        std::process::exit(1);
                    }
                }
            } else if let Err(e) = print_human(&report) {
                eprintln!("error: writing to stdout: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
