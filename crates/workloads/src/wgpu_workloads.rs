//! The compute and render workloads on a caller's [`wgpu::Device`] (feature
//! `wgpu`), for `gpu-counters run --backend wgpu`.
//!
//! They live here, beside the Vulkan workloads, because what makes their
//! counts known is shared with those: the same WGSL sources, the same size
//! checks (against the wgpu limits of the same meaning) and the same
//! triangle layout and covered-pixel count. Only the objects and the
//! recording are wgpu's. Like the Vulkan workloads they never create
//! devices, never submit and never wait; they record into the caller's
//! passes (`gpu_counters::wgpu::Profiler`'s scoped passes in the command line).
//!
//! There is no copy workload on wgpu: wgpu records a buffer copy on the
//! command encoder, outside any pass, where it has neither pass timestamp
//! writes nor pipeline statistics queries, so it cannot be measured as a
//! pass the way the other two are.

use crate::compute::{check_sizes as check_compute_sizes, compute_source, ComputeLimits};
use crate::error::WorkloadError;
use crate::render::{check_sizes as check_render_sizes, ndc_vertices, Layout, SHADER_SOURCE};
use gpu_counters_hal::Error;

/// The color format of the render target (as the Vulkan workload's
/// `R8G8B8A8_UNORM`).
const COLOR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

/// Runs `f` inside error scopes of `device` catching out-of-memory,
/// validation and internal errors: a wgpu error becomes a typed
/// [`WorkloadError::Wgpu`] naming `what` rather than wgpu's uncaptured-error
/// handler (which panics by default).
fn scoped<T>(device: &wgpu::Device, what: &str, f: impl FnOnce() -> T) -> Result<T, WorkloadError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = f();
    // Innermost first; each future is ready at once on native backends.
    let internal = pollster::block_on(internal.pop());
    let validation = pollster::block_on(validation.pop());
    let oom = pollster::block_on(oom.pop());
    if let Some(e) = oom {
        return Err(WorkloadError::Wgpu(Error::OutOfMemory(format!(
            "{what}: {e}"
        ))));
    }
    match validation.or(internal) {
        Some(e) => Err(WorkloadError::Wgpu(Error::Internal(format!("{what}: {e}")))),
        None => Ok(value),
    }
}

/// The compute workload on wgpu: as [`crate::ComputeWorkload`], each
/// dispatch runs `W` workgroups of `S` invocations of the same shader on a
/// storage buffer of `W * S` `u32`s, so `D` dispatches make exactly
/// `D * W * S` compute shader invocations.
///
/// wgpu orders the dispatches of a pass itself: each reads and writes the
/// storage buffer, so wgpu puts a barrier between them (the Vulkan workload
/// records one with `record_barrier`).
#[derive(Debug)]
pub struct WgpuComputeWorkload {
    workgroup_size: u32,
    workgroups: u32,
    buffer: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
}

