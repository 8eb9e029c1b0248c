//! Hooks for a whole-process tracer (the `gpu-counters record` injection):
//! every CUPTI callback of the domains it asks for, and every activity
//! record CUPTI hands back, through the process's one subscriber and one
//! set of buffer callbacks, which this crate owns (its private `launches`
//! and `activity` modules).
//!
//! - [`observe_api`]: an [`ApiObserver`] sees the callbacks of the ids it
//!   enables (API calls at entry and exit, resource and synchronization
//!   events), before this crate's own handling of them.
//! - [`record_sink`]: a [`RecordSink`] sees every record of every buffer,
//!   parsed into [`Record`]s; the kinds it asks for are enabled for good
//!   (a zero-intrusion device's recorders ending never turn them off).
//! - [`flush`]: hands finished buffers back now (forced: unfinished ones
//!   too, whose records come back incomplete).
//!
//! One observer and one sink per process; the first registration holds.
//! Records borrow CUPTI's buffer: a sink copies what it keeps inside
//! [`RecordSink::record`].

use crate::activity::{self, ActivityStats};
use crate::cupti;
use crate::tracer;
use gpu_counters_cupti_sys as cs;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::tracer::{
    kind, ApiCall, ApiObserver, Callback, CopyRecord, Domain, KernelRecord, MemsetRecord, Record,
    RecordSink, Site, SyncRecord, Work,
};

/// Registers `o` (once per process) and enables the callbacks `enable`
/// names: a domain and one of its ids, or the whole domain (`None`).
/// Subscribes to CUPTI where nothing did yet; an error says why not (no
/// CUPTI, another subscriber such as Nsight, an id CUPTI refused).
pub fn observe_api(
    o: &'static dyn ApiObserver,
    enable: &[(Domain, Option<u32>)],
) -> Result<(), String> {
    let launches = crate::launches::Launches::get()?;
    if !tracer::set_observer(o) {
        return Err("an API observer is already registered in this process".into());
    }
    let api = launches.api;
    let subscriber = launches.subscriber as cs::CUpti_SubscriberHandle;
    for &(domain, id) in enable {
        let r = match id {
            // SAFETY: the process's subscriber, a domain of CUPTI's enum.
            None => unsafe { api.cuptiEnableDomain(1, subscriber, domain.raw()) },
            // SAFETY: as above, with a callback id of that domain.
            Some(cbid) => unsafe { api.cuptiEnableCallback(1, subscriber, domain.raw(), cbid) },
        };
        cupti::check(&format!("cuptiEnableCallback({domain:?}, {id:?})"), r)?;
    }
    Ok(())
}

/// CUPTI's name of callback `cbid` of an API domain (`cuLaunchKernel`,
/// `cudaLaunchKernel_v7000`), `None` where it has none.
pub fn callback_name(domain: Domain, cbid: u32) -> Option<String> {
    let api = cs::cupti().ok()?;
    let mut name: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: a valid out-pointer; CUPTI points it at a static string.
    let r = unsafe { api.cuptiGetCallbackName(domain.raw(), cbid, &mut name) };
    if r != cs::CUptiResult::CUPTI_SUCCESS || name.is_null() {
        return None;
    }
    // SAFETY: non-null, CUPTI's NUL-terminated static string.
    Some(
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Registers `s` (once per process), sets CUPTI's activity tracing up
/// where nothing did yet (subscriber, timestamp and buffer callbacks), and
/// enables `kinds` for good. An error says what failed; kinds enabled
/// before it stay enabled.
pub fn record_sink(s: &'static dyn RecordSink, kinds: &[u32]) -> Result<(), String> {
    let a = activity::Activity::get()?;
    if !tracer::set_sink(s) {
        return Err("a record sink is already registered in this process".into());
    }
    for &k in kinds {
        tracer::make_permanent(k);
        // SAFETY: a plain CUPTI call with a kind number of CUPTI's enum.
        let r = unsafe { a.api.cuptiActivityEnable(cs::CUpti_ActivityKind(k)) };
        cupti::check(&format!("cuptiActivityEnable(kind {k})"), r)?;
    }
    Ok(())
}

/// The newest activity buffer handed to CUPTI (numbered from 1; 0 before
/// the first).
pub fn newest_buffer() -> u64 {
    activity::newest_buffer()
}

/// Records CUPTI dropped, summed over every [`flush`] so far.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Hands CUPTI's finished buffers back now (`cuptiActivityFlushAll`);
/// `forced` also those holding records of unfinished work
/// (`CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`), whose records come back with no
/// start or end. Returns what tracing did so far (CUPTI's dropped records
/// included).
pub fn flush(forced: bool) -> Result<ActivityStats, String> {
    let a = activity::Activity::get()?;
    a.flush_with(u32::from(forced))?;
    let stats = a.stats();
    DROPPED.store(stats.dropped, Ordering::Release);
    Ok(stats)
}

/// Asks CUPTI to hand buffers back every `ms` milliseconds on its own
/// thread (`cuptiActivityFlushPeriod`; 0: only when full or flushed).
pub fn set_flush_period(ms: u32) -> Result<(), String> {
    let api = cupti::cupti_api()?;
    // SAFETY: a plain CUPTI call.
    cupti::check("cuptiActivityFlushPeriod", unsafe {
        api.cuptiActivityFlushPeriod(ms)
    })
}

/// Records carry system thread ids (`gettid`), not pthread handles
/// (`cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)`).
pub fn use_system_thread_ids() -> Result<(), String> {
    let api = cupti::cupti_api()?;
    // SAFETY: a plain CUPTI call with a value of CUPTI's enum.
    cupti::check("cuptiSetThreadIdType", unsafe {
        api.cuptiSetThreadIdType(
            cs::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
        )
    })
}

/// CUPTI's API version (`cuptiGetVersion`), where CUPTI loads.
pub fn cupti_version() -> Option<u32> {
    let api = cs::cupti().ok()?;
    let mut v = 0u32;
    // SAFETY: a valid out-pointer.
    let r = unsafe { api.cuptiGetVersion(&mut v) };
    (r == cs::CUptiResult::CUPTI_SUCCESS).then_some(v)
}

/// The file of the CUPTI library this process uses, once loaded: the one
/// it had mapped, else the one loaded for it.
pub fn cupti_path() -> Option<std::path::PathBuf> {
    cs::cupti().ok()?;
    cs::mapped_cupti()
}

/// The ordinal of the device of context `context` (a `CUcontext`), from
/// CUPTI (`cuptiGetDeviceId`).
pub fn context_device(context: usize) -> Result<u32, String> {
    let api = cupti::cupti_api()?;
    let mut id = 0u32;
    // SAFETY: a context the caller was told of by a resource callback;
    // a valid out-pointer.
    cupti::check("cuptiGetDeviceId", unsafe {
        api.cuptiGetDeviceId(context as cs::CUcontext, &mut id)
    })?;
    Ok(id)
}
