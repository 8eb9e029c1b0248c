//! NVTX: our handlers installed in each NVTX instance's function table.
//!
//! NVTX v3 is header-only: every library that uses it (libtorch, NCCL, the
//! `nvtx` Python package) is its own instance, and each calls
//! `InitializeInjectionNvtx2` of `NVTX_INJECTION64_PATH` once, with its
//! export table. From it we take the CORE and CORE2 modules' tables and
//! point their slots at the handlers here: push/pop and start/end ranges,
//! marks, domains, registered strings and thread names. Each handler reads
//! the clock once, updates the thread's stack and queues one record.
//! Slots left alone stay no-ops.

use crate::state::{self, now_ns, State};
use gpu_counters_record::protocol::{init, Name, NvtxEnd, NvtxPop, NvtxRange, Record, Text};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `NVTX_ETID_CALLBACKS`.
const ETID_CALLBACKS: u32 = 1;
/// `NVTX_ETID_VERSIONINFO`.
const ETID_VERSIONINFO: u32 = 3;
/// `NVTX_CB_MODULE_CORE`.
const MODULE_CORE: u32 = 1;
/// `NVTX_CB_MODULE_CORE2`.
const MODULE_CORE2: u32 = 5;

type Slot = *mut Option<unsafe extern "C" fn()>;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<
        unsafe extern "C" fn(module: u32, out_table: *mut *mut Slot, out_size: *mut u32) -> c_int,
    >,
}

#[repr(C)]
struct ExportTableVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: Option<unsafe extern "C" fn(version: u32)>,
}

/// `nvtxEventAttributes_t` v2's fields read (48 bytes in all).
#[repr(C)]
#[derive(Clone, Copy)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    _pad: u32,
    message: usize,
}

const ATTR_BYTES: usize = std::mem::size_of::<EventAttributes>();
const _: () = assert!(ATTR_BYTES == 48);

/// `NVTX_MESSAGE_TYPE_ASCII`, `UNICODE`, `REGISTERED`.
const MSG_ASCII: i32 = 1;
const MSG_UNICODE: i32 = 2;
const MSG_REGISTERED: i32 = 3;
/// `NVTX_COLOR_ARGB`.
const COLOR_ARGB: i32 = 1;

/// A message as NVTX passes it.
enum Message {
    Bytes(Vec<u8>),
    Registered(u32),
    None,
}

/// UTF-32 (`wchar_t` on Linux) to UTF-8, invalid code points replaced.
///
/// # Safety
///
/// `p` is null or a NUL-terminated `wchar_t` string.
unsafe fn wide(p: *const i32) -> Vec<u8> {
    let mut s = String::new();
    if p.is_null() {
        return Vec::new();
    }
    let mut i = 0;
    loop {
        // SAFETY: the caller's promise: read up to the NUL.
        let c = unsafe { *p.add(i) };
        if c == 0 || i >= gpu_counters_record::protocol::MAX_TEXT {
            break;
        }
        s.push(char::from_u32(c as u32).unwrap_or(char::REPLACEMENT_CHARACTER));
        i += 1;
    }
    s.into_bytes()
}

/// # Safety
///
/// `p` is null or a NUL-terminated string.
unsafe fn ascii(p: *const c_char) -> Vec<u8> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
}

/// The attributes' message, color and category.
///
/// # Safety
///
/// `a` is null or an `nvtxEventAttributes_t` of at least its `size` bytes.
unsafe fn attributes(a: *const c_void) -> (Message, u32, u32) {
    if a.is_null() {
        return (Message::None, 0, 0);
    }
    let mut buf = [0u8; ATTR_BYTES];
    // SAFETY: `size` is the attributes' first u16 after `version`.
    let size = unsafe { std::ptr::read_unaligned((a as *const u8).add(2) as *const u16) } as usize;
    let n = size.min(ATTR_BYTES);
    // SAFETY: the caller's promise: `size` bytes are readable.
    unsafe { std::ptr::copy_nonoverlapping(a as *const u8, buf.as_mut_ptr(), n) };
    // SAFETY: EventAttributes is plain data; any bytes are a value.
    let at: EventAttributes = unsafe { std::ptr::read_unaligned(buf.as_ptr() as *const _) };
    let msg = match at.message_type {
        // SAFETY: NVTX's contract for these message types.
        MSG_ASCII => Message::Bytes(unsafe { ascii(at.message as *const c_char) }),
        // SAFETY: as above.
        MSG_UNICODE => Message::Bytes(unsafe { wide(at.message as *const i32) }),
        MSG_REGISTERED => Message::Registered(at.message as u32),
        _ => Message::None,
    };
    let color = if at.color_type == COLOR_ARGB {
        at.color
    } else {
        0
    };
    (msg, color, at.category)
}

