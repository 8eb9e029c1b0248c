//! The CPU resolve: parallel and single reads agree, statistics chains,
//! statuses of unwritten, failed and aliased samples, and the AVX2 layout.

use super::*;

/// The parallel timestamp resolve gives what the single-threaded one does,
/// with gaps and parts that do not divide evenly.
#[test]
fn parallel_timestamp_resolve_matches() {
    let n = 3 * RESOLVE_CHUNK + 123;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let written = |i: u32| i % 1000 != 7;
    let mut queries = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in (0..n).filter(|&i| written(i)) {
            slots.mark_recorded(i, NONE, false, 1, 0);
            queries.data[2 * i as usize] = 7 * i as u64 + 3;
            queries.data[2 * i as usize + 1] = 1;
        }
    }
    let mut slots = samples.lock().unwrap();
    // One pair of result vectors reused across the resolves, as
    // `resolve_cpu_into` does: a smaller range after a larger one.
    let (mut bytes, mut status) = (Vec::new(), Vec::new());
    for (first, count) in [(0, n), (5, n - 11), (RESOLVE_CHUNK - 1, 2)] {
        let (lo, hi) = samples.span(&slots, first, count);
        let mut scratch = Vec::new();
        let mut resolve = |threads| {
            slots.seen.fill(false);
            let noted = samples
                .resolve_timestamps(
                    &mut slots,
                    &queries,
                    (first, count, lo, hi),
                    &mut scratch,
                    threads,
                    (&mut bytes, &mut status),
                )
                .unwrap();
            // Nothing is pending, so the parts noted what they saw written:
            // exactly the range's written samples.
            assert!(noted);
            let r = first as usize..(first + count) as usize;
            for (i, seen) in slots.seen.iter().enumerate() {
                let written = r.contains(&i) && status[i - first as usize] == SampleStatus::Written;
                assert_eq!(*seen, written, "seen of sample {i} with {threads} threads");
            }
            (bytes.clone(), status.clone())
        };
        let one = resolve(1);
        for threads in [2, 3, 4, 16] {
            let many = resolve(threads);
            assert!(one == many, "{threads} threads differ");
        }
        for (k, st) in one.1.iter().enumerate() {
            let i = first + k as u32;
            let v = u64::from_ne_bytes(one.0[8 * k..8 * k + 8].try_into().unwrap());
            if written(i) {
                assert_eq!((*st, v), (SampleStatus::Written, 7 * i as u64 + 3));
            } else {
                assert_eq!((*st, v), (SampleStatus::NotWritten, COUNTER_ERROR_VALUE));
            }
        }
    }
}

