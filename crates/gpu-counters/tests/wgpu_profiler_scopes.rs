//! `gpu_counters::wgpu::Profiler`, the drop-in for wgpu-profiler, on
//! lavapipe through wgpu's Vulkan backend, with wgpu's validation and the
//! Khronos validation layer on: any validation error fails the test.
//!
//! Encoder scopes and frames: nesting, dropped and leaked scopes, submissions
//! late or missing, statistics, devices refused, threads.

mod common;

use common::*;

/// The sketch's user code: an encoder scope with a pass-through copy, a
/// nested scoped pass and a nested scope with a pass, submitted by the
/// application; every scope inside the submission's CPU window and its
/// parent, with the tree in wgpu-profiler's shape.
#[test]
fn nested_scopes_inside_their_cpu_window() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("frame");
    {
        let mut scope = profiler.scope("frame", &mut encoder);
        scope.copy_buffer_to_buffer(&app.data, 0, &app.scratch, 0, 1024);
        {
            let mut pass = scope.scoped_compute_pass("fill");
            app.dispatch(&mut pass, 16);
        }
        let mut inner = scope.scope("inner");
        let mut pass = inner.scoped_compute_pass("again");
        app.dispatch(&mut pass, 4);
    }
    let before = cpu_monotonic_ns();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!(labels(f), ["frame", "fill", "inner", "again"]);
    let parents: Vec<_> = f.scopes().iter().map(|s| s.parent).collect();
    assert_eq!(parents, [None, Some(0), Some(0), Some(2)]);
    assert_eq!(f.result.drops.total(), 0);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (1, 0));
    assert!(f.ended_by_panic.is_empty());
    assert_inside(f.scopes(), before, after);
    let tree = f.to_timer_queries();
    assert_eq!(tree.len(), 1);
    assert_eq!(tree[0].label, "frame");
    let nested: Vec<_> = tree[0].nested_queries.iter().map(|q| &q.label).collect();
    assert_eq!(nested, ["fill", "inner"]);
    assert_eq!(tree[0].nested_queries[1].nested_queries[0].label, "again");
    assert!(tree[0].time.start <= tree[0].time.end);
    app.check();
}

/// A scope dropped without `end` ends (its result is there); `end` ends
/// one too, with no error.
#[test]
fn a_dropped_scope_ends() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("drops");
    let scope = profiler.scope("dropped", &mut encoder);
    drop(scope);
    let scope = profiler.scope("ended", &mut encoder);
    scope.end().expect("end");
    let pass = profiler.scoped_compute_pass("pass dropped", &mut encoder);
    drop(pass);
    let before = cpu_monotonic_ns();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    assert_eq!(labels(&frames[0]), ["dropped", "ended", "pass dropped"]);
    assert_eq!(frames[0].result.drops.total(), 0);
    assert_inside(frames[0].scopes(), before, after);
    app.check();
}

/// A scope dropped while its thread panics is ended and marked; its
/// parent, dropped in the same unwinding, too.
#[test]
fn a_scope_dropped_during_a_panic_is_marked() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("panics");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut outer = profiler.scope("outer", &mut encoder);
        let _inner = outer.scope("inner");
        panic!("the application panics while recording");
    }));
    assert!(caught.is_err());
    let calm = profiler.scope("after", &mut encoder);
    drop(calm);
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let f = &frames[0];
    assert_eq!(labels(f), ["outer", "inner", "after"]);
    assert_eq!(f.ended_by_panic, [0, 1]);
    assert_eq!(f.result.drops.total(), 0);
    app.check();
}

/// Two encoders, each with a root scope, submitted in one `queue.submit`
/// in the reverse of their recording order, then in two submits reversed:
/// every scope reported, inside the CPU window.
#[test]
fn two_encoders_in_one_submit_and_reversed() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    for split in [false, true] {
        let mut a = app.encoder("a");
        let mut b = app.encoder("b");
        {
            let mut s = profiler.scope("a", &mut a);
            let mut p = s.scoped_compute_pass("a pass");
            app.dispatch(&mut p, 2);
        }
        {
            let mut s = profiler.scope("b", &mut b);
            let mut p = s.scoped_compute_pass("b pass");
            app.dispatch(&mut p, 2);
        }
        let before = cpu_monotonic_ns();
        if split {
            app.queue.submit([b.finish()]);
            app.queue.submit([a.finish()]);
        } else {
            app.queue.submit([b.finish(), a.finish()]);
        }
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        let after = cpu_monotonic_ns();
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        assert_eq!(labels(f), ["a", "a pass", "b", "b pass"]);
        assert_eq!((f.root_scopes, f.root_scopes_not_run), (2, 0));
        assert_eq!(f.result.drops.total(), 0);
        assert_inside(f.scopes(), before, after);
        // Submitted first, b ran first.
        assert!(f.scopes()[2].end_ns <= f.scopes()[0].start_ns + 2 * f.scopes()[0].error_bound_ns);
    }
    app.check();
}

