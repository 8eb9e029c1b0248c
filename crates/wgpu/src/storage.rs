//! One sample buffer's or heap's query set, the values read back from it,
//! and their availability.

use crate::Write;
use gpu_counters_core::bookkeeping::{runs, QueryRead, SampleSet, Ticket};
use gpu_counters_core::{Error, Result};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const MAP_PENDING: u8 = 0;
const MAP_OK: u8 = 1;
const MAP_FAILED: u8 = 2;

/// The read-back of one submission's writes into one query set.
pub(crate) struct Readback {
    buffer: wgpu::Buffer,
    /// Runs of queries `(first, count, byte offset)` in `buffer`.
    runs: Vec<(u32, u32, u64)>,
    /// Each index written and its write's sequence number.
    writes: Vec<Write>,
    /// Where `map_async` got to.
    mapped: Arc<AtomicU8>,
    /// The submission's ticket: values count only once it is done.
    ticket: Ticket,
}

/// The host side of the read-back values.
struct Host {
    /// `values` words per query.
    values: Vec<u64>,
    /// Whether each query's value arrived for its latest write.
    available: Vec<bool>,
    /// The sequence number of each query's latest recorded write (0: none).
    seq: Vec<u64>,
    /// Read-backs of submitted work whose values have not arrived yet.
    pending: Vec<Readback>,
}

/// A sample buffer's or heap's wgpu query set and host values.
pub(crate) struct Storage {
    pub(crate) samples: SampleSet,
    pub(crate) query_set: wgpu::QuerySet,
    device: wgpu::Device,
    /// `u64` values per query.
    values: u32,
    host: Mutex<Host>,
}

impl Storage {
    pub(crate) fn new(
        samples: SampleSet,
        query_set: wgpu::QuerySet,
        device: wgpu::Device,
        values: u32,
    ) -> Self {
        let n = samples.count as usize;
        Self {
            samples,
            query_set,
            device,
            values,
            host: Mutex::new(Host {
                values: vec![0; n * values as usize],
                available: vec![false; n],
                seq: vec![0; n],
                pending: Vec::new(),
            }),
        }
    }

    /// Notes new writes of `indices`: their values are unavailable until
    /// the read-back of these writes arrives. Appends each index and its
    /// write's sequence number to `writes` (no allocation of its own: this
    /// runs for every sample recorded).
    pub(crate) fn begin_writes(&self, indices: &[u32], writes: &mut Vec<Write>) {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut host = lock(&self.host);
        for &i in indices {
            let seq = NEXT.fetch_add(1, Ordering::Relaxed);
            host.seq[i as usize] = seq;
            host.available[i as usize] = false;
            writes.push((i, seq));
        }
    }

    /// Records, at the end of `encoder`, the resolve of the queries in
    /// `writes` and their copy into a new `MAP_READ` buffer. `None` when
    /// there is nothing to read back.
    pub(crate) fn record_readback(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        writes: Vec<Write>,
        ticket: &Ticket,
    ) -> Option<Readback> {
        if writes.is_empty() {
            return None;
        }
        let n = self.samples.count;
        let mut written = vec![false; n as usize];
        for &(i, _) in &writes {
            written[i as usize] = true;
        }
        let stride = 8 * u64::from(self.values);
        let mut at = 0u64;
        let runs: Vec<(u32, u32, u64)> = runs(0, n, |i| written[i as usize])
            .into_iter()
            .map(|(first, count)| {
                let offset = at;
                at = (at + u64::from(count) * stride)
                    .next_multiple_of(wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT);
                (first, count, offset)
            })
            .collect();
        let size = at;
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu-counters resolve"),
            size,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu-counters read-back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for &(first, count, offset) in &runs {
            encoder.resolve_query_set(&self.query_set, first..first + count, &resolve, offset);
        }
        encoder.copy_buffer_to_buffer(&resolve, 0, &buffer, 0, size);
        Some(Readback {
            buffer,
            runs,
            writes,
            mapped: Arc::new(AtomicU8::new(MAP_PENDING)),
            ticket: ticket.clone(),
        })
    }

    /// Starts mapping `rb` (after its submission) and keeps it until its
    /// values arrive.
    pub(crate) fn start_map(&self, rb: Readback) {
        let flag = rb.mapped.clone();
        rb.buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| {
                flag.store(
                    if r.is_ok() { MAP_OK } else { MAP_FAILED },
                    Ordering::Release,
                );
            });
        lock(&self.host).pending.push(rb);
    }

    /// Polls the device without waiting, then takes in the values of every
    /// read-back whose submission is done and whose buffer is mapped.
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
        let values = self.values as usize;
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
            let words: Vec<u64> = match rb.buffer.slice(..).get_mapped_range() {
                Ok(view) => view
                    .chunks_exact(8)
                    .map(|b| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(b);
                        u64::from_ne_bytes(w)
                    })
                    .collect(),
                Err(e) => {
                    first_error.get_or_insert_with(|| {
                        Error::Internal(format!("read-back get_mapped_range: {e}"))
                    });
                    continue;
                }
            };
            rb.buffer.unmap();
            for &(i, seq) in &rb.writes {
                let q = i as usize;
                // A later write (or a host reset) since: this value is old.
                if host.seq[q] != seq {
                    continue;
                }
                let Some(&(first, _, offset)) =
                    rb.runs.iter().find(|&&(f, c, _)| (f..f + c).contains(&i))
                else {
                    continue;
                };
                let at = offset as usize / 8 + (i - first) as usize * values;
                let Some(src) = words.get(at..at + values) else {
                    continue;
                };
                host.values[q * values..(q + 1) * values].copy_from_slice(src);
                // wgpu reads an unwritten query as 0 (a pass's timestamp
                // writes handed out and never used, say). No GPU clock reads
                // exactly 0 ticks, so a timestamp of 0 has no value: it stays
                // unavailable and resolves to the error value, never to 0.
                let unwritten_timestamp = self.samples.set
                    == gpu_counters_core::CommonCounterSet::Timestamp
                    && src.first() == Some(&0);
                host.available[q] = !unwritten_timestamp;
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Forgets `first..first+count` on the host: no value, no write.
    pub(crate) fn clear(&self, first: u32, count: u32) {
        let mut host = lock(&self.host);
        for i in first as usize..(first + count) as usize {
            host.available[i] = false;
            host.seq[i] = 0;
        }
    }
}

impl QueryRead for Storage {
    fn values(&self) -> u32 {
        self.values
    }

    fn read(&self, first: u32, count: u32, out: &mut [u64]) -> Result<()> {
        let host = lock(&self.host);
        let values = self.values as usize;
        let stride = values + 1;
        let (f, n) = (first as usize, count as usize);
        if f + n > host.available.len() || out.len() != n * stride {
            return Err(Error::Internal(format!(
                "wgpu read of {first}+{count} past the buffer or into a wrong-sized slice"
            )));
        }
        for (k, q) in out.chunks_exact_mut(stride).enumerate() {
            let i = f + k;
            q[..values].copy_from_slice(&host.values[i * values..(i + 1) * values]);
            q[values] = u64::from(host.available[i]);
        }
        Ok(())
    }
}
