//! Loading CUPTI and naming its errors: what every module that calls
//! CUPTI shares.

use gpu_counters_cupti_sys as cs;

/// What is said where CUPTI's library cannot be loaded.
pub(crate) const NO_CUPTI: &str = "no CUPTI library (libcupti.so): put the directory holding it (CUDA's extras/CUPTI/lib64, or targets/x86_64-linux/lib) on LD_LIBRARY_PATH, or its path in GPU_COUNTERS_CUPTI";

/// CUPTI, loaded once per process (`gpu_counters_cupti_sys::cupti`: the
/// library the process already mapped, else `GPU_COUNTERS_CUPTI`, else by
/// name), or why not.
pub(crate) fn cupti_api() -> Result<&'static cs::Cupti, String> {
    cs::cupti().map_err(|e| format!("{NO_CUPTI}: {e}"))
}

/// `Ok` for `CUPTI_SUCCESS`, else `what: <CUPTI's name of the result>`.
pub(crate) fn check(what: &str, r: cs::CUptiResult) -> Result<(), String> {
    if r == cs::CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        let name = match cs::cupti() {
            Ok(api) => crate::hardware::result_name(api, r),
            Err(_) => format!("CUptiResult {}", r.0),
        };
        Err(format!("{what}: {name}"))
    }
}
