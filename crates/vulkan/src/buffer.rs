//! GPU buffers: resolve destinations and internal scratch.

use crate::device::Device;
use crate::util::vk_err;
use ash::vk;
use gpu_counters_hal::{Error, Result};
use std::sync::Arc;

/// Where a [`GpuBuffer`]'s memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLocation {
    /// Host-visible and coherent: the CPU can read it with [`GpuBuffer::read`].
    HostVisible,
    /// Device-local: only the GPU reads it.
    DeviceLocal,
}

/// A buffer gpu-counters allocated, usable as the destination of a GPU
/// resolve (storage and transfer usage).
///
/// Dropping it while the GPU may still use it is safe: a command buffer that
/// records a resolve into it keeps the Vulkan buffer and its memory alive
/// until the GPU has finished.
pub struct GpuBuffer {
    shared: Arc<BufferShared>,
}

/// The Vulkan buffer and its memory, destroyed when the last holder (the
/// [`GpuBuffer`], or a command buffer or submission that uses it) lets go.
pub(crate) struct BufferShared {
    device: Device,
    raw: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    mapped: Option<std::ptr::NonNull<u8>>,
    usage: vk::BufferUsageFlags,
}

// SAFETY: the mapped pointer refers to device memory owned by this value and
// is only dereferenced through `GpuBuffer`'s methods, with bounds checks;
// Vulkan handles are plain identifiers usable from any thread.
unsafe impl Send for BufferShared {}
// SAFETY: see above; shared access copies bytes through the mapping only.
unsafe impl Sync for BufferShared {}

impl GpuBuffer {
    /// Allocates `size` bytes with storage, transfer-source and
    /// transfer-destination usage.
    pub fn new(device: &Device, size: u64, location: MemoryLocation) -> Result<Self> {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        Self::with_usage(device, size, location, usage)
    }

    pub(crate) fn with_usage(
        device: &Device,
        size: u64,
        location: MemoryLocation,
        usage: vk::BufferUsageFlags,
    ) -> Result<Self> {
        if size == 0 {
            return Err(gpu_counters_hal::InvalidInput::Argument("buffer size is 0".into()).into());
        }
        let raw_dev = device.raw();
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create-info; destroyed in Drop.
        let raw =
            unsafe { raw_dev.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        // SAFETY: `raw` was just created on this device.
        let req = unsafe { raw_dev.get_buffer_memory_requirements(raw) };
        let flags = match location {
            MemoryLocation::HostVisible => {
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
            }
            MemoryLocation::DeviceLocal => vk::MemoryPropertyFlags::DEVICE_LOCAL,
        };
        let Some(type_index) = device
            .memory_type(req.memory_type_bits, flags)
            .or_else(|| device.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::empty()))
        else {
            // SAFETY: unused buffer of this device.
            unsafe { raw_dev.destroy_buffer(raw, None) };
            return Err(Error::OutOfMemory(format!(
                "no memory type for a {size}-byte buffer ({location:?})"
            )));
        };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index);
        // SAFETY: valid allocate-info; freed in Drop.
        let memory = match unsafe { raw_dev.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: unused buffer of this device.
                unsafe { raw_dev.destroy_buffer(raw, None) };
                return Err(vk_err("vkAllocateMemory")(e));
            }
        };
        let cleanup = |e| {
            // SAFETY: both objects are unused and belong to this device.
            unsafe {
                raw_dev.destroy_buffer(raw, None);
                raw_dev.free_memory(memory, None);
            }
            e
        };
        // SAFETY: memory type and size come from the buffer's requirements.
        unsafe { raw_dev.bind_buffer_memory(raw, memory, 0) }
            .map_err(|e| cleanup(vk_err("vkBindBufferMemory")(e)))?;
        let host_visible = device.shared.memory.memory_types[type_index as usize]
            .property_flags
            .contains(
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            );
        let mapped = if host_visible {
            // SAFETY: the whole allocation is mapped once and unmapped on free.
            let p = unsafe {
                raw_dev.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            }
            .map_err(|e| cleanup(vk_err("vkMapMemory")(e)))?;
            std::ptr::NonNull::new(p.cast::<u8>())
        } else {
            None
        };
        Ok(Self {
            shared: Arc::new(BufferShared {
                device: device.clone(),
                raw,
                memory,
                size,
                mapped,
                usage,
            }),
        })
    }

    /// Whether nothing but this value holds the buffer (no command buffer or
    /// submission uses it).
    pub(crate) fn is_unshared(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    pub(crate) fn shared(&self) -> Arc<BufferShared> {
        self.shared.clone()
    }

    /// The Vulkan buffer.
    pub fn raw(&self) -> vk::Buffer {
        self.shared.raw
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size
    }

    /// Whether the CPU can read it.
    pub fn is_host_visible(&self) -> bool {
        self.shared.mapped.is_some()
    }

    /// Copies `len` bytes from `offset` out of a host-visible buffer. Wait for
    /// the GPU work that writes it first.
    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let ptr = self.shared.mapped.ok_or_else(|| {
            Error::from(gpu_counters_hal::InvalidInput::Argument(
                "buffer is not host-visible".into(),
            ))
        })?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.shared.size)
            .ok_or_else(|| {
                Error::from(gpu_counters_hal::InvalidInput::Argument(format!(
                    "read of {len} bytes at {offset} is past the buffer's {} bytes",
                    self.shared.size
                )))
            })?;
        let mut out = vec![0u8; (end - offset) as usize];
        // SAFETY: the mapping covers `size` bytes and offset..end is inside it;
        // memory is coherent, so no flush is needed.
        unsafe {
            std::ptr::copy_nonoverlapping(
                ptr.as_ptr().add(offset as usize),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Ok(out)
    }

    /// Writes bytes into a host-visible buffer at `offset`.
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let ptr = self.shared.mapped.ok_or_else(|| {
            Error::from(gpu_counters_hal::InvalidInput::Argument(
                "buffer is not host-visible".into(),
            ))
        })?;
        if offset
            .checked_add(bytes.len() as u64)
            .is_none_or(|e| e > self.shared.size)
        {
            return Err(gpu_counters_hal::InvalidInput::Argument(format!(
                "write of {} bytes at {offset} is past the buffer's {} bytes",
                bytes.len(),
                self.shared.size
            ))
            .into());
        }
        // SAFETY: bounds checked above; coherent mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                ptr.as_ptr().add(offset as usize),
                bytes.len(),
            );
        }
        Ok(())
    }

    pub(crate) fn as_ref(&self) -> BufferRef {
        BufferRef {
            device_id: self.shared.device.id(),
            raw: self.shared.raw,
            size: self.shared.size,
            usage: self.shared.usage,
            keep: Some(self.shared.clone()),
        }
    }
}

