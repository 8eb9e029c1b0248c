//! The wgpu backend on lavapipe, through wgpu's Vulkan backend, with wgpu's
//! validation (and the Khronos validation layer where installed) on: any
//! validation error captured fails the test.
//!
//! Timestamps: pass and encoder timestamps, calibration, missing features,
//! the profiler over an encoder, re-recorded samples and unused pass writes.

mod common;

use common::*;

/// A compute pass of a small dispatch with timestamps at `buffer[0]` (start)
/// and `buffer[1]` (end): Written, end >= start, and calibrated inside the
/// CPU window around the submission; index 2, never written, resolves to the
/// error value with NotWritten (not wgpu's 0).
#[test]
fn pass_timestamps_are_written_ordered_and_inside_the_cpu_window() {
    pass_timestamps_inside_the_cpu_window(gpu());
}

/// wgpu's plain `request_device` does not enable
/// `VK_EXT_calibrated_timestamps` (lavapipe has it): calibration falls back
/// to a bracketed submission, and says so.
#[test]
fn without_the_extension_calibration_brackets_a_submission() {
    let gpu = gpu();
    let d = &gpu.device;
    let info = d.info();
    assert_eq!(info.calibration, CalibrationMethod::Bracketing);
    assert_eq!(info.calibration_source, "bracketed submission");
    assert_eq!(d.calibrated_timestamps_extension(), None);
    if d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        let pair = d.sample_timestamps().unwrap();
        eprintln!("bracketed pair: {pair:?}");
        let c = d.calibration().unwrap();
        assert_eq!(c.method(), CalibrationMethod::Bracketing);
    }
    gpu.check();
}

/// Through [`Device::request`] on lavapipe (which has
/// `VK_EXT_calibrated_timestamps`): a calibrated pair naming the extension,
/// CPU times inside the CPU window of the read, and pass timestamps
/// calibrated inside the window around their submission.
#[test]
fn with_the_extension_calibration_is_a_calibrated_pair() {
    let gpu = gpu_opened(|have| have & wanted(), true);
    let d = &gpu.device;
    let info = d.info().clone();
    let Some(ext) = d.calibrated_timestamps_extension() else {
        // The portable build (no `vulkan` feature) never reaches wgpu-hal;
        // with it, lavapipe has the extension, so it must be found.
        assert!(
            !cfg!(feature = "vulkan") || !info.name.contains("llvmpipe"),
            "Device::request did not enable lavapipe's VK_EXT_calibrated_timestamps"
        );
        eprintln!("no calibrated-timestamps extension: calibration brackets a submission");
        assert_eq!(info.calibration, CalibrationMethod::Bracketing);
        assert_eq!(info.calibration_source, "bracketed submission");
        return;
    };
    eprintln!(
        "calibration: {:?} via {}",
        info.calibration, info.calibration_source
    );
    assert_eq!(info.calibration, CalibrationMethod::CalibratedPair);
    assert_eq!(info.calibration_source, ext);
    assert!(ext.ends_with("_calibrated_timestamps"), "{ext}");
    // Lavapipe has the EXT; it is preferred over the KHR.
    if info.name.contains("llvmpipe") {
        assert_eq!(ext, "VK_EXT_calibrated_timestamps");
    }
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped the rest: the adapter lacks wgpu::Features::TIMESTAMP_QUERY");
        return;
    }
    let mut deviations = Vec::new();
    for _ in 0..8 {
        let before = cpu_monotonic_ns();
        let pair = d.sample_timestamps().unwrap();
        let after = cpu_monotonic_ns();
        assert!(
            pair.cpu_ns >= before && pair.cpu_ns <= after,
            "calibrated CPU time {} outside {before}..{after}",
            pair.cpu_ns
        );
        deviations.push(pair.max_deviation_ns);
    }
    eprintln!("calibrated max deviations (ns): {deviations:?}");
    let c = d.calibration().unwrap();
    assert_eq!(c.method(), CalibrationMethod::CalibratedPair);
    pass_timestamps_inside_the_cpu_window(gpu);
}

