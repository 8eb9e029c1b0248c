//! WGSL to SPIR-V with naga.

use naga::back::spv;
use naga::valid::{Capabilities, ValidationFlags, Validator};

use crate::error::WorkloadError;

/// Compiles WGSL source (all its entry points) to SPIR-V words for Vulkan.
///
/// naga parses and validates the module (all validation checks, with every
/// capability naga's SPIR-V writer supports allowed) and writes SPIR-V 1.0,
/// which Vulkan 1.0 and later accept.
///
/// The clip-space position a vertex shader returns is passed through as is:
/// it is in Vulkan's convention (y points down), not flipped as WebGPU would.
///
/// # Errors
///
/// [`WorkloadError::Shader`] with naga's message (and the source location
/// where naga gives one) when the source does not parse or validate, or the
/// SPIR-V writer fails.
pub fn compile_wgsl(source: &str) -> Result<Vec<u32>, WorkloadError> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| WorkloadError::Shader(e.emit_to_string(source)))?;
    let capabilities: Capabilities = spv::supported_capabilities();
    let info = Validator::new(ValidationFlags::all(), capabilities)
        .validate(&module)
        .map_err(|e| WorkloadError::Shader(e.emit_to_string(source)))?;
    let options = spv::Options {
        lang_version: (1, 0),
        // No ADJUST_COORDINATE_SPACE: positions are already in Vulkan's clip
        // space. No DEBUG: output does not depend on the build profile.
        flags: spv::WriterFlags::LABEL_VARYINGS | spv::WriterFlags::CLAMP_FRAG_DEPTH,
        // With no binding map, each resource keeps the `@group`/`@binding`
        // numbers of the WGSL source as its descriptor set and binding.
        fake_missing_bindings: true,
        binding_map: spv::BindingMap::default(),
        ..spv::Options::default()
    };
    spv::write_vec(&module, &info, &options, None)
        .map_err(|e| WorkloadError::Shader(format!("SPIR-V writer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_a_compute_shader() {
        let words = compile_wgsl(
            "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
             @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
               if (g.x < arrayLength(&d)) { d[g.x] = g.x; }\n\
             }\n",
        )
        .expect("valid WGSL compiles");
        assert_eq!(words.first(), Some(&0x0723_0203), "SPIR-V magic number");
    }

    #[test]
    fn parse_error_is_a_shader_error() {
        let err = compile_wgsl("fn main( {").unwrap_err();
        assert!(matches!(err, WorkloadError::Shader(_)), "{err:?}");
    }

    #[test]
    fn validation_error_is_a_shader_error() {
        // Parses, but returns the wrong type.
        let err = compile_wgsl("fn f() -> u32 { return 1.5; }").unwrap_err();
        assert!(matches!(err, WorkloadError::Shader(_)), "{err:?}");
    }
}