impl WgpuComputeWorkload {
    /// Builds the workload on `device`: checks the sizes against the
    /// device's limits, compiles the shader for `workgroup_size` and creates
    /// the pipeline and the storage buffer.
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `workgroup_size` or
    ///   `workgroups` is 0, `workgroup_size` is over
    ///   `max_compute_workgroup_size_x` or
    ///   `max_compute_invocations_per_workgroup`, `workgroups` is over
    ///   `max_compute_workgroups_per_dimension`, or the buffer is over
    ///   `max_storage_buffer_binding_size` or `max_buffer_size`.
    /// - [`WorkloadError::Wgpu`] when wgpu fails to build it.
    pub fn new(
        device: &wgpu::Device,
        workgroup_size: u32,
        workgroups: u32,
        iterations: u32,
    ) -> Result<Self, WorkloadError> {
        let limits = device.limits();
        let buffer_size = check_compute_sizes(
            workgroup_size,
            workgroups,
            &ComputeLimits {
                size_x: (
                    "max_compute_workgroup_size_x",
                    limits.max_compute_workgroup_size_x,
                ),
                invocations: (
                    "max_compute_invocations_per_workgroup",
                    limits.max_compute_invocations_per_workgroup,
                ),
                count_x: (
                    "max_compute_workgroups_per_dimension",
                    limits.max_compute_workgroups_per_dimension,
                ),
                buffer: &[
                    (
                        "max_storage_buffer_binding_size",
                        limits.max_storage_buffer_binding_size,
                    ),
                    ("max_buffer_size", limits.max_buffer_size),
                ],
            },
        )?;
        let source = compute_source(workgroup_size, iterations);
        let (buffer, pipeline, bind_group) =
            scoped(device, "building the compute workload", || {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("gpu-counters compute workload"),
                    source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
                });
                let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some("gpu-counters compute workload"),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("gpu-counters compute workload data"),
                    size: buffer_size,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("gpu-counters compute workload data"),
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &[wgpu::BindGroupEntry {
                        binding: 0,
                        resource: buffer.as_entire_binding(),
                    }],
                });
                (buffer, pipeline, bind_group)
            })?;
        Ok(Self {
            workgroup_size,
            workgroups,
            buffer,
            pipeline,
            bind_group,
        })
    }

    /// The storage buffer the invocations write, `W * S` `u32`s.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// The exact number of compute shader invocations of `dispatches`
    /// dispatches: `dispatches * W * S`.
    pub fn expected_invocations(&self, dispatches: u32) -> u64 {
        u64::from(dispatches)
            .saturating_mul(u64::from(self.workgroups))
            .saturating_mul(u64::from(self.workgroup_size))
    }

    /// Binds the pipeline and the storage buffer and records `dispatches`
    /// dispatches of `W` workgroups into `pass`.
    pub fn record_dispatches(&self, pass: &mut wgpu::ComputePass<'_>, dispatches: u32) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        for _ in 0..dispatches {
            pass.dispatch_workgroups(self.workgroups, 1, 1);
        }
    }
}

/// The render workload on wgpu: as [`crate::RenderWorkload`], `T`
/// non-overlapping triangles laid out the same way in a `width` x `height`
/// color target (`Rgba8Unorm`), drawn with one non-indexed `draw(0..3T,
/// 0..1)`: `3T` vertex shader invocations, `T` clipper invocations, and
/// [`WgpuRenderWorkload::covered_pixels`] covered pixels (wgpu has no
/// occlusion count in its pipeline statistics, so that one is not measured
/// on wgpu).
#[derive(Debug)]
pub struct WgpuRenderWorkload {
    triangles: u32,
    width: u32,
    height: u32,
    layout: Layout,
    covered: u64,
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    vertex_buffer: wgpu::Buffer,
    pipeline: wgpu::RenderPipeline,
}

