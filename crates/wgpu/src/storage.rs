//! One sample buffer's or heap's query set, the values read back from it,
//! and their availability.

use gpu_counters_hal::bookkeeping::{QueryRead, SampleSet, Ticket};
use gpu_counters_hal::storage::SampleStorage;
use gpu_counters_hal::{Error, Result};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const MAP_PENDING: u8 = 0;
const MAP_OK: u8 = 1;
const MAP_FAILED: u8 = 2;

/// Read-back buffers kept for reuse per storage: one submission's in
/// flight per frame, a few frames.
const SPARE_READBACKS: usize = 4;

// A claimed block is one word of `Written` (`QuerySetStorage::note_claimed_writes`).
const _: () = assert!(gpu_counters_hal::bookkeeping::BLOCK == 64);

/// The indices one recording wrote into one storage, as a bit per index
/// (a write is one OR: this runs for every sample recorded).
pub(crate) struct Written {
    words: Box<[u64]>,
}

impl Written {
    /// None written of `storage`'s queries.
    pub(crate) fn new(storage: &QuerySetStorage) -> Self {
        Self {
            words: vec![0; storage.latest.len().div_ceil(64)].into(),
        }
    }

    #[inline]
    fn set(&mut self, i: u32) {
        if let Some(w) = self.words.get_mut((i / 64) as usize) {
            *w |= 1 << (i % 64);
        }
    }

    /// The runs `(first, count)` of indices set below `limit`, in order:
    /// a word at a time (a submission's read-back takes these; a word of
    /// 64 written or unwritten indices is one step, not 64).
    fn runs(&self, limit: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        // The first index of the run being scanned, if one is open.
        let mut open: Option<u32> = None;
        for (k, &w) in self.words.iter().enumerate() {
            let base = 64 * k as u32;
            let mut bit = 0u32;
            while bit < 64 {
                let rest = w >> bit;
                match open {
                    Some(first) => {
                        bit += rest.trailing_ones();
                        if bit < 64 {
                            out.push((first, base + bit - first));
                            open = None;
                        }
                    }
                    None if rest == 0 => break,
                    None => {
                        bit += rest.trailing_zeros();
                        open = Some(base + bit);
                    }
                }
            }
        }
        if let Some(first) = open {
            out.push((first, 64 * self.words.len() as u32 - first));
        }
        // No index at or past `limit` is ever set; cut any run there all
        // the same.
        out.retain_mut(|(first, count)| {
            *count = (*count).min(limit.saturating_sub(*first));
            *count > 0
        });
        out
    }
}

/// The read-back of one submission's writes into one query set.
pub(crate) struct Readback {
    /// The resolve destination, then the mapped copy; both kept for reuse
    /// once the values are in.
    resolve: wgpu::Buffer,
    buffer: wgpu::Buffer,
    /// Runs of queries `(first, count, byte offset)` in `buffer`: exactly
    /// the indices written.
    runs: Vec<(u32, u32, u64)>,
    /// Where `map_async` got to.
    mapped: Arc<AtomicU8>,
    /// The submission's ticket: values count only once it is done, and its
    /// id names the writes (see [`QuerySetStorage::latest`]).
    ticket: Ticket,
}

/// The host side of the read-back values.
struct Host {
    /// `values` words per query.
    values: Vec<u64>,
    /// The write whose value each query holds (its recording's ticket id;
    /// 0: none, or a timestamp the GPU never wrote).
    arrived: Vec<u64>,
    /// Read-backs of submitted work whose values have not arrived yet.
    pending: Vec<Readback>,
    /// Read-back buffer pairs (resolve, mapped copy) free for reuse.
    spare: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

/// A sample buffer's or heap's wgpu query set and host values: the
/// storage of [`CounterSampleBuffer`](crate::CounterSampleBuffer) and
/// [`CounterHeap`](crate::CounterHeap).
pub struct QuerySetStorage {
    pub(crate) samples: SampleSet,
    pub(crate) query_set: wgpu::QuerySet,
    /// The device it belongs to: a recorder of another refuses it.
    pub(crate) device_id: gpu_counters_hal::DeviceId,
    device: wgpu::Device,
    /// `u64` values per query.
    values: u32,
    /// The latest recorded write of each query: its recording's ticket id
    /// (0: none since creation or the last host reset). A query's value is
    /// available when the write it holds is this one. Stored and loaded
    /// under the sample set's lock (a locked write, the end of a claim for
    /// the writes made under it, host reset, resolve), or by a read-back
    /// of a submission that follows the store; atomic only so that a write
    /// needs no lock of the host values.
    latest: Box<[AtomicU64]>,
    host: Mutex<Host>,
}

impl QuerySetStorage {
    pub(crate) fn new(
        samples: SampleSet,
        query_set: wgpu::QuerySet,
        device: (wgpu::Device, gpu_counters_hal::DeviceId),
        values: u32,
    ) -> Self {
        let n = samples.count as usize;
        let (device, device_id) = device;
        Self {
            samples,
            query_set,
            device_id,
            device,
            values,
            latest: (0..n).map(|_| AtomicU64::new(0)).collect(),
            host: Mutex::new(Host {
                values: vec![0; n * values as usize],
                arrived: vec![0; n],
                pending: Vec::new(),
                spare: Vec::new(),
            }),
        }
    }

