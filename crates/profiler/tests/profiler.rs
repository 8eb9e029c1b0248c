//! Profiler layer on the default Vulkan driver (lavapipe in CI) with the
//! validation layer on: nested scopes from two threads, 1000 frames through a
//! ring of 3, the drop report, the ring's policies and option limits, and
//! results reused frame after frame.

#[path = "common/vulkan.rs"]
mod vulkan;

use gpu_counters_hal::timeline::PassKind;
use gpu_counters_profiler::{export, DropCounts, FrameResult, Profiler, ProfilerError, WhenFull};
use gpu_counters_vulkan::{CommandBuffer, GpuBuffer, MemoryLocation, Submission};
use gpu_counters_workloads::ComputeWorkload;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Duration;
use vulkan::*;

#[test]
fn nested_scopes_from_two_threads() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, true, WAIT)).unwrap();
    const SIZE: u32 = 32;
    // Thread t dispatches 2 + t workgroups of 32 invocations.
    let mut works: Vec<ComputeWorkload> = (0..2)
        .map(|t| ComputeWorkload::new(&ctx(&device), SIZE, 2 + t, 1).unwrap())
        .collect();

    let frame = profiler.begin_frame().unwrap();
    assert!(frame.has_slot());
    let together = Barrier::new(2);
    let submissions: Vec<Submission> = std::thread::scope(|s| {
        let handles: Vec<_> = works
            .iter()
            .enumerate()
            .map(|(t, work)| {
                let (frame, device, together) = (&frame, &device, &together);
                std::thread::Builder::new()
                    .name(format!("recorder-{t}"))
                    .spawn_scoped(s, move || {
                        let d = device.raw();
                        let mut cmd = CommandBuffer::new(device).unwrap();
                        let outer = frame
                            .scope(&mut cmd, &format!("outer-{t}"), PassKind::Scope)
                            .unwrap();
                        // Both threads have an open scope in the same frame.
                        together.wait();
                        let a = frame
                            .scope(&mut cmd, &format!("a-{t}"), PassKind::Compute)
                            .unwrap();
                        // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
                        // outside any render pass (profiler scopes open none) on `device`, where
                        // `work` was built; `work` is destroyed only after the submissions are
                        // waited for.
                        unsafe { work.record_dispatch(d, cmd.raw()) };
                        a.end(&mut cmd).unwrap();
                        // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
                        // outside any render pass (profiler scopes open none) on `device`, where
                        // `work` was built; `work` is destroyed only after the submissions are
                        // waited for.
                        unsafe { work.record_barrier(d, cmd.raw()) };
                        let b = frame
                            .scope(&mut cmd, &format!("b-{t}"), PassKind::Compute)
                            .unwrap();
                        // SAFETY: `cmd.raw()` is recording (gpu-counters begins its command buffers)
                        // outside any render pass (profiler scopes open none) on `device`, where
                        // `work` was built; `work` is destroyed only after the submissions are
                        // waited for.
                        unsafe {
                            work.record_dispatch(d, cmd.raw());
                            work.record_barrier(d, cmd.raw());
                            work.record_dispatch(d, cmd.raw());
                        }
                        b.end(&mut cmd).unwrap();
                        together.wait();
                        outer.end(&mut cmd).unwrap();
                        cmd.commit().unwrap()
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let submit = submissions.iter().map(|s| s.cpu_submit_ns()).min();
    profiler.end_frame(frame, &submissions).unwrap();
    for s in &submissions {
        s.wait().unwrap();
    }
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!(f.index, 0);
    assert_eq!(f.dropped_scopes, 0);
    assert_eq!(f.drops, DropCounts::default());
    assert_eq!(f.scopes.len(), 6, "{:#?}", f.scopes);
    let submit = submit.unwrap();

    for (t, work) in works.iter().enumerate() {
        let thread = format!("recorder-{t}");
        let (outer_i, outer) = find(f, &format!("outer-{t}"));
        let (a_i, a) = find(f, &format!("a-{t}"));
        let (b_i, b) = find(f, &format!("b-{t}"));
        // Tree.
        assert_eq!((outer.depth, outer.parent), (0, None));
        assert_eq!((a.depth, a.parent), (1, Some(outer_i)));
        assert_eq!((b.depth, b.parent), (1, Some(outer_i)));
        assert!(outer_i < a_i && a_i < b_i, "parents before children");
        assert_eq!(outer.kind, PassKind::Scope);
        assert_eq!(a.kind, PassKind::Compute);
        for s in [outer, a, b] {
            assert_eq!(s.thread, thread);
            // Times inside the CPU window, within the stated bound.
            assert!(
                s.start_ns + s.error_bound_ns >= submit,
                "{s:#?} vs submit {submit}"
            );
            assert!(
                s.end_ns <= f.cpu_complete_ns + s.error_bound_ns,
                "{s:#?} vs complete {}",
                f.cpu_complete_ns
            );
            assert!(s.start_ns <= s.end_ns);
            assert_eq!(s.duration_ns, s.end_ns - s.start_ns);
        }
        // Inner inside outer, in order.
        assert!(outer.start_ticks <= a.start_ticks);
        assert!(a.start_ticks <= a.end_ticks);
        assert!(a.end_ticks <= b.start_ticks);
        assert!(b.start_ticks <= b.end_ticks);
        assert!(b.end_ticks <= outer.end_ticks);
        assert!(outer.start_ns <= a.start_ns && b.end_ns <= outer.end_ns);
        // Exact statistics: D * W * S, and the outer is the sum of the inners.
        let per_dispatch = (2 + t as u64) * SIZE as u64;
        let (sa, sb, so) = (
            a.statistics.as_deref().unwrap(),
            b.statistics.as_deref().unwrap(),
            outer.statistics.as_deref().unwrap(),
        );
        assert_eq!(sa.compute_kernel_invocations, per_dispatch);
        assert_eq!(sa.compute_kernel_invocations, work.expected_invocations(1));
        assert_eq!(sb.compute_kernel_invocations, 2 * per_dispatch);
        assert_eq!(
            so.compute_kernel_invocations,
            sa.compute_kernel_invocations + sb.compute_kernel_invocations
        );
        assert_eq!(so.vertex_invocations, 0);
        assert_eq!(so.fragment_invocations, 0);
    }

    // The exporters take the result.
    let timeline = profiler.timeline(&frames);
    assert_eq!(timeline.frames.len(), 1);
    assert_eq!(timeline.frames[0].intervals.len(), 6);
    assert_eq!(timeline.frames[0].cpu_submit_ns, submit);
    for (i, s) in timeline.frames[0].intervals.iter().zip(&f.scopes) {
        assert_eq!(i.parent, s.parent);
        assert_eq!(i.queue, "graphics");
        assert_eq!(i.thread.as_deref(), Some(s.thread.as_str()));
    }
    let json = export::to_chrome_trace_json(&timeline).to_string();
    assert!(json.contains("outer-1") && json.contains("recorder-0"));

    drop(submissions);
    for w in &mut works {
        // SAFETY: `submissions` were dropped above, and dropping a submission waits
        // for its work: no pending command buffer uses the workloads, which were
        // built on `device`.
        unsafe { w.destroy(device.raw()) };
    }
    drop(profiler);
    assert_no_validation_messages(&device);
}

#[test]
fn thousand_frames_through_a_ring_of_three() {
    const FRAMES: u32 = 1000;
    let device = device();
    let profiler = Profiler::new(&device, options(3, 4, true, WAIT)).unwrap();
    let buffers = profiler.sample_buffer_count();
    assert_eq!(buffers, 6, "3 slots of timestamps and statistics");
    let target = GpuBuffer::new(&device, 256, MemoryLocation::DeviceLocal).unwrap();
    // Every 250th frame holds the GPU back on a gate, so the frame three
    // later finds the ring full and must wait for it. The gate opens only
    // once that later frame is about to begin: an event, not a sleep, so the
    // test cannot race the machine's speed.
    const GATED: u32 = 250;
    let gates: Vec<(Gate, AtomicBool)> = (0..FRAMES / GATED)
        .map(|_| (Gate::new(&device), AtomicBool::new(false)))
        .collect();
    let mut in_flight: VecDeque<Submission> = VecDeque::new();
    let mut collected: Vec<FrameResult> = Vec::new();
    let mut waited = 0;
    std::thread::scope(|s| {
        let mut openers: Vec<std::sync::mpsc::Sender<()>> = Vec::new();
        for n in 0..FRAMES {
            if n % GATED == 0 {
                // Drain first, so that only the gated frame holds the GPU
                // back. (lavapipe's vkGetQueryPoolResults waits for the
                // device to idle, so resolving an older frame behind the
                // gate would block as well.)
                for s in &in_flight {
                    s.wait().unwrap();
                }
                collected.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
            }
            // Begin before the oldest submission is waited for: with 3 frames in
            // flight the ring is full, so this may wait for the GPU.
            let gated =
                (n >= 3 && (n - 3) % GATED == 0).then(|| &gates[((n - 3) / GATED) as usize]);
            if let Some((_, opened)) = gated {
                assert!(
                    !opened.load(Ordering::SeqCst),
                    "frame {n} began before the gate opened"
                );
                // Let the gate open now: begin_frame must not return before.
                openers[((n - 3) / GATED) as usize].send(()).unwrap();
            }
            let frame = profiler.begin_frame().unwrap();
            if let Some((_, opened)) = gated {
                // The gated frame's slot was freed only after the GPU ran it.
                assert!(
                    opened.load(Ordering::SeqCst),
                    "frame {n} waited for the gated frame"
                );
                waited += 1;
            }
            assert_eq!(frame.index(), n as u64);
            assert!(frame.has_slot());
            let mut cmd = if in_flight.len() == 3 {
                in_flight.pop_front().unwrap().reuse().unwrap()
            } else {
                CommandBuffer::new(&device).unwrap()
            };
            if n % GATED == 0 {
                let (gate, opened) = &gates[(n / GATED) as usize];
                gate.record_wait(&cmd);
                let (open_now, go) = std::sync::mpsc::channel::<()>();
                openers.push(open_now);
                s.spawn(move || {
                    // The main thread says when frame n + 3 is about to begin.
                    let _ = go.recv();
                    opened.store(true, Ordering::SeqCst);
                    gate.open();
                });
            }
            let outer = frame.scope(&mut cmd, "frame", PassKind::Scope).unwrap();
            let inner = frame.scope(&mut cmd, "fill", PassKind::Blit).unwrap();
            fill(&device, &cmd, &target, n);
            inner.end(&mut cmd).unwrap();
            outer.end(&mut cmd).unwrap();
            let submission = cmd.commit().unwrap();
            profiler.end_frame(frame, [&submission]).unwrap();
            in_flight.push_back(submission);
            collected.extend(profiler.collect().unwrap());
            assert_eq!(profiler.ring_size(), 3);
        }
    });
    assert_eq!(waited, FRAMES / GATED);
    for s in &in_flight {
        s.wait().unwrap();
    }
    collected.extend(profiler.wait_collect_all(Duration::from_secs(10)).unwrap());
    assert!(profiler.collect().unwrap().is_empty(), "each frame once");

    assert_eq!(collected.len(), FRAMES as usize);
    let mut previous_end = 0;
    for (n, f) in collected.iter().enumerate() {
        assert_eq!(f.index, n as u64, "in order");
        assert_eq!(f.dropped_scopes, 0);
        assert_eq!(f.scopes.len(), 2, "frame {n}: {:#?}", f.scopes);
        let (outer, inner) = (&f.scopes[0], &f.scopes[1]);
        assert_eq!(
            (outer.label.as_str(), outer.parent, outer.depth),
            ("frame", None, 0)
        );
        assert_eq!(
            (inner.label.as_str(), inner.parent, inner.depth),
            ("fill", Some(0), 1)
        );
        assert!(outer.start_ticks <= inner.start_ticks && inner.end_ticks <= outer.end_ticks);
        assert!(outer.start_ns + outer.error_bound_ns >= f.cpu_submit_ns.unwrap());
        assert!(outer.end_ns <= f.cpu_complete_ns + outer.error_bound_ns);
        assert!(
            outer.start_ns + outer.error_bound_ns >= previous_end,
            "frame {n}"
        );
        previous_end = outer.end_ns;
        let st = outer.statistics.as_deref().unwrap();
        assert_eq!(st.compute_kernel_invocations, 0);
        assert_eq!(st.vertex_invocations, 0);
    }
    assert_eq!(profiler.dropped_scopes_total(), 0);
    assert_eq!(profiler.ring_size(), 3);
    assert_eq!(profiler.sample_buffer_count(), buffers, "no GPU allocation");

    drop(in_flight);
    drop(target);
    drop(profiler);
    drop(gates);
    assert_no_validation_messages(&device);
}

#[test]
fn drop_reports_exact_counts() {
    let device = device();
    let target = GpuBuffer::new(&device, 64, MemoryLocation::DeviceLocal).unwrap();
    let profiler = Profiler::new(&device, options(2, 2, true, WhenFull::Drop)).unwrap();

    // Frame 0: three scopes, room for two; recorded, not submitted yet.
    let frame0 = profiler.begin_frame().unwrap();
    let mut cmd0 = CommandBuffer::new(&device).unwrap();
    let a = frame0.scope(&mut cmd0, "a", PassKind::Scope).unwrap();
    let b = frame0.scope(&mut cmd0, "b", PassKind::Blit).unwrap();
    fill(&device, &cmd0, &target, 1);
    let c = frame0.scope(&mut cmd0, "c", PassKind::Blit).unwrap();
    assert!(a.is_recorded() && b.is_recorded() && !c.is_recorded());
    c.end(&mut cmd0).unwrap();
    b.end(&mut cmd0).unwrap();
    a.end(&mut cmd0).unwrap();
    assert_eq!(frame0.dropped_scopes(), 1);
    profiler.end_frame(frame0, []).unwrap();

    // Frame 1: fills the ring.
    let frame1 = profiler.begin_frame().unwrap();
    let mut cmd1 = CommandBuffer::new(&device).unwrap();
    let d = frame1.scope(&mut cmd1, "d", PassKind::Blit).unwrap();
    fill(&device, &cmd1, &target, 2);
    d.end(&mut cmd1).unwrap();
    profiler.end_frame(frame1, []).unwrap();

    // Frames 2 and 3: the ring is full (nothing submitted), so they get no
    // slot and every scope is dropped, nested ones included.
    let mut cmd2 = CommandBuffer::new(&device).unwrap();
    for frame_scopes in [3u32, 2] {
        let frame = profiler.begin_frame().unwrap();
        assert!(!frame.has_slot());
        let outer = frame.scope(&mut cmd2, "outer", PassKind::Scope).unwrap();
        for _ in 1..frame_scopes {
            let inner = frame.scope(&mut cmd2, "inner", PassKind::Blit).unwrap();
            assert!(!inner.is_recorded());
            inner.end(&mut cmd2).unwrap();
        }
        outer.end(&mut cmd2).unwrap();
        assert_eq!(frame.dropped_scopes(), frame_scopes);
        profiler.end_frame(frame, []).unwrap();
    }
    assert_eq!(profiler.ring_size(), 2);
    assert_eq!(profiler.dropped_scopes_total(), 1 + 3 + 2);
    // Nothing finished yet: frames 2 and 3 wait behind 0 and 1.
    assert!(profiler.collect().unwrap().is_empty());

    let submissions = [cmd0.commit().unwrap(), cmd1.commit().unwrap()];
    for s in &submissions {
        s.wait().unwrap();
    }
    drop(cmd2);
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    let summary: Vec<(u64, usize, DropCounts)> = frames
        .iter()
        .map(|f| (f.index, f.scopes.len(), f.drops))
        .collect();
    let over = |n| DropCounts {
        over_capacity: n,
        ..Default::default()
    };
    let no_slot = |n| DropCounts {
        no_slot: n,
        ..Default::default()
    };
    assert_eq!(
        summary,
        vec![
            (0, 2, over(1)),
            (1, 1, DropCounts::default()),
            (2, 0, no_slot(3)),
            (3, 0, no_slot(2)),
        ]
    );
    assert_eq!(
        frames.iter().map(|f| f.dropped_scopes).collect::<Vec<_>>(),
        [1, 0, 3, 2]
    );
    assert_eq!(frames[0].scopes[1].parent, Some(0));

    // A scope never ended is reported, not lost.
    let frame = profiler.begin_frame().unwrap();
    assert!(frame.has_slot(), "slots were freed by collecting");
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let kept = frame.scope(&mut cmd, "kept", PassKind::Scope).unwrap();
    let forgotten = frame.scope(&mut cmd, "forgotten", PassKind::Blit).unwrap();
    drop(forgotten);
    kept.end(&mut cmd).unwrap();
    let submission = cmd.commit().unwrap();
    profiler.end_frame(frame, [&submission]).unwrap();
    submission.wait().unwrap();
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].scopes.len(), 1);
    assert_eq!(frames[0].scopes[0].label, "kept");
    assert_eq!(
        frames[0].drops,
        DropCounts {
            not_ended: 1,
            ..Default::default()
        }
    );
    assert_eq!(profiler.dropped_scopes_total(), 7);

    drop(submissions);
    drop(submission);
    drop(profiler);
    drop(target);
    assert_no_validation_messages(&device);
}

#[test]
fn grow_grows_the_ring_and_frames() {
    let device = device();
    let target = GpuBuffer::new(&device, 64, MemoryLocation::DeviceLocal).unwrap();
    let profiler = Profiler::new(&device, options(1, 1, false, WhenFull::Grow)).unwrap();
    assert_eq!(profiler.sample_buffer_count(), 1);

    // Three frames recorded before any is submitted: the ring grows to 3.
    let mut cmds = Vec::new();
    for n in 0..3u32 {
        let frame = profiler.begin_frame().unwrap();
        assert!(frame.has_slot());
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
        fill(&device, &cmd, &target, n);
        if n == 1 {
            // One scope per buffer: a second one grows this frame's buffers.
            let inner = frame.scope(&mut cmd, "inner", PassKind::Blit).unwrap();
            assert!(inner.is_recorded());
            fill(&device, &cmd, &target, n);
            inner.end(&mut cmd).unwrap();
        }
        outer.end(&mut cmd).unwrap();
        profiler.end_frame(frame, []).unwrap();
        cmds.push(cmd);
        assert_eq!(profiler.ring_size(), n as usize + 1);
    }
    assert_eq!(profiler.sample_buffer_count(), 4);
    let submissions: Vec<Submission> = cmds.into_iter().map(|c| c.commit().unwrap()).collect();
    for s in &submissions {
        s.wait().unwrap();
    }
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(
        frames.iter().map(|f| f.scopes.len()).collect::<Vec<_>>(),
        [1, 2, 1]
    );
    assert!(frames.iter().all(|f| f.dropped_scopes == 0));
    assert_eq!(frames[1].scopes[1].parent, Some(0));

    // Steady state: the grown ring is reused, nothing more is allocated.
    for n in 0..10u32 {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        let s = frame.scope(&mut cmd, "steady", PassKind::Blit).unwrap();
        fill(&device, &cmd, &target, n);
        s.end(&mut cmd).unwrap();
        let submission = cmd.commit().unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait().unwrap();
        // The frame marker signals a moment after the submission's fence.
        let got = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].index, 3 + n as u64);
    }
    assert_eq!(profiler.ring_size(), 3);
    assert_eq!(profiler.sample_buffer_count(), 4);
    assert_eq!(profiler.dropped_scopes_total(), 0);

    drop(submissions);
    drop(profiler);
    drop(target);
    assert_no_validation_messages(&device);
}

#[test]
fn wait_times_out_with_a_typed_error_and_misuse_is_reported() {
    let device = device();
    let profiler = Profiler::new(
        &device,
        options(
            1,
            4,
            false,
            WhenFull::Wait {
                timeout: Duration::from_millis(30),
            },
        ),
    )
    .unwrap();
    let frame = profiler.begin_frame().unwrap();
    let mut cmd = CommandBuffer::new(&device).unwrap();
    let mut other = CommandBuffer::new(&device).unwrap();
    let outer = frame.scope(&mut cmd, "outer", PassKind::Scope).unwrap();
    let inner = frame.scope(&mut cmd, "inner", PassKind::Blit).unwrap();
    // The outer scope cannot end before the inner one.
    assert!(matches!(
        outer.end(&mut cmd),
        Err(ProfilerError::ScopeOrder { ref label, ref open }) if label == "outer" && open == "inner"
    ));
    // Nor on another command buffer.
    assert!(matches!(
        inner.end(&mut other),
        Err(ProfilerError::WrongCommandBuffer { ref label }) if label == "inner"
    ));
    profiler.end_frame(frame, []).unwrap();

    // The only slot holds frame 0, which was never submitted.
    let err = profiler.begin_frame().unwrap_err();
    assert!(
        matches!(
            err,
            ProfilerError::RingFull {
                busy_frame: 0,
                ring_size: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        profiler.wait_collect_all(Duration::from_millis(10)),
        Err(ProfilerError::CollectTimeout { frame: 0, .. })
    ));

    let submission = cmd.commit().unwrap();
    submission.wait().unwrap();
    let frame = profiler.begin_frame().unwrap();
    assert_eq!(frame.index(), 1);
    drop(frame);
    let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!(
        frames[0].drops,
        DropCounts {
            not_ended: 2,
            ..Default::default()
        }
    );
    assert!(frames[0].scopes.is_empty());

    assert!(matches!(
        Profiler::new(&device, options(0, 4, false, WhenFull::Drop)),
        Err(ProfilerError::InvalidOptions(_))
    ));
    assert!(matches!(
        Profiler::new(&device, options(1, 0, false, WhenFull::Drop)),
        Err(ProfilerError::InvalidOptions(_))
    ));

    drop(other);
    drop(submission);
    drop(profiler);
    assert_no_validation_messages(&device);
}

/// A slot is reset only over the samples its frame took (one page of 8
/// scopes, a ring of one slot): frames of 6, 2, 8 (the whole page), 1 and
/// 8 scopes, with and without statistics, each come back whole, every
/// sample written and none left over from an earlier frame.
#[test]
fn frames_of_varying_size_reuse_a_partly_reset_slot() {
    let device = device();
    for statistics in [false, true] {
        let profiler = Profiler::new(&device, options(1, 8, statistics, WAIT)).unwrap();
        for (n, count) in [6usize, 2, 8, 1, 8].into_iter().enumerate() {
            let frame = profiler.begin_frame().unwrap();
            let mut cmd = CommandBuffer::new(&device).unwrap();
            for k in 0..count {
                let scope = frame
                    .scope(&mut cmd, &format!("f{n} s{k}"), PassKind::Scope)
                    .unwrap();
                scope.end(&mut cmd).unwrap();
            }
            let submission = cmd.commit().unwrap();
            profiler.end_frame(frame, [&submission]).unwrap();
            submission.wait().unwrap();
            let frames = profiler.wait_collect_all(Duration::from_secs(10)).unwrap();
            assert_eq!(frames.len(), 1, "frame {n}");
            let r = &frames[0];
            assert_eq!(r.drops, DropCounts::default(), "frame {n}: {r:?}");
            assert_eq!(r.scopes.len(), count, "frame {n}");
            for (k, s) in r.scopes.iter().enumerate() {
                assert_eq!(s.label, format!("f{n} s{k}").as_str());
                assert!(s.end_ns >= s.start_ns, "frame {n} scope {k}: {s:?}");
                assert_eq!(s.statistics.is_some(), statistics, "frame {n} scope {k}");
            }
        }
        drop(profiler);
    }
    assert_no_validation_messages(&device);
}

/// Soundness item 17: huge ring sizes are typed errors naming the option
/// and its limit, not an abort.
#[test]
fn huge_profiler_options_are_refused() {
    let device = device();
    for (ring, scopes, what) in [
        (usize::MAX, 1, "frames_in_flight"),
        (
            gpu_counters_profiler::MAX_FRAMES_IN_FLIGHT + 1,
            1,
            "frames_in_flight",
        ),
        (64, 1 << 18, "max_scopes_per_frame"),
        (1, u32::MAX, "max_scopes_per_frame"),
    ] {
        let e = Profiler::new(&device, options(ring, scopes, true, WAIT)).unwrap_err();
        assert!(
            matches!(&e, ProfilerError::InvalidOptions(m) if m.contains(what) && m.contains("limit")),
            "{ring} x {scopes}: {e}"
        );
    }
    assert_no_validation_messages(&device);
}

/// `collect_into` one vector frame after frame: each frame comes back whole
/// with its own scopes only (fewer than the frame before, then more), in
/// memory the earlier results held, each result overwritten whole: labels
/// (new each frame), parents and depths are this frame's.
#[test]
fn collect_into_reuses_results_without_leftovers() {
    let device = device();
    let profiler = Profiler::new(&device, options(2, 16, false, WAIT)).unwrap();
    let mut results = Vec::new();
    let mut kept_capacity = 0;
    for (n, inner) in [9usize, 3, 12, 1, 0].into_iter().enumerate() {
        let frame = profiler.begin_frame().unwrap();
        let mut cmd = CommandBuffer::new(&device).unwrap();
        // Frames alternate between one outer scope around the others and
        // none, so a result's parent and depth change from frame to frame.
        let nested = n % 2 == 0;
        let outer = nested.then(|| {
            frame
                .scope(&mut cmd, &format!("frame {n}"), PassKind::Scope)
                .unwrap()
        });
        for i in 0..inner {
            let label = format!("{n}-{}", if i % 2 == 0 { "even" } else { "odd" });
            frame
                .scope(&mut cmd, &label, PassKind::Compute)
                .unwrap()
                .end(&mut cmd)
                .unwrap();
        }
        outer.map(|o| o.end(&mut cmd)).transpose().unwrap();
        let submission = cmd.commit().unwrap();
        profiler.end_frame(frame, [&submission]).unwrap();
        submission.wait().unwrap();
        device.wait_idle().unwrap();
        profiler.collect_into(&mut results).unwrap();
        assert_eq!(results.len(), 1, "frame {n}");
        let r = &results[0];
        assert_eq!(r.index, n as u64);
        assert_eq!(r.scopes.len(), inner + usize::from(nested), "frame {n}");
        let (first, depth, parent) = if nested {
            let o = &r.scopes[0];
            assert_eq!(o.label, format!("frame {n}"));
            assert_eq!((o.depth, o.parent, o.kind), (0, None, PassKind::Scope));
            (1, 1, Some(0))
        } else {
            (0, 0, None)
        };
        for (i, s) in r.scopes[first..].iter().enumerate() {
            let want = format!("{n}-{}", if i % 2 == 0 { "even" } else { "odd" });
            assert_eq!(s.label, want, "frame {n} scope {i}");
            assert_eq!(
                (s.depth, s.parent, s.kind),
                (depth, parent, PassKind::Compute)
            );
            assert!(s.start_ns <= s.end_ns);
            assert_eq!(s.duration_ns, s.end_ns - s.start_ns);
            assert!(s.statistics.is_none());
        }
        if n > 0 {
            assert!(
                r.scopes.capacity() >= kept_capacity,
                "frame {n}: the earlier frame's scope list was reused"
            );
        }
        kept_capacity = r.scopes.capacity();
    }
    assert_eq!(profiler.dropped_scopes_total(), 0);
    drop(profiler);
    assert_no_validation_messages(&device);
}