fn state() -> Option<&'static State> {
    let s = state::state_with(init::NVTX)?;
    if s.config.nvtx && !s.done.load(std::sync::atomic::Ordering::Relaxed) {
        Some(s)
    } else {
        None
    }
}

fn guarded<R>(default: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(default)
}

fn name<'a>(s: &State, m: &'a Message) -> Name<'a> {
    match m {
        Message::Bytes(b) => s.name(b),
        Message::Registered(id) => Name::Id(*id),
        Message::None => Name::Text(Text::default()),
    }
}

fn push(domain: u32, m: Message, color: u32, category: u32) -> c_int {
    let Some(s) = state() else { return -1 };
    let tid = s.thread();
    let id = s.next_range();
    let ts = now_ns();
    let Some(depth) = state::with_nvtx(|n| n.push(domain, id)) else {
        return -1;
    };
    s.counts
        .nvtx_open
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    s.push(&Record::NvtxPush(NvtxRange {
        tid,
        ts_ns: ts,
        range_id: id,
        domain,
        name: name(s, &m),
        color,
        category,
    }));
    depth
}

fn pop(domain: u32) -> c_int {
    let Some(s) = state() else { return -1 };
    let ts = now_ns();
    match state::with_nvtx(|n| n.pop(domain)) {
        Some(Ok((id, depth))) => {
            let tid = s.thread();
            s.counts
                .nvtx_open
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            s.push(&Record::NvtxPop(NvtxPop {
                tid,
                ts_ns: ts,
                domain,
                range_id: id,
            }));
            depth
        }
        Some(Err(true)) => 0,
        _ => {
            s.counts
                .nvtx_pop_empty
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            -1
        }
    }
}

fn start(domain: u32, m: Message, color: u32, category: u32) -> u64 {
    let Some(s) = state() else { return 0 };
    let tid = s.thread();
    let id = s.next_range();
    s.push(&Record::NvtxStart(NvtxRange {
        tid,
        ts_ns: now_ns(),
        range_id: id,
        domain,
        name: name(s, &m),
        color,
        category,
    }));
    id
}

fn end(id: u64) {
    let Some(s) = state() else { return };
    let tid = s.thread();
    s.push(&Record::NvtxEnd(NvtxEnd {
        tid,
        ts_ns: now_ns(),
        range_id: id,
    }));
}

fn mark(domain: u32, m: Message, color: u32, category: u32) {
    let Some(s) = state() else { return };
    let tid = s.thread();
    s.push(&Record::NvtxMark(NvtxRange {
        tid,
        ts_ns: now_ns(),
        range_id: 0,
        domain,
        name: name(s, &m),
        color,
        category,
    }));
}

/// Domain handles are our domain ids as pointers (never null).
fn domain_id(h: *const c_void) -> u32 {
    h as usize as u32
}

// The CORE module.
unsafe extern "C" fn mark_ex(a: *const c_void) {
    guarded((), || {
        // SAFETY: NVTX's contract: an attributes structure or null.
        let (m, c, k) = unsafe { attributes(a) };
        mark(0, m, c, k)
    })
}
unsafe extern "C" fn mark_a(msg: *const c_char) {
    // SAFETY: NVTX's contract: a string or null.
    guarded((), || mark(0, Message::Bytes(unsafe { ascii(msg) }), 0, 0))
}
unsafe extern "C" fn mark_w(msg: *const i32) {
    // SAFETY: NVTX's contract: a wide string or null.
    guarded((), || mark(0, Message::Bytes(unsafe { wide(msg) }), 0, 0))
}
unsafe extern "C" fn range_start_ex(a: *const c_void) -> u64 {
    guarded(0, || {
        // SAFETY: as in `mark_ex`.
        let (m, c, k) = unsafe { attributes(a) };
        start(0, m, c, k)
    })
}
unsafe extern "C" fn range_start_a(msg: *const c_char) -> u64 {
    // SAFETY: as in `mark_a`.
    guarded(0, || start(0, Message::Bytes(unsafe { ascii(msg) }), 0, 0))
}
unsafe extern "C" fn range_start_w(msg: *const i32) -> u64 {
    // SAFETY: as in `mark_w`.
    guarded(0, || start(0, Message::Bytes(unsafe { wide(msg) }), 0, 0))
}
unsafe extern "C" fn range_end(id: u64) {
    guarded((), || end(id))
}
unsafe extern "C" fn range_push_ex(a: *const c_void) -> c_int {
    guarded(-1, || {
        // SAFETY: as in `mark_ex`.
        let (m, c, k) = unsafe { attributes(a) };
        push(0, m, c, k)
    })
}
unsafe extern "C" fn range_push_a(msg: *const c_char) -> c_int {
    // SAFETY: as in `mark_a`.
    guarded(-1, || push(0, Message::Bytes(unsafe { ascii(msg) }), 0, 0))
}
unsafe extern "C" fn range_push_w(msg: *const i32) -> c_int {
    // SAFETY: as in `mark_w`.
    guarded(-1, || push(0, Message::Bytes(unsafe { wide(msg) }), 0, 0))
}
unsafe extern "C" fn range_pop() -> c_int {
    guarded(-1, || pop(0))
}
unsafe extern "C" fn name_os_thread_a(tid: u32, name: *const c_char) {
    guarded((), || {
        let Some(s) = state() else { return };
        // SAFETY: as in `mark_a`.
        let n = unsafe { ascii(name) };
        if let Some(id) = s.intern(&n) {
            s.push(&Record::Thread(gpu_counters_record::protocol::Thread {
                tid,
                name: id,
            }));
        }
    })
}