/// A compute pass's timestamps, calibrated, inside the CPU window around its
/// submission (see the test above for the rest of what is checked).
fn pass_timestamps_inside_the_cpu_window(gpu: Gpu) {
    let d = &gpu.device;
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped: the adapter lacks wgpu::Features::TIMESTAMP_QUERY");
        return;
    }
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("test shader"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("test pipeline"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("test data"),
        size: 4 * 64 * 64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("test bind group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let calibration = d.calibration().unwrap();
    let buffer = timestamps(d, 4);
    let mut rec = d.recorder(Some("test"));
    let writes = rec
        .compute_pass_timestamp_writes(&buffer, Some(0), Some(1))
        .unwrap();
    {
        let mut pass = rec
            .encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("timed pass"),
                timestamp_writes: Some(writes),
            });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(64, 1, 1);
    }
    // Written by the recording, not yet submitted: never a value.
    let before_submit = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(before_submit.statuses()[0], SampleStatus::NotReady);
    assert_eq!(
        before_submit.timestamps().unwrap()[0].timestamp,
        COUNTER_ERROR_VALUE
    );
    let before = cpu_monotonic_ns();
    let submission = d.submit(rec).unwrap();
    let after = submission.wait().unwrap();
    let r = buffer.resolve_counter_range(0..4).unwrap();
    let st = r.statuses();
    let ts = r.timestamps().unwrap();
    assert_eq!(&st[..2], &[SampleStatus::Written, SampleStatus::Written]);
    let (start, end) = (ts[0].timestamp, ts[1].timestamp);
    assert!(end >= start, "end {end} before start {start}");
    for t in [start, end] {
        let c = calibration.to_cpu_ns(t).unwrap();
        eprintln!(
            "{:?}: timestamp at cpu {} ± {} ns, window {before}..{after} ({} ns)",
            calibration.method(),
            c.ns,
            c.error_bound_ns,
            after - before
        );
        assert!(
            c.ns + c.error_bound_ns >= before && c.ns <= after + c.error_bound_ns,
            "timestamp {t} calibrated to {} ± {} outside {before}..{after}",
            c.ns,
            c.error_bound_ns
        );
    }
    // Never written: the error value and NotWritten, not wgpu's 0.
    for i in 2..4 {
        assert_eq!(st[i], SampleStatus::NotWritten);
        assert_eq!(ts[i].timestamp, COUNTER_ERROR_VALUE);
    }
    // A host reset of finished samples is allowed, and forgets them.
    buffer.reset().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// An encoder timestamp between passes with TIMESTAMP_QUERY_INSIDE_ENCODERS.
#[test]
fn encoder_timestamps_between_passes() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY_INSIDE_ENCODERS");
        return;
    }
    let buffer = timestamps(d, 3);
    let mut rec = d.recorder(None);
    rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
        .unwrap();
    rec.sample_counters(&buffer, 2, TimestampGranularity::Relaxed)
        .unwrap();
    let s = d.submit(rec).unwrap();
    s.wait().unwrap();
    let r = buffer.resolve_counter_range(0..3).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::Written
        ]
    );
    let ts = r.timestamps().unwrap();
    assert!(ts[2].timestamp >= ts[0].timestamp);
    assert_eq!(ts[1].timestamp, COUNTER_ERROR_VALUE);
    // A result resolved into again keeps its memory (steady-state resolves
    // allocate nothing), and holds the same.
    let mut into = gpu_counters_hal::ResolvedCounters::default();
    buffer.resolve_counter_range_into(0..3, &mut into).unwrap();
    let at = into.as_bytes().as_ptr();
    buffer.resolve_counter_range_into(0..3, &mut into).unwrap();
    assert_eq!(into.as_bytes().as_ptr(), at, "the result was reallocated");
    assert_eq!(
        (into.as_bytes(), into.statuses()),
        (r.as_bytes(), r.statuses())
    );
    gpu.check();
}

fn unsupported(e: Error) -> String {
    match e {
        Error::Invalid(InvalidInput::Unsupported(m)) => m,
        other => panic!("not a typed Unsupported error: {other:?}"),
    }
}

/// Without the features, typed errors that name them.
#[test]
fn missing_features_are_typed_errors_naming_them() {
    let gpu = gpu_with(|_| wgpu::Features::empty());
    let d = &gpu.device;
    assert!(d.info().counter_sets.is_empty());
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Timestamp,
            "t",
            2,
        ))
        .expect_err("a timestamp buffer without TIMESTAMP_QUERY");
    assert!(unsupported(e).contains("TIMESTAMP_QUERY"));
    let e = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s",
            2,
        ))
        .expect_err("a statistic buffer without PIPELINE_STATISTICS_QUERY");
    assert!(unsupported(e).contains("PIPELINE_STATISTICS_QUERY"));
    assert!(unsupported(d.calibration().unwrap_err()).contains("TIMESTAMP_QUERY"));
    gpu.check();

    // Pass timestamps only: encoder timestamps name the missing feature and
    // say pass timestamp writes still work.
    let gpu = gpu_with(|_| wgpu::Features::TIMESTAMP_QUERY);
    let d = &gpu.device;
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped the encoder part: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(None);
    let m = unsupported(
        rec.sample_counters(&buffer, 0, TimestampGranularity::Precise)
            .unwrap_err(),
    );
    assert!(m.contains("TIMESTAMP_QUERY_INSIDE_ENCODERS") && m.contains("pass timestamp writes"));
    drop(rec);
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// Statistics between passes: a typed error saying why.
#[test]
fn statistics_between_passes_are_a_typed_error() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let stats = d
        .make_counter_sample_buffer(&CounterSampleBufferDescriptor::new(
            CommonCounterSet::Statistic,
            "s",
            2,
        ))
        .unwrap();
    let mut rec = d.recorder(None);
    let m = unsupported(
        rec.sample_counters(&stats, 0, TimestampGranularity::Precise)
            .unwrap_err(),
    );
    assert!(m.contains("inside a pass"), "{m}");
    gpu.check();
}

