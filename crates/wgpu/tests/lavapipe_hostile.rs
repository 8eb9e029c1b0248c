//! The wgpu backend on lavapipe, through wgpu's Vulkan backend, with wgpu's
//! validation (and the Khronos validation layer where installed) on: any
//! validation error captured fails the test.
//!
//! Hostile use: leaked guards, other devices' objects, and what a caller
//! hands out and never uses.

mod common;

use common::*;

/// The label an [`InvalidInput::EncoderState`] error names between
/// backquotes, for the errors of a leaked pass.
fn leaked_pass_label(e: &Error) -> String {
    match e.invalid() {
        Some(InvalidInput::EncoderState(m)) => m
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("no label in {m}"))
            .to_string(),
        other => panic!("expected EncoderState naming a leaked pass, got {other:?} ({e})"),
    }
}

/// What an [`InvalidInput::ForeignObject`] error names.
fn foreign(e: &Error) -> &'static str {
    match e.invalid() {
        Some(InvalidInput::ForeignObject { what }) => what,
        other => panic!("expected ForeignObject, got {other:?} ({e})"),
    }
}

/// The hal error inside a profiler error.
fn counters(e: gpu_counters_profiler::ProfilerError) -> Error {
    match e {
        gpu_counters_profiler::ProfilerError::Counters(e) => e,
        other => panic!("expected a counters error, got {other:?}"),
    }
}

/// An 8×8 render target of `d`.
fn target(d: &Device) -> wgpu::TextureView {
    d.device()
        .create_texture(&wgpu::TextureDescriptor {
            label: Some("target"),
            size: wgpu::Extent3d {
                width: 8,
                height: 8,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        })
        .create_view(&Default::default())
}

/// A render pass descriptor labelled `label` clearing `view`.
fn render_desc<'a>(
    label: &'a str,
    attachments: &'a [Option<wgpu::RenderPassColorAttachment<'a>>],
) -> wgpu::RenderPassDescriptor<'a> {
    wgpu::RenderPassDescriptor {
        label: Some(label),
        color_attachments: attachments,
        ..Default::default()
    }
}

fn clear(view: &wgpu::TextureView) -> [Option<wgpu::RenderPassColorAttachment<'_>>; 1] {
    [Some(wgpu::RenderPassColorAttachment {
        view,
        depth_slice: None,
        resolve_target: None,
        ops: wgpu::Operations {
            load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
            store: wgpu::StoreOp::Store,
        },
    })]
}

/// The guards a wgpu recorder hands out, for the leak tests.
#[derive(Debug, Clone, Copy)]
enum Guard {
    ComputeStatistics,
    RenderStatistics,
}