    /// Notes new writes of `indices` by the recording of ticket `id`, with
    /// the sample set's lock held: their values are unavailable until the
    /// read-back of these writes arrives. Marks each in `written`.
    #[inline]
    pub(crate) fn begin_writes(&self, indices: &[u32], id: u64, written: &mut Written) {
        for &i in indices {
            if let Some(latest) = self.latest.get(i as usize) {
                latest.store(id, Ordering::Relaxed);
                written.set(i);
            }
        }
    }

    /// Notes the writes of the recording of ticket `id` made under a claim
    /// that just ended, with the sample set's lock held: the indices
    /// `first + i` for each bit `i` of `mask` (`first` is a block's first
    /// index, a multiple of 64), as [`QuerySetStorage::begin_writes`] does.
    pub(crate) fn note_claimed_writes(
        &self,
        first: u32,
        mask: u64,
        id: u64,
        written: &mut Written,
    ) {
        if mask == 0 {
            return;
        }
        let Some(latest) = self.latest.get(first as usize..) else {
            return;
        };
        let mut bits = mask;
        while bits != 0 {
            if let Some(l) = latest.get(bits.trailing_zeros() as usize) {
                l.store(id, Ordering::Relaxed);
            }
            bits &= bits - 1;
        }
        if let Some(w) = written.words.get_mut((first / 64) as usize) {
            *w |= mask;
        }
    }