/// The profiler over encoders, where encoder timestamps are available.
#[test]
fn profiler_over_an_encoder() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY_INSIDE_ENCODERS");
        return;
    }
    let profiler = Profiler::new(d, ProfilerOptions::default()).unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut rec = d.recorder(Some("profiled"));
    let outer = frame.scope(&mut rec, "outer", PassKind::Scope).unwrap();
    let inner = frame.scope(&mut rec, "inner", PassKind::Compute).unwrap();
    drop(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    inner.end(&mut rec).unwrap();
    outer.end(&mut rec).unwrap();
    let before = cpu_monotonic_ns();
    let submission = d.submit(rec).unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    let after = submission.wait().unwrap();
    let frames = profiler
        .wait_collect_all(std::time::Duration::from_secs(10))
        .unwrap();
    assert_eq!(frames.len(), 1);
    let scopes = &frames[0].scopes;
    assert_eq!(scopes.len(), 2);
    for s in scopes {
        assert!(s.start_ns <= s.end_ns, "{s:?}");
        assert_inside_window(s, before, after);
    }
    gpu.check();
}

/// A sample recorded again in a submission not yet seen done is NotReady,
/// never the older value; heap entries invalidate to 0; markers signal once
/// the work before them is done.
#[test]
fn rerecorded_samples_heaps_and_markers() {
    use gpu_counters_hal::CounterHeapDescriptor;
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let record = |d: &Device| {
        let mut rec = d.recorder(None);
        let w = rec
            .compute_pass_timestamp_writes(&buffer, Some(0), None)
            .unwrap();
        drop(
            rec.encoder()
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: Some(w),
                }),
        );
        rec
    };
    d.submit(record(d)).unwrap().wait().unwrap();
    let first = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(first.statuses(), &[SampleStatus::Written]);
    // Recorded again: until its submission is seen done, not the old value.
    let rec = record(d);
    let pending = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(pending.statuses(), &[SampleStatus::NotReady]);
    assert_eq!(
        pending.timestamps().unwrap()[0].timestamp,
        COUNTER_ERROR_VALUE
    );
    let marker = d.make_marker().unwrap();
    let s = d.submit(rec).unwrap();
    d.submit_marker(&marker).unwrap();
    s.wait().unwrap();
    d.wait_idle().unwrap();
    assert!(marker.is_signaled().unwrap());
    marker.reset().unwrap();
    let second = buffer.resolve_counter_range(0..1).unwrap();
    assert_eq!(second.statuses(), &[SampleStatus::Written]);
    assert!(second.timestamps().unwrap()[0].timestamp >= first.timestamps().unwrap()[0].timestamp);

    if d.features()
        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    {
        let heap = d
            .make_counter_heap(&CounterHeapDescriptor::timestamp(3).with_label("frame times"))
            .unwrap();
        assert_eq!(heap.label(), "frame times");
        assert!(format!("{heap:?}").contains("frame times"));
        let mut rec = d.recorder(None);
        let e = rec
            .write_timestamp(TimestampGranularity::Precise, &heap, 3)
            .unwrap_err();
        assert!(e.to_string().contains("`frame times`"), "{e}");
        rec.write_timestamp(TimestampGranularity::Precise, &heap, 1)
            .unwrap();
        d.submit(rec).unwrap().wait().unwrap();
        let r = heap.resolve_counter_range(0..3).unwrap();
        assert_eq!(
            r.statuses(),
            &[
                SampleStatus::NotWritten,
                SampleStatus::Written,
                SampleStatus::NotWritten
            ]
        );
        heap.invalidate_counter_range(1..2).unwrap();
        let r = heap.resolve_counter_range(1..2).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::Invalidated]);
        assert_eq!(r.timestamps().unwrap()[0].timestamp, 0);
    }
    gpu.check();
}

/// Pass timestamp writes handed out and never put in a pass: wgpu reads
/// those queries as 0, which resolve to the error value, never to a
/// plausible 0 marked written.
#[test]
fn unused_pass_timestamp_writes_are_never_a_zero() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(Some("unused writes"));
    let _unused = rec
        .compute_pass_timestamp_writes(&buffer, Some(0), Some(1))
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let r = buffer.resolve_counter_range(0..2).unwrap();
    for (st, t) in r.statuses().iter().zip(r.timestamps().unwrap()) {
        assert_ne!(*st, SampleStatus::Written);
        assert_eq!(t.timestamp, COUNTER_ERROR_VALUE);
    }
    // The profiler's resolve says the same.
    let mut once = gpu_counters_hal::ResolvedTimestamps::default();
    buffer.resolve_timestamps_into(0..2, &mut once).unwrap();
    assert!(!once.all_written());
    for (i, st) in r.statuses().iter().enumerate() {
        assert_eq!(once.get(i), Some((COUNTER_ERROR_VALUE, *st)));
    }
    gpu.check();
}