/// A frame with no scope, and a frame whose encoders were never
/// submitted, are reported as such: nothing ran, every scope counted.
#[test]
fn a_frame_with_no_submission_is_reported() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    profiler.end_frame().unwrap();
    let mut encoder = app.encoder("never submitted");
    {
        let mut s = profiler.scope("unsubmitted", &mut encoder);
        let mut p = s.scoped_compute_pass("unsubmitted pass");
        app.dispatch(&mut p, 1);
    }
    drop(encoder);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].index() + 1, frames[1].index());
    assert!(frames[0].nothing_ran());
    assert_eq!(frames[0].root_scopes, 0);
    assert!(frames[1].nothing_ran());
    assert_eq!(
        (frames[1].root_scopes, frames[1].root_scopes_not_run),
        (1, 1)
    );
    assert_eq!(frames[1].result.drops.abandoned, 2);
    assert_eq!(frames[1].result.dropped_scopes, 2);
    app.check();
}

/// An encoder never submitted, beside one that was, in a frame whose query
/// sets an earlier frame wrote: its scopes are counted as abandoned, never
/// reported with a zero or the earlier frame's values.
#[test]
fn an_encoder_never_submitted_gives_no_zero_or_stale_value() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    // Frame 0 writes the query slots the next frames reuse.
    for label in ["ran", "ran again"] {
        let mut e = app.encoder(label);
        drop(profiler.scope(label, &mut e));
        app.queue.submit([e.finish()]);
    }
    profiler.end_frame().unwrap();
    let first = app.collect(&profiler);
    assert_eq!(labels(&first[0]), ["ran", "ran again"]);
    // Frame 1 (empty) was begun with objects of its own; frame 2 takes
    // frame 0's back: its first scope's slots are those `ran` wrote.
    profiler.end_frame().unwrap();
    let mut never = app.encoder("never");
    drop(profiler.scope("never", &mut never));
    let mut ran = app.encoder("ran");
    drop(profiler.scope("submitted", &mut ran));
    app.queue.submit([ran.finish()]);
    drop(never);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 2);
    assert!(frames[0].nothing_ran());
    let f = &frames[1];
    assert_eq!(f.index(), 2);
    assert_eq!(labels(f), ["submitted"]);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (2, 1));
    assert_eq!(f.result.drops.abandoned, 1);
    assert_eq!(f.result.drops.total(), 1);
    app.check();
}

/// An encoder submitted after its frame ended: counted as not run (its
/// queries were read before it ran), no wgpu validation error, and the
/// frames after it are right (its frame's objects are not reused).
#[test]
fn a_late_submission_is_counted_and_harmless() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut late = app.encoder("late");
    {
        let mut s = profiler.scope("late", &mut late);
        let mut p = s.scoped_compute_pass("late pass");
        app.dispatch(&mut p, 1);
    }
    profiler.end_frame().unwrap();
    app.queue.submit([late.finish()]);
    let frames = app.collect(&profiler);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].scopes().is_empty());
    assert_eq!(frames[0].root_scopes_not_run, 1);
    assert_eq!(frames[0].result.drops.abandoned, 2);
    for k in 0..3 {
        let mut e = app.encoder("next");
        {
            let mut s = profiler.scope(format!("next {k}"), &mut e);
            let mut p = s.scoped_compute_pass("next pass");
            app.dispatch(&mut p, 1);
        }
        let before = cpu_monotonic_ns();
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        let after = cpu_monotonic_ns();
        assert_eq!(
            labels(&frames[0]),
            [format!("next {k}").as_str(), "next pass"]
        );
        assert_eq!(frames[0].result.drops.total(), 0);
        assert_inside(frames[0].scopes(), before, after);
    }
    app.check();
}

/// A scope still open when its frame ends is counted as not ended, and
/// its `end` says so.
#[test]
fn a_scope_open_at_end_frame_is_counted() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut encoder = app.encoder("open");
    let scope = profiler.scope("open", &mut encoder);
    profiler.end_frame().unwrap();
    let err = scope.end().expect_err("ended after its frame");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::EncoderState(m)) if m.contains("`open`")),
        "{err}"
    );
    app.queue.submit([encoder.finish()]);
    let frames = app.collect(&profiler);
    assert!(frames[0].scopes().is_empty());
    assert_eq!(frames[0].result.drops.not_ended, 1);
    assert_eq!(frames[0].result.drops.total(), 1);
    app.check();
}

