//! The CUDA backend with the caller's own work: pass attachments around
//! the caller's kernels, and statistics that count the caller's launches
//! and graph kernels exactly. Without a CUDA driver (CI) each test prints
//! one line saying it skipped; on a machine with one they all run.

mod common;

use common::{device, timestamps};
use gpu_counters_cuda::Device;
use gpu_counters_hal::{
    CommonCounterSet, CounterSampleBufferDescriptor, SampleStatus, TimestampGranularity,
    COUNTER_ERROR_VALUE,
};

/// The `busy` kernel of [`BUSY_PTX`], launched through cudarc.
struct Busy {
    f: cudarc::driver::CudaFunction,
    _module: std::sync::Arc<cudarc::driver::CudaModule>,
}

impl Busy {
    fn new(d: &Device) -> Self {
        let module = d
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(BUSY_PTX))
            .unwrap();
        let f = module.load_function("busy").unwrap();
        Self { f, _module: module }
    }

    /// `busy` with `grid` blocks of `block` threads on the device's stream.
    fn launch(&self, d: &Device, grid: u32, block: u32) {
        use cudarc::driver::{LaunchConfig, PushKernelArg};
        let n = 10u32;
        let mut l = d.stream().launch_builder(&self.f);
        l.arg(&n);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `busy` takes one u32, given; it touches no memory.
        unsafe { l.launch(cfg) }.unwrap();
    }
}

/// A kernel of the caller's: `n` iterations of busy work by one thread.
const BUSY_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry busy(.param .u32 n)
{
    .reg .b32 %r<3>;
    .reg .pred %p;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, %r1;
    @%p bra LOOP;
    ret;
}
"#;

/// Pass attachments bracket the caller's kernels: the start sample before
/// them, the end one after; bad attachments are refused before anything is
/// sampled.
#[test]
fn pass_attachments_bracket_the_callers_kernels() {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    use gpu_counters_cuda::PassAttachment;
    let Some(d) = device("pass_attachments_bracket_the_callers_kernels") else {
        return;
    };
    let busy = Busy::new(&d);
    let buffer = timestamps(&d, 4);
    let mut rec = d.recorder();
    let attach = |start, end| PassAttachment {
        sample_buffer: &buffer,
        start_of_encoder_sample_index: start,
        end_of_encoder_sample_index: end,
    };
    for (bad, what) in [
        (vec![attach(Some(0), Some(0))], "attached twice"),
        (vec![attach(Some(0), Some(4))], "out of range"),
        (
            vec![attach(Some(0), None), attach(Some(0), None)],
            "attached twice",
        ),
    ] {
        let e = rec.begin_compute_pass(&bad).err().expect(what);
        assert!(e.invalid().is_some(), "{what}: {e}");
    }
    {
        let pass = rec.begin_compute_pass(&[attach(Some(0), Some(1))]).unwrap();
        let n = 100_000u32;
        let mut launch = pass.stream().launch_builder(&busy.f);
        launch.arg(&n);
        // SAFETY: `busy` takes one u32, given; it touches no memory.
        unsafe { launch.launch(LaunchConfig::for_num_elems(1)) }.unwrap();
        pass.end().unwrap();
    }
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::NotWritten
        ],
        "only the good pass sampled"
    );
    let t = r.timestamps().unwrap();
    assert!(t[0].timestamp < t[1].timestamp, "{t:?}");
}

/// Statistics count exactly the caller's launches between two samples of a
/// recorder (grid × block threads each), not gpu-counters' own kernels;
/// samples of two recorders are not comparable.
#[test]
fn statistics_count_the_callers_launches_exactly() {
    use gpu_counters_hal::SampleValue;
    let Some(d) = device("statistics_count_the_callers_launches_exactly") else {
        return;
    };
    if let Some(why) = d.statistics_unavailable() {
        eprintln!("skipped statistics_count_the_callers_launches_exactly: {why}");
        return;
    }
    let busy = Busy::new(&d);
    let launch = |grid: u32, block: u32| busy.launch(&d, grid, block);
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "statistics",
            4,
        ))
        .unwrap();
    let stamps = timestamps(&d, 1);
    let mut rec = d.recorder();
    rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
        .unwrap();
    launch(3, 64);
    rec.sample_counters(&stamps, 0, TimestampGranularity::Precise)
        .unwrap();
    launch(5, 32);
    rec.sample_counters(&stats, 1, TimestampGranularity::Precise)
        .unwrap();
    launch(7, 1);
    rec.sample_counters(&stats, 2, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let mut other = d.recorder();
    other
        .sample_counters(&stats, 3, TimestampGranularity::Precise)
        .unwrap();
    d.submit(other).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..4).unwrap();
    assert!(
        r.statuses().iter().all(|s| *s == SampleStatus::Written),
        "{:?}",
        r.statuses()
    );
    let between = |a, b| match r.statistics_between(a, b).unwrap() {
        SampleValue::Value(v) => Some(v),
        _ => None,
    };
    let v = between(0, 1).expect("comparable");
    assert_eq!(v.compute_kernel_invocations, 3 * 64 + 5 * 32);
    assert_eq!(v.vertex_invocations, COUNTER_ERROR_VALUE);
    assert_eq!(between(1, 2).unwrap().compute_kernel_invocations, 7);
    assert_eq!(
        between(0, 2).unwrap().compute_kernel_invocations,
        3 * 64 + 5 * 32 + 7
    );
    assert_eq!(between(2, 3), None, "two recorders' samples compared");
}