/// Every guard kind leaked (`mem::forget`), with the profiler's statistics
/// off and on (scopes timed by a pass's own writes are
/// `gpu_counters::wgpu::Profiler`'s, tested in the facade crate): the recorder refuses every later pass and sample with a
/// typed error naming the leaked pass (nothing reaches wgpu's locked
/// encoder), `encoder()` still works without a wgpu error, submit refuses
/// the recording naming the pass, its samples resolve NotWritten (never
/// wgpu's 0), a statistics pass's samples can be written again at once, and
/// the frame is collected with the leaked pass's scope counted as
/// failed for the scope refused after the leak.
#[test]
fn every_leaked_guard_is_refused_at_submit_and_never_reads_zero() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let counts = d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY);
    let view = target(d);
    let attachments = clear(&view);
    let ts = timestamps(d, 4);
    for guard in [Guard::ComputeStatistics, Guard::RenderStatistics] {
        for statistics in [false, true] {
            if !counts {
                eprintln!("{guard:?} skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
                continue;
            }
            let stats = Some(statistics_buffer(d, 4));
            let profiler = Profiler::new(
                d,
                ProfilerOptions {
                    statistics,
                    ..Default::default()
                },
            )
            .unwrap();
            let frame = profiler.begin_frame().unwrap();
            let mut rec = d.recorder(Some("leaks a guard"));
            let label = format!("leaked {guard:?}");
            let desc = wgpu::ComputePassDescriptor {
                label: Some(&label),
                timestamp_writes: None,
            };
            match guard {
                Guard::ComputeStatistics => std::mem::forget(
                    rec.begin_compute_pass_with_statistics(&desc, stats.as_ref().unwrap(), 0, 1)
                        .unwrap(),
                ),
                Guard::RenderStatistics => std::mem::forget(
                    rec.begin_render_pass_with_statistics(
                        &render_desc(&label, &attachments),
                        stats.as_ref().unwrap(),
                        0,
                        1,
                    )
                    .unwrap(),
                ),
            }
            let case = format!("{guard:?}, statistics {statistics}");
            // Every later pass or sample on the recorder: refused, naming it.
            let refused = [
                rec.compute_pass_timestamp_writes(&ts, Some(2), Some(3))
                    .err(),
                rec.render_pass_timestamp_writes(&ts, Some(2), Some(3))
                    .err(),
                rec.sample_counters(&ts, 2, TimestampGranularity::Precise)
                    .err(),
                frame
                    .scope(&mut rec, "scope after", PassKind::Scope)
                    .err()
                    .map(counters),
            ];
            for (k, e) in refused.into_iter().enumerate() {
                let e = e.unwrap_or_else(|| panic!("{case}: call {k} after the leak accepted"));
                assert_eq!(leaked_pass_label(&e), label, "{case}: call {k}: {e}");
            }
            if let Some(stats) = &stats {
                let e = rec
                    .begin_compute_pass_with_statistics(&desc, stats, 2, 3)
                    .err()
                    .expect("a counted pass after the leak");
                assert_eq!(leaked_pass_label(&e), label, "{case}: {e}");
            }
            // The caller's own commands: no wgpu error, no panic.
            drop(
                rec.encoder()
                    .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
            );
            let e = d
                .submit(rec)
                .err()
                .unwrap_or_else(|| panic!("{case}: submitted with a leaked pass"));
            assert_eq!(leaked_pass_label(&e), label, "{case}: {e}");
            if let Some(stats) = &stats {
                {
                    let r = stats.resolve_counter_range(0..2).unwrap();
                    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2], "{case}");
                    for s in r.statistics().unwrap() {
                        assert_eq!(s.compute_kernel_invocations, COUNTER_ERROR_VALUE);
                        assert_eq!(s.vertex_invocations, COUNTER_ERROR_VALUE);
                    }
                    // No longer open: written again at once.
                    let mut again = d.recorder(None);
                    drop(
                        again
                            .begin_compute_pass_with_statistics(&desc, stats, 0, 1)
                            .unwrap(),
                    );
                    d.submit(again).unwrap().wait().unwrap();
                    let r = stats.resolve_counter_range(0..2).unwrap();
                    assert_eq!(r.statuses(), &[SampleStatus::Written; 2], "{case}");
                }
            }
            profiler.end_frame(frame, []).unwrap();
            let frames = profiler
                .wait_collect_all(std::time::Duration::from_secs(10))
                .unwrap();
            let f = &frames[0];
            assert!(f.scopes.is_empty(), "{case}: {:?}", f.scopes);
            // The scope refused after the leak: failed.
            assert_eq!(f.drops.abandoned, 0, "{case}: {:?}", f.drops);
            assert_eq!(f.drops.failed, 1, "{case}: {:?}", f.drops);
            assert_eq!(f.dropped_scopes, 1, "{case}");
            gpu.check();
        }
    }
    let r = ts.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
    gpu.check();
}

fn statistics_buffer(d: &Device, n: u32) -> CounterSampleBuffer {
    statistics(d, n)
}

/// A counted pass leaked with `mem::forget` (issue 40, 2): its two samples
/// resolve NotWritten with the error value, never Written with 0
/// invocations; submit refuses the recording naming the pass; the samples
/// are no longer open, so a new recording writes them.
#[test]
fn a_leaked_statistics_pass_never_reads_written_zero() {
    let gpu = gpu();
    let d = &gpu.device;
    if !d
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        eprintln!("skipped: the adapter lacks PIPELINE_STATISTICS_QUERY");
        return;
    }
    let stats = statistics(d, 2);
    let desc = wgpu::ComputePassDescriptor {
        label: Some("leaked counted pass"),
        timestamp_writes: None,
    };
    let mut rec = d.recorder(None);
    std::mem::forget(
        rec.begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap(),
    );
    let submitted = d.submit(rec);
    if let Ok(s) = &submitted {
        let _ = s.wait();
    }
    let r = stats.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    for s in r.statistics().unwrap() {
        assert_eq!(s.compute_kernel_invocations, COUNTER_ERROR_VALUE);
    }
    let e = submitted.expect_err("submitted with a leaked pass");
    assert_eq!(leaked_pass_label(&e), "leaked counted pass", "{e}");
    let mut again = d.recorder(None);
    drop(
        again
            .begin_compute_pass_with_statistics(&desc, &stats, 0, 1)
            .unwrap(),
    );
    d.submit(again).unwrap().wait().unwrap();
    let r = stats.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Written; 2]);
    assert_eq!(r.statistics().unwrap()[0].compute_kernel_invocations, 0);
    gpu.check();
}

