//! A program that loads an NVTX tool as NVTX v3's headers do (the library
//! named by `NVTX_INJECTION64_PATH`, `dlopen`ed, its
//! `InitializeInjectionNvtx2` called with an export table) and then calls
//! the function-table slots the tool filled, for tests without a GPU or an
//! NVTX build.
//!
//! It pushes `outer` > `inner` (popping both), starts and ends `async`,
//! marks `mark`, creates domain `dom` and pushes `in-dom` there through a
//! registered string, pops an empty stack once, and with `--leave-open`
//! leaves `open` pushed; with `--fork` a forked child pushes and pops
//! `child` and exits. It prints `nvtx-fake-app: tool returned N`.

use std::ffi::{c_char, c_int, c_void, CString};

type Fp = Option<unsafe extern "C" fn()>;

const SLOTS: usize = 16;
static mut CORE: [Fp; SLOTS] = [None; SLOTS];
static mut CORE2: [Fp; SLOTS] = [None; SLOTS];
static mut CORE_PTRS: [*mut Fp; SLOTS] = [std::ptr::null_mut(); SLOTS];
static mut CORE2_PTRS: [*mut Fp; SLOTS] = [std::ptr::null_mut(); SLOTS];

#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get: unsafe extern "C" fn(u32, *mut *mut *mut Fp, *mut u32) -> c_int,
}

#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set: Option<unsafe extern "C" fn(u32)>,
}

unsafe extern "C" fn get_table(module: u32, out: *mut *mut *mut Fp, size: *mut u32) -> c_int {
    // SAFETY: single-threaded set-up; the tables are this program's.
    unsafe {
        let table = match module {
            1 => &raw mut CORE_PTRS,
            5 => &raw mut CORE2_PTRS,
            _ => return 0,
        };
        *out = (*table).as_mut_ptr();
        *size = SLOTS as u32;
    }
    1
}

static CALLBACKS: Callbacks = Callbacks {
    struct_size: std::mem::size_of::<Callbacks>(),
    get: get_table,
};
static VERSION: VersionInfo = VersionInfo {
    struct_size: std::mem::size_of::<VersionInfo>(),
    version: 3,
    reserved0: 0,
    set: None,
};

unsafe extern "C" fn export_table(id: u32) -> *const c_void {
    match id {
        1 => (&raw const CALLBACKS).cast(),
        3 => (&raw const VERSION).cast(),
        _ => std::ptr::null(),
    }
}

/// Slot `i` of `table` as a function of type `F`.
unsafe fn slot<F: Copy>(table: *const [Fp; SLOTS], i: usize) -> F {
    // SAFETY: the caller names the slot's real type; a slot not filled
    // aborts the test program.
    unsafe {
        let f = (*table)[i].expect("slot filled by the tool");
        std::mem::transmute_copy::<unsafe extern "C" fn(), F>(&f)
    }
}

#[repr(C)]
struct Attributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    pad: u32,
    message: *const c_void,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = std::env::var("NVTX_INJECTION64_PATH").expect("NVTX_INJECTION64_PATH");
    let cpath = CString::new(path).unwrap();
    // SAFETY: plain dlopen/dlsym of the tool, as NVTX does.
    let init: unsafe extern "C" fn(unsafe extern "C" fn(u32) -> *const c_void) -> c_int = unsafe {
        let h = libc::dlopen(cpath.as_ptr(), libc::RTLD_LAZY);
        assert!(!h.is_null(), "dlopen failed");
        let s = libc::dlsym(h, c"InitializeInjectionNvtx2".as_ptr());
        assert!(!s.is_null(), "no InitializeInjectionNvtx2");
        std::mem::transmute::<*mut c_void, _>(s)
    };
    // SAFETY: single-threaded; the slot pointers point into the tables.
    unsafe {
        for i in 0..SLOTS {
            CORE_PTRS[i] = (&raw mut CORE).cast::<Fp>().add(i);
            CORE2_PTRS[i] = (&raw mut CORE2).cast::<Fp>().add(i);
        }
    }
    // SAFETY: the tool's entry point with our getter.
    let r = unsafe { init(export_table) };
    eprintln!("nvtx-fake-app: tool returned {r}");
    if r != 1 {
        std::process::exit(3);
    }
    let core = &raw const CORE;
    let core2 = &raw const CORE2;
    // SAFETY: each slot's type as nvToolsExt.h gives it.
    unsafe {
        let push_a: unsafe extern "C" fn(*const c_char) -> c_int = slot(core, 9);
        let pop: unsafe extern "C" fn() -> c_int = slot(core, 11);
        let start_a: unsafe extern "C" fn(*const c_char) -> u64 = slot(core, 5);
        let end: unsafe extern "C" fn(u64) = slot(core, 7);
        let mark_a: unsafe extern "C" fn(*const c_char) = slot(core, 2);
        let domain_create: unsafe extern "C" fn(*const c_char) -> *const c_void = slot(core2, 12);
        let register: unsafe extern "C" fn(*const c_void, *const c_char) -> *const c_void =
            slot(core2, 10);
        let dpush: unsafe extern "C" fn(*const c_void, *const Attributes) -> c_int = slot(core2, 4);
        let dpop: unsafe extern "C" fn(*const c_void) -> c_int = slot(core2, 5);

        assert_eq!(push_a(c"outer".as_ptr()), 0);
        assert_eq!(push_a(c"inner".as_ptr()), 1);
        assert_eq!(pop(), 1);
        assert_eq!(pop(), 0);
        assert_eq!(pop(), -1, "an empty stack");
        let id = start_a(c"async".as_ptr());
        assert_ne!(id, 0);
        mark_a(c"mark".as_ptr());
        end(id);
        let dom = domain_create(c"dom".as_ptr());
        assert!(!dom.is_null());
        let s = register(dom, c"in-dom".as_ptr());
        let a = Attributes {
            version: 3,
            size: 48,
            category: 0,
            color_type: 1,
            color: 0xff336699,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: 3,
            pad: 0,
            message: s,
        };
        assert_eq!(dpush(dom, &a), 0);
        assert_eq!(dpop(dom), 0);
        if args.iter().any(|a| a == "--fork") {
            let pid = libc::fork();
            if pid == 0 {
                push_a(c"child".as_ptr());
                pop();
                libc::exit(0);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        if args.iter().any(|a| a == "--leave-open") {
            push_a(c"open".as_ptr());
        }
    }
}