/// Statistics count the kernels of a CUDA graph launch exactly, from the
/// graph's nodes at instantiation (a child graph's included), and stop
/// counting (not comparable, never a stale number) once the instance is
/// changed.
#[test]
fn statistics_count_graph_kernels_until_the_instance_changes() {
    use cudarc::driver::sys;
    use gpu_counters_hal::SampleValue;
    let test = "statistics_count_graph_kernels_until_the_instance_changes";
    let Some(d) = device(test) else {
        return;
    };
    if let Some(why) = d.statistics_unavailable() {
        eprintln!("skipped {test}: {why}");
        return;
    }
    let busy = Busy::new(&d);
    let launch = |grid: u32, block: u32| busy.launch(&d, grid, block);
    let stream = d.stream().cu_stream();
    d.context().bind_to_thread().unwrap();
    // Captures what `f` launches on the stream into a graph.
    let capture = |f: &dyn Fn()| {
        let mut graph = std::ptr::null_mut();
        // SAFETY: a valid stream of the bound context; the capture ends
        // here, and the graph is destroyed at the end of the test.
        unsafe {
            let r = sys::cuStreamBeginCapture_v2(
                stream,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            );
            assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
            f();
            assert_eq!(
                sys::cuStreamEndCapture(stream, &mut graph),
                sys::CUresult::CUDA_SUCCESS
            );
        }
        graph
    };
    let graph = capture(&|| {
        launch(3, 64);
        launch(5, 32);
    });
    let child = capture(&|| launch(2, 16));
    let mut exec = std::ptr::null_mut();
    let mut child_node = std::ptr::null_mut();
    // SAFETY: valid graphs and out-pointers; the instance and the graphs
    // are destroyed at the end, after the stream finished with them.
    unsafe {
        assert_eq!(
            sys::cuGraphAddChildGraphNode(&mut child_node, graph, std::ptr::null(), 0, child),
            sys::CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            sys::CUresult::CUDA_SUCCESS
        );
    }
    let graph_launch = || {
        // SAFETY: the instance and the stream are valid.
        let r = unsafe { sys::cuGraphLaunch(exec, stream) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    };
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "statistics",
            5,
        ))
        .unwrap();
    let mut rec = d.recorder();
    rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
        .unwrap();
    graph_launch();
    rec.sample_counters(&stats, 1, TimestampGranularity::Precise)
        .unwrap();
    launch(7, 1);
    rec.sample_counters(&stats, 2, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    // One kernel node of the instance gets a grid of 1: from here its
    // launches are not counted.
    let mut nodes = [std::ptr::null_mut(); 3];
    let mut n = nodes.len();
    // SAFETY: `nodes` holds 3 entries (the graph has 3 nodes: two kernels
    // and the child graph); a node is changed in the instance only.
    unsafe {
        assert_eq!(
            sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut n),
            sys::CUresult::CUDA_SUCCESS
        );
        let kernel = nodes[..n]
            .iter()
            .copied()
            .find(|&node| node != child_node)
            .unwrap();
        let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
        assert_eq!(
            sys::cuGraphKernelNodeGetParams_v2(kernel, &mut p),
            sys::CUresult::CUDA_SUCCESS
        );
        p.gridDimX = 1;
        assert_eq!(
            sys::cuGraphExecKernelNodeSetParams_v2(exec, kernel, &p),
            sys::CUresult::CUDA_SUCCESS
        );
    }
    let mut rec = d.recorder();
    rec.sample_counters(&stats, 3, TimestampGranularity::Precise)
        .unwrap();
    graph_launch();
    rec.sample_counters(&stats, 4, TimestampGranularity::Precise)
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..5).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
    let between = |a, b| r.statistics_between(a, b).unwrap();
    let count = |a, b| match between(a, b) {
        SampleValue::Value(v) => v.compute_kernel_invocations,
        other => panic!("{a}..{b}: {other:?}"),
    };
    assert_eq!(count(0, 1), 3 * 64 + 5 * 32 + 2 * 16);
    assert_eq!(count(1, 2), 7);
    assert_eq!(count(0, 2), 3 * 64 + 5 * 32 + 2 * 16 + 7);
    assert!(
        matches!(between(3, 4), SampleValue::NotComparable),
        "{:?}",
        between(3, 4)
    );
    // SAFETY: the stream finished with them (`wait` above).
    unsafe {
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
        sys::cuGraphDestroy(child);
    }
}