// The CORE2 module.
unsafe extern "C" fn domain_mark_ex(d: *const c_void, a: *const c_void) {
    guarded((), || {
        // SAFETY: as in `mark_ex`.
        let (m, c, k) = unsafe { attributes(a) };
        mark(domain_id(d), m, c, k)
    })
}
unsafe extern "C" fn domain_range_start_ex(d: *const c_void, a: *const c_void) -> u64 {
    guarded(0, || {
        // SAFETY: as in `mark_ex`.
        let (m, c, k) = unsafe { attributes(a) };
        start(domain_id(d), m, c, k)
    })
}
unsafe extern "C" fn domain_range_end(_d: *const c_void, id: u64) {
    guarded((), || end(id))
}
unsafe extern "C" fn domain_range_push_ex(d: *const c_void, a: *const c_void) -> c_int {
    guarded(-1, || {
        // SAFETY: as in `mark_ex`.
        let (m, c, k) = unsafe { attributes(a) };
        push(domain_id(d), m, c, k)
    })
}
unsafe extern "C" fn domain_range_pop(d: *const c_void) -> c_int {
    guarded(-1, || pop(domain_id(d)))
}
unsafe extern "C" fn domain_register_string_a(
    _d: *const c_void,
    s: *const c_char,
) -> *const c_void {
    guarded(std::ptr::null(), || {
        let Some(st) = state() else {
            return std::ptr::null();
        };
        // SAFETY: as in `mark_a`.
        let b = unsafe { ascii(s) };
        st.intern(&b).unwrap_or(0) as usize as *const c_void
    })
}
unsafe extern "C" fn domain_register_string_w(_d: *const c_void, s: *const i32) -> *const c_void {
    guarded(std::ptr::null(), || {
        let Some(st) = state() else {
            return std::ptr::null();
        };
        // SAFETY: as in `mark_w`.
        let b = unsafe { wide(s) };
        st.intern(&b).unwrap_or(0) as usize as *const c_void
    })
}
unsafe extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    guarded(std::ptr::null(), || {
        let Some(st) = state() else {
            // A handle all the same: NVTX treats null as "no domain".
            return usize::MAX as *const c_void;
        };
        // SAFETY: as in `mark_a`.
        st.domain(&unsafe { ascii(name) }) as usize as *const c_void
    })
}
unsafe extern "C" fn domain_create_w(name: *const i32) -> *const c_void {
    guarded(std::ptr::null(), || {
        let Some(st) = state() else {
            return usize::MAX as *const c_void;
        };
        // SAFETY: as in `mark_w`.
        st.domain(&unsafe { wide(name) }) as usize as *const c_void
    })
}
unsafe extern "C" fn domain_destroy(_d: *const c_void) {}
unsafe extern "C" fn initialize(_reserved: *const c_void) {}

/// Points slot `i` of `table` (of `size` slots) at `f`, where the slot
/// exists.
///
/// # Safety
///
/// `table` is NVTX's table of `size` slot pointers for a module, and `f`
/// has the signature NVTX gives slot `i` of that module.
unsafe fn set(table: *mut Slot, size: u32, i: u32, f: *const ()) {
    if i >= size {
        return;
    }
    // SAFETY: `i < size`: inside the table.
    let slot = unsafe { *table.add(i as usize) };
    if !slot.is_null() {
        // SAFETY: NVTX's slot, written once during its initialization;
        // `f`'s signature is the slot's (the caller's promise).
        unsafe { *slot = Some(std::mem::transmute::<*const (), unsafe extern "C" fn()>(f)) };
    }
}

