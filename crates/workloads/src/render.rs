//! The render workload.

use ash::vk;

use crate::context::{
    allocate_buffer_memory, allocate_image_memory, create_shader_module, GpuContext,
};
use crate::error::{vk_err, WorkloadError};
use crate::shader::compile_wgsl;

/// The smallest cell, in pixels on a side, one triangle is given.
pub(crate) const MIN_CELL: u32 = 4;

/// The color format of the target.
const COLOR_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

/// The color every covered pixel gets (RGBA), non-zero in every channel.
const FRAGMENT_COLOR: [f32; 4] = [1.0, 0.5, 0.25, 1.0];

pub(crate) const SHADER_SOURCE: &str = "\
@vertex
fn vs_main(@location(0) position: vec2<f32>) -> @builtin(position) vec4<f32> {
    return vec4<f32>(position, 0.0, 1.0);
}

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    return vec4<f32>(1.0, 0.5, 0.25, 1.0);
}
";

/// Where the triangles go: a grid of square cells, one triangle per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Cell side in pixels.
    pub(crate) cell: u32,
    /// Cells per row.
    columns: u32,
    /// Leg length `L`: each triangle is `(x0, y0), (x0 + 2L, y0), (x0, y0 + L)`.
    leg: u32,
}

impl Layout {
    /// The largest square cell (at least `MIN_CELL`) such that `triangles`
    /// cells fit in a `width` x `height` target, or `None` when they do not.
    fn choose(triangles: u32, width: u32, height: u32) -> Option<Self> {
        let largest = width.min(height);
        (MIN_CELL..=largest).rev().find_map(|cell| {
            let columns = width / cell;
            let rows = height / cell;
            (u64::from(columns) * u64::from(rows) >= u64::from(triangles)).then_some(Self {
                cell,
                columns,
                leg: cell / 2,
            })
        })
    }

    /// The pixel coordinates of the three vertices of triangle `index`. The
    /// legs lie on pixel boundaries and the hypotenuse on `x + 2y = x0 + 2L`,
    /// which no pixel center `(i + 1/2, j + 1/2)` satisfies (there
    /// `x + 2y = i + 2j + 3/2`), so no pixel center is on an edge.
    fn triangle(&self, index: u32) -> [[u32; 2]; 3] {
        let columns = self.columns.max(1);
        let x0 = (index % columns) * self.cell;
        let y0 = (index / columns) * self.cell;
        let l = self.leg;
        [[x0, y0], [x0 + 2 * l, y0], [x0, y0 + l]]
    }
}