impl Drop for BufferShared {
    fn drop(&mut self) {
        // SAFETY: owned objects of this device; the last holder is gone, and
        // every command buffer or submission that used the buffer held it
        // until the GPU finished.
        unsafe {
            if self.mapped.is_some() {
                self.device.raw().unmap_memory(self.memory);
            }
            self.device.raw().destroy_buffer(self.raw, None);
            self.device.raw().free_memory(self.memory, None);
        }
    }
}

/// A destination for a GPU resolve: a [`GpuBuffer`] (which the recording
/// then keeps alive) or a caller's buffer ([`BufferRef::from_raw`]).
#[derive(Clone)]
pub struct BufferRef {
    pub(crate) device_id: gpu_counters_hal::DeviceId,
    pub(crate) raw: vk::Buffer,
    pub(crate) size: u64,
    pub(crate) usage: vk::BufferUsageFlags,
    /// The buffer, for a [`GpuBuffer`]: held by the recording.
    pub(crate) keep: Option<Arc<BufferShared>>,
}

impl std::fmt::Debug for BufferRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferRef")
            .field("raw", &self.raw)
            .field("size", &self.size)
            .field("owned_by_gpu_counters", &self.keep.is_some())
            .finish()
    }
}

impl BufferRef {
    /// Describes a caller's buffer.
    ///
    /// # Safety
    /// `raw` must be a buffer of `device`, of at least `size` bytes, created
    /// with `usage`, bound to memory, and alive until GPU work recorded with it
    /// has completed.
    pub unsafe fn from_raw(
        device: &Device,
        raw: vk::Buffer,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Self {
        Self {
            device_id: device.id(),
            raw,
            size,
            usage,
            keep: None,
        }
    }
}

impl<'a> From<&'a GpuBuffer> for BufferRef {
    fn from(b: &'a GpuBuffer) -> Self {
        b.as_ref()
    }
}