/// Installs the handlers through an NVTX instance's export table getter.
/// Returns 1 on success, 0 where the tables are not what we need (NVTX
/// then makes every call a no-op).
///
/// # Safety
///
/// `get` is NVTX's `nvtxGetExportTable` of the calling instance.
pub unsafe fn install(get: Option<unsafe extern "C" fn(u32) -> *const c_void>) -> c_int {
    let Some(get) = get else { return 0 };
    // SAFETY: NVTX's getter, per its contract.
    let cb = unsafe { get(ETID_CALLBACKS) } as *const ExportTableCallbacks;
    if cb.is_null() {
        return 0;
    }
    // SAFETY: non-null, NVTX's export table; its size is checked first.
    let cb = unsafe { &*cb };
    if cb.struct_size < std::mem::size_of::<ExportTableCallbacks>() {
        return 0;
    }
    let Some(get_table) = cb.get_module_function_table else {
        return 0;
    };
    type F = *const ();
    let core: [(u32, F); 12] = [
        (1, mark_ex as F),
        (2, mark_a as F),
        (3, mark_w as F),
        (4, range_start_ex as F),
        (5, range_start_a as F),
        (6, range_start_w as F),
        (7, range_end as F),
        (8, range_push_ex as F),
        (9, range_push_a as F),
        (10, range_push_w as F),
        (11, range_pop as F),
        (14, name_os_thread_a as F),
    ];
    let core2: [(u32, F); 12] = [
        (1, domain_mark_ex as F),
        (2, domain_range_start_ex as F),
        (3, domain_range_end as F),
        (4, domain_range_push_ex as F),
        (5, domain_range_pop as F),
        // Resource destroy takes one pointer, as domain destroy: a no-op.
        (7, domain_destroy as F),
        (10, domain_register_string_a as F),
        (11, domain_register_string_w as F),
        (12, domain_create_a as F),
        (13, domain_create_w as F),
        (14, domain_destroy as F),
        (15, initialize as F),
    ];
    for (module, slots) in [(MODULE_CORE, &core[..]), (MODULE_CORE2, &core2[..])] {
        let mut table: *mut Slot = std::ptr::null_mut();
        let mut size = 0u32;
        // SAFETY: NVTX's function, with valid out-pointers.
        if unsafe { get_table(module, &mut table, &mut size) } == 0 || table.is_null() {
            return 0;
        }
        for &(i, f) in slots {
            // SAFETY: each handler has the signature NVTX gives its slot
            // (nvToolsExt.h; the CORE2 domain functions).
            unsafe { set(table, size, i, f) };
        }
    }
    // SAFETY: NVTX's getter; the version table is optional.
    let v = unsafe { get(ETID_VERSIONINFO) } as *const ExportTableVersionInfo;
    if !v.is_null() {
        // SAFETY: non-null, NVTX's table; its size is checked first.
        let v = unsafe { &*v };
        if v.struct_size >= std::mem::size_of::<ExportTableVersionInfo>() {
            if let Some(set_version) = v.set_injection_nvtx_version {
                // SAFETY: NVTX's function.
                unsafe { set_version(3) };
            }
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attributes are read no further than their size; each message type
    /// becomes its text or registered id; a color counts only as ARGB.
    #[test]
    fn attributes_read_within_their_size() {
        let msg = b"step 3\0";
        let mut a = EventAttributes {
            version: 3,
            size: 48,
            category: 7,
            color_type: COLOR_ARGB,
            color: 0xff00ff00,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: MSG_ASCII,
            _pad: 0,
            message: msg.as_ptr() as usize,
        };
        // SAFETY: a full attributes structure.
        let (m, c, k) = unsafe { attributes((&a as *const EventAttributes).cast()) };
        assert!(matches!(m, Message::Bytes(ref b) if b == b"step 3"));
        assert_eq!((c, k), (0xff00ff00, 7));
        a.message_type = MSG_REGISTERED;
        a.message = 42;
        a.color_type = 2;
        // SAFETY: as above.
        let (m, c, _) = unsafe { attributes((&a as *const EventAttributes).cast()) };
        assert!(matches!(m, Message::Registered(42)));
        assert_eq!(c, 0);
        // A short structure: the message fields are past its size.
        a.size = 16;
        // SAFETY: as above (48 bytes readable; 16 read).
        let (m, c, k) = unsafe { attributes((&a as *const EventAttributes).cast()) };
        assert!(matches!(m, Message::None));
        assert_eq!((c, k), (0, 7));
        let w: Vec<i32> = "é✓\0".chars().map(|c| c as i32).collect();
        // SAFETY: a NUL-terminated wide string.
        assert_eq!(unsafe { wide(w.as_ptr()) }, "é✓".as_bytes());
    }
}