/// A caller's own wgpu pass, begun on the recorder's encoder and leaked:
/// wgpu refuses to finish the encoder, and submit turns that into a typed
/// error (caught in an error scope, not handed to the device's error
/// handler); the recording's samples resolve NotWritten.
#[test]
fn a_callers_leaked_wgpu_pass_is_a_typed_error_at_submit() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 2);
    let mut rec = d.recorder(None);
    timed_pass(&mut rec, &buffer, 0).unwrap();
    std::mem::forget(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    let e = d
        .submit(rec)
        .expect_err("submitted with a leaked wgpu pass");
    assert!(
        matches!(e.invalid(), Some(InvalidInput::EncoderState(_))),
        "{e}"
    );
    let r = buffer.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    gpu.check();
}

/// A device with wgpu's default error handler (a wgpu error panics).
fn gpu_default_handler() -> Device {
    let adapter = shared_adapter();
    let features = adapter.features() & wanted();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("default handler"),
        required_features: features,
        ..Default::default()
    }))
    .expect("request_device");
    Device::new(device, queue, adapter.get_info())
}

/// Under wgpu's default error handler, which panics on any wgpu error: a
/// leaked counted pass and a caller's leaked wgpu pass are each a typed
/// error from submit, never a panic.
#[test]
fn leaked_passes_under_the_default_handler_are_errors_not_panics() {
    let d = gpu_default_handler();
    if !d.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("skipped: the adapter lacks TIMESTAMP_QUERY");
        return;
    }
    if d.features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY)
    {
        let stats = statistics(&d, 2);
        let mut rec = d.recorder(None);
        std::mem::forget(
            rec.begin_compute_pass_with_statistics(
                &wgpu::ComputePassDescriptor::default(),
                &stats,
                0,
                1,
            )
            .unwrap(),
        );
        let e = d.submit(rec).expect_err("submitted with a leaked pass");
        assert_eq!(leaked_pass_label(&e), "compute pass", "{e}");
    }
    let mut rec = d.recorder(None);
    std::mem::forget(
        rec.encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor::default()),
    );
    assert!(d.submit(rec).is_err());
}

