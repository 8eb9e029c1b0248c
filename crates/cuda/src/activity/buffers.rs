//! CUPTI's activity buffer callbacks: buffers handed to CUPTI, and the
//! kernel, copy and memset records of those it hands back parsed into the
//! activity state (every record also reaching a registered sink).

use super::{ACTIVITY, REQUESTED};
use crate::lock;
use gpu_counters_cupti_sys as cs;
use std::sync::atomic::Ordering;

/// Bytes of one activity buffer handed to CUPTI: small, so that a buffer
/// held back by one record of unfinished work holds few others.
const BUFFER_BYTES: usize = 256 * 1024;

/// Where the fields read lie in a record. CUPTI hands out the record
/// structure of its own version (CUDA 13.0: `CUpti_ActivityKernel10`,
/// `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemset4`); the fields read here
/// have kept their offsets since CUDA 12 (checked against the binding's
/// structures below, CUPTI 13.0's).
struct Layout {
    start: usize,
    end: usize,
    context: usize,
    stream: usize,
    correlation: usize,
}

const KERNEL: Layout = Layout {
    start: 16,
    end: 24,
    context: 44,
    stream: 48,
    correlation: 92,
};

const COPY: Layout = Layout {
    start: 16,
    end: 24,
    context: 36,
    stream: 40,
    correlation: 44,
};

const _: () = {
    use std::mem::offset_of;
    type K = cs::CUpti_ActivityKernel10;
    assert!(offset_of!(K, start) == KERNEL.start);
    assert!(offset_of!(K, end) == KERNEL.end);
    assert!(offset_of!(K, contextId) == KERNEL.context);
    assert!(offset_of!(K, streamId) == KERNEL.stream);
    assert!(offset_of!(K, correlationId) == KERNEL.correlation);
    type C = cs::CUpti_ActivityMemcpy6;
    assert!(offset_of!(C, start) == COPY.start);
    assert!(offset_of!(C, end) == COPY.end);
    assert!(offset_of!(C, contextId) == COPY.context);
    assert!(offset_of!(C, streamId) == COPY.stream);
    assert!(offset_of!(C, correlationId) == COPY.correlation);
    type S = cs::CUpti_ActivityMemset4;
    assert!(offset_of!(S, start) == COPY.start);
    assert!(offset_of!(S, end) == COPY.end);
    assert!(offset_of!(S, contextId) == COPY.context);
    assert!(offset_of!(S, streamId) == COPY.stream);
    assert!(offset_of!(S, correlationId) == COPY.correlation);
};

/// CUPTI asks for a buffer: [`BUFFER_BYTES`], 8-byte aligned.
pub(super) unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    if buffer.is_null() || size.is_null() || max_records.is_null() {
        return;
    }
    let mut words: Vec<u64> = Vec::new();
    let ok = words.try_reserve_exact(BUFFER_BYTES / 8).is_ok();
    let Some(Ok(a)) = ACTIVITY.get() else {
        // SAFETY: CUPTI's out-pointers, checked non-null.
        unsafe {
            *buffer = std::ptr::null_mut();
            *size = 0;
            *max_records = 0;
        }
        return;
    };
    if !ok {
        lock(&a.state).stats.buffers_refused += 1;
        // SAFETY: as above: no buffer, CUPTI drops (and counts) records.
        unsafe {
            *buffer = std::ptr::null_mut();
            *size = 0;
            *max_records = 0;
        }
        return;
    }
    words.resize(BUFFER_BYTES / 8, 0);
    let p = Box::into_raw(words.into_boxed_slice()) as *mut u64 as *mut u8;
    let mut st = lock(&a.state);
    st.requested += 1;
    let n = st.requested;
    st.outstanding.insert(n);
    st.numbers.insert(p as usize, n);
    st.stats.buffers_requested += 1;
    REQUESTED.store(n, Ordering::Release);
    // SAFETY: CUPTI's out-pointers, checked non-null; the buffer is ours
    // until CUPTI hands it back through `buffer_completed`.
    unsafe {
        *buffer = p;
        *size = BUFFER_BYTES;
        *max_records = 0;
    }
}

/// Reads a `T` at `offset` of a record.
///
/// # Safety
///
/// `offset + size_of::<T>()` must lie inside the record.
unsafe fn field<T: Copy>(record: *const u8, offset: usize) -> T {
    // SAFETY: the caller's promise; records are only 8-byte aligned.
    unsafe { std::ptr::read_unaligned(record.add(offset) as *const T) }
}

/// CUPTI hands a buffer back: its records are parsed and it is freed.
pub(super) unsafe extern "C" fn buffer_completed(
    _context: cs::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let Some(Ok(a)) = ACTIVITY.get() else {
        return;
    };
    let mut st = lock(&a.state);
    let mut record: *mut cs::CUpti_Activity = std::ptr::null_mut();
    loop {
        // SAFETY: a buffer CUPTI filled, with its valid size; `record` is
        // CUPTI's cursor.
        let r = unsafe { a.api.cuptiActivityGetNextRecord(buffer, valid, &mut record) };
        if r != cs::CUptiResult::CUPTI_SUCCESS || record.is_null() {
            break;
        }
        let base = record as *const u8;
        // The kind as a plain u32: a newer CUPTI may use kinds the binding's
        // enum lacks.
        // SAFETY: every record starts with its kind.
        let kind: u32 = unsafe { field(base, 0) };
        let layout = if kind == cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.0
            || kind == cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL.0
        {
            &KERNEL
        } else if kind == cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY.0
            || kind == cs::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET.0
        {
            &COPY
        } else {
            if crate::tracer::sinking() {
                // SAFETY: a whole record of CUPTI's, of kind `kind`, valid
                // until the buffer is freed below.
                unsafe { crate::tracer::sink(base, kind, false) };
            }
            continue;
        };
        // SAFETY: the offsets lie inside records of these kinds (see
        // `Layout`).
        let (start, end, context, stream, c) = unsafe {
            (
                field::<u64>(base, layout.start),
                field::<u64>(base, layout.end),
                field::<u32>(base, layout.context),
                field::<u32>(base, layout.stream),
                field::<u32>(base, layout.correlation),
            )
        };
        a.record(&mut st, context, stream, c, start, end);
        if crate::tracer::sinking() {
            let ours = st.ids.contains(&(context, stream));
            // SAFETY: as above; the sink takes no lock of this module.
            unsafe { crate::tracer::sink(base, kind, ours) };
        }
    }
    if let Some(n) = st.numbers.remove(&(buffer as usize)) {
        st.outstanding.remove(&n);
        st.stats.buffers_returned += 1;
        let back_to = st.outstanding.first().map_or(st.requested, |&m| m - 1);
        drop(st);
        if crate::tracer::sinking() {
            crate::tracer::buffers_returned(back_to);
        }
        // SAFETY: `buffer` is one of ours (it was in `numbers`), made by
        // `buffer_requested` from a boxed slice of BUFFER_BYTES / 8 words;
        // CUPTI is done with it.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                buffer as *mut u64,
                BUFFER_BYTES / 8,
            ))
        });
    }
}
