//! Claims, tickets and host resets: who may write which index, and what
//! each recording keeps.

use super::*;

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
