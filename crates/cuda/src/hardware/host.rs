//! Safe wrappers over CUPTI's profiler calls (the bindings of
//! gpu-counters-cupti-sys): every call fills a zeroed parameter struct with
//! its `structSize`, checks the result, and copies out what CUPTI returns
//! before the memory behind it can go away.

use super::HardwareError;
use gpu_counters_cupti_sys as cs;
use std::ffi::{c_char, CStr, CString};

/// CUPTI's parameter structs, which may be made all-zero (null pointers,
/// 0, enum newtypes of 0) and then carry their `structSize`.
///
/// # Safety
///
/// All-zero must be a valid value of the type.
pub(super) unsafe trait Params: Sized {
    /// What `structSize` must hold (the headers' `..._STRUCT_SIZE`).
    const SIZE: usize;
    /// Where `structSize` is.
    fn struct_size(&mut self) -> &mut usize;
}

macro_rules! params {
    ($($t:ident => $size:ident),* $(,)?) => {$(
        // SAFETY: a plain C struct of integers, pointers and `u32` enum
        // newtypes, for which all-zero is valid.
        unsafe impl Params for cs::$t {
            const SIZE: usize = cs::$size;
            fn struct_size(&mut self) -> &mut usize {
                &mut self.structSize
            }
        }
    )*};
}

params! {
    CUpti_Profiler_Initialize_Params => CUpti_Profiler_Initialize_Params_STRUCT_SIZE,
    CUpti_Profiler_DeviceSupported_Params => CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE,
    CUpti_Profiler_GetCounterAvailability_Params => CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE,
    CUpti_Device_GetChipName_Params => CUpti_Device_GetChipName_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_Initialize_Params => CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_Deinitialize_Params => CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetBaseMetrics_Params => CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetSubMetrics_Params => CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetMetricProperties_Params => CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_ConfigAddMetrics_Params => CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetConfigImageSize_Params => CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetConfigImage_Params => CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_GetNumOfPasses_Params => CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE,
    CUpti_Profiler_Host_EvaluateToGpuValues_Params => CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_Enable_Params => CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_Disable_Params => CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_GetCounterDataSize_Params => CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params => CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_SetConfig_Params => CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_Start_Params => CUpti_RangeProfiler_Start_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_Stop_Params => CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_PushRange_Params => CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_PopRange_Params => CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_DecodeData_Params => CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_GetCounterDataInfo_Params => CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE,
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params => CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE,
    CUpti_PmSampling_SetConfig_Params => CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE,
    CUpti_PmSampling_Enable_Params => CUpti_PmSampling_Enable_Params_STRUCT_SIZE,
    CUpti_PmSampling_Disable_Params => CUpti_PmSampling_Disable_Params_STRUCT_SIZE,
    CUpti_PmSampling_Start_Params => CUpti_PmSampling_Start_Params_STRUCT_SIZE,
    CUpti_PmSampling_Stop_Params => CUpti_PmSampling_Stop_Params_STRUCT_SIZE,
    CUpti_PmSampling_DecodeData_Params => CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE,
    CUpti_PmSampling_GetCounterAvailability_Params => CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE,
    CUpti_PmSampling_GetCounterDataSize_Params => CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE,
    CUpti_PmSampling_CounterDataImage_Initialize_Params => CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE,
    CUpti_PmSampling_GetCounterDataInfo_Params => CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE,
    CUpti_PmSampling_CounterData_GetSampleInfo_Params => CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE,
}

/// Which of CUPTI's profilers a host object builds configs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Profiler {
    /// The range profiler (per range or kernel, with replay).
    Range,
    /// PM sampling (over time, one pass).
    PmSampling,
}

impl Profiler {
    fn raw(self) -> cs::CUpti_ProfilerType {
        match self {
            Profiler::Range => cs::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER,
            Profiler::PmSampling => cs::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_PM_SAMPLING,
        }
    }
}

/// A parameter struct, zeroed, with its `structSize`.
pub(super) fn params<T: Params>() -> T {
    // SAFETY: `Params` promises all-zero is a valid value.
    let mut p: T = unsafe { std::mem::zeroed() };
    *p.struct_size() = T::SIZE;
    p
}

