//! Host-mapped memory the GPU writes samples into, and one sample buffer's
//! (or heap's) storage: two words per sample, the value then the
//! availability word, read by hal's CPU resolve without any copy. A
//! timestamp kernel writes only the value, which is then its own
//! availability (`%globaltimer` is never 0).

use crate::{driver_err, Shared};
use cudarc::driver::{result, sys, CudaContext};
use gpu_counters_hal::bookkeeping::{QueryRead, SampleSet};
use gpu_counters_hal::storage::SampleStorage;
use gpu_counters_hal::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Page-locked host memory mapped into the device's address space
/// (`cuMemHostAlloc` with `DEVICEMAP`), as `u64` words.
pub(crate) struct MappedWords {
    ctx: Arc<CudaContext>,
    host: *mut u64,
    device: u64,
    len: usize,
}

// SAFETY: the memory is only accessed through `&AtomicU64` views (the GPU
// writes it concurrently), and freed once, in `drop`; the context handle is
// shareable across threads (cudarc's `CudaContext` is Send + Sync).
unsafe impl Send for MappedWords {}
// SAFETY: as above: every access is atomic.
unsafe impl Sync for MappedWords {}

impl MappedWords {
    /// `len` zeroed words.
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize, what: &str) -> Result<Self> {
        let bytes = len
            .checked_mul(8)
            .filter(|&b| b > 0 && b < isize::MAX as usize)
            .ok_or_else(|| Error::OutOfMemory(format!("{what}: {len} words")))?;
        ctx.bind_to_thread().map_err(driver_err(what))?;
        // SAFETY: a plain allocation of `bytes` bytes in the current
        // context (bound above); the pointer is checked before use.
        let host = unsafe {
            result::malloc_host(
                bytes,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        }
        .map_err(driver_err(what))? as *mut u64;
        if host.is_null() || !host.is_aligned() {
            return Err(Error::Internal(format!(
                "{what}: cuMemHostAlloc gave a null or unaligned pointer"
            )));
        }
        // SAFETY: `host` points to `bytes` bytes just allocated, aligned for
        // u64 (checked), that nothing else uses yet.
        unsafe { std::ptr::write_bytes(host, 0, len) };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in this context, so it
        // has a device address; `device` is a valid out-pointer.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) };
        let mut words = Self {
            ctx: ctx.clone(),
            host,
            device: 0,
            len,
        };
        if mapped != sys::CUresult::CUDA_SUCCESS {
            // Freed by `words`' drop.
            return Err(driver_err(what)(cudarc::driver::DriverError(mapped)));
        }
        words.device = device;
        Ok(words)
    }

    /// Word `i`, `None` past the end.
    pub(crate) fn word(&self, i: usize) -> Option<&AtomicU64> {
        self.words(i, 1).map(|w| &w[0])
    }

    /// Words `from..from + n`, `None` past the end.
    pub(crate) fn words(&self, from: usize, n: usize) -> Option<&[AtomicU64]> {
        let end = from.checked_add(n).filter(|&e| e <= self.len)?;
        // SAFETY: `from..end` lies in the allocation (checked), which lives
        // as long as `self`; u64 and AtomicU64 have the same size and
        // alignment, and every access to the memory from the host is atomic.
        Some(unsafe {
            std::slice::from_raw_parts(self.host.add(from).cast::<AtomicU64>(), end - from)
        })
    }

    /// The device address of word `i` (`i < len`).
    pub(crate) fn device_address(&self, i: usize) -> u64 {
        self.device + 8 * i as u64
    }
}

impl Drop for MappedWords {
    fn drop(&mut self) {
        // Whoever owns the words keeps them until no launch writing them
        // can still run (see `MappedStorage`), so freeing here is the last use.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemHostAlloc in `new`, freed only here.
        let _ = unsafe { result::free_host(self.host.cast()) };
    }
}

/// One sample buffer's or heap's storage: its bookkeeping and its words;
/// the storage of [`CounterSampleBuffer`](crate::CounterSampleBuffer) and
/// [`CounterHeap`](crate::CounterHeap).
/// Held by every recording that writes it until that recording is done, so
/// the memory outlives every launch that writes it.
pub struct MappedStorage {
    pub(crate) samples: SampleSet,
    pub(crate) words: MappedWords,
    /// The device, to poll for finished work before a resolve (weak: the
    /// device's pending work holds storages).
    pub(crate) device: Weak<Shared>,
    /// Which device it belongs to, for refusing foreign objects.
    pub(crate) device_id: gpu_counters_hal::DeviceId,
}

impl MappedStorage {
    /// Completes the tickets of finished work before a resolve reads.
    pub(crate) fn poll(&self) -> Result<()> {
        match self.device.upgrade() {
            Some(shared) => shared.poll(),
            // The device is gone: its drop waited for all of its work.
            None => Ok(()),
        }
    }

    /// Writes sample `i`'s query from the host, value then availability
    /// (stage utilization, decoded on the CPU; nothing on the GPU writes
    /// those words).
    #[cfg(feature = "cupti")]
    pub(crate) fn set_value(&self, i: u32, value: u64) {
        let (Some(v), Some(a)) = (
            self.words.word(2 * i as usize),
            self.words.word(2 * i as usize + 1),
        ) else {
            return;
        };
        v.store(value, Ordering::Release);
        a.store(1, Ordering::Release);
    }

    /// Clears sample `i`'s value and availability words on the host (a
    /// host reset; the bookkeeping checked that no launch writing it is
    /// pending). The value too: a timestamp's value is its own
    /// availability.
    pub(crate) fn clear_sample(&self, i: u32) {
        for w in self.words.words(2 * i as usize, 2).into_iter().flatten() {
            w.store(0, Ordering::Release);
        }
    }
}

/// A resolve or host reset first completes the tickets of finished work
/// (a poll of the device).
impl SampleStorage for MappedStorage {
    fn samples(&self) -> &SampleSet {
        &self.samples
    }

    fn update(&self) -> Result<()> {
        self.poll()
    }

    fn clear(&self, first: u32, count: u32) {
        #[cfg(feature = "cupti")]
        if let Some(z) = self.device.upgrade().as_ref().and_then(|d| d.zero.as_ref()) {
            // A zero-intrusion value still waiting for its record is
            // forgotten.
            z.cancel(self, first, first + count);
        }
        for i in first..first + count {
            self.clear_sample(i);
        }
    }
}

impl QueryRead for MappedStorage {
    fn values(&self) -> u32 {
        1
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let from = 2 * first as usize;
        if out.len() != 2 * count as usize {
            return Err(Error::Internal("CUDA read into a wrong-sized slice".into()));
        }
        let Some(words) = self.words.words(from, 2 * count as usize) else {
            return Err(Error::Internal(format!(
                "CUDA read of {first}+{count} past the buffer"
            )));
        };
        for (o, w) in out.chunks_exact_mut(2).zip(words.chunks_exact(2)) {
            // The availability word first: the kernels that write one
            // fence the value before it, so a set word means the value is
            // the new one. A timestamp kernel writes only its value, which
            // is never 0 and was cleared to 0 before (a host reset, or a
            // launch that counts as a reset until it is done): a value
            // that is not 0 is complete and is the new one.
            let a = w[1].load(Ordering::Acquire);
            let v = w[0].load(Ordering::Acquire);
            o[0] = v;
            o[1] = if a != 0 { a } else { u64::from(v != 0) };
        }
        Ok(())
    }
}
