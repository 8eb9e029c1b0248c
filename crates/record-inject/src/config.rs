//! What `gpu-counters record` asks of the injection:
//! `$GPU_COUNTERS_RECORD_DIR/config.json`, written before the program
//! starts. A missing or unreadable file gives the defaults (API slices of
//! launches, NVTX on, no metrics), with the reason kept for a notice.

use serde::Deserialize;
use std::path::Path;

/// The injection's settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct Config {
    /// The file's version (1).
    pub version: u32,
    /// Which API calls become slices: `launches` or `none`.
    pub api: String,
    /// Record NVTX ranges.
    pub nvtx: bool,
    /// PM-sampling rate (`--gpu-metrics`), samples a second.
    pub gpu_metrics_hz: Option<u32>,
    /// PM-sampling metrics (empty: the defaults, chosen on the device).
    pub gpu_metrics: Vec<String>,
    /// Per-kernel counters (`--counters`).
    pub counters: Vec<String>,
    /// `none` or `kernel`: whether per-kernel counters replay kernels.
    pub replay: String,
    /// Seconds between clock calibrations.
    pub refit_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            version: 1,
            api: "launches".into(),
            nvtx: true,
            gpu_metrics_hz: None,
            gpu_metrics: Vec::new(),
            counters: Vec::new(),
            replay: "none".into(),
            refit_s: 10.0,
        }
    }
}

impl Config {
    /// Parses the file's text; an error names what was wrong.
    pub fn parse(text: &str) -> Result<Config, String> {
        let c: Config = serde_json::from_str(text).map_err(|e| format!("config.json: {e}"))?;
        if c.version != 1 {
            return Err(format!(
                "config.json: version {} (this library reads 1)",
                c.version
            ));
        }
        if c.api != "launches" && c.api != "none" {
            return Err(format!("config.json: api {:?} (launches or none)", c.api));
        }
        if !(c.refit_s.is_finite() && c.refit_s > 0.0) {
            return Err(format!("config.json: refit_s {}", c.refit_s));
        }
        if c.replay != "none" && c.replay != "kernel" {
            return Err(format!(
                "config.json: replay {:?} (none or kernel)",
                c.replay
            ));
        }
        if let Some(hz) = c.gpu_metrics_hz {
            if !(1..=MAX_PM_HZ).contains(&hz) {
                return Err(format!(
                    "config.json: gpu_metrics_hz {hz} (1 to {MAX_PM_HZ})"
                ));
            }
        }
        if c.gpu_metrics_hz.is_some() && !c.counters.is_empty() {
            return Err(
                "config.json: gpu_metrics_hz with counters (both need the performance monitors)"
                    .into(),
            );
        }
        Ok(c)
    }

    /// Reads `dir/config.json`: the defaults and why, where it cannot be
    /// read or parsed.
    pub fn load(dir: &Path) -> (Config, Option<String>) {
        match std::fs::read_to_string(dir.join("config.json")) {
            Ok(t) => match Config::parse(&t) {
                Ok(c) => (c, None),
                Err(e) => (Config::default(), Some(e)),
            },
            Err(e) => (
                Config::default(),
                Some(format!("{}: {e}", dir.join("config.json").display())),
            ),
        }
    }

    /// Whether API calls become slices.
    pub fn api_slices(&self) -> bool {
        self.api == "launches"
    }

    /// Whether per-kernel counters replay kernels.
    pub fn replay_kernels(&self) -> bool {
        self.replay == "kernel"
    }
}

/// The highest PM-sampling rate accepted, samples a second.
pub const MAX_PM_HZ: u32 = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// What `record` writes parses; absent keys take their defaults.
    #[test]
    fn record_config_parses() {
        let c = Config::parse(
            r#"{"version":1,"api":"none","nvtx":false,"gpu_metrics_hz":10000,
                "gpu_metrics":["dram__bytes_read.sum"],"counters":[],"replay":"none"}"#,
        )
        .unwrap();
        assert!(!c.api_slices());
        assert!(!c.nvtx);
        assert_eq!(c.gpu_metrics_hz, Some(10000));
        assert_eq!(c.gpu_metrics, vec!["dram__bytes_read.sum".to_string()]);
        assert_eq!(c.refit_s, 10.0);
        assert!(!c.replay_kernels());
        assert_eq!(Config::parse("{}").unwrap(), Config::default());
        let c = Config::parse(
            r#"{"version":1,"counters":["smsp__inst_executed.sum","dram__bytes_read.sum"],
                "replay":"kernel"}"#,
        )
        .unwrap();
        assert!(c.replay_kernels());
        assert_eq!(c.counters.len(), 2);
        assert_eq!(c.gpu_metrics_hz, None);
    }

    /// Bad files are typed errors naming the field; a missing file gives
    /// the defaults and says why.
    #[test]
    fn bad_configs_are_errors() {
        assert!(Config::parse(r#"{"version":2}"#)
            .unwrap_err()
            .contains("version 2"));
        assert!(Config::parse(r#"{"api":"all"}"#)
            .unwrap_err()
            .contains("api"));
        assert!(Config::parse(r#"{"nvtx":"yes"}"#).is_err());
        assert!(Config::parse(r#"{"replay":"user"}"#)
            .unwrap_err()
            .contains("replay \"user\""));
        assert!(Config::parse(r#"{"gpu_metrics_hz":0}"#)
            .unwrap_err()
            .contains("gpu_metrics_hz 0"));
        assert!(Config::parse(r#"{"gpu_metrics_hz":100001}"#).is_err());
        assert!(
            Config::parse(r#"{"gpu_metrics_hz":10,"counters":["smsp__inst_executed.sum"]}"#)
                .unwrap_err()
                .contains("with counters")
        );
        assert!(Config::parse("[").is_err());
        let dir = tempfile::tempdir().unwrap();
        let (c, why) = Config::load(dir.path());
        assert_eq!(c, Config::default());
        assert!(why.unwrap().contains("config.json"));
    }
}
