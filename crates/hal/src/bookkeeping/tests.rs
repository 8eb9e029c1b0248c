//! The bookkeeping and CPU resolve on a fake backend: scripted query values
//! on the CPU, no GPU API, so these run on a machine without a Vulkan loader.

use super::*;
use crate::SampleValue;

/// A backend's query storage, scripted: `values` per query, then the
/// availability word.
struct Scripted {
    values: u32,
    data: Vec<u64>,
}

impl QueryRead for Scripted {
    fn values(&self) -> u32 {
        self.values
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let stride = self.stride();
        let from = first as usize * stride;
        out.copy_from_slice(&self.data[from..from + count as usize * stride]);
        Ok(())
    }
}

fn set(kind: CommonCounterSet, n: u32, field_map: [u8; 8]) -> SampleSet {
    SampleSet::new(
        "scripted".into(),
        kind,
        StorageMode::Shared,
        n,
        field_map,
        u64::MAX,
        "sample",
    )
    .unwrap()
}

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

/// An abandoned recording leaves its indices not written, dirty (the next
/// write resets first) and not pending; others' indices are untouched.
#[test]
fn abandoned_recordings_are_forgotten() {
    let samples = set(CommonCounterSet::Timestamp, 4, [ABSENT; 8]);
    let mine = Ticket::new();
    let other = Ticket::new();
    let queries = Scripted {
        values: 1,
        data: vec![5, 1, 0, 0, 0, 0, 0, 0],
    };
    let mut slots = samples.lock().unwrap();
    slots.register(&other);
    slots.mark_recorded(0, NONE, false, other.id(), 0);
    other.complete();
    slots.register(&mine);
    slots.mark_recorded(1, NONE, false, mine.id(), 0);
    assert!(samples.check_write(&slots, 1, false, other.id()).is_err());
    let e = samples.check_host_reset(&mut slots, &queries, 0, 4, "reset");
    assert!(e.is_err(), "index 1 is being recorded");
    mine.set_phase(Phase::Abandoned);
    slots.abandon(mine.id());
    assert_eq!(slots.state[1], SlotState::Fresh);
    assert!(slots.dirty[1], "an older value may be there");
    assert!(samples.check_write(&slots, 1, false, other.id()).unwrap());
    samples
        .check_host_reset(&mut slots, &queries, 0, 4, "reset")
        .unwrap();
    drop(slots);
    let r = samples.resolve_cpu(0..2, &queries, None).unwrap();
    assert_eq!(
        r.statuses(),
        &[SampleStatus::Written, SampleStatus::NotWritten]
    );
}