/// Pixel centers strictly inside a triangle given in integer pixel
/// coordinates, counted exactly with integer edge functions, and the number of
/// centers lying exactly on an edge (ambiguous under fill rules).
fn count_centers(tri: [[u32; 2]; 3]) -> (u64, u64) {
    // Doubled coordinates: vertex (x, y) -> (2x, 2y), center (i + 1/2, j + 1/2)
    // -> (2i + 1, 2j + 1); everything is an integer.
    let v = tri.map(|[x, y]| [2 * i64::from(x), 2 * i64::from(y)]);
    let [a, b, c] = v;
    let min_x = a[0].min(b[0]).min(c[0]) / 2;
    let max_x = a[0].max(b[0]).max(c[0]) / 2;
    let min_y = a[1].min(b[1]).min(c[1]) / 2;
    let max_y = a[1].max(b[1]).max(c[1]) / 2;
    let edge = |p: [i64; 2], q: [i64; 2], r: [i64; 2]| {
        (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    };
    let (mut inside, mut on_edge) = (0u64, 0u64);
    for j in min_y..max_y {
        for i in min_x..max_x {
            let p = [2 * i + 1, 2 * j + 1];
            let e = [edge(a, b, p), edge(b, c, p), edge(c, a, p)];
            if e.contains(&0) {
                // Only matters if the other two are on the inside.
                let others_in = e.iter().all(|&x| x >= 0) || e.iter().all(|&x| x <= 0);
                if others_in {
                    on_edge += 1;
                }
            } else if e.iter().all(|&x| x > 0) || e.iter().all(|&x| x < 0) {
                inside += 1;
            }
        }
    }
    (inside, on_edge)
}

/// Checks the sizes of a render workload (against 0, against `limits`:
/// the size field, the limit's name in the device's API, the limit), lays
/// the triangles out and counts the pixels they cover: the one check and
/// layout of both backends' render workloads.
pub(crate) fn check_sizes(
    triangles: u32,
    width: u32,
    height: u32,
    limits: &[(&'static str, &'static str, u32)],
) -> Result<(Layout, u64), WorkloadError> {
    if triangles == 0 {
        return Err(WorkloadError::invalid_size(
            &["triangles"],
            "triangles is 0; it must be at least 1",
        ));
    }
    for (name, value) in [("width", width), ("height", height)] {
        if value == 0 {
            return Err(WorkloadError::invalid_size(
                &[name],
                format!("{name} is 0; it must be at least 1"),
            ));
        }
    }
    for &(name, limit_name, limit) in limits {
        let value = if name == "width" { width } else { height };
        if value > limit {
            return Err(WorkloadError::invalid_size(
                &[name],
                format!("{name} {value} is over the device limit {limit_name} = {limit}"),
            ));
        }
    }
    let layout = Layout::choose(triangles, width, height).ok_or_else(|| {
        let fit = u64::from(width / MIN_CELL) * u64::from(height / MIN_CELL);
        WorkloadError::invalid_size(
            // Too many triangles for the target: the count is at fault,
            // the target's size is the limit.
            &["triangles"],
            format!(
                "triangles {triangles} do not fit in a {width}x{height} target: \
                 each needs a cell of at least {MIN_CELL}x{MIN_CELL} pixels, so at most \
                 {fit} fit"
            ),
        )
    })?;
    triangles.checked_mul(3).ok_or_else(|| {
        WorkloadError::invalid_size(
            &["triangles"],
            format!(
                "triangles {triangles} * 3 vertices is over the u32 vertex count limit {}",
                u32::MAX
            ),
        )
    })?;
    // Every triangle is a translate of triangle 0 by whole pixels, so each
    // covers the same pixel centers.
    let (per_triangle, ambiguous) = count_centers(layout.triangle(0));
    if ambiguous != 0 {
        return Err(WorkloadError::invalid_size(
            &[],
            format!(
                "internal layout error: {ambiguous} pixel centers lie on a triangle edge \
                 for cell {} in a {width}x{height} target",
                layout.cell
            ),
        ));
    }
    Ok((layout, per_triangle * u64::from(triangles)))
}

/// The vertices of `triangles` triangles of `layout` in normalized device
/// coordinates of a `width` x `height` target. `y_up`: WebGPU's convention
/// (wgpu flips y on Vulkan), else Vulkan's (y points down), so that both
/// backends cover the same pixels.
pub(crate) fn ndc_vertices(
    layout: &Layout,
    triangles: u32,
    width: u32,
    height: u32,
    y_up: bool,
) -> Vec<[f32; 2]> {
    let w = f64::from(width);
    let h = f64::from(height);
    (0..triangles)
        .flat_map(|t| layout.triangle(t))
        .map(|[x, y]| {
            // Viewport transform: x_fb = (x_ndc + 1) * w / 2. Pixel
            // coordinates are integers; the f32 rounding error is far
            // below the rasterizer's sub-pixel precision and far from
            // moving an edge across a pixel center.
            let y_ndc = f64::from(y) * 2.0 / h - 1.0;
            [
                (f64::from(x) * 2.0 / w - 1.0) as f32,
                (if y_up { -y_ndc } else { y_ndc }) as f32,
            ]
        })
        .collect()
}

/// A render workload: `T` triangles that do not overlap, each inside its own
/// cell of a grid laid over a `width` x `height` color target
/// (`R8G8B8A8_UNORM`), drawn with one non-indexed `vkCmdDraw(3T, 1, 0, 0)`
/// inside a dynamic rendering instance begun by the caller.
///
/// Known in advance: `3T` vertex shader invocations, `T` clipping invocations,
/// and exactly [`RenderWorkload::covered_pixels`] covered pixels (no pixel
/// center lies on a triangle edge, so the count does not depend on fill
/// rules). There is no depth buffer; the fragment shader writes a constant,
/// non-zero color.
///
/// The workload owns its Vulkan objects; call [`RenderWorkload::destroy`]
/// before destroying the device.
#[derive(Debug)]
pub struct RenderWorkload {
    triangles: u32,
    extent: vk::Extent2D,
    layout: Layout,
    covered: u64,
    image: vk::Image,
    image_memory: vk::DeviceMemory,
    view: vk::ImageView,
    vertex_buffer: vk::Buffer,
    vertex_memory: vk::DeviceMemory,
    pipeline_layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
}

impl RenderWorkload {
    /// Builds the workload: lays out `triangles` triangles in a
    /// `width` x `height` target, computes the covered pixels, creates the
    /// color image and view, a host-visible vertex buffer with the vertices in
    /// normalized device coordinates, and the graphics pipeline (dynamic
    /// rendering, triangle list, no culling, dynamic viewport and scissor).
    ///
    /// # Errors
    ///
    /// - [`WorkloadError::InvalidSize`] when `triangles`, `width` or `height`
    ///   is 0, `width` or `height` is over `maxImageDimension2D`,
    ///   `maxFramebufferWidth`/`Height` or `maxViewportDimensions`, or the
    ///   triangles do not fit (each needs a cell of at least 4x4 pixels).
    /// - [`WorkloadError::Shader`], [`WorkloadError::Vulkan`],
    ///   [`WorkloadError::NoMemoryType`] when building fails.
    pub fn new(
        ctx: &GpuContext,
        triangles: u32,
        width: u32,
        height: u32,
    ) -> Result<Self, WorkloadError> {
        if !ctx.dynamic_rendering {
            return Err(WorkloadError::Vulkan(gpu_counters_hal::Error::from(
                gpu_counters_hal::InvalidInput::Unsupported(
                    "the render workload needs the dynamicRendering feature enabled on the device"
                        .into(),
                ),
            )));
        }
        let limits = ctx.properties().limits;
        let (layout, covered) = check_sizes(
            triangles,
            width,
            height,
            &[
                (
                    "width",
                    "maxImageDimension2D",
                    limits.max_image_dimension2_d,
                ),
                (
                    "height",
                    "maxImageDimension2D",
                    limits.max_image_dimension2_d,
                ),
                ("width", "maxFramebufferWidth", limits.max_framebuffer_width),
                (
                    "height",
                    "maxFramebufferHeight",
                    limits.max_framebuffer_height,
                ),
                (
                    "width",
                    "maxViewportDimensions[0]",
                    limits.max_viewport_dimensions[0],
                ),
                (
                    "height",
                    "maxViewportDimensions[1]",
                    limits.max_viewport_dimensions[1],
                ),
            ],
        )?;

        let mut workload = Self {
            triangles,
            extent: vk::Extent2D { width, height },
            layout,
            covered,
            image: vk::Image::null(),
            image_memory: vk::DeviceMemory::null(),
            view: vk::ImageView::null(),
            vertex_buffer: vk::Buffer::null(),
            vertex_memory: vk::DeviceMemory::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        match workload.init(ctx) {
            Ok(()) => Ok(workload),
            Err(e) => {
                // SAFETY: the objects were created just now from this device
                // and never used; null handles are ignored.
                unsafe { workload.destroy(ctx.device) };
                Err(e)
            }
        }
    }

    /// The vertices of all triangles in normalized device coordinates.
    fn vertices(&self) -> Vec<[f32; 2]> {
        ndc_vertices(
            &self.layout,
            self.triangles,
            self.extent.width,
            self.extent.height,
            false,
        )
    }

    fn init(&mut self, ctx: &GpuContext) -> Result<(), WorkloadError> {
        let device = ctx.device;

        // SAFETY: a valid physical device of `instance` (GpuContext contract).
        let format_props = unsafe {
            ctx.instance
                .get_physical_device_format_properties(ctx.physical_device, COLOR_FORMAT)
        };
        let needed =
            vk::FormatFeatureFlags::COLOR_ATTACHMENT | vk::FormatFeatureFlags::TRANSFER_SRC;
        if !format_props.optimal_tiling_features.contains(needed) {
            return Err(vk_err("vkGetPhysicalDeviceFormatProperties (R8G8B8A8_UNORM lacks color attachment or transfer source support)")(vk::Result::ERROR_FORMAT_NOT_SUPPORTED));
        }

        // Color target.
        let image_info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(COLOR_FORMAT)
            .extent(vk::Extent3D {
                width: self.extent.width,
                height: self.extent.height,
                depth: 1,
            })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        // SAFETY: valid create info; sizes checked against the device limits
        // and the format's features checked above.
        self.image =
            unsafe { device.create_image(&image_info, None) }.map_err(vk_err("vkCreateImage"))?;
        self.image_memory = allocate_image_memory(
            ctx,
            self.image,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::empty(),
            "the color target image",
        )?;
        let view_info = vk::ImageViewCreateInfo::default()
            .image(self.image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(COLOR_FORMAT)
            .subresource_range(color_range());
        // SAFETY: the image is live with memory bound; the range is in it.
        self.view = unsafe { device.create_image_view(&view_info, None) }
            .map_err(vk_err("vkCreateImageView"))?;

        // Vertex buffer, written once through a host mapping.
        let vertices = self.vertices();
        let bytes: &[u8] = bytemuck::cast_slice(&vertices);
        let size = bytes.len() as u64;
        let buffer_info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::VERTEX_BUFFER)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info with a non-zero size (T >= 1).
        self.vertex_buffer = unsafe { device.create_buffer(&buffer_info, None) }
            .map_err(vk_err("vkCreateBuffer"))?;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        self.vertex_memory = allocate_buffer_memory(
            ctx,
            self.vertex_buffer,
            host | vk::MemoryPropertyFlags::DEVICE_LOCAL,
            host,
            "the vertex buffer (host-visible, host-coherent)",
        )?;
        // SAFETY: the memory is host-visible, not mapped elsewhere, and at
        // least `size` bytes long (it backs a buffer of `size` bytes).
        let ptr =
            unsafe { device.map_memory(self.vertex_memory, 0, size, vk::MemoryMapFlags::empty()) }
                .map_err(vk_err("vkMapMemory"))?;
        // SAFETY: `ptr` points to `size` writable bytes of mapped memory that
        // nothing else accesses; `bytes` has exactly `size` bytes and does not
        // overlap it. The memory is coherent, so no flush is needed.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.cast::<u8>(), bytes.len());
            device.unmap_memory(self.vertex_memory);
        }

        // Pipeline.
        let words = compile_wgsl(SHADER_SOURCE)?;
        let layout_info = vk::PipelineLayoutCreateInfo::default();
        // SAFETY: an empty pipeline layout create info is valid.
        self.pipeline_layout = unsafe { device.create_pipeline_layout(&layout_info, None) }
            .map_err(vk_err("vkCreatePipelineLayout"))?;
        let module = create_shader_module(device, &words)?;
        let result = self.create_pipeline(device, module);
        // SAFETY: the module is only needed while creating the pipeline.
        unsafe { device.destroy_shader_module(module, None) };
        self.pipeline = result?;
        Ok(())
    }

    fn create_pipeline(
        &self,
        device: &ash::Device,
        module: vk::ShaderModule,
    ) -> Result<vk::Pipeline, WorkloadError> {
        let stages = [
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::VERTEX)
                .module(module)
                .name(c"vs_main"),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(module)
                .name(c"fs_main"),
        ];
        let bindings = [vk::VertexInputBindingDescription::default()
            .binding(0)
            .stride(8)
            .input_rate(vk::VertexInputRate::VERTEX)];
        let attributes = [vk::VertexInputAttributeDescription::default()
            .location(0)
            .binding(0)
            .format(vk::Format::R32G32_SFLOAT)
            .offset(0)];
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings)
            .vertex_attribute_descriptions(&attributes);
        let input_assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
            .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
        let viewport = vk::PipelineViewportStateCreateInfo::default()
            .viewport_count(1)
            .scissor_count(1);
        let rasterization = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let multisample = vk::PipelineMultisampleStateCreateInfo::default()
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let blend_attachments = [vk::PipelineColorBlendAttachmentState::default()
            .blend_enable(false)
            .color_write_mask(vk::ColorComponentFlags::RGBA)];
        let color_blend =
            vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend_attachments);
        let dynamic_states = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
        let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
        let formats = [COLOR_FORMAT];
        let mut rendering =
            vk::PipelineRenderingCreateInfo::default().color_attachment_formats(&formats);
        let info = vk::GraphicsPipelineCreateInfo::default()
            .push_next(&mut rendering)
            .stages(&stages)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&input_assembly)
            .viewport_state(&viewport)
            .rasterization_state(&rasterization)
            .multisample_state(&multisample)
            .color_blend_state(&color_blend)
            .dynamic_state(&dynamic)
            .layout(self.pipeline_layout);
        // SAFETY: every state the pipeline needs is given and outlives the
        // call; the module has the named entry points, whose interfaces match
        // the vertex input and the single color attachment; the device has
        // dynamic rendering enabled (GpuContext contract).
        let pipelines =
            unsafe { device.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None) }
                .map_err(|(_, e)| vk_err("vkCreateGraphicsPipelines")(e))?;
        pipelines
            .first()
            .copied()
            .ok_or_else(|| vk_err("vkCreateGraphicsPipelines")(vk::Result::ERROR_UNKNOWN))
    }

    /// The number of triangles `T`.
    pub fn triangles(&self) -> u32 {
        self.triangles
    }

    /// The side in pixels of the square cell each triangle is drawn in.
    pub fn cell_size(&self) -> u32 {
        self.layout.cell
    }

    /// The exact number of vertex shader invocations of one
    /// [`RenderWorkload::record_draw`]: `3 * T` (non-indexed draw, so no
    /// vertex is reused).
    pub fn expected_vertex_invocations(&self) -> u64 {
        3 * u64::from(self.triangles)
    }

    /// The exact number of primitives that reach the clipping stage: `T`.
    pub fn expected_clipper_invocations(&self) -> u64 {
        u64::from(self.triangles)
    }

    /// The exact number of pixels the draw covers, counted on the CPU by
    /// enumerating pixel centers inside the triangles with integer arithmetic.
    /// An occlusion query with `PRECISE` over the draw returns this number.
    pub fn covered_pixels(&self) -> u64 {
        self.covered
    }

    /// The color target's view, for a `vk::RenderingAttachmentInfo`.
    pub fn color_view(&self) -> vk::ImageView {
        self.view
    }

    /// The color target image (one mip level, one layer).
    pub fn color_image(&self) -> vk::Image {
        self.image
    }

    /// The color target's format, `R8G8B8A8_UNORM`.
    pub fn color_format(&self) -> vk::Format {
        COLOR_FORMAT
    }

    /// The color written to every covered pixel, as RGBA floats.
    pub fn fragment_color(&self) -> [f32; 4] {
        FRAGMENT_COLOR
    }

    /// The size of the color target.
    pub fn extent(&self) -> vk::Extent2D {
        self.extent
    }

    /// The render area covering the whole target, for a
    /// `vk::RenderingInfo`.
    pub fn render_area(&self) -> vk::Rect2D {
        vk::Rect2D {
            offset: vk::Offset2D { x: 0, y: 0 },
            extent: self.extent,
        }
    }

    /// Records a `vkCmdPipelineBarrier2` that moves the color image from
    /// `UNDEFINED` (discarding its contents) to `COLOR_ATTACHMENT_OPTIMAL`,
    /// after all earlier work on it. Record it before beginning rendering.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, with
    ///   `synchronization2` enabled, and `cmd` a command buffer allocated
    ///   from it, in the recording state, outside a render pass instance, on
    ///   a queue family with graphics support.
    /// - The workload must outlive the GPU's use of `cmd`: do not
    ///   [`destroy`](RenderWorkload::destroy) it until every submission of
    ///   `cmd` has completed (or `cmd` is reset or freed unsubmitted).
    pub unsafe fn record_prepare(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let barriers = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
            .src_access_mask(vk::AccessFlags2::MEMORY_WRITE)
            .dst_stage_mask(vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT)
            .dst_access_mask(
                vk::AccessFlags2::COLOR_ATTACHMENT_WRITE | vk::AccessFlags2::COLOR_ATTACHMENT_READ,
            )
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .image(self.image)
            .subresource_range(color_range())];
        let dependency = vk::DependencyInfo::default().image_memory_barriers(&barriers);
        // SAFETY: `cmd` is a recording command buffer of `device` outside a
        // render pass, and synchronization2 is enabled (caller's contract);
        // the barrier names a live image of `device` and its whole
        // subresource range, which stays live while the GPU uses it (caller's
        // contract).
        unsafe { device.cmd_pipeline_barrier2(cmd, &dependency) };
    }

    /// A color attachment for [`RenderWorkload::color_view`] in
    /// `COLOR_ATTACHMENT_OPTIMAL`, cleared to transparent black and stored.
    pub fn color_attachment(&self) -> vk::RenderingAttachmentInfo<'static> {
        vk::RenderingAttachmentInfo::default()
            .image_view(self.view)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue {
                color: vk::ClearColorValue {
                    float32: [0.0, 0.0, 0.0, 0.0],
                },
            })
    }

    /// Inside a rendering instance begun by the caller (with
    /// [`RenderWorkload::color_attachment`] or another attachment of this
    /// view and format, and no depth or stencil attachment): sets the
    /// viewport and scissor to the whole target, binds the pipeline and the
    /// vertex buffer, and records `vkCmdDraw(3T, 1, 0, 0)`.
    ///
    /// # Safety
    ///
    /// - `device` must be the device the workload was created with, and
    ///   `cmd` a command buffer allocated from it, in the recording state,
    ///   inside a render pass instance begun with dynamic rendering whose
    ///   only color attachment is this workload's view (as
    ///   [`RenderWorkload::color_attachment`] describes), in
    ///   `COLOR_ATTACHMENT_OPTIMAL` (see [`RenderWorkload::record_prepare`]),
    ///   with no depth or stencil attachment.
    /// - The workload must outlive the GPU's use of `cmd` (see
    ///   [`RenderWorkload::record_prepare`]).
    pub unsafe fn record_draw(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let viewport = vk::Viewport {
            x: 0.0,
            y: 0.0,
            width: self.extent.width as f32,
            height: self.extent.height as f32,
            min_depth: 0.0,
            max_depth: 1.0,
        };
        let vertex_count = self.triangles.saturating_mul(3);
        // SAFETY: `cmd` is a recording command buffer of `device` inside a
        // compatible rendering instance (caller's contract); the pipeline and
        // vertex buffer are live objects of `device` that stay live while the
        // GPU uses them (caller's contract); the buffer holds exactly `3T`
        // vertices.
        unsafe {
            device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.pipeline);
            device.cmd_set_viewport(cmd, 0, &[viewport]);
            device.cmd_set_scissor(cmd, 0, &[self.render_area()]);
            device.cmd_bind_vertex_buffers(cmd, 0, &[self.vertex_buffer], &[0]);
            device.cmd_draw(cmd, vertex_count, 1, 0, 0);
        }
    }

    /// Destroys the workload's Vulkan objects. Calling it again does nothing.
    ///
    /// # Safety
    ///
    /// `device` must be the device the workload was created with, and no
    /// pending command buffer may still use the workload.
    pub unsafe fn destroy(&mut self, device: &ash::Device) {
        // SAFETY: the caller guarantees the objects are of `device` and no
        // longer in use; null handles are ignored by the destroy functions.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_buffer(self.vertex_buffer, None);
            device.free_memory(self.vertex_memory, None);
            device.destroy_image_view(self.view, None);
            device.destroy_image(self.image, None);
            device.free_memory(self.image_memory, None);
        }
        self.pipeline = vk::Pipeline::null();
        self.pipeline_layout = vk::PipelineLayout::null();
        self.vertex_buffer = vk::Buffer::null();
        self.vertex_memory = vk::DeviceMemory::null();
        self.view = vk::ImageView::null();
        self.image = vk::Image::null();
        self.image_memory = vk::DeviceMemory::null();
    }
}