/// Past `max_scopes_per_frame`, scopes are counted as over capacity, the
/// others reported; exact counts over several frames.
#[test]
fn exact_scope_counts_with_a_full_frame() {
    let app = app_with(features());
    if !app.device.features().contains(features()) {
        eprintln!("skipped: the adapter lacks {:?}", features());
        return;
    }
    let settings = ProfilerSettings {
        max_scopes_per_frame: 3,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    for frame in 0..3 {
        let mut e = app.encoder("full");
        {
            let mut outer = profiler.scope("outer", &mut e);
            for k in 0..4 {
                let mut p = outer.scoped_compute_pass(format!("pass {k}"));
                app.dispatch(&mut p, 1);
            }
        }
        app.queue.submit([e.finish()]);
        profiler.end_frame().unwrap();
        let frames = app.collect(&profiler);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].index(), frame);
        assert_eq!(labels(&frames[0]), ["outer", "pass 0", "pass 1"]);
        assert_eq!(frames[0].result.drops.over_capacity, 2);
        assert_eq!(frames[0].result.dropped_scopes, 2);
    }
    app.check();
}

/// With statistics on, a scoped pass counts its invocations exactly: 5
/// workgroups of 64.
#[test]
fn pass_statistics_count_exactly() {
    let Some((app, _)) = setup() else {
        return;
    };
    let settings = ProfilerSettings {
        pipeline_statistics: true,
        ..Default::default()
    };
    let profiler = Profiler::new(&app.device, &app.queue, settings).unwrap();
    let mut e = app.encoder("stats");
    {
        let mut s = profiler.scope("frame", &mut e);
        let mut p = s.scoped_compute_pass("five groups");
        app.dispatch(&mut p, 5);
    }
    app.queue.submit([e.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let scopes = frames[0].scopes();
    assert!(
        scopes[0].statistics.is_none(),
        "an encoder scope is timed only"
    );
    let stats = scopes[1]
        .statistics
        .as_deref()
        .expect("the pass's statistics");
    assert_eq!(stats.compute_kernel_invocations, 5 * 64);
    assert_eq!(
        stats.tessellation_input_patches,
        gpu_counters::COUNTER_ERROR_VALUE
    );
    app.check();
}

/// An owning scope gives its encoder back; scopes in it nest.
#[test]
fn an_owning_scope_gives_its_encoder_back() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let mut scope = profiler.owning_scope("owned", app.encoder("owned"));
    {
        let mut p = scope.scoped_compute_pass("owned pass");
        app.dispatch(&mut p, 1);
    }
    let encoder = scope.into_inner();
    app.queue.submit([encoder.finish()]);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    assert_eq!(labels(&frames[0]), ["owned", "owned pass"]);
    assert_eq!(frames[0].scopes()[1].parent, Some(0));
    app.check();
}

/// A device without timestamps: the profiler is refused, naming the
/// feature.
#[test]
fn a_device_without_timestamps_is_refused_by_name() {
    let app = app_with(wgpu::Features::empty());
    let err = Profiler::new(&app.device, &app.queue, ProfilerSettings::default())
        .expect_err("no TIMESTAMP_QUERY");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::Unsupported(m)) if m.contains("TIMESTAMP_QUERY")),
        "{err}"
    );
    let err = Profiler::new(
        &app.device,
        &app.queue,
        ProfilerSettings {
            max_scopes_per_frame: 0,
            ..Default::default()
        },
    )
    .expect_err("no scope per frame");
    assert!(
        matches!(&err, Error::Invalid(InvalidInput::Argument(m)) if m.contains("max_scopes_per_frame")),
        "{err}"
    );
    app.check();
}

/// Scopes begun on four threads' encoders in one frame, submitted together
/// by the application: all reported, each with its thread's name, nested
/// on its own encoder.
#[test]
fn scopes_from_threads_into_one_frame() {
    let Some((app, profiler)) = setup() else {
        return;
    };
    let buffers: Vec<wgpu::CommandBuffer> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (app, profiler) = (&app, &profiler);
                std::thread::Builder::new()
                    .name(format!("recorder {t}"))
                    .spawn_scoped(s, move || {
                        let mut e = app.encoder("thread");
                        {
                            let mut scope = profiler.scope(format!("t{t}"), &mut e);
                            let mut p = scope.scoped_compute_pass(format!("t{t} pass"));
                            app.dispatch(&mut p, 1);
                        }
                        e.finish()
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = cpu_monotonic_ns();
    app.queue.submit(buffers);
    profiler.end_frame().unwrap();
    let frames = app.collect(&profiler);
    let after = cpu_monotonic_ns();
    let f = &frames[0];
    assert_eq!(f.scopes().len(), 8);
    assert_eq!((f.root_scopes, f.root_scopes_not_run), (4, 0));
    assert_eq!(f.result.drops.total(), 0);
    assert_inside(f.scopes(), before, after);
    for (i, s) in f.scopes().iter().enumerate() {
        let t = s
            .thread
            .strip_prefix("recorder ")
            .expect("the thread's name");
        match s.parent {
            None => assert_eq!(s.label, format!("t{t}")),
            Some(p) => {
                assert_eq!(s.label, format!("t{t} pass"));
                assert_eq!(f.scopes()[p].thread, s.thread, "scope {i}");
            }
        }
    }
    app.check();
}