/// An index whose recording was submitted and not seen finished cannot be
/// reset on the host, even where its query reads available (the GPU may
/// still be running the rest of the recording); `check_not_submitted` says
/// so from the table alone, naming the first such index. Once the ticket
/// completes, or for indices of other recordings, it passes.
#[test]
fn submitted_recordings_keep_their_indices_from_host_resets() {
    let samples = set(CommonCounterSet::Timestamp, 4, [ABSENT; 8]);
    let done = Ticket::new();
    let flying = Ticket::new();
    let mut slots = samples.lock().unwrap();
    slots.register(&done);
    slots.mark_recorded(0, NONE, false, done.id(), 0);
    slots.register(&flying);
    slots.mark_recorded(2, NONE, false, flying.id(), 0);
    slots.mark_recorded(3, NONE, false, flying.id(), 0);
    done.set_phase(Phase::Submitted);
    done.complete();
    samples.check_not_submitted(&slots, 0, 4).unwrap();
    flying.set_phase(Phase::Submitted);
    // A later recording registering prunes finished tickets only.
    slots.register(&Ticket::new());
    samples.check_not_submitted(&slots, 0, 2).unwrap();
    let e = samples.check_not_submitted(&slots, 1, 3).unwrap_err();
    assert!(
        matches!(
            e.invalid(),
            Some(InvalidInput::SampleIndexReuse { index: 2, reason, .. }) if reason.contains("pending on the GPU")
        ),
        "{e}"
    );
    flying.complete();
    samples.check_not_submitted(&slots, 0, 4).unwrap();
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

/// A recording's locked write of `index`, then its claim of the block, as a
/// backend's slow path does it.
fn locked_write(samples: &SampleSet, claims: &mut LocalClaims, ticket: &Ticket, index: u32) {
    // As a backend's locked timestamp write: only the block's claim applied.
    let mut slots = samples.lock_block(index).unwrap();
    if let Some(i) = claims.release(samples, &mut slots, ticket) {
        panic!("conflict at {i}");
    }
    assert!(!samples
        .check_write(&slots, index, false, ticket.id())
        .unwrap());
    slots.register(ticket);
    slots.mark_recorded(index, NONE, false, ticket.id(), 0);
    claims.claim(samples, &mut slots, index, ticket);
}

/// Writes into a claimed block skip the lock, and the next lock shows them
/// as recorded by the claimant: pending, refused to others, and written
/// once available.
#[test]
fn claimed_writes_are_seen_by_the_next_lock() {
    let n = 2 * BLOCK + 5;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mine = Ticket::new();
    let other = Ticket::new();
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    // The rest of block 0 goes without the lock; index 0 is dirty now.
    assert!(!claims.try_write(&samples, 0));
    // So do blocks 1 and 2, claimed ahead (wholly fresh, nobody else
    // recording into the set); the last one is partial.
    for i in 1..n {
        assert!(claims.try_write(&samples, i), "{i}");
    }
    // Past the end: never clean.
    assert!(!claims.try_write(&samples, n));
    let mut slots = samples.lock().unwrap();
    for i in 0..n {
        assert_eq!(slots.state[i as usize], SlotState::Recorded, "{i}");
        assert_eq!(slots.rec[i as usize], mine.id(), "{i}");
        assert!(slots.dirty[i as usize], "{i}");
    }
    let e = samples.check_write(&slots, 7, false, other.id());
    assert!(e.is_err(), "written by an open recording");
    let none = Scripted {
        values: 1,
        data: vec![0; 2 * n as usize],
    };
    let e = samples.check_host_reset(&mut slots, &none, 0, n, "reset");
    assert!(e.is_err(), "recorded, not submitted: pending");
    assert_eq!(claims.release(&samples, &mut slots, &mine), None);
    assert!(slots.claims.is_empty());
    drop(slots);
    mine.set_phase(Phase::Done);
    let all = Scripted {
        values: 1,
        data: (0..n).flat_map(|i| [u64::from(i) + 10, 1]).collect(),
    };
    let r = samples.resolve_cpu(0..n as u64, &all, None).unwrap();
    assert!(r.all_written(), "{:?}", r.statuses());
}

/// A claim snapshot leaves out dirty indices, indices another open
/// recording wrote, and open ones; a later write of them takes the locked
/// path.
#[test]
fn a_claim_covers_only_indices_writable_as_they_are() {
    let samples = set(CommonCounterSet::Timestamp, BLOCK, [ABSENT; 8]);
    let (mine, other, done) = (Ticket::new(), Ticket::new(), Ticket::new());
    {
        let mut slots = samples.lock().unwrap();
        slots.register(&other);
        slots.mark_recorded(3, NONE, false, other.id(), 0);
        slots.register(&done);
        slots.mark_recorded(4, NONE, false, done.id(), 0);
        slots.dirty[4] = false;
        slots.open[5] = true;
    }
    done.complete();
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(!claims.try_write(&samples, 3), "another open recording's");
    assert!(
        claims.try_write(&samples, 4),
        "a finished recording's, reset"
    );
    assert!(!claims.try_write(&samples, 5), "open");
    assert!(claims.try_write(&samples, 6));
    assert!(!claims.try_write(&samples, 6), "written: dirty now");
}

/// Another recording's write into a claimed block revokes that index from
/// the claim: the claimant's own write of it takes the locked path (which
/// refuses it). A true race, where neither saw the other, is reported when
/// the claim is released.
#[test]
fn foreign_writes_revoke_and_races_are_reported() {
    let samples = set(CommonCounterSet::Timestamp, BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(claims.try_write(&samples, 1));
    {
        // The other recording's locked write of index 2: the claim holds the
        // block, so it claims nothing itself.
        let mut theirs = LocalClaims::default();
        locked_write(&samples, &mut theirs, &other, 2);
        assert!(theirs.is_empty(), "block 0 is claimed");
        let slots = samples.lock().unwrap();
        let e = samples.check_write(&slots, 1, false, other.id());
        assert!(e.is_err(), "index 1 is the claimant's");
    }
    assert!(!claims.try_write(&samples, 2), "revoked");
    let slots = samples.lock().unwrap();
    assert!(samples.check_write(&slots, 2, false, mine.id()).is_err());
    drop(slots);
    // A race: the claimant writes index 9 without the lock while another
    // thread, not seeing it yet, writes 9 under the lock.
    assert!(claims.try_write(&samples, 9));
    {
        let mut raw = samples.slots.lock().unwrap();
        raw.mark_recorded(9, NONE, false, other.id(), 0);
    }
    let mut slots = samples.lock().unwrap();
    assert_eq!(claims.release(&samples, &mut slots, &mine), Some(9));
}

/// A released claim says which indices it wrote without the lock (not the
/// locked write that claimed the block, not the revoked index), and the
/// index raced for.
#[test]
fn a_released_claim_names_its_writes() {
    let samples = set(CommonCounterSet::Timestamp, 3 * BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, BLOCK + 1);
    for i in [BLOCK + 2, BLOCK + 5, 2 * BLOCK - 1] {
        assert!(claims.try_write(&samples, i), "{i}");
    }
    assert!(claims.try_write(&samples, BLOCK + 9));
    {
        let mut raw = samples.slots.lock().unwrap();
        raw.mark_recorded(BLOCK + 9, NONE, false, other.id(), 0);
    }
    let mut slots = samples.lock().unwrap();
    let mut released = Vec::new();
    claims.release_written(&samples, &mut slots, &mine, |c| released.push(c));
    released.sort_by_key(|c| c.first);
    assert_eq!(
        released,
        [
            ReleasedClaim {
                first: BLOCK,
                written: 1 << 2 | 1 << 5 | 1 << 9 | 1 << 63,
                conflict: Some(BLOCK + 9),
            },
            // Claimed ahead (wholly fresh, nobody else recording), unwritten.
            ReleasedClaim {
                first: 2 * BLOCK,
                written: 0,
                conflict: None,
            }
        ]
    );
    claims.release_written(&samples, &mut slots, &mine, |c| {
        panic!("released twice: {c:?}")
    });
}

/// A released claim writes nothing without the lock, even right after it
/// was the one used last; claims on two sets each serve their own set as
/// the writes alternate between them.
#[test]
fn a_released_claim_takes_no_write() {
    let (a, b) = (
        set(CommonCounterSet::Timestamp, BLOCK, [ABSENT; 8]),
        set(CommonCounterSet::Timestamp, BLOCK, [ABSENT; 8]),
    );
    let mine = Ticket::new();
    let mut claims = LocalClaims::default();
    locked_write(&a, &mut claims, &mine, 0);
    locked_write(&b, &mut claims, &mine, 0);
    for i in 1..4 {
        assert!(claims.try_write(&b, i), "b[{i}]");
        assert!(claims.try_write(&a, i), "a[{i}]");
    }
    // `a`'s claim, the one used last, is released.
    let mut slots = a.lock().unwrap();
    assert_eq!(claims.release(&a, &mut slots, &mine), None);
    drop(slots);
    assert!(claims.holds(&b) && !claims.holds(&a));
    assert!(!claims.try_write(&a, 4), "released");
    assert!(claims.try_write(&b, 4), "b's claim stays");
    assert!(!claims.try_write(&a, 5), "released, after a write of b");
    claims.clear();
    assert!(!claims.try_write(&b, 5), "cleared");
    // Index 4 of `a` is clean in the table: only the claim was gone.
    let slots = a.lock().unwrap();
    assert!(!a.check_write(&slots, 4, false, mine.id()).unwrap());
}

/// A claim left by a recording that ended without releasing it (leaked) is
/// taken over, its writes kept.
#[test]
fn a_leaked_claim_is_taken_over() {
    let samples = set(CommonCounterSet::Timestamp, BLOCK, [ABSENT; 8]);
    let (old, new) = (Ticket::new(), Ticket::new());
    let mut leaked = LocalClaims::default();
    locked_write(&samples, &mut leaked, &old, 0);
    assert!(leaked.try_write(&samples, 1));
    old.set_phase(Phase::Abandoned);
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &new, 2);
    assert!(!claims.is_empty(), "taken over");
    assert!(!claims.try_write(&samples, 1), "the leaked write is dirty");
    assert!(claims.try_write(&samples, 3));
    let slots = samples.lock().unwrap();
    assert_eq!(slots.rec[1], old.id());
    assert_eq!(slots.rec[3], new.id());
}

/// A pass's attachment points: an index attached twice is refused wherever
/// the second one is (among the first few or past them), the same index
/// of another buffer is not.
#[test]
fn attachment_points_attached_twice_are_refused() {
    let a = set(CommonCounterSet::Timestamp, 64, [ABSENT; 8]);
    let b = set(CommonCounterSet::Timestamp, 64, [ABSENT; 8]);
    let points = |list: &[(usize, u32)]| -> Vec<(usize, u32)> { list.to_vec() };
    let check = |list: Vec<(usize, u32)>| {
        check_pass_attachments(
            list.into_iter()
                .map(|(key, i)| (key, if key == 1 { &a } else { &b }, i)),
        )
    };
    let distinct: Vec<(usize, u32)> = (0..12u32).map(|i| (1 + i as usize % 2, i / 2)).collect();
    check(distinct.clone()).unwrap();
    for (first, second) in [(0, 1), (2, 9), (9, 11), (0, 11)] {
        let mut list = points(&distinct);
        list[second] = list[first];
        let e = check(list).unwrap_err();
        assert!(
            e.to_string().contains("attached twice"),
            "{first} {second}: {e}"
        );
    }
    let e = check(vec![(1, 64)]).unwrap_err();
    assert!(e.to_string().contains("64"), "{e}");
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

/// What `resolve_timestamps_into` reads for every sample of `range`, each as
/// `get` and as `spans` give it.
fn read_timestamps(out: &ResolvedTimestamps) -> Vec<(u64, SampleStatus)> {
    let all: Vec<_> = (0..out.len()).map(|i| out.get(i).unwrap()).collect();
    assert!(out.get(out.len()).is_none());
    let mut spans = Vec::new();
    out.for_each_span(|k, a, b| {
        assert_eq!(k, spans.len() / 2);
        spans.extend([a, b]);
    });
    assert_eq!(spans, all[..2 * (all.len() / 2)], "spans and get agree");
    for status in [
        SampleStatus::Written,
        SampleStatus::NotWritten,
        SampleStatus::NotReady,
        SampleStatus::Error,
        SampleStatus::Invalidated,
    ] {
        let n = all.iter().filter(|(_, s)| *s == status).count();
        assert_eq!(out.count(status), n, "count of {status:?}");
    }
    assert_eq!(
        out.all_written(),
        all.iter().all(|(_, s)| *s == SampleStatus::Written)
    );
    all
}

/// The usual resolve of `range`, sample by sample, and the `seen` it leaves.
fn usual(samples: &SampleSet, queries: &Scripted, range: Range<u64>) -> Vec<(u64, SampleStatus)> {
    let r = samples.resolve_cpu(range, queries, None).unwrap();
    r.timestamps()
        .unwrap()
        .iter()
        .zip(r.statuses())
        .map(|(t, s)| (t.timestamp, *s))
        .collect()
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

/// A recording claims the wholly fresh blocks after its locked write's in
/// its group (at most `AHEAD`), and no more: not past the group's end, not
/// past a block with a dirty index, not a block another recording claimed,
/// not in a group where another recording holds a claim, and not in a
/// group where recordings wrote into each other's claims; recordings into
/// groups of their own each claim ahead, side by side.
#[test]
fn blocks_are_claimed_ahead_only_when_fresh_and_alone() {
    let (ahead, group) = (super::claim::AHEAD, super::claim::GROUP);
    assert_eq!(group, ahead + 1);
    let n = (group + 2) * BLOCK;
    let samples = set(CommonCounterSet::Timestamp, n, [ABSENT; 8]);
    let mine = Ticket::new();
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    for i in 1..group * BLOCK {
        assert!(claims.try_write(&samples, i), "{i}");
    }
    assert!(
        !claims.try_write(&samples, group * BLOCK),
        "at most {ahead} blocks ahead"
    );
    // The next locked write releases them all, then claims on.
    locked_write(&samples, &mut claims, &mine, group * BLOCK);
    assert!(claims.try_write(&samples, (group + 1) * BLOCK + 3));
    drop(claims);
    mine.set_phase(Phase::Done);

    // Claims ahead end with the group: from block 2, blocks 2 and 3.
    let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
    let mine = Ticket::new();
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, (group - 2) * BLOCK);
    assert!(
        claims.try_write(&samples, (group - 1) * BLOCK + 7),
        "the group's last block"
    );
    assert!(
        !claims.try_write(&samples, group * BLOCK + 7),
        "not the next group's"
    );
    drop(claims);

    // A dirty index in block 2 stops the claim after block 1.
    let samples = set(CommonCounterSet::Timestamp, 4 * BLOCK, [ABSENT; 8]);
    let (done, mine) = (Ticket::new(), Ticket::new());
    {
        let mut slots = samples.lock().unwrap();
        slots.mark_recorded(2 * BLOCK + 40, NONE, false, done.id(), 0);
    }
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(claims.try_write(&samples, BLOCK + 7), "block 1: fresh");
    assert!(!claims.try_write(&samples, 2 * BLOCK + 7), "block 2: not");
    assert!(!claims.try_write(&samples, 3 * BLOCK + 7), "nor past it");
    drop(claims);

    // Another open recording's claims (block 1, and 2 and 3 ahead: it was
    // alone) leave block 0 alone to this one, with nothing ahead.
    let samples = set(CommonCounterSet::Timestamp, 4 * BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut theirs = LocalClaims::default();
    locked_write(&samples, &mut theirs, &other, BLOCK);
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(claims.try_write(&samples, 5), "its own block");
    assert!(!claims.try_write(&samples, BLOCK + 5), "the other's");
    assert!(theirs.try_write(&samples, BLOCK + 5));
    assert!(theirs.try_write(&samples, 3 * BLOCK + 5), "its claim ahead");
    drop((claims, theirs));

    // Another open recording's claim in the group, after or before:
    // their indices interleave, and nothing is claimed ahead. One in the
    // next group, however near, is no obstacle.
    for (theirs_at, at, claims_ahead) in [(2, 0, false), (0, 2, false), (group, 0, true)] {
        let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
        let (mine, other, done) = (Ticket::new(), Ticket::new(), Ticket::new());
        if theirs_at == 0 {
            // Block 1 dirty: the other claims block 0 alone.
            let mut slots = samples.lock().unwrap();
            slots.mark_recorded(BLOCK + 40, NONE, false, done.id(), 0);
        }
        let mut theirs = LocalClaims::default();
        locked_write(&samples, &mut theirs, &other, theirs_at * BLOCK);
        let mut claims = LocalClaims::default();
        locked_write(&samples, &mut claims, &mine, at * BLOCK);
        assert!(claims.try_write(&samples, at * BLOCK + 5), "its own block");
        assert_eq!(
            claims.try_write(&samples, (at + 1) * BLOCK + 5),
            claims_ahead,
            "block {at} with another's claim on block {theirs_at}"
        );
        drop((claims, theirs));
    }
    // A claim left by a recording that ended without releasing it (leaked)
    // interleaves with nothing.
    let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
    let (mine, leaked) = (Ticket::new(), Ticket::new());
    let mut theirs = LocalClaims::default();
    locked_write(&samples, &mut theirs, &leaked, 2 * BLOCK);
    assert!(theirs.try_write(&samples, 2 * BLOCK + 9));
    // Dropped unreleased, as a leaked command buffer's claims are.
    drop(theirs);
    leaked.set_phase(Phase::Done);
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(
        claims.try_write(&samples, BLOCK + 5),
        "ahead beside a leaked claim"
    );
    assert!(!claims.try_write(&samples, 2 * BLOCK + 5), "not into it");
    drop(claims);
    // Its writes are applied when the leaked claim is taken over.
    locked_write(&samples, &mut LocalClaims::default(), &mine, 2 * BLOCK + 10);
    assert_eq!(
        samples.lock().unwrap().rec[(2 * BLOCK + 9) as usize],
        leaked.id(),
        "the leaked claim's write"
    );

    // Recordings into groups of their own (one thread's range each) both
    // claim ahead.
    let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut theirs = LocalClaims::default();
    locked_write(&samples, &mut theirs, &other, group * BLOCK);
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    for b in 1..=ahead {
        assert!(claims.try_write(&samples, b * BLOCK + 5), "block {b} ahead");
        assert!(
            theirs.try_write(&samples, (group + b) * BLOCK + 5),
            "theirs"
        );
    }
    drop((claims, theirs));

    // Once a recording wrote into a block another one claimed, their
    // indices interleave in that group: nothing is claimed ahead there,
    // even alone, until a host reset of every index of the group. Other
    // groups claim ahead as before.
    let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut theirs = LocalClaims::default();
    locked_write(&samples, &mut theirs, &other, 0);
    // Into the other's claim ahead (block 1): the lock, no claim.
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, BLOCK + 1);
    assert!(claims.is_empty(), "block 1 is the other's");
    // The other ends its recording (its claims released), then this one
    // claims in another group.
    theirs.release(&samples, &mut samples.lock().unwrap(), &other);
    other.set_phase(Phase::Done);
    locked_write(&samples, &mut claims, &mine, 2 * group * BLOCK);
    assert!(
        claims.try_write(&samples, (2 * group + 1) * BLOCK + 5),
        "ahead in another group"
    );
    let reset_and_claim_first = |claims: &mut LocalClaims, count: u32| {
        {
            let mut slots = samples.lock().unwrap();
            samples.host_reset_table(&mut slots, 0, count, SlotState::Fresh);
        }
        locked_write(&samples, claims, &mine, 0);
        claims.try_write(&samples, BLOCK + 5)
    };
    assert!(
        !reset_and_claim_first(&mut claims, (group - 1) * BLOCK),
        "nothing ahead after a reset of part of the group"
    );
    assert!(
        reset_and_claim_first(&mut claims, group * BLOCK),
        "ahead again after a reset of the whole group"
    );
}

/// Another recording's writes into a block claimed ahead take the lock:
/// an index the claimant wrote is refused to it, the index it writes is
/// revoked from the claimant, and a true race is reported when the
/// claimant's claims end.
#[test]
fn writes_into_blocks_claimed_ahead_are_checked() {
    let samples = set(CommonCounterSet::Timestamp, 4 * BLOCK, [ABSENT; 8]);
    let (mine, other) = (Ticket::new(), Ticket::new());
    let mut claims = LocalClaims::default();
    locked_write(&samples, &mut claims, &mine, 0);
    assert!(claims.try_write(&samples, 2 * BLOCK + 1), "claimed ahead");
    {
        let mut theirs = LocalClaims::default();
        locked_write(&samples, &mut theirs, &other, 2 * BLOCK + 2);
        assert!(theirs.is_empty(), "block 2 is claimed");
        let slots = samples.lock().unwrap();
        let e = samples.check_write(&slots, 2 * BLOCK + 1, false, other.id());
        assert!(e.is_err(), "the claimant's write");
    }
    assert!(!claims.try_write(&samples, 2 * BLOCK + 2), "revoked");
    assert!(claims.try_write(&samples, 2 * BLOCK + 3), "the rest stays");
    // A race in block 3: written by both, neither seeing the other.
    assert!(claims.try_write(&samples, 3 * BLOCK + 9));
    {
        let mut raw = samples.slots.lock().unwrap();
        raw.mark_recorded(3 * BLOCK + 9, NONE, false, other.id(), 0);
    }
    let mut slots = samples.lock().unwrap();
    assert_eq!(
        claims.release(&samples, &mut slots, &mine),
        Some(3 * BLOCK + 9)
    );
    assert!(slots.claims.is_empty(), "every block released");
}

/// The next lock applies claimed writes as runs across blocks: each index
/// written is recorded by its own recording (two recordings' adjacent
/// blocks stay apart), and an index left unwritten stays fresh.
#[test]
fn claimed_writes_across_blocks_are_applied_each_to_its_recording() {
    let samples = set(CommonCounterSet::Timestamp, 4 * BLOCK, [ABSENT; 8]);
    let (a, b) = (Ticket::new(), Ticket::new());
    let (mut ca, mut cb) = (LocalClaims::default(), LocalClaims::default());
    // Not at the block's first index, so that `b`'s claimed writes start
    // where `a`'s end. `b` claims first, and blocks 2 and 3 ahead; `a`,
    // beside it, nothing ahead.
    locked_write(&samples, &mut cb, &b, BLOCK + 5);
    locked_write(&samples, &mut ca, &a, 0);
    for i in 0..BLOCK {
        if i != 0 && i != 10 {
            assert!(ca.try_write(&samples, i), "{i}");
        }
        if i != 5 {
            assert!(cb.try_write(&samples, BLOCK + i), "{}", BLOCK + i);
        }
    }
    assert!(!ca.try_write(&samples, 2 * BLOCK), "`b`'s block, ahead");
    let slots = samples.lock().unwrap();
    for i in 0..2 * BLOCK as usize {
        let (state, rec) = (slots.state[i], slots.rec[i]);
        if i == 10 {
            assert_eq!((state, rec), (SlotState::Fresh, 0), "{i}");
        } else {
            let who = if i < BLOCK as usize { a.id() } else { b.id() };
            assert_eq!((state, rec), (SlotState::Recorded, who), "{i}");
            assert!(slots.dirty[i], "{i}");
        }
    }
    assert_eq!(slots.state[2 * BLOCK as usize], SlotState::Fresh);
}

/// A locked write applies the claim on its own block and no other: another
/// recording's claimed writes stay for whoever reads their block (or that
/// recording's release), so that threads recording into one set do not
/// apply each other's writes under the lock. A write into a claimed block
/// still sees the claimant's writes, and a reader's lock sees them all.
#[test]
fn a_locked_write_applies_only_the_claim_on_its_block() {
    let group = super::claim::GROUP;
    let samples = set(CommonCounterSet::Timestamp, 3 * group * BLOCK, [ABSENT; 8]);
    let (a, b) = (Ticket::new(), Ticket::new());
    let (mut theirs, mut mine) = (LocalClaims::default(), LocalClaims::default());
    locked_write(&samples, &mut theirs, &a, 0);
    assert!(theirs.try_write(&samples, 5));
    locked_write(&samples, &mut mine, &b, group * BLOCK);
    assert!(mine.try_write(&samples, group * BLOCK + 5));
    // This recording's next locked write, in another group: its own claims
    // are released (their writes applied), the other's are not touched.
    locked_write(&samples, &mut mine, &b, 2 * group * BLOCK);
    {
        let slots = samples.slots.lock().unwrap();
        assert_eq!(
            slots.rec[group as usize * BLOCK as usize + 5],
            b.id(),
            "its own"
        );
        assert_eq!(slots.rec[5], 0, "the other's claimed write, not applied");
    }
    // A write into the other's block applies its claim first: the index it
    // wrote is refused.
    {
        let slots = samples.lock_block(7).unwrap();
        assert_eq!(slots.rec[5], a.id());
        assert!(samples.check_write(&slots, 5, false, b.id()).is_err());
    }
    // A reader sees every claimed write.
    assert!(mine.try_write(&samples, 2 * group * BLOCK + 5));
    assert_eq!(
        samples.lock().unwrap().rec[(2 * group * BLOCK + 5) as usize],
        b.id()
    );
}

/// A pass's relaxed writes, marked as aliases at its end all at once,
/// revoke from another recording's claim exactly the indices they alias
/// (its own write of them is then refused), and nothing from the marking
/// recording's own claims.
#[test]
fn aliases_marked_at_once_revoke_only_from_others_claims() {
    let group = super::claim::GROUP;
    let samples = set(CommonCounterSet::Timestamp, 2 * group * BLOCK, [ABSENT; 8]);
    let (a, b) = (Ticket::new(), Ticket::new());
    let (mut theirs, mut mine) = (LocalClaims::default(), LocalClaims::default());
    locked_write(&samples, &mut theirs, &a, 0);
    let own = group * BLOCK;
    locked_write(&samples, &mut mine, &b, own);
    {
        let mut slots = samples.lock().unwrap();
        slots.mark_aliases(&[6, 9, own + 3, own + 4], own, b.id());
        assert_eq!(slots.rec[6], b.id());
        assert_eq!(slots.link[9], own);
        assert_eq!(slots.state[own as usize + 3], SlotState::Alias);
    }
    assert!(
        !theirs.try_write(&samples, 6),
        "aliased by another: revoked"
    );
    assert!(
        !theirs.try_write(&samples, 9),
        "aliased by another: revoked"
    );
    assert!(theirs.try_write(&samples, 7), "not aliased: still its own");
    assert!(mine.try_write(&samples, own + 5), "its own claim untouched");
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