/// The memoised chain sums resolve to what walking every chain whole does:
/// long chains, a chain broken by a re-recorded sample, a second chain,
/// samples never written and samples not yet executed.
#[test]
fn chain_sums_match_whole_walks() {
    // Two counted fields: vertex invocations (Metal field 1) at query value
    // 0, compute invocations (field 7) at value 1; the rest absent.
    let mut field_map = [ABSENT; 8];
    field_map[1] = 0;
    field_map[7] = 1;
    let n = 600;
    let samples = set(CommonCounterSet::Statistic, n, field_map);
    let mut queries = Scripted {
        values: 2,
        data: vec![0; 3 * n as usize],
    };
    let mut write = |slots: &mut SampleTable, i: u32, link: u32, chain: u64, available: bool| {
        slots.mark_recorded(i, link, false, 1, chain);
        let q = &mut queries.data[3 * i as usize..3 * i as usize + 3];
        q.copy_from_slice(&[u64::from(i % 5), u64::from(i % 3) * 64, available as u64]);
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in 0..300 {
            write(&mut slots, i, if i == 0 { NONE } else { i - 1 }, 1, true);
        }
        let mut prev = NONE;
        for i in [400, 150, 401, 402] {
            write(&mut slots, i, prev, 2, true);
            prev = i;
        }
        // Recorded, not executed yet: not ready.
        let mut prev = NONE;
        for i in 500..505 {
            write(&mut slots, i, prev, 3, false);
            prev = i;
        }
    }
    let slots = samples.lock().unwrap();
    let stride = queries.stride();
    for (first, count) in [(0, n), (100, 220), (401, 2), (299, 1)] {
        let (lo, hi) = samples.span(&slots, first, count);
        let mut main = Vec::new();
        queries.read_into(lo, hi - lo, &mut main).unwrap();
        let (bytes, status) =
            samples.resolve_statistics(&slots, stride, first, count, lo, hi, &main, None);
        let mut out = [0u64; 8];
        for (k, s) in (first..first + count).enumerate() {
            let expected = match slots.state[s as usize] {
                SlotState::Fresh => SampleStatus::NotWritten,
                _ => samples.sum_chain(&slots, stride, s, lo, &main, None, &mut out),
            };
            assert_eq!(status[k], expected, "sample {s}");
            if expected == SampleStatus::Written {
                let got: Vec<u64> = bytes[k * 64..k * 64 + 64]
                    .chunks_exact(8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                    .collect();
                assert_eq!(got, out, "sample {s}");
            }
        }
        if (first, count) == (0, n) {
            let count = |st| status.iter().filter(|&&s| s == st).count();
            assert_eq!(
                count(SampleStatus::Error),
                149,
                "151..300 follow the re-recorded 150"
            );
            assert_eq!(count(SampleStatus::NotReady), 5);
            assert_eq!(count(SampleStatus::Written), 150 + 4, "{status:?}");
        }
    }
    // Sample 402 counts what queries 400, 150 and 401 counted.
    drop(slots);
    let r = samples.resolve_cpu(0..600, &queries, None).unwrap();
    let v = r.statistics().unwrap()[402];
    let vertices = |i: u64| i % 5;
    let invocations = |i: u64| (i % 3) * 64;
    assert_eq!(
        v.vertex_invocations,
        vertices(400) + vertices(150) + vertices(401)
    );
    assert_eq!(
        v.compute_kernel_invocations,
        invocations(400) + invocations(150) + invocations(401)
    );
    assert_eq!(v.fragments_passed, COUNTER_ERROR_VALUE, "absent field");
    assert_eq!(r.origin(402), Some(2));
    assert_eq!(r.origin(0), Some(1));
    match r.statistics_between(400, 402).unwrap() {
        SampleValue::Value(d) => assert_eq!(d.vertex_invocations, vertices(150) + vertices(401)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.statistics_between(0, 402).unwrap(),
        SampleValue::NotComparable
    );
}

/// A timestamp a done recording wrote, that the GPU left unwritten (a
/// wgpu pass's timestamp write handed out and never used): forgotten, it
/// resolves NotWritten with the error value, never NotReady for ever nor
/// its query's value, stays dirty, and is written again at once; a write
/// of another recording since, or an index never written, is left as it
/// is.
#[test]
fn unwritten_timestamps_of_a_done_recording_resolve_not_written() {
    let samples = set(CommonCounterSet::Timestamp, 4, [ABSENT; 8]);
    let (done, later) = (Ticket::new(), Ticket::new());
    // Query 1 "available" with wgpu's 0 for an unwritten query: only the
    // bookkeeping can tell.
    let mut queries = Scripted {
        values: 1,
        data: vec![5, 1, 0, 1, 0, 0, 0, 0],
    };
    let mut slots = samples.lock().unwrap();
    slots.register(&done);
    for i in 0..3 {
        slots.mark_recorded(i, NONE, false, done.id(), 0);
    }
    done.complete();
    // Index 2 written again by a later recording before the read-back.
    slots.register(&later);
    slots.mark_recorded(2, NONE, false, later.id(), 0);
    assert!(slots.forget_unwritten(1, done.id()));
    assert!(!slots.forget_unwritten(1, done.id()), "already forgotten");
    assert!(
        !slots.forget_unwritten(2, done.id()),
        "the later write stays"
    );
    assert!(!slots.forget_unwritten(3, done.id()), "never written");
    assert!(!slots.forget_unwritten(0, 0), "no ticket");
    assert!(!slots.forget_unwritten(9, done.id()), "past the end");
    assert_eq!(slots.state[1], SlotState::Fresh);
    assert!(slots.dirty[1], "its query may hold an older value");
    assert_eq!(slots.rec[2], later.id());
    assert!(samples.check_write(&slots, 1, false, later.id()).unwrap());
    drop(slots);
    later.complete();
    queries.data[4..6].copy_from_slice(&[9, 1]);
    let r = samples.resolve_cpu(0..4, &queries, None).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::NotWritten,
            SampleStatus::Written,
            SampleStatus::NotWritten
        ]
    );
    let t = r.timestamps().unwrap();
    assert_eq!(
        [t[0].timestamp, t[1].timestamp, t[2].timestamp],
        [5, COUNTER_ERROR_VALUE, 9]
    );
    let mut once = ResolvedTimestamps::default();
    samples
        .resolve_timestamps_into(0..4, &queries, &mut once)
        .unwrap();
    assert_eq!(
        once.get(1),
        Some((COUNTER_ERROR_VALUE, SampleStatus::NotWritten))
    );
}