/// CUPTI's name for `r` (`CUPTI_ERROR_...`), or its number.
pub(crate) fn result_name(api: &cs::Cupti, r: cs::CUptiResult) -> String {
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: a valid out-pointer; CUPTI points it at a static string.
    let ok = unsafe { api.cuptiGetResultString(r, &mut s) } == cs::CUptiResult::CUPTI_SUCCESS;
    if ok && !s.is_null() {
        // SAFETY: non-null, a NUL-terminated static string of CUPTI's.
        let name = unsafe { CStr::from_ptr(s) }.to_string_lossy();
        // "CUPTI_ERROR_X: what it means" or just the name.
        return name.into_owned();
    }
    format!("CUptiResult {}", r.0)
}

/// `r` of the call `call` as a typed error: privileges (NVIDIA's
/// ERR_NVGPUCTRPERM) and unsupported configurations each have their own
/// kind; anything else names the call and CUPTI's result.
pub(super) fn check(
    api: &cs::Cupti,
    call: &'static str,
    r: cs::CUptiResult,
) -> Result<(), HardwareError> {
    use cs::CUptiResult as R;
    match r {
        R::CUPTI_SUCCESS => Ok(()),
        R::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
        | R::CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES => {
            Err(HardwareError::NotPermitted { call })
        }
        R::CUPTI_ERROR_NOT_SUPPORTED
        | R::CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED
        | R::CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED
        | R::CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED
        | R::CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED
        | R::CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED
        | R::CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED
        | R::CUPTI_ERROR_INVALID_CHIP_NAME => Err(HardwareError::NotSupported {
            why: format!("{call}: {}", result_name(api, r)),
        }),
        R::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED | R::CUPTI_ERROR_HARDWARE_BUSY => {
            Err(HardwareError::InUse {
                call,
                result: result_name(api, r),
            })
        }
        _ => Err(HardwareError::Cupti {
            call,
            code: r.0,
            result: result_name(api, r),
        }),
    }
}

