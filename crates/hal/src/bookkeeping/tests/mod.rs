//! The bookkeeping and CPU resolve on a fake backend: scripted query values
//! on the CPU, no GPU API, so these run on a machine without a Vulkan loader.

use super::resolve::*;
use super::*;
use crate::SampleValue;

mod claims;
mod resolve;

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