/// Stage utilization resolves through the same chains as statistics, into
/// its 6-field layout: total cycles summed along the chain, the other
/// fields the error value, origins per chain (it used to index past the 6
/// fields and panic).
#[test]
fn stage_utilization_chains_resolve_into_six_fields() {
    let mut field_map = [ABSENT; 8];
    field_map[0] = 0;
    let samples = set(CommonCounterSet::StageUtilization, 4, field_map);
    // Queries (value, available): 100 cycles from 0 to 1, 250 from 1 to 2,
    // 0 after 2; sample 3 in a chain of its own.
    let queries = Scripted {
        values: 1,
        data: vec![100, 1, 250, 1, 0, 1, 9, 1],
    };
    {
        let mut slots = samples.lock().unwrap();
        slots.mark_recorded(0, NONE, false, 1, 7);
        slots.mark_recorded(1, 0, false, 1, 7);
        slots.mark_recorded(2, 1, false, 1, 7);
        slots.mark_recorded(3, NONE, false, 1, 8);
    }
    let r = samples.resolve_cpu(0..4, &queries, None).unwrap();
    let su = r.stage_utilization().unwrap();
    assert_eq!(
        su.iter().map(|s| s.total_cycles).collect::<Vec<_>>(),
        [0, 100, 350, 0]
    );
    assert!(su
        .iter()
        .all(|s| s.vertex_cycles == COUNTER_ERROR_VALUE
            && s.render_target_cycles == COUNTER_ERROR_VALUE));
    match r.stage_utilization_between(0, 2).unwrap() {
        SampleValue::Value(d) => {
            assert_eq!(d.total_cycles, 350);
            assert_eq!(d.fragment_cycles, COUNTER_ERROR_VALUE);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.stage_utilization_between(0, 3).unwrap(),
        SampleValue::NotComparable
    );
    assert!(r.statistics().is_err());
}

/// A timestamp query whose availability word is `QUERY_FAILED` resolves as
/// an error with the error value, never as its (made-up) value, on the fast
/// path (one resolve of the whole range) and the exception path alike.
#[test]
fn failed_timestamp_queries_resolve_as_errors() {
    let n = 6;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mut queries = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in 0..n - 1 {
            slots.mark_recorded(i, NONE, false, 1, 0);
            queries.data[2 * i as usize] = 100 + i as u64;
            queries.data[2 * i as usize + 1] = match i {
                1 | 3 => QUERY_FAILED,
                2 => 0,
                _ => 1,
            };
        }
    }
    let r = samples.resolve_cpu(0..n as u64, &queries, None).unwrap();
    assert_eq!(
        r.statuses(),
        &[
            SampleStatus::Written,
            SampleStatus::Error,
            SampleStatus::NotReady,
            SampleStatus::Error,
            SampleStatus::Written,
            SampleStatus::NotWritten,
        ]
    );
    let t: Vec<u64> = r
        .timestamps()
        .unwrap()
        .iter()
        .map(|t| t.timestamp)
        .collect();
    assert_eq!(
        t,
        [
            100,
            COUNTER_ERROR_VALUE,
            COUNTER_ERROR_VALUE,
            COUNTER_ERROR_VALUE,
            104,
            COUNTER_ERROR_VALUE
        ]
    );
    assert_eq!(
        r.sample::<crate::CounterResultTimestamp>(1).unwrap(),
        SampleValue::Error
    );
    // A range of failed queries only, through the fast path's check.
    let r = samples.resolve_cpu(3..4, &queries, None).unwrap();
    assert_eq!(r.statuses(), &[SampleStatus::Error]);
}

