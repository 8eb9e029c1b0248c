//! The PTX kernels gpu-counters launches, as text the driver JIT-compiles
//! (no NVRTC, no nvcc at build time), and their launches.
//!
//! They read `%globaltimer`, the GPU's 64-bit nanosecond timer, into
//! host-mapped memory. A timestamp is one 64-bit store: `%globaltimer` is
//! never 0, so a value word that is not 0 is its own availability (the
//! host zeroes it before the sample is written again), and no fence is
//! needed, just as a raw one-store timestamp kernel has none. The other
//! kernels write a value then an availability word (1), with a
//! system-scope fence between them so that the CPU never sees the word
//! before the value: their values may be 0.

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

/// `gc_timestamp(slot)`: `slot[0] = %globaltimer` (nothing else).
/// `gc_timer_step(slot)`: waits for `%globaltimer` to change twice and
/// writes the second change's size, then `slot[1] = 1`.
/// `gc_store(slot, value)`: `slot[0] = value`, then `slot[1] = 1`.
/// `gc_calibrate(flag, out)`: `out[2] = 1` (started), spin until `*flag` is
/// non-zero, then `out[0] = %globaltimer`, then `out[1] = 1`.
/// `gc_probe(out)`: `out[0] = %globaltimer` as its first instruction,
/// `out[1] = %globaltimer` as its last read, then `out[2] = 1`: the reads a
/// CUPTI kernel record of the same launch must enclose.
pub(crate) const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry gc_timestamp(.param .u64 slot)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [slot];
    mov.u64 %rd2, %globaltimer;
    st.volatile.global.u64 [%rd1], %rd2;
    ret;
}

.visible .entry gc_timer_step(.param .u64 slot)
{
    .reg .b64 %rd<7>;
    .reg .pred %p;
    ld.param.u64 %rd1, [slot];
    mov.u64 %rd2, %globaltimer;
FIRST:
    mov.u64 %rd3, %globaltimer;
    setp.eq.u64 %p, %rd3, %rd2;
    @%p bra FIRST;
SECOND:
    mov.u64 %rd4, %globaltimer;
    setp.eq.u64 %p, %rd4, %rd3;
    @%p bra SECOND;
    sub.u64 %rd5, %rd4, %rd3;
    st.volatile.global.u64 [%rd1], %rd5;
    membar.sys;
    mov.u64 %rd6, 1;
    st.volatile.global.u64 [%rd1+8], %rd6;
    ret;
}

.visible .entry gc_store(.param .u64 slot, .param .u64 value)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [slot];
    ld.param.u64 %rd2, [value];
    st.volatile.global.u64 [%rd1], %rd2;
    membar.sys;
    mov.u64 %rd3, 1;
    st.volatile.global.u64 [%rd1+8], %rd3;
    ret;
}

.visible .entry gc_calibrate(.param .u64 flag, .param .u64 out)
{
    .reg .b64 %rd<6>;
    .reg .pred %p;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd3, 1;
    st.volatile.global.u64 [%rd2+16], %rd3;
    membar.sys;
WAIT:
    ld.volatile.global.u64 %rd4, [%rd1];
    setp.eq.u64 %p, %rd4, 0;
    @%p bra WAIT;
    mov.u64 %rd5, %globaltimer;
    st.volatile.global.u64 [%rd2], %rd5;
    membar.sys;
    st.volatile.global.u64 [%rd2+8], %rd3;
    ret;
}

.visible .entry gc_probe(.param .u64 out)
{
    .reg .b64 %rd<5>;
    mov.u64 %rd2, %globaltimer;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd3, %globaltimer;
    st.volatile.global.u64 [%rd1], %rd2;
    st.volatile.global.u64 [%rd1+8], %rd3;
    membar.sys;
    mov.u64 %rd4, 1;
    st.volatile.global.u64 [%rd1+16], %rd4;
    ret;
}
"#;

/// One thread.
const ONE: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (1, 1, 1),
    shared_mem_bytes: 0,
};

/// Launches `gc_timestamp` on `stream` (or another kernel that takes one
/// address: `gc_timer_step`, `gc_probe`), writing the words at device
/// address `slot`: one for `gc_timestamp`, two for `gc_timer_step`, three
/// for `gc_probe` (see [`launch_probe`]).
///
/// # Safety
///
/// `slot` must be the device address of two `u64`s of host-mapped memory
/// that stay allocated until the launch has run.
pub(crate) unsafe fn launch_timestamp(
    stream: &CudaStream,
    func: &CudaFunction,
    slot: u64,
) -> Result<(), cudarc::driver::DriverError> {
    let mut launch = stream.launch_builder(func);
    launch.arg(&slot);
    // SAFETY: the kernel takes one u64 (a device address), given here; it
    // writes at most the two words there, which the caller keeps allocated.
    unsafe { launch.launch(ONE) }.map(|_| ())
}

/// Launches `gc_probe` on `stream`, writing the three words at device
/// address `out`.
///
/// # Safety
///
/// `out` must be the device address of three `u64`s of host-mapped memory
/// that stay allocated until the launch has run.
#[cfg(feature = "cupti")]
pub(crate) unsafe fn launch_probe(
    stream: &CudaStream,
    func: &CudaFunction,
    out: u64,
) -> Result<(), cudarc::driver::DriverError> {
    // SAFETY: the caller's promise is launch_timestamp's (for three words).
    unsafe { launch_timestamp(stream, func, out) }
}

/// Launches `gc_store` on `stream`: `value` is written at device address
/// `slot` once the stream reaches it.
///
/// # Safety
///
/// As [`launch_timestamp`].
pub(crate) unsafe fn launch_store(
    stream: &CudaStream,
    func: &CudaFunction,
    slot: u64,
    value: u64,
) -> Result<(), cudarc::driver::DriverError> {
    let mut launch = stream.launch_builder(func);
    launch.arg(&slot).arg(&value);
    // SAFETY: the kernel takes two u64s (a device address and a value),
    // given here; it writes only the two words at `slot`, which the caller
    // keeps allocated.
    unsafe { launch.launch(ONE) }.map(|_| ())
}

/// Launches `gc_calibrate` on `stream`.
///
/// # Safety
///
/// `flag` must be the device address of one `u64`, and `out` of three, of
/// host-mapped memory that stays allocated until the launch has run; the
/// kernel spins until `*flag` is non-zero, so the caller must set it.
pub(crate) unsafe fn launch_calibrate(
    stream: &CudaStream,
    func: &CudaFunction,
    flag: u64,
    out: u64,
) -> Result<(), cudarc::driver::DriverError> {
    let mut launch = stream.launch_builder(func);
    launch.arg(&flag).arg(&out);
    // SAFETY: the kernel takes two u64 device addresses, given here; it
    // reads `flag` and writes the three words at `out`, which the caller
    // keeps allocated.
    unsafe { launch.launch(ONE) }.map(|_| ())
}