/// Two devices on the one adapter: every call that takes two objects
/// refuses the other device's with `ForeignObject` naming it, before
/// anything reaches wgpu (issue 40, 3): B's sample buffer, heap and
/// statistics buffer on A's recorder (between passes, as pass timestamp
/// writes, counted passes, beside blocks A's recorder claimed), B's
/// recorder submitted through A, and B's profiler frame with A's recorder.
/// B's samples never read Written (B's statistics never Written 0), and A's
/// recording still submits and writes exactly its own samples.
#[test]
fn objects_of_another_device_are_refused() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_hal::CounterHeapDescriptor;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let (Some(a), Some(b)) = (timestamp_gpu(), timestamp_gpu()) else {
        return;
    };
    let (da, db) = (&a.device, &b.device);
    let encoder_timestamps = da
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let counts = da
        .features()
        .contains(wgpu::Features::PIPELINE_STATISTICS_QUERY);
    let (ts_a, ts_b) = (timestamps(da, 8), timestamps(db, 8));
    let heap_b = db
        .make_counter_heap(&CounterHeapDescriptor::timestamp(8))
        .unwrap();
    let view = target(da);
    let attachments = clear(&view);
    let mut rec = da.recorder(Some("A"));
    // A's own writes first: the recorder holds claims on A's buffer.
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    timed_pass(&mut rec, &ts_a, 2).unwrap();
    let sample_buffer = "counter sample buffer";
    assert_eq!(
        foreign(
            &rec.compute_pass_timestamp_writes(&ts_b, Some(4), Some(5))
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.render_pass_timestamp_writes(&ts_b, Some(4), None)
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.sample_counters(&ts_b, 4, TimestampGranularity::Precise)
                .unwrap_err()
        ),
        sample_buffer
    );
    assert_eq!(
        foreign(
            &rec.write_timestamp(TimestampGranularity::Precise, &heap_b, 4)
                .unwrap_err()
        ),
        "counter heap"
    );
    if counts {
        let stats_b = statistics(db, 4);
        let desc = wgpu::ComputePassDescriptor::default();
        assert_eq!(
            foreign(
                &rec.begin_compute_pass_with_statistics(&desc, &stats_b, 0, 1)
                    .err()
                    .unwrap()
            ),
            sample_buffer
        );
        assert_eq!(
            foreign(
                &rec.begin_render_pass_with_statistics(
                    &render_desc("foreign statistics", &attachments),
                    &stats_b,
                    2,
                    3
                )
                .err()
                .unwrap()
            ),
            sample_buffer
        );
        let r = stats_b.resolve_counter_range(0..4).unwrap();
        assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 4]);
    }
    // B's profiler frames on A's recorder, statistics off and on.
    for statistics in [false, true] {
        if statistics && !counts {
            continue;
        }
        let profiler_b = Profiler::new(
            db,
            ProfilerOptions {
                statistics,
                ..Default::default()
            },
        )
        .unwrap();
        let frame_b = profiler_b.begin_frame().unwrap();
        if encoder_timestamps {
            assert_eq!(
                foreign(&counters(
                    frame_b
                        .scope(&mut rec, "foreign frame", PassKind::Scope)
                        .unwrap_err()
                )),
                "recorder"
            );
        }
        profiler_b.end_frame(frame_b, []).unwrap();
        let frames = profiler_b
            .wait_collect_all(std::time::Duration::from_secs(10))
            .unwrap();
        assert!(frames[0].scopes.is_empty());
        assert_eq!(frames[0].dropped_scopes, 0, "{:?}", frames[0].drops);
    }
    // B's recorder through A.
    let mut rec_b = db.recorder(Some("B"));
    timed_pass(&mut rec_b, &ts_b, 6).unwrap();
    assert_eq!(foreign(&da.submit(rec_b).unwrap_err()), "recorder");
    // A's recording is untouched by all of it.
    da.submit(rec).unwrap().wait().unwrap();
    let r = ts_a.resolve_counter_range(0..8).unwrap();
    let mut expected = [SampleStatus::NotWritten; 8];
    expected[..4].fill(SampleStatus::Written);
    assert_eq!(r.statuses(), &expected);
    let r = ts_b.resolve_counter_range(0..8).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 8]);
    let r = heap_b.resolve_counter_range(0..8).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 8]);
    a.check();
    b.check();
}

/// A's recorder over B's encoder (`Device::wrap`): wgpu 30 cannot tell
/// an encoder's device, so `wrap` cannot check it; submit does. Without A's
/// samples in it, nothing reaches either device as an error; with one, the
/// sample resolves NotWritten, and B's device reports A's query set in its
/// encoder when the encoder is finished (wgpu's own validation, on B).
#[test]
fn another_devices_encoder_is_refused_at_submit() {
    let (Some(a), Some(b)) = (timestamp_gpu(), timestamp_gpu()) else {
        return;
    };
    let (da, db) = (&a.device, &b.device);
    let rec = da.wrap(
        db.device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
    );
    assert_eq!(foreign(&da.submit(rec).unwrap_err()), "command encoder");
    a.check();
    b.check();
    let ts_a = timestamps(da, 2);
    let mut rec = da.wrap(
        db.device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
    );
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    let submitted = da.submit(rec);
    if let Ok(s) = &submitted {
        let _ = s.wait();
    }
    let r = ts_a.resolve_counter_range(0..2).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::NotWritten; 2]);
    assert_eq!(foreign(&submitted.unwrap_err()), "command encoder");
    a.check();
    let errors = std::mem::take(&mut *b.errors.lock().unwrap());
    assert_eq!(errors.len(), 1, "{errors:?}");
    b.check();
    // A still records and submits.
    let mut rec = da.recorder(None);
    timed_pass(&mut rec, &ts_a, 0).unwrap();
    da.submit(rec).unwrap().wait().unwrap();
    assert!(ts_a.resolve_counter_range(0..2).unwrap().all_written());
    a.check();
}