impl WgpuRenderWorkload {
    /// Builds the workload on `device`: checks the sizes against the
    /// device's limits, lays out the triangles, counts the covered pixels,
    /// and creates the color target, the vertex buffer and the pipeline
    /// (triangle list, no culling, no depth).
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `triangles`, `width` or
    ///   `height` is 0, `width` or `height` is over
    ///   `max_texture_dimension_2d`, the triangles do not fit (each needs a
    ///   cell of at least 4x4 pixels), or their vertex buffer is over
    ///   `max_buffer_size`.
    /// - [`WorkloadError::Wgpu`] when wgpu fails to build it.
    pub fn new(
        device: &wgpu::Device,
        triangles: u32,
        width: u32,
        height: u32,
    ) -> Result<Self, WorkloadError> {
        let limits = device.limits();
        let (layout, covered) = check_render_sizes(
            triangles,
            width,
            height,
            &[
                (
                    "width",
                    "max_texture_dimension_2d",
                    limits.max_texture_dimension_2d,
                ),
                (
                    "height",
                    "max_texture_dimension_2d",
                    limits.max_texture_dimension_2d,
                ),
            ],
        )?;
        let vertex_bytes = u64::from(triangles) * 3 * 8;
        if vertex_bytes > limits.max_buffer_size {
            return Err(WorkloadError::InvalidSize {
                fields: vec!["triangles"],
                message: format!(
                    "the vertex buffer of triangles {triangles} * 3 vertices * 8 bytes = \
                     {vertex_bytes} bytes is over the device limit max_buffer_size = {}",
                    limits.max_buffer_size
                ),
            });
        }
        let vertices = ndc_vertices(&layout, triangles, width, height, true);
        let built = scoped(device, "building the render workload", || {
            let texture = device.create_texture(&wgpu::TextureDescriptor {
                label: Some("gpu-counters render workload target"),
                size: wgpu::Extent3d {
                    width,
                    height,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: COLOR_FORMAT,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
                view_formats: &[],
            });
            let view = texture.create_view(&Default::default());
            let vertex_buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpu-counters render workload vertices"),
                size: vertex_bytes,
                usage: wgpu::BufferUsages::VERTEX,
                mapped_at_creation: true,
            });
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("gpu-counters render workload"),
                source: wgpu::ShaderSource::Wgsl(SHADER_SOURCE.into()),
            });
            let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some("gpu-counters render workload"),
                layout: None,
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some("vs_main"),
                    compilation_options: Default::default(),
                    buffers: &[Some(wgpu::VertexBufferLayout {
                        array_stride: 8,
                        step_mode: wgpu::VertexStepMode::Vertex,
                        attributes: &[wgpu::VertexAttribute {
                            format: wgpu::VertexFormat::Float32x2,
                            offset: 0,
                            shader_location: 0,
                        }],
                    })],
                },
                primitive: wgpu::PrimitiveState {
                    topology: wgpu::PrimitiveTopology::TriangleList,
                    cull_mode: None,
                    ..Default::default()
                },
                depth_stencil: None,
                multisample: wgpu::MultisampleState::default(),
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some("fs_main"),
                    compilation_options: Default::default(),
                    targets: &[Some(COLOR_FORMAT.into())],
                }),
                multiview_mask: None,
                cache: None,
            });
            (texture, view, vertex_buffer, pipeline)
        })?;
        let (texture, view, vertex_buffer, pipeline) = built;
        // Mapped at creation, `vertex_bytes` long (a multiple of 4); a
        // failed creation was caught above.
        {
            let mut range = vertex_buffer
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| {
                    WorkloadError::Wgpu(Error::Internal(format!(
                        "mapping the render workload's vertex buffer: {e}"
                    )))
                })?;
            let bytes: &[u8] = bytemuck::cast_slice(&vertices);
            if range.len() != bytes.len() {
                return Err(WorkloadError::Wgpu(Error::Internal(format!(
                    "the vertex buffer maps {} bytes, {} expected",
                    range.len(),
                    bytes.len()
                ))));
            }
            range.copy_from_slice(bytes);
        }
        vertex_buffer.unmap();
        Ok(Self {
            triangles,
            width,
            height,
            layout,
            covered,
            texture,
            view,
            vertex_buffer,
            pipeline,
        })
    }

    /// The number of triangles `T`.
    pub fn triangles(&self) -> u32 {
        self.triangles
    }

    /// The side in pixels of the square cell each triangle is drawn in.
    pub fn cell_size(&self) -> u32 {
        self.layout.cell
    }

    /// The target's width and height in pixels.
    pub fn extent(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The exact number of vertex shader invocations of one
    /// [`WgpuRenderWorkload::record_draw`]: `3 * T`.
    pub fn expected_vertex_invocations(&self) -> u64 {
        3 * u64::from(self.triangles)
    }

    /// The exact number of primitives that reach the clipping stage: `T`.
    pub fn expected_clipper_invocations(&self) -> u64 {
        u64::from(self.triangles)
    }

    /// The exact number of pixels the draw covers (as
    /// [`crate::RenderWorkload::covered_pixels`]).
    pub fn covered_pixels(&self) -> u64 {
        self.covered
    }

    /// The color target (`Rgba8Unorm`, usable as a copy source).
    pub fn color_texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// A color attachment of the target, cleared to transparent black and
    /// stored, for the caller's render pass descriptor.
    pub fn color_attachment(&self) -> wgpu::RenderPassColorAttachment<'_> {
        wgpu::RenderPassColorAttachment {
            view: &self.view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(wgpu::Color::TRANSPARENT),
                store: wgpu::StoreOp::Store,
            },
        }
    }

    /// Inside a render pass whose only color attachment is
    /// [`WgpuRenderWorkload::color_attachment`] (no depth or stencil): binds
    /// the pipeline and the vertex buffer and records `draw(0..3T, 0..1)`
    /// (the viewport is the whole target, wgpu's default).
    pub fn record_draw(&self, pass: &mut wgpu::RenderPass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_vertex_buffer(0, self.vertex_buffer.slice(..));
        pass.draw(0..self.triangles.saturating_mul(3), 0..1);
    }
}