    /// Records, at the end of `encoder`, the resolve of the queries in
    /// `written` and their copy into a `MAP_READ` buffer (reused from an
    /// earlier read-back where one is large enough). `None` when there is
    /// nothing to read back.
    pub(crate) fn record_readback(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        written: Written,
        ticket: &Ticket,
    ) -> Option<Readback> {
        let stride = 8 * u64::from(self.values);
        let mut at = 0u64;
        let runs: Vec<(u32, u32, u64)> = written
            .runs(self.samples.count)
            .into_iter()
            .map(|(first, count)| {
                let offset = at;
                at = (at + u64::from(count) * stride)
                    .next_multiple_of(wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT);
                (first, count, offset)
            })
            .collect();
        if runs.is_empty() {
            return None;
        }
        let size = at;
        let spare = {
            let mut host = lock(&self.host);
            let k = host.spare.iter().position(|(r, _)| r.size() >= size);
            k.map(|k| host.spare.swap_remove(k))
        };
        let (resolve, buffer) = spare.unwrap_or_else(|| {
            let make = |label, usage| {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage,
                    mapped_at_creation: false,
                })
            };
            (
                make(
                    "gpu-counters resolve",
                    wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                ),
                make(
                    "gpu-counters read-back",
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                ),
            )
        });
        for &(first, count, offset) in &runs {
            encoder.resolve_query_set(&self.query_set, first..first + count, &resolve, offset);
        }
        encoder.copy_buffer_to_buffer(&resolve, 0, &buffer, 0, size);
        Some(Readback {
            resolve,
            buffer,
            runs,
            mapped: Arc::new(AtomicU8::new(MAP_PENDING)),
            ticket: ticket.clone(),
        })
    }

    /// The bytes of `rb`'s buffer its runs fill (the buffer may be a larger
    /// one reused).
    fn readback_size(&self, rb: &Readback) -> u64 {
        rb.runs.last().map_or(0, |&(_, count, offset)| {
            offset + u64::from(count) * 8 * u64::from(self.values)
        })
    }

    /// Starts mapping `rb` (after its submission) and keeps it until its
    /// values arrive.
    pub(crate) fn start_map(&self, rb: Readback) {
        let flag = rb.mapped.clone();
        rb.buffer
            .slice(..self.readback_size(&rb))
            .map_async(wgpu::MapMode::Read, move |r| {
                flag.store(
                    if r.is_ok() { MAP_OK } else { MAP_FAILED },
                    Ordering::Release,
                );
            });
        lock(&self.host).pending.push(rb);
    }

    /// Polls the device without waiting, then takes in the values of every
    /// read-back whose submission is done and whose buffer is mapped. A
    /// timestamp that came back 0 was never written by the GPU (a pass's
    /// timestamp write handed out and never used: wgpu reads it as 0, and no
    /// GPU clock reads exactly 0 ticks): the bookkeeping forgets that write
    /// ([`SampleTable::forget_unwritten`](gpu_counters_hal::bookkeeping::SampleTable::forget_unwritten)),
    /// so it resolves NotWritten, not NotReady for ever.
    pub(crate) fn harvest(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Poll)
            .map_err(crate::poll_err("resolve"))?;
        let mut host = lock(&self.host);
        if host.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut host.pending);
        let mut first_error = None;
        // Timestamps that came back unwritten: (index, the write's ticket).
        let mut unwritten: Vec<(u32, u64)> = Vec::new();
        let values = self.values as usize;
        let timestamps = self.samples.set == gpu_counters_hal::CommonCounterSet::Timestamp;
        for rb in pending {
            match rb.mapped.load(Ordering::Acquire) {
                MAP_PENDING => {
                    host.pending.push(rb);
                    continue;
                }
                MAP_FAILED => {
                    first_error.get_or_insert_with(|| {
                        Error::Internal(format!(
                            "`{}`: mapping a read-back buffer failed; its samples stay not ready",
                            self.samples.label
                        ))
                    });
                    continue;
                }
                _ => {}
            }
            if !rb.ticket.is_done() {
                // Mapped means the submission finished: the work-done
                // callback runs in the same poll, or has yet to.
                rb.ticket.complete();
            }
            let id = rb.ticket.id();
            {
                let view = match rb
                    .buffer
                    .slice(..self.readback_size(&rb))
                    .get_mapped_range()
                {
                    Ok(view) => view,
                    Err(e) => {
                        first_error.get_or_insert_with(|| {
                            Error::Internal(format!("read-back get_mapped_range: {e}"))
                        });
                        continue;
                    }
                };
                let host = &mut *host;
                for &(first, count, offset) in &rb.runs {
                    let (f, c, at) = (first as usize, count as usize, offset as usize);
                    let (Some(src), Some(latest), Some(dst), Some(arrived)) = (
                        view.get(at..at + 8 * c * values),
                        self.latest.get(f..f + c),
                        host.values.get_mut(f * values..(f + c) * values),
                        host.arrived.get_mut(f..f + c),
                    ) else {
                        continue;
                    };
                    if values == 1 {
                        // Timestamps: one value a query, the loop below
                        // without its inner one.
                        for (k, (((src, l), d), a)) in src
                            .chunks_exact(8)
                            .zip(latest)
                            .zip(dst.iter_mut())
                            .zip(arrived)
                            .enumerate()
                        {
                            if l.load(Ordering::Relaxed) != id {
                                continue;
                            }
                            let mut w = [0u8; 8];
                            w.copy_from_slice(src);
                            *d = u64::from_ne_bytes(w);
                            *a = if timestamps && *d == 0 {
                                unwritten.push((first + k as u32, id));
                                0
                            } else {
                                id
                            };
                        }
                        continue;
                    }
                    for (k, (((src, l), dst), a)) in src
                        .chunks_exact(8 * values)
                        .zip(latest)
                        .zip(dst.chunks_exact_mut(values))
                        .zip(arrived)
                        .enumerate()
                    {
                        // A later write (or a host reset) since: this value
                        // is old.
                        if l.load(Ordering::Relaxed) != id {
                            continue;
                        }
                        for (d, b) in dst.iter_mut().zip(src.chunks_exact(8)) {
                            let mut w = [0u8; 8];
                            w.copy_from_slice(b);
                            *d = u64::from_ne_bytes(w);
                        }
                        // wgpu reads an unwritten query as 0 (a pass's
                        // timestamp writes handed out and never used, say).
                        // No GPU clock reads exactly 0 ticks, so a timestamp
                        // of 0 has no value: it stays unavailable and
                        // resolves to the error value, never to 0.
                        let unwritten_timestamp = timestamps && dst[0] == 0;
                        if unwritten_timestamp {
                            unwritten.push((first + k as u32, id));
                        }
                        *a = if unwritten_timestamp { 0 } else { id };
                    }
                }
            }
            rb.buffer.unmap();
            if host.spare.len() < SPARE_READBACKS {
                host.spare.push((rb.resolve, rb.buffer));
            }
        }
        drop(host);
        if !unwritten.is_empty() {
            // The bookkeeping's lock is taken before the host values'
            // elsewhere: never both in the other order.
            let mut slots = self.samples.lock()?;
            for (i, id) in unwritten {
                // Still that write (no later write or reset since).
                if self
                    .latest
                    .get(i as usize)
                    .is_some_and(|l| l.load(Ordering::Relaxed) == id)
                {
                    slots.forget_unwritten(i, id);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The wgpu query set, for the caller's own pass descriptors (record
    /// through [`Recorder`](crate::Recorder) so the bookkeeping knows of the
    /// writes).
    pub fn query_set(&self) -> &wgpu::QuerySet {
        &self.query_set
    }
}

/// A resolve or host reset first takes in the read-backs that arrived
/// (a poll of the device, then the read-backs mapped since).
impl SampleStorage for QuerySetStorage {
    fn samples(&self) -> &SampleSet {
        &self.samples
    }

    fn update(&self) -> Result<()> {
        self.harvest()
    }

    /// Forgets `first..first+count` on the host: no value, no write.
    fn clear(&self, first: u32, count: u32) {
        let range = first as usize..(first as usize + count as usize);
        let mut host = lock(&self.host);
        if let Some(arrived) = host.arrived.get_mut(range.clone()) {
            arrived.fill(0);
        }
        for l in self.latest.get(range).unwrap_or_default() {
            l.store(0, Ordering::Relaxed);
        }
    }
}

impl QueryRead for QuerySetStorage {
    fn values(&self) -> u32 {
        self.values
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let host = lock(&self.host);
        let values = self.values as usize;
        let stride = values + 1;
        let (f, n) = (first as usize, count as usize);
        if f + n > host.arrived.len() || out.len() != n * stride {
            return Err(Error::Internal(format!(
                "wgpu read of {first}+{count} past the buffer or into a wrong-sized slice"
            )));
        }
        let (Some(vals), Some(arrived), Some(latest)) = (
            host.values.get(f * values..(f + n) * values),
            host.arrived.get(f..f + n),
            self.latest.get(f..f + n),
        ) else {
            return Err(Error::Internal(format!(
                "wgpu read of {first}+{count} past the buffer"
            )));
        };
        // Zipped, so that a timestamp read (a million of them) checks no
        // bounds per query.
        if values == 1 {
            for ((q, (&v, &a)), l) in out
                .chunks_exact_mut(2)
                .zip(vals.iter().zip(arrived))
                .zip(latest)
            {
                q[0] = v;
                q[1] = u64::from(a != 0 && l.load(Ordering::Relaxed) == a);
            }
            return Ok(());
        }
        for (((q, v), &a), l) in out
            .chunks_exact_mut(stride)
            .zip(vals.chunks_exact(values))
            .zip(arrived)
            .zip(latest)
        {
            q[..values].copy_from_slice(v);
            q[values] = u64::from(a != 0 && l.load(Ordering::Relaxed) == a);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Written;

    /// The runs of `words`, an index at a time: what `Written::runs` must
    /// give.
    fn runs_by_index(words: &[u64], limit: u32) -> Vec<(u32, u32)> {
        let set = |i: u32| i < limit && words[(i / 64) as usize] & (1 << (i % 64)) != 0;
        let mut out = Vec::new();
        let mut i = 0;
        while i < 64 * words.len() as u32 {
            if set(i) {
                let first = i;
                while i < 64 * words.len() as u32 && set(i) {
                    i += 1;
                }
                out.push((first, i - first));
            } else {
                i += 1;
            }
        }
        out
    }

    #[test]
    fn runs_a_word_at_a_time_match_runs_an_index_at_a_time() {
        let mut cases: Vec<Vec<u64>> = vec![
            vec![],
            vec![0],
            vec![u64::MAX],
            vec![u64::MAX, u64::MAX, 0, u64::MAX],
            vec![1 << 63, 1, 1 << 63],
            vec![0b1011_0110, u64::MAX << 1, u64::MAX >> 1],
            vec![0, 0, 1 << 5],
        ];
        // A fixed pseudo-random walk of words with long and short runs.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..200 {
            let words = (0..5)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match x % 4 {
                        0 => 0,
                        1 => u64::MAX,
                        _ => x,
                    }
                })
                .collect();
            cases.push(words);
        }
        for words in cases {
            let limit = 64 * words.len() as u32;
            for limit in [limit, limit.saturating_sub(1), limit / 2, 0] {
                let written = Written {
                    words: words.clone().into(),
                };
                assert_eq!(
                    written.runs(limit),
                    runs_by_index(&words, limit),
                    "{words:x?} below {limit}"
                );
            }
        }
    }
}