fn color_range() -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_triangle_covers_leg_squared() {
        for leg in 1..40u32 {
            let (inside, on_edge) = count_centers([[3, 5], [3 + 2 * leg, 5], [3, 5 + leg]]);
            assert_eq!(on_edge, 0, "leg {leg}");
            assert_eq!(inside, u64::from(leg * leg), "leg {leg}");
        }
    }

    #[test]
    fn layout_fits_and_does_not_overlap() {
        for (t, w, h) in [
            (1, 64, 64),
            (37, 256, 128),
            (5, 17, 9),
            (64, 32, 32),
            (7, 100, 30),
        ] {
            let l = Layout::choose(t, w, h).expect("fits");
            assert!(l.cell >= MIN_CELL);
            let mut seen = std::collections::HashSet::new();
            for i in 0..t {
                let tri = l.triangle(i);
                for [x, y] in tri {
                    assert!(x <= w && y <= h, "{t} {w}x{h}: vertex ({x},{y}) outside");
                }
                let cell = (tri[0][0] / l.cell, tri[0][1] / l.cell);
                assert!(seen.insert(cell), "two triangles in cell {cell:?}");
                assert!(tri[1][0] - tri[0][0] <= l.cell && tri[2][1] - tri[0][1] <= l.cell);
            }
        }
    }

    #[test]
    fn layout_rejects_too_many() {
        assert_eq!(Layout::choose(5, 8, 8), None);
        assert!(Layout::choose(4, 8, 8).is_some());
        assert_eq!(Layout::choose(1, 3, 100), None);
    }

    #[test]
    fn largest_cell_is_chosen() {
        let l = Layout::choose(1, 64, 64).expect("fits");
        assert_eq!((l.cell, l.leg), (64, 32));
        let l = Layout::choose(37, 256, 128).expect("fits");
        // Cells of 26..=28 give 9x4 = 36 < 37 cells; 25 gives 10x5 = 50.
        assert_eq!(l.cell, 25);
    }
}