/// Resolves of one sample set from the tasks of a rayon pool (a caller's
/// own `par_iter`): each holds the set's lock while its parts run, and none
/// may wait on a part that waits for that lock (a worker waiting for a pool
/// runs other tasks of its pool meanwhile), so they all finish, with every
/// sample.
#[test]
fn resolves_from_a_callers_rayon_tasks_finish() {
    use rayon::prelude::*;
    let n = 3 * RESOLVE_CHUNK;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mut queries = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in 0..n {
            slots.mark_recorded(i, NONE, false, 1, 0);
            queries.data[2 * i as usize] = i as u64 + 1;
            queries.data[2 * i as usize + 1] = 1;
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Not a scoped thread: on a deadlock the test fails rather than waits.
    std::thread::spawn(move || {
        let written: Vec<usize> = pool.install(|| {
            (0..8)
                .into_par_iter()
                .map(|_| {
                    let r = samples
                        .resolve_cpu(0..u64::from(n), &queries, None)
                        .unwrap();
                    r.count(SampleStatus::Written)
                })
                .collect()
        });
        let _ = tx.send(written);
    });
    // The resolves take milliseconds; the limit is only there to fail.
    let written = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("resolves from rayon tasks deadlocked");
    assert_eq!(written, vec![n as usize; 8]);
}

/// The timestamp resolve for callers that read each sample once gives, for
/// every sample, what the usual resolve does, and notes the same samples as
/// seen: every sample written (kept as read, on one thread and several),
/// and every exception (never written, not ready, failed, invalidated, an
/// alias inside and outside the range, a recording still pending); with
/// one `ResolvedTimestamps` reused throughout, a smaller range after a
/// larger one.
#[test]
fn timestamp_resolve_for_one_read_matches_the_usual() {
    let n = 3 * RESOLVE_CHUNK + 123;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mut queries = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in 0..n {
            slots.mark_recorded(i, NONE, false, 1, 0);
            queries.data[2 * i as usize] = (5 * i as u64 + 1) | (1 << 63);
            queries.data[2 * i as usize + 1] = 1;
        }
    }
    let mut out = ResolvedTimestamps::default();
    let compare = |out: &mut ResolvedTimestamps, queries: &Scripted, range: Range<u64>| {
        let r = range.start as usize..range.end as usize;
        samples.lock().unwrap().seen[r.clone()].fill(false);
        samples
            .resolve_timestamps_into(range.clone(), queries, out)
            .unwrap();
        let mine = read_timestamps(out);
        let seen_mine = samples.lock().unwrap().seen[r.clone()].to_vec();
        samples.lock().unwrap().seen[r.clone()].fill(false);
        let theirs = usual(&samples, queries, range.clone());
        let seen_theirs = samples.lock().unwrap().seen[r].to_vec();
        assert!(mine == theirs, "samples of {range:?} differ");
        assert!(seen_mine == seen_theirs, "seen of {range:?} differs");
        mine
    };
    // Every sample written: kept as read (the valid bits of the value).
    for range in [0..u64::from(n), 7..20, 0..2] {
        let all = compare(&mut out, &queries, range.clone());
        assert!(out.all_written, "{range:?} kept as read");
        assert_eq!(
            all[0],
            ((5 * range.start + 1) | (1 << 63), SampleStatus::Written)
        );
    }
    // Every kind of exception, in a range read on several threads.
    let pending = Ticket::new();
    {
        let mut slots = samples.lock().unwrap();
        samples.host_reset_table(&mut slots, 3, 1, SlotState::Fresh);
        queries.data[2 * 5 + 1] = 0;
        queries.data[2 * 6 + 1] = QUERY_FAILED;
        samples.host_reset_table(&mut slots, 8, 1, SlotState::Invalidated);
        slots.mark_alias(10, 2, 1);
        slots.mark_alias(RESOLVE_CHUNK + 4, n - 1, 1);
    }
    for range in [0..u64::from(n), 0..16, 2..12, 3..5, 8..10, 9..11] {
        compare(&mut out, &queries, range);
        assert!(!out.all_written);
    }
    // A recording still pending.
    {
        let mut slots = samples.lock().unwrap();
        slots.register(&pending);
        slots.note_reset(12, &pending);
        slots.mark_recorded(12, NONE, false, pending.id(), 0);
    }
    for range in [0..u64::from(n), 11..13] {
        compare(&mut out, &queries, range);
    }
    let all = compare(&mut out, &queries, 0..16);
    let status: Vec<_> = all.iter().map(|(_, s)| *s).collect();
    use SampleStatus::*;
    assert_eq!(
        status,
        [
            Written,
            Written,
            Written,
            NotWritten,
            Written,
            NotReady,
            Error,
            Written,
            Invalidated,
            Written,
            Written,
            Written,
            NotReady,
            Written,
            Written,
            Written
        ]
    );
    assert_eq!(all[10].0, all[2].0, "an alias reads its target");
    // Written, but laid out while a recording is pending elsewhere; kept as
    // read once it is done (and its range resolved, which forgets it).
    compare(&mut out, &queries, 13..16);
    assert!(out.all_written() && !out.all_written);
    pending.complete();
    let all = compare(&mut out, &queries, 12..16);
    assert!(out.all_written);
    assert_eq!(all[0].1, SampleStatus::Written);
}

