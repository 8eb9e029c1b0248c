//! What the layer times: `vulkan` in `$GPU_COUNTERS_RECORD_DIR/config.json`
//! (written by `gpu-counters record`), else the defaults (pass level, no
//! statistics). A file that cannot be read or a bad value gives the
//! defaults and a notice naming what was wrong.

use serde::Deserialize;
use std::path::Path;

/// How finely command buffers are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Command buffers, render passes, runs of dispatches and of copies,
    /// and debug labels.
    #[default]
    Pass,
    /// Also each draw.
    Draw,
    /// Also each dispatch.
    Dispatch,
}

impl Level {
    /// Parses `pass`, `draw` or `dispatch`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "pass" => Some(Level::Pass),
            "draw" => Some(Level::Draw),
            "dispatch" => Some(Level::Dispatch),
            _ => None,
        }
    }
}

/// The layer's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// How finely.
    pub level: Level,
    /// Pipeline statistics per render pass and compute run (needs
    /// `pipelineStatisticsQuery`, which the layer then enables).
    pub statistics: bool,
    /// Bytes of results each queue's ring holds.
    pub ring_bytes: u64,
    /// Query blocks a device may hold at most (32 timestamps each).
    pub max_blocks: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            level: Level::Pass,
            statistics: false,
            ring_bytes: 4 << 20,
            max_blocks: 1 << 15,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct File {
    vulkan: Option<VulkanSection>,
}

#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct VulkanSection {
    level: String,
    statistics: bool,
    ring_kb: u64,
    max_blocks: u32,
}

impl Default for VulkanSection {
    fn default() -> Self {
        VulkanSection {
            level: "pass".into(),
            statistics: false,
            ring_kb: 4096,
            max_blocks: 1 << 15,
        }
    }
}

impl Config {
    /// Parses `config.json`'s text; an error names what was wrong.
    pub fn parse(text: &str) -> Result<Config, String> {
        let f: File = serde_json::from_str(text).map_err(|e| format!("config.json: {e}"))?;
        let Some(v) = f.vulkan else {
            return Ok(Config::default());
        };
        let level = Level::parse(&v.level).ok_or_else(|| {
            format!(
                "config.json: vulkan.level {:?} (pass, draw or dispatch)",
                v.level
            )
        })?;
        if !(16..=1 << 20).contains(&v.ring_kb) {
            return Err(format!(
                "config.json: vulkan.ring_kb {} (16 to 1048576)",
                v.ring_kb
            ));
        }
        if !(1..=1 << 20).contains(&v.max_blocks) {
            return Err(format!(
                "config.json: vulkan.max_blocks {} (1 to 1048576)",
                v.max_blocks
            ));
        }
        Ok(Config {
            level,
            statistics: v.statistics,
            ring_bytes: v.ring_kb << 10,
            max_blocks: v.max_blocks,
        })
    }

    /// Reads `dir/config.json`: the defaults and why, where it cannot be
    /// read or parsed.
    pub fn load(dir: &Path) -> (Config, Option<String>) {
        let path = dir.join("config.json");
        match std::fs::read_to_string(&path) {
            Ok(t) => match Config::parse(&t) {
                Ok(c) => (c, None),
                Err(e) => (Config::default(), Some(e)),
            },
            Err(e) => (Config::default(), Some(format!("{}: {e}", path.display()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `record` writes parses; a file without a `vulkan` section (an
    /// older recorder) gives the defaults.
    #[test]
    fn record_config_parses() {
        let c = Config::parse(
            r#"{"version":1,"api":"launches","vulkan":{"level":"draw","statistics":true}}"#,
        )
        .unwrap();
        assert_eq!(c.level, Level::Draw);
        assert!(c.statistics);
        assert_eq!(c.ring_bytes, 4 << 20);
        assert_eq!(
            Config::parse(r#"{"version":1,"nvtx":true}"#).unwrap(),
            Config::default()
        );
    }

    /// Bad values are errors naming the field.
    #[test]
    fn bad_configs_are_errors() {
        let e = Config::parse(r#"{"vulkan":{"level":"frame"}}"#).unwrap_err();
        assert!(e.contains("vulkan.level \"frame\""), "{e}");
        let e = Config::parse(r#"{"vulkan":{"ring_kb":0}}"#).unwrap_err();
        assert!(e.contains("vulkan.ring_kb 0"), "{e}");
        assert!(Config::parse(r#"{"vulkan":{"levl":"pass"}}"#).is_err());
        assert!(Config::parse("[").is_err());
        let dir = tempfile::tempdir().unwrap();
        let (c, why) = Config::load(dir.path());
        assert_eq!(c, Config::default());
        assert!(why.unwrap().contains("config.json"));
    }
}