/// A string CUPTI returned, copied; `""` for null.
///
/// # Safety
///
/// `s` is null or a NUL-terminated string valid for the call.
unsafe fn copy_str(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated, by the caller.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// CUPTI's metric kinds, as the host API's `CUpti_MetricType`.
pub(super) const KINDS: [(cs::CUpti_MetricType, super::MetricKind); 3] = [
    (
        cs::CUpti_MetricType::CUPTI_METRIC_TYPE_COUNTER,
        super::MetricKind::Counter,
    ),
    (
        cs::CUpti_MetricType::CUPTI_METRIC_TYPE_RATIO,
        super::MetricKind::Ratio,
    ),
    (
        cs::CUpti_MetricType::CUPTI_METRIC_TYPE_THROUGHPUT,
        super::MetricKind::Throughput,
    ),
];

fn kind_of(t: cs::CUpti_MetricType) -> Option<super::MetricKind> {
    KINDS.iter().find(|(k, _)| *k == t).map(|(_, m)| *m)
}

fn metric_type(kind: super::MetricKind) -> cs::CUpti_MetricType {
    KINDS
        .iter()
        .find(|(_, m)| *m == kind)
        .map(|(k, _)| *k)
        .unwrap_or(cs::CUpti_MetricType::CUPTI_METRIC_TYPE_COUNTER)
}

/// What the host API says about one metric.
pub(super) struct Properties {
    pub(super) description: String,
    pub(super) hw_unit: String,
    pub(super) unit: String,
    pub(super) kind: Option<super::MetricKind>,
}

/// A profiler host object (`cuptiProfilerHostInitialize`) of one chip:
/// lists and describes metrics, builds a config image of the metrics added
/// to it, evaluates counter data. Not thread-safe: used under a lock.
pub(crate) struct HostObject {
    api: &'static cs::Cupti,
    ptr: *mut cs::CUpti_Profiler_Host_Object,
}

// SAFETY: the host object is CUPTI's heap object, not tied to a thread;
// every use of it is through `&mut self` or `&self` under its owner's lock.
unsafe impl Send for HostObject {}

impl HostObject {
    /// A range-profiler host object for `chip`, with the device's counter
    /// availability image where there is one (what the device makes
    /// available).
    pub(super) fn new(
        api: &'static cs::Cupti,
        chip: &CStr,
        availability: Option<&[u8]>,
    ) -> Result<Self, HardwareError> {
        Self::of(api, Profiler::Range, chip, availability)
    }

    /// A host object of `profiler` for `chip`, with the device's counter
    /// availability image of that profiler where there is one.
    pub(super) fn of(
        api: &'static cs::Cupti,
        profiler: Profiler,
        chip: &CStr,
        availability: Option<&[u8]>,
    ) -> Result<Self, HardwareError> {
        let mut p: cs::CUpti_Profiler_Host_Initialize_Params = params();
        p.profilerType = profiler.raw();
        p.pChipName = chip.as_ptr();
        p.pCounterAvailabilityImage = availability.map_or(std::ptr::null(), <[u8]>::as_ptr);
        // SAFETY: valid parameters; the chip name and image outlive the
        // call (CUPTI copies what it keeps).
        let r = unsafe { api.cuptiProfilerHostInitialize(&mut p) };
        check(api, "cuptiProfilerHostInitialize", r)?;
        if p.pHostObject.is_null() {
            return Err(HardwareError::Cupti {
                call: "cuptiProfilerHostInitialize",
                code: 0,
                result: "no host object returned".into(),
            });
        }
        Ok(Self {
            api,
            ptr: p.pHostObject,
        })
    }

    /// The base metrics of `kind` (names without a rollup or submetric).
    pub(super) fn base_metrics(
        &self,
        kind: super::MetricKind,
    ) -> Result<Vec<String>, HardwareError> {
        let mut p: cs::CUpti_Profiler_Host_GetBaseMetrics_Params = params();
        p.pHostObject = self.ptr;
        p.metricType = metric_type(kind);
        // SAFETY: valid parameters and host object.
        let r = unsafe { self.api.cuptiProfilerHostGetBaseMetrics(&mut p) };
        check(self.api, "cuptiProfilerHostGetBaseMetrics", r)?;
        // SAFETY: CUPTI returns `numMetrics` string pointers that the host
        // object owns, valid while it lives (copied here).
        Ok(unsafe { copy_strs(p.ppMetricNames, p.numMetrics) })
    }

    /// The rollups and submetrics `metric` (of `kind`) may be suffixed with
    /// (`.sum`, `.max`, `.avg.pct_of_peak_sustained_elapsed`, ...).
    pub(super) fn submetrics(
        &self,
        kind: super::MetricKind,
        metric: &CStr,
    ) -> Result<Vec<String>, HardwareError> {
        let mut p: cs::CUpti_Profiler_Host_GetSubMetrics_Params = params();
        p.pHostObject = self.ptr;
        p.metricType = metric_type(kind);
        p.pMetricName = metric.as_ptr();
        // SAFETY: valid parameters and host object.
        let r = unsafe { self.api.cuptiProfilerHostGetSubMetrics(&mut p) };
        check(self.api, "cuptiProfilerHostGetSubMetrics", r)?;
        // SAFETY: as in `base_metrics`.
        Ok(unsafe { copy_strs(p.ppSubMetrics, p.numOfSubmetrics) })
    }

    /// `metric`'s description, units and kind.
    pub(super) fn properties(&self, metric: &CStr) -> Result<Properties, HardwareError> {
        let mut p: cs::CUpti_Profiler_Host_GetMetricProperties_Params = params();
        p.pHostObject = self.ptr;
        p.pMetricName = metric.as_ptr();
        // SAFETY: valid parameters and host object.
        let r = unsafe { self.api.cuptiProfilerHostGetMetricProperties(&mut p) };
        check(self.api, "cuptiProfilerHostGetMetricProperties", r)?;
        // SAFETY: null or strings the host object owns, copied at once.
        Ok(unsafe {
            Properties {
                description: copy_str(p.pDescription),
                hw_unit: copy_str(p.pHwUnit),
                unit: copy_str(p.pDimUnit),
                kind: kind_of(p.metricType),
            }
        })
    }

    /// Adds `metrics` to the config this object builds.
    pub(super) fn add_metrics(&mut self, metrics: &[CString]) -> Result<(), HardwareError> {
        let mut names: Vec<*const c_char> = metrics.iter().map(|m| m.as_ptr()).collect();
        let mut p: cs::CUpti_Profiler_Host_ConfigAddMetrics_Params = params();
        p.pHostObject = self.ptr;
        p.ppMetricNames = names.as_mut_ptr();
        p.numMetrics = names.len();
        // SAFETY: valid parameters; the names outlive the call.
        let r = unsafe { self.api.cuptiProfilerHostConfigAddMetrics(&mut p) };
        check(self.api, "cuptiProfilerHostConfigAddMetrics", r)
    }

    /// The config image of the metrics added.
    pub(super) fn config_image(&self) -> Result<Vec<u8>, HardwareError> {
        let mut size: cs::CUpti_Profiler_Host_GetConfigImageSize_Params = params();
        size.pHostObject = self.ptr;
        // SAFETY: valid parameters and host object.
        let r = unsafe { self.api.cuptiProfilerHostGetConfigImageSize(&mut size) };
        check(self.api, "cuptiProfilerHostGetConfigImageSize", r)?;
        let mut image = vec![0u8; size.configImageSize];
        let mut p: cs::CUpti_Profiler_Host_GetConfigImage_Params = params();
        p.pHostObject = self.ptr;
        p.configImageSize = image.len();
        p.pConfigImage = image.as_mut_ptr();
        // SAFETY: `image` holds the `configImageSize` bytes CUPTI writes.
        let r = unsafe { self.api.cuptiProfilerHostGetConfigImage(&mut p) };
        check(self.api, "cuptiProfilerHostGetConfigImage", r)?;
        Ok(image)
    }

    /// The values of `metrics` in range `range` of decoded `counter_data`.
    pub(super) fn evaluate(
        &self,
        counter_data: &[u8],
        range: usize,
        metrics: &[CString],
    ) -> Result<Vec<f64>, HardwareError> {
        let mut names: Vec<*const c_char> = metrics.iter().map(|m| m.as_ptr()).collect();
        let mut values = vec![f64::NAN; metrics.len()];
        let mut p: cs::CUpti_Profiler_Host_EvaluateToGpuValues_Params = params();
        p.pHostObject = self.ptr;
        p.pCounterDataImage = counter_data.as_ptr();
        p.counterDataImageSize = counter_data.len();
        p.rangeIndex = range;
        p.ppMetricNames = names.as_mut_ptr();
        p.numMetrics = names.len();
        p.pMetricValues = values.as_mut_ptr();
        // SAFETY: valid parameters; `values` holds one f64 per metric.
        let r = unsafe { self.api.cuptiProfilerHostEvaluateToGpuValues(&mut p) };
        check(self.api, "cuptiProfilerHostEvaluateToGpuValues", r)?;
        Ok(values)
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        let mut p: cs::CUpti_Profiler_Host_Deinitialize_Params = params();
        p.pHostObject = self.ptr;
        // SAFETY: our host object, deinitialized once, here.
        let _ = unsafe { self.api.cuptiProfilerHostDeinitialize(&mut p) };
    }
}

/// `n` strings CUPTI returned, copied.
///
/// # Safety
///
/// `names` is null or points to `n` pointers, each null or a
/// NUL-terminated string, all valid for the call.
unsafe fn copy_strs(names: *const *const c_char, n: usize) -> Vec<String> {
    if names.is_null() {
        return Vec::new();
    }
    (0..n)
        // SAFETY: `i < n` pointers, each valid, by the caller.
        .map(|i| unsafe { copy_str(*names.add(i)) })
        .filter(|s| !s.is_empty())
        .collect()
}

/// The number of replay passes `config` needs.
pub(super) fn passes(api: &cs::Cupti, config: &mut [u8]) -> Result<usize, HardwareError> {
    let mut p: cs::CUpti_Profiler_Host_GetNumOfPasses_Params = params();
    p.configImageSize = config.len();
    p.pConfigImage = config.as_mut_ptr();
    // SAFETY: valid parameters; the image is a config image CUPTI built.
    let r = unsafe { api.cuptiProfilerHostGetNumOfPasses(&mut p) };
    check(api, "cuptiProfilerHostGetNumOfPasses", r)?;
    Ok(p.numOfPasses)
}

/// CUPTI's profiler, initialized once per process (never deinitialized:
/// other users in the process may rely on it).
pub(super) fn initialize(api: &'static cs::Cupti) -> Result<(), HardwareError> {
    static INITIALIZED: std::sync::OnceLock<Result<(), HardwareError>> = std::sync::OnceLock::new();
    INITIALIZED
        .get_or_init(|| {
            let mut p: cs::CUpti_Profiler_Initialize_Params = params();
            // SAFETY: valid parameters.
            let r = unsafe { api.cuptiProfilerInitialize(&mut p) };
            check(api, "cuptiProfilerInitialize", r)
        })
        .clone()
}

/// Whether CUPTI's range profiler supports device `device` (a `CUdevice`);
/// if not, the reasons CUPTI gives.
pub(super) fn device_supported(api: &cs::Cupti, device: i32) -> Result<(), HardwareError> {
    use cs::CUpti_Profiler_Support_Level as L;
    let mut p: cs::CUpti_Profiler_DeviceSupported_Params = params();
    p.cuDevice = device;
    p.api = cs::CUpti_Profiler_API::CUPTI_PROFILER_RANGE_PROFILING;
    // SAFETY: valid parameters.
    let r = unsafe { api.cuptiProfilerDeviceSupported(&mut p) };
    check(api, "cuptiProfilerDeviceSupported", r)?;
    if p.isSupported == L::CUPTI_PROFILER_CONFIGURATION_SUPPORTED {
        return Ok(());
    }
    let level = |l: L| match l {
        L::CUPTI_PROFILER_CONFIGURATION_SUPPORTED => None,
        L::CUPTI_PROFILER_CONFIGURATION_DISABLED => Some("disabled"),
        L::CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED => Some("unsupported"),
        _ => Some("unknown"),
    };
    let why: Vec<String> = [
        (
            "architecture (compute capability 7.0 or later)",
            p.architecture,
        ),
        ("SLI", p.sli),
        ("vGPU", p.vGpu),
        ("confidential computing", p.confidentialCompute),
        ("CMP (crypto mining processor)", p.cmp),
        ("WSL", p.wsl),
    ]
    .into_iter()
    .filter_map(|(what, l)| level(l).map(|s| format!("{what}: {s}")))
    .collect();
    Err(HardwareError::NotSupported {
        why: if why.is_empty() {
            "cuptiProfilerDeviceSupported says unsupported".into()
        } else {
            format!("cuptiProfilerDeviceSupported: {}", why.join(", "))
        },
    })
}

/// The chip's name (`GH100`, ...) of device ordinal `ordinal`.
pub(super) fn chip_name(api: &cs::Cupti, ordinal: usize) -> Result<String, HardwareError> {
    let mut p: cs::CUpti_Device_GetChipName_Params = params();
    p.deviceIndex = ordinal;
    // SAFETY: valid parameters.
    let r = unsafe { api.cuptiDeviceGetChipName(&mut p) };
    check(api, "cuptiDeviceGetChipName", r)?;
    // SAFETY: null or a static NUL-terminated string of CUPTI's.
    Ok(unsafe { copy_str(p.pChipName) })
}

/// The counter availability image of context `ctx`: which counters the
/// device makes available now.
pub(super) fn counter_availability(
    api: &cs::Cupti,
    ctx: cs::CUcontext,
) -> Result<Vec<u8>, HardwareError> {
    let mut p: cs::CUpti_Profiler_GetCounterAvailability_Params = params();
    p.ctx = ctx;
    // SAFETY: valid parameters; a null image asks for the size.
    let r = unsafe { api.cuptiProfilerGetCounterAvailability(&mut p) };
    check(api, "cuptiProfilerGetCounterAvailability", r)?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    p.counterAvailabilityImageSize = image.len();
    // SAFETY: `image` holds the size CUPTI asked for.
    let r = unsafe { api.cuptiProfilerGetCounterAvailability(&mut p) };
    check(api, "cuptiProfilerGetCounterAvailability", r)?;
    image.truncate(p.counterAvailabilityImageSize);
    Ok(image)
}

/// The PM-sampling counter availability image of device ordinal `ordinal`:
/// which counters PM sampling may use there now (it may fail while a
/// profiling or sampling session is active on the device).
pub(super) fn pm_counter_availability(
    api: &cs::Cupti,
    ordinal: usize,
) -> Result<Vec<u8>, HardwareError> {
    let mut p: cs::CUpti_PmSampling_GetCounterAvailability_Params = params();
    p.deviceIndex = ordinal;
    // SAFETY: valid parameters; a null image asks for the size.
    let r = unsafe { api.cuptiPmSamplingGetCounterAvailability(&mut p) };
    check(api, "cuptiPmSamplingGetCounterAvailability", r)?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    p.counterAvailabilityImageSize = image.len();
    // SAFETY: `image` holds the size CUPTI asked for.
    let r = unsafe { api.cuptiPmSamplingGetCounterAvailability(&mut p) };
    check(api, "cuptiPmSamplingGetCounterAvailability", r)?;
    image.truncate(p.counterAvailabilityImageSize);
    Ok(image)
}