/// The timestamp resolve for one read refuses what it cannot resolve, with
/// the usual resolve's typed errors, and leaves its output empty.
#[test]
fn timestamp_resolve_for_one_read_refuses_bad_input() {
    let samples = set(CommonCounterSet::Timestamp, 4, [ABSENT; 8]);
    let queries = Scripted {
        values: 1,
        data: vec![0; 8],
    };
    {
        let mut slots = samples.lock().unwrap();
        for i in 0..4 {
            slots.mark_recorded(i, NONE, false, 1, 0);
        }
    }
    let mut out = ResolvedTimestamps::default();
    samples
        .resolve_timestamps_into(0..4, &queries, &mut out)
        .unwrap();
    assert_eq!(out.len(), 4);
    let e = samples
        .resolve_timestamps_into(2..5, &queries, &mut out)
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::RangeOutOfBounds { .. })),
        "{e:?}"
    );
    assert!(out.is_empty() && out.span_count() == 0);
    out.for_each_span(|_, _, _| panic!("no spans"));
    let mut field_map = [ABSENT; 8];
    field_map[1] = 0;
    let stats = set(CommonCounterSet::Statistic, 4, field_map);
    let e = stats
        .resolve_timestamps_into(0..4, &queries, &mut out)
        .unwrap_err();
    assert!(e.to_string().contains("not timestamps"), "{e}");
    assert!(out.is_empty());
    let private = SampleSet::new(
        "private".into(),
        CommonCounterSet::Timestamp,
        StorageMode::Private,
        4,
        [ABSENT; 8],
        u64::MAX,
        "sample",
    )
    .unwrap();
    let e = private
        .resolve_timestamps_into(0..4, &queries, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Invalid(InvalidInput::CpuResolveOfPrivateBuffer { .. })
        ),
        "{e:?}"
    );
}

