//! `gpu-counters devices`: every Vulkan device and what it can sample.

use crate::cli::DevicesArgs;
use crate::error::{CliError, CliResult};
use gpu_counters_core::{CommonCounterSet, DeviceInfo};
use gpu_counters_vulkan::{Instance, InstanceOptions};
use serde_json::{json, Value};

/// A device's JSON form: [`DeviceInfo`]'s serde form with a `name` on each
/// counter set (`timestamp`, `statistic`, ...) and `default` marking the
/// device `run` picks without `--device`.
pub fn device_json(info: &DeviceInfo, is_default: bool) -> Value {
    let mut v = serde_json::to_value(info).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "counter_sets".into(),
            Value::Array(
                info.counter_sets
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name(),
                            "counters": s.counters.iter().map(|c| c.name()).collect::<Vec<_>>(),
                        })
                    })
                    .collect(),
            ),
        );
        obj.insert(
            "sampling_points".into(),
            Value::Array(
                info.sampling_points
                    .iter()
                    .map(|p| Value::from(p.name()))
                    .collect(),
            ),
        );
        obj.insert("default".into(), Value::Bool(is_default));
    }
    v
}

/// The instance's devices and the index of the default one (`None` when there
/// are no devices).
pub fn list(instance: &Instance) -> CliResult<(Vec<DeviceInfo>, Option<usize>)> {
    let devices = instance.devices()?;
    let default = if devices.is_empty() {
        None
    } else {
        Some(instance.default_device_index()?)
    };
    Ok((devices, default))
}

/// Fails with every validation message the instance captured, if any.
pub fn check_validation(instance: &Instance) -> CliResult<()> {
    match print_validation(instance) {
        0 => Ok(()),
        n => Err(CliError::Failure(format!(
            "the Vulkan validation layer reported {n} message{} (printed above)",
            if n == 1 { "" } else { "s" }
        ))),
    }
}

/// Prints every validation message the instance captured to stderr and
/// returns how many there were.
pub fn print_validation(instance: &Instance) -> usize {
    let messages = instance.validation_messages();
    for m in &messages {
        eprintln!("validation: {m}");
    }
    messages.len()
}

/// Runs `gpu-counters devices`.
pub fn run(args: &DevicesArgs) -> CliResult<()> {
    let instance = Instance::new(&InstanceOptions::default())?;
    let (devices, default) = list(&instance)?;
    check_validation(&instance)?;
    if args.json {
        let list: Vec<Value> = devices
            .iter()
            .map(|d| device_json(d, Some(d.index) == default))
            .collect();
        let out = json!({ "devices": list });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| CliError::Failure(e.to_string()))?
        );
        return Ok(());
    }
    if devices.is_empty() {
        println!("No Vulkan 1.3 device found.");
        return Ok(());
    }
    println!(
        "{} Vulkan device{} (* = default, used by `run` without --device):",
        devices.len(),
        if devices.len() == 1 { "" } else { "s" }
    );
    for d in &devices {
        println!();
        print_device(d, Some(d.index) == default);
    }
    Ok(())
}

/// Prints one device as an indented listing.
pub fn print_device(d: &DeviceInfo, is_default: bool) {
    let mark = if is_default { "*" } else { " " };
    println!("{mark} [{}] {}", d.index, d.name);
    let rows: Vec<(&str, String)> = vec![
        ("type", serde_plain(&d.device_type)),
        (
            "api",
            format!("{} {}", serde_plain(&d.backend), d.api_version),
        ),
        ("driver", d.driver.clone()),
        (
            "timestamps",
            if d.counter_set(CommonCounterSet::Timestamp).is_some() {
                format!(
                    "{} ns per tick, {} valid bits",
                    trim_float(d.timestamp_period_ns),
                    d.timestamp_valid_bits
                )
            } else {
                "none".into()
            },
        ),
        ("calibration", d.calibration.name().to_string()),
        (
            "counter sets",
            if d.counter_sets.is_empty() {
                "none".into()
            } else {
                d.counter_sets
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ),
    ];
    for (k, v) in rows {
        println!("    {k:<16}{v}");
    }
    for s in &d.counter_sets {
        let names: Vec<&str> = s.counters.iter().map(|c| c.name()).collect();
        println!("    {:<16}{}", format!("  {}", s.name()), names.join(", "));
    }
    let points: Vec<&str> = d.sampling_points.iter().map(|p| p.name()).collect();
    println!(
        "    {:<16}{}",
        "sampling points",
        if points.is_empty() {
            "none".into()
        } else {
            points.join(", ")
        }
    );
    println!(
        "    {:<16}{} per counter sample buffer",
        "max samples", d.max_sample_count
    );
}

/// A unit enum's serde name (`discrete_gpu`, `vulkan`), for printing.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::from("?"),
    }
}

/// A float without a trailing `.0` where it is whole.
fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
