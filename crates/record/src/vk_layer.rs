//! How `gpu-counters record` enables the Vulkan layer
//! (`crates/vk-layer`): its name, library file name, and the loader
//! manifest that points at the library.

use std::path::Path;

/// The layer's name, as its manifest and `VK_INSTANCE_LAYERS` spell it.
pub const LAYER_NAME: &str = "VK_LAYER_GPU_COUNTERS_timing";
/// The layer library's file name.
pub const LIBRARY: &str = "libgpu_counters_vk_layer.so";
/// The manifest's file name.
pub const MANIFEST: &str = "VkLayer_gpu_counters_timing.json";

/// The layer's loader manifest (file format 1.2.0) naming `library`: an
/// absolute path, or one relative to the manifest's directory (`./...`).
pub fn manifest_json(library: &Path) -> String {
    let lib = serde_json_string(&library.to_string_lossy());
    format!(
        r#"{{
    "file_format_version": "1.2.0",
    "layer": {{
        "name": "{LAYER_NAME}",
        "type": "GLOBAL",
        "library_path": {lib},
        "api_version": "1.3.239",
        "implementation_version": "1",
        "description": "gpu-counters: times command buffers, passes and debug labels for gpu-counters record"
    }}
}}
"#
    )
}

/// `s` as a JSON string literal.
fn serde_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in manifest beside the layer's sources is this one.
    #[test]
    fn the_checked_in_manifest_is_the_generated_one() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../vk-layer")
            .join(MANIFEST);
        let file = std::fs::read_to_string(&here).expect("crates/vk-layer's manifest");
        assert_eq!(
            file,
            manifest_json(Path::new("./libgpu_counters_vk_layer.so"))
        );
        let odd = manifest_json(Path::new("/a \"b\"\\c"));
        assert!(odd.contains(r#""library_path": "/a \"b\"\\c","#), "{odd}");
    }
}