/// The AVX2 build of the timestamp layout and of the all-written check gives
/// exactly what the portable loop does: values, statuses, `seen` and the
/// result, for every mix of states and availability words (0, a count,
/// [`QUERY_FAILED`]) and lengths around the vector width.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx2_layout_matches_the_portable_one() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("no AVX2 on this CPU: nothing to compare");
        return;
    }
    let states_of = [
        SlotState::Fresh,
        SlotState::Recorded,
        SlotState::Invalidated,
        SlotState::Alias,
    ];
    let words = [0u64, 1, 7, QUERY_FAILED, u64::MAX - 1];
    for n in [0usize, 1, 3, 4, 5, 7, 8, 9, 31, 32, 33, 100] {
        for pattern in 0..12usize {
            // Pattern 0: every sample recorded and available (the fast
            // case); others mix states and words along the range.
            let states: Vec<SlotState> = (0..n)
                .map(|i| {
                    if pattern == 0 || (i * 7 + pattern) % 5 != 0 {
                        SlotState::Recorded
                    } else {
                        states_of[(i + pattern) % 4]
                    }
                })
                .collect();
            let pairs: Vec<u64> = (0..n)
                .flat_map(|i| {
                    let avail = if pattern == 0 || (i * 3 + pattern) % 4 != 0 {
                        1
                    } else {
                        words[(i + pattern) % words.len()]
                    };
                    [0x0123_4567_89ab_cdefu64.rotate_left(i as u32), avail]
                })
                .collect();
            let mask = if pattern % 2 == 0 {
                u64::MAX
            } else {
                (1 << 36) - 1
            };
            let run = |avx2: bool| {
                let mut bytes = vec![MaybeUninit::new(0xAAu8); 8 * n];
                let mut status = vec![MaybeUninit::new(SampleStatus::Error); n];
                let mut seen = vec![false; n];
                let out = Out {
                    bytes: &mut bytes,
                    status: &mut status,
                    seen: Some(&mut seen),
                };
                let all = if avx2 {
                    // SAFETY: AVX2 was detected above.
                    unsafe { layout_timestamps_avx2(&pairs, &states, mask, out) }
                } else {
                    layout_timestamps_loop(&pairs, &states, mask, out)
                };
                // SAFETY: every element was initialised when made.
                let bytes: Vec<u8> = bytes.iter().map(|b| unsafe { b.assume_init() }).collect();
                // SAFETY: as above.
                let status: Vec<SampleStatus> =
                    status.iter().map(|s| unsafe { s.assume_init() }).collect();
                let check = if avx2 {
                    // SAFETY: AVX2 was detected above.
                    unsafe { all_recorded_and_available_avx2(&pairs, &states) }
                } else {
                    all_recorded_and_available_loop(&pairs, &states)
                };
                (all, check, bytes, status, seen)
            };
            let (portable, avx2) = (run(false), run(true));
            assert_eq!(avx2, portable, "{n} samples, pattern {pattern}");
            let expect_all = states
                .iter()
                .zip(pairs.chunks_exact(2))
                .all(|(&s, q)| s == SlotState::Recorded && q[1] != 0 && q[1] != QUERY_FAILED);
            assert!(expect_all || n > 0 && pattern > 0);
            assert_eq!(
                (portable.0, portable.1),
                (expect_all, expect_all),
                "{n} samples, pattern {pattern}"
            );
        }
    }
}

/// Runs of aliases resolve to their target's value and status, each alias
/// its own: one that aliases an older generation of the same target (the
/// target written again since) is an error even right after a run of
/// current aliases of that target; one of another target reads that
/// target; and an alias of a target that is not available is not ready.
#[test]
fn runs_of_aliases_resolve_each_to_its_own_target() {
    let n = 32;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mut queries = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    for t in 0..4u64 {
        queries.data[2 * t as usize] = 100 * (t + 1);
        queries.data[2 * t as usize + 1] = 1;
    }
    // Target 1 stays unavailable.
    queries.data[3] = 0;
    {
        let mut slots = samples.lock().unwrap();
        for t in 0..4 {
            slots.mark_recorded(t, NONE, false, 1, 0);
        }
        // 13 aliases target 2 as first written...
        slots.mark_aliases(&[13], 2, 1);
        // ...which is written again: 10 to 12 alias the new one.
        slots.mark_recorded(2, NONE, false, 1, 0);
        slots.mark_aliases(&[10, 11, 12], 2, 1);
        slots.mark_aliases(&[14, 15], 3, 1);
        slots.mark_aliases(&[16], 1, 1);
    }
    let r = samples.resolve_cpu(10..17, &queries, None).unwrap();
    let got: Vec<(u64, SampleStatus)> = r
        .timestamps()
        .unwrap()
        .iter()
        .zip(r.statuses())
        .map(|(t, s)| (t.timestamp, *s))
        .collect();
    use SampleStatus::*;
    let e = crate::COUNTER_ERROR_VALUE;
    assert_eq!(
        got,
        [
            (300, Written),
            (300, Written),
            (300, Written),
            (e, Error),
            (400, Written),
            (400, Written),
            (e, NotReady),
        ]
    );
}