/// Pass timestamp writes handed out and never used by a pass (issue 40,
/// docs): once their submission completed they resolve NotWritten with
/// the error value (not NotReady forever, never wgpu's 0), beside writes
/// that were used, and the indices can be written again.
#[test]
fn unused_pass_timestamp_writes_resolve_not_written_once_complete() {
    let Some(gpu) = timestamp_gpu() else {
        return;
    };
    let d = &gpu.device;
    let buffer = timestamps(d, 4);
    let mut rec = d.recorder(Some("unused writes"));
    timed_pass(&mut rec, &buffer, 0).unwrap();
    let _unused = rec
        .compute_pass_timestamp_writes(&buffer, Some(2), Some(3))
        .unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    let expected = [
        SampleStatus::Written,
        SampleStatus::Written,
        SampleStatus::NotWritten,
        SampleStatus::NotWritten,
    ];
    let r = buffer.resolve_counter_range(0..4).unwrap();
    assert_eq!(r.statuses(), &expected);
    let t = r.timestamps().unwrap();
    assert_eq!(
        (t[2].timestamp, t[3].timestamp),
        (COUNTER_ERROR_VALUE, COUNTER_ERROR_VALUE)
    );
    let mut once = gpu_counters_hal::ResolvedTimestamps::default();
    buffer.resolve_timestamps_into(0..4, &mut once).unwrap();
    assert_eq!(
        once.get(2),
        Some((COUNTER_ERROR_VALUE, SampleStatus::NotWritten))
    );
    assert_eq!(
        once.get(3),
        Some((COUNTER_ERROR_VALUE, SampleStatus::NotWritten))
    );
    // Written again by a later recording.
    let mut rec = d.recorder(None);
    timed_pass(&mut rec, &buffer, 2).unwrap();
    d.submit(rec).unwrap().wait().unwrap();
    assert!(buffer.resolve_counter_range(0..4).unwrap().all_written());
    gpu.check();
}

/// An encoder-level profiler scope with the profiler's statistics on
/// (issue 40, docs): timed, with `statistics: None` (the recorder says it
/// cannot count there), never a made-up 0 and never dropped; the profiled
/// pass inside it counts its invocations exactly.
#[test]
fn an_encoder_scope_with_statistics_is_timed_without_them() {
    use gpu_counters_hal::timeline::PassKind;
    use gpu_counters_profiler::{Profiler, ProfilerOptions};
    let gpu = gpu();
    let d = &gpu.device;
    let needed = wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::PIPELINE_STATISTICS_QUERY;
    if !d.features().contains(needed) {
        eprintln!("skipped: the adapter lacks {needed:?}");
        return;
    }
    let profiler = Profiler::new(
        d,
        ProfilerOptions {
            statistics: true,
            ..Default::default()
        },
    )
    .unwrap();
    let raw = d.device();
    let module = raw.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("counted kernel"),
        source: wgpu::ShaderSource::Wgsl(kernel(4).into()),
    });
    let pipeline = raw.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("counted pipeline"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let data = raw.create_buffer(&wgpu::BufferDescriptor {
        label: Some("counted data"),
        size: 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let bind = raw.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: data.as_entire_binding(),
        }],
    });
    let frame = profiler.begin_frame().unwrap();
    let mut rec = d.recorder(None);
    assert!(!rec.samples_statistics(), "wgpu counts only inside passes");
    let outer = frame.scope(&mut rec, "encoder", PassKind::Scope).unwrap();
    {
        let mut pass = rec
            .encoder()
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("pass"),
                timestamp_writes: None,
            });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(5, 1, 1);
    }
    outer.end(&mut rec).unwrap();
    let s = d.submit(rec).unwrap();
    profiler.end_frame(frame, [&s]).unwrap();
    s.wait().unwrap();
    let frames = profiler
        .wait_collect_all(std::time::Duration::from_secs(10))
        .unwrap();
    let f = &frames[0];
    assert_eq!(f.dropped_scopes, 0, "{:?}", f.drops);
    assert_eq!(f.scopes.len(), 1);
    assert_eq!(f.scopes[0].label, "encoder");
    assert_eq!(f.scopes[0].statistics, None);
    gpu.check();
}
