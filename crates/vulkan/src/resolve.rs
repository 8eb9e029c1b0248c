//! The compute pipeline behind GPU resolves (WGSL, compiled with naga).

use crate::util::vk_err;
use ash::vk;
use bytemuck::{Pod, Zeroable};
use gpu_counters_hal::{Error, Result};

/// Invocations per workgroup of the resolve shader.
pub(crate) const RESOLVE_WORKGROUP: u32 = 64;

const SOURCE: &str = include_str!("resolve.wgsl");

/// Push constants of the resolve shader; matches `Params` in resolve.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(crate) struct ResolveParams {
    pub first: u32,
    pub count: u32,
    pub dst_word: u32,
    pub kind: u32,
    pub stride_words: u32,
    pub occ_base_word: u32,
    pub mask_lo: u32,
    pub mask_hi: u32,
    pub map_lo: u32,
    pub map_hi: u32,
    pub total: u32,
    pub has_occlusion: u32,
}

pub(crate) struct ResolvePipeline {
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) pipeline: vk::Pipeline,
}

impl ResolvePipeline {
    /// # Safety
    /// No GPU work may still use the pipeline.
    pub(crate) unsafe fn destroy(&self, d: &ash::Device) {
        // SAFETY: forwarded from the caller; the objects were created on `d`.
        unsafe {
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// Compiles WGSL to SPIR-V words with naga.
pub fn compile_wgsl(source: &str) -> Result<Vec<u32>> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| Error::Internal(format!("WGSL parse error: {}", e.emit_to_string(source))))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| Error::Internal(format!("WGSL validation error: {e:?}")))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        ..Default::default()
    };
    naga::back::spv::write_vec(&module, &info, &options, None)
        .map_err(|e| Error::Internal(format!("SPIR-V generation error: {e}")))
}

impl ResolvePipeline {
    /// Compiles the resolve shader and creates its pipeline on `d`, which
    /// must have `VK_KHR_push_descriptor` enabled.
    pub(crate) fn new(d: &ash::Device) -> Result<Self> {
        let spirv = compile_wgsl(SOURCE)?;
        let bindings: Vec<_> = (0..3)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            .bindings(&bindings);
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(std::mem::size_of::<ResolveParams>() as u32)];
        // SAFETY: create-infos point at locals alive for each call; objects
        // are destroyed on failure paths below or in `destroy`.
        unsafe {
            let set_layout = d
                .create_descriptor_set_layout(&set_info, None)
                .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
            let set_layouts = [set_layout];
            let layout_info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&set_layouts)
                .push_constant_ranges(&ranges);
            let layout = match d.create_pipeline_layout(&layout_info, None) {
                Ok(l) => l,
                Err(e) => {
                    d.destroy_descriptor_set_layout(set_layout, None);
                    return Err(vk_err("vkCreatePipelineLayout")(e));
                }
            };
            let module_info = vk::ShaderModuleCreateInfo::default().code(&spirv);
            let module = match d.create_shader_module(&module_info, None) {
                Ok(m) => m,
                Err(e) => {
                    d.destroy_pipeline_layout(layout, None);
                    d.destroy_descriptor_set_layout(set_layout, None);
                    return Err(vk_err("vkCreateShaderModule")(e));
                }
            };
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let info = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)];
            let result = d.create_compute_pipelines(vk::PipelineCache::null(), &info, None);
            d.destroy_shader_module(module, None);
            match result {
                Ok(p) => Ok(ResolvePipeline {
                    set_layout,
                    layout,
                    pipeline: p[0],
                }),
                Err((_, e)) => {
                    d.destroy_pipeline_layout(layout, None);
                    d.destroy_descriptor_set_layout(set_layout, None);
                    Err(vk_err("vkCreateComputePipelines")(e))
                }
            }
        }
    }
}
