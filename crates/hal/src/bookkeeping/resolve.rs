//! The CPU resolve of a sample set's timestamps and counters: read the
//! queries in parts (on the resolve's own thread pool where there are many),
//! lay them out with every sample's status, and fix up the exceptions.

use super::*;

impl SampleSet {
    /// Resolves `range` on the CPU into Metal's layout, reading the
    /// backend's queries through `main` (and `occlusion`, for the
    /// `fragments_passed` field of statistics).
    pub fn resolve_cpu(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        occlusion: Option<&dyn QueryRead>,
    ) -> Result<ResolvedCounters> {
        let mut out = ResolvedCounters::default();
        self.resolve_cpu_into(range, main, occlusion, &mut out)?;
        Ok(out)
    }

    /// What every CPU resolve checks first (storage the CPU may read, a
    /// range inside the set), then the lock: the range's first index and
    /// count, and the table.
    pub(super) fn lock_for_cpu_resolve(
        &self,
        range: &Range<u64>,
    ) -> Result<(u32, u32, std::sync::MutexGuard<'_, SampleTable>)> {
        if self.storage == StorageMode::Private {
            return Err(InvalidInput::CpuResolveOfPrivateBuffer {
                label: self.label.clone(),
            }
            .into());
        }
        let (first, count) = self.check_range(range)?;
        Ok((first, count, self.lock()?))
    }

    /// [`SampleSet::resolve_cpu`] into `out`, reusing its memory: a resolve
    /// of the same size as the last one into it allocates nothing (a fresh
    /// result of a million timestamps costs about 1 ms in page faults on
    /// the H200). On error `out` is left empty.
    pub fn resolve_cpu_into(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        occlusion: Option<&dyn QueryRead>,
        out: &mut ResolvedCounters,
    ) -> Result<()> {
        let (mut bytes, mut status) = out.take_buffers();
        let (first, count, mut slots) = self.lock_for_cpu_resolve(&range)?;
        let (lo, hi) = self.span(&slots, first, count);
        slots.prune_tickets(lo as usize..hi as usize);
        // The driver writes into scratch kept between resolves; it goes back
        // into `slots` whatever happens.
        let reader = main;
        let mut data = std::mem::take(&mut slots.scratch);
        let resolved = if self.set == CommonCounterSet::Timestamp {
            let threads = resolve_threads(hi - lo);
            self.resolve_timestamps(
                &mut slots,
                reader,
                (first, count, lo, hi),
                &mut data,
                threads,
                (&mut bytes, &mut status),
            )
        } else {
            let mut occ = std::mem::take(&mut slots.occlusion_scratch);
            let mut read = reader.read_into(lo, hi - lo, &mut data);
            if let (Ok(()), Some(o)) = (&read, occlusion) {
                read = o.read_into(lo, hi - lo, &mut occ);
            }
            let resolved = read.map(|()| {
                (bytes, status) = self.resolve_statistics(
                    &slots,
                    reader.stride(),
                    first,
                    count,
                    lo,
                    hi,
                    &data,
                    occlusion.map(|_| occ.as_slice()),
                );
            });
            slots.occlusion_scratch = occ;
            resolved.map(|()| false)
        };
        slots.scratch = data;
        // What the resolve saw written stays available until its next write
        // or reset: a host reset need not read it again. (A timestamp
        // resolve with nothing pending noted it already.)
        if !resolved? {
            let t = &mut *slots;
            let r = first as usize..(first + count) as usize;
            for ((seen, st), state) in t.seen[r.clone()].iter_mut().zip(&status).zip(&t.state[r]) {
                *seen |= (*st == SampleStatus::Written) & (*state == SlotState::Recorded);
            }
        }
        let origins = (self.set != CommonCounterSet::Timestamp).then(|| {
            (first as usize..(first + count) as usize)
                .zip(&status)
                .map(|(i, st)| match st {
                    SampleStatus::Written => slots.chain[i],
                    _ => 0,
                })
                .collect::<Vec<u64>>()
        });
        let resolved = ResolvedCounters::new(self.set, first, bytes, status)?;
        *out = match origins {
            Some(o) => resolved.with_origins(o)?,
            None => resolved,
        };
        Ok(())
    }

    /// The timestamp resolve of `first..first+count`, reading the span
    /// `lo..hi` into `scratch` (on `threads` threads, each reading a part and
    /// laying out what of the range is in it while it is still in cache):
    /// first every value as if written and complete, then a pass over the
    /// exceptions (and every index while a ticket may be pending), which are
    /// rare in the common case of a range the GPU has finished.
    ///
    /// With no ticket pending, the threads also note what they saw written
    /// in `slots.seen` and the result is `true`; otherwise (`false`) the
    /// caller does.
    pub(crate) fn resolve_timestamps(
        &self,
        slots: &mut SampleTable,
        main: &dyn QueryRead,
        (first, count, lo, hi): (u32, u32, u32, u32),
        scratch: &mut Vec<u64>,
        threads: usize,
        (bytes, status): (&mut Vec<u8>, &mut Vec<SampleStatus>),
    ) -> Result<bool> {
        let (n, f, l) = (count as usize, first as usize, lo as usize);
        let span = (hi - lo) as usize;
        if scratch.len() < 2 * span {
            scratch.resize(2 * span, 0);
        }
        let data = &mut scratch[..2 * span];
        // Nothing pending: a sample recorded and available is written, so
        // the threads can note it as seen (see `SampleTable::seen`).
        let no_tickets = slots.tickets == 0;
        let states = &slots.state[f..f + n];
        let seen = no_tickets.then(|| &mut slots.seen[f..f + n]);
        let mask = self.valid_mask;
        // Written without zero-filling first: a large output would otherwise
        // be written twice. (Both are empty: reserve makes room for n.)
        bytes.clear();
        bytes.reserve(n * 8);
        status.clear();
        status.reserve(n);
        let out = Out {
            bytes: &mut bytes.spare_capacity_mut()[..n * 8],
            status: &mut status.spare_capacity_mut()[..n],
            seen,
        };
        // Reads queries `a..` into `chunk`, then lays out the range's part of
        // them into `out`.
        let job = |(a, chunk, out): (usize, &mut [u64], Out<'_>)| -> Result<bool> {
            let b = a + chunk.len() / 2;
            main.read(a as u32, (b - a) as u32, chunk)?;
            let ia = a.clamp(f, f + n);
            let ib = b.clamp(ia, f + n);
            Ok(layout_timestamps(
                &chunk[2 * (ia - a)..2 * (ib - a)],
                &states[ia - f..ib - f],
                mask,
                out,
            ))
        };
        let all_written = if threads <= 1 {
            job((l, data, out))?
        } else {
            // Chunks of the span in order; the range's parts of them
            // partition the output in the same order.
            let per = span.div_ceil(threads);
            let mut jobs = Vec::with_capacity(threads);
            let mut rest = out;
            for (k, chunk) in data.chunks_mut(2 * per).enumerate() {
                let a = l + k * per;
                let b = a + chunk.len() / 2;
                let ia = a.clamp(f, f + n);
                let ib = b.clamp(ia, f + n);
                let (out, tail) = rest.split_at(ib - ia);
                rest = tail;
                jobs.push((a, chunk, out));
            }
            run_jobs(jobs, job)?
        };
        // SAFETY: the jobs (all of them ran and succeeded, or we returned
        // above) called `layout_timestamps` on parts that partition the first
        // `n * 8` bytes and `n` statuses of spare capacity, and it
        // initialised every one of them.
        unsafe {
            bytes.set_len(n * 8);
            status.set_len(n);
        }
        if all_written && no_tickets {
            return Ok(true);
        }
        self.fix_timestamp_exceptions(slots, (first, lo), &scratch[..2 * span], (bytes, status));
        Ok(no_tickets)
    }

    /// The exception pass of a timestamp resolve: corrects each sample of
    /// the laid-out `bytes` and `status` (from index `first`) that is not
    /// simply recorded, complete and current, reading `data` (queries from
    /// `lo`).
    pub(super) fn fix_timestamp_exceptions(
        &self,
        slots: &SampleTable,
        (first, lo): (u32, u32),
        data: &[u64],
        (bytes, status): (&mut [u8], &mut [SampleStatus]),
    ) {
        let f = first as usize;
        let n = status.len();
        let at = 2 * (first - lo) as usize;
        let pairs = &data[at..at + 2 * n];
        // A pass's relaxed writes are runs of aliases of one timestamp:
        // the last alias's target (index and the generation it aliases)
        // and what it resolved to serve the rest of the run, since an
        // alias that is current resolves to its target's value and status
        // alone.
        let mut last_alias: Option<(u32, u32, u64, SampleStatus)> = None;
        for (k, (out, st)) in bytes.chunks_exact_mut(8).zip(status.iter_mut()).enumerate() {
            let i = f + k;
            let q = &pairs[2 * k..2 * k + 2];
            let state = slots.state[i];
            if state == SlotState::Recorded && available(q[1]) && !slots.stale(i) {
                continue;
            }
            let (v, s) = if state == SlotState::Alias && !slots.stale(i) {
                let key = (slots.link[i], slots.link_gen[i]);
                match last_alias {
                    Some((t, g, v, s)) if (t, g) == key => (v, s),
                    _ => {
                        let (v, s) = self.timestamp_exception(slots, i as u32, lo, data);
                        last_alias = Some((key.0, key.1, v, s));
                        (v, s)
                    }
                }
            } else {
                self.timestamp_exception(slots, i as u32, lo, data)
            };
            out.copy_from_slice(&v.to_ne_bytes());
            *st = s;
        }
    }

    /// Resolves the timestamps of `range` into `out` for a caller that
    /// reads each sample once: when every sample is recorded, complete and
    /// current, `out` keeps the driver's reads as they are (no layout pass,
    /// which would write what the caller then reads again); otherwise the
    /// layout and statuses of [`SampleSet::resolve_cpu_into`]. The same
    /// ticks and statuses either way. On error `out` is left empty.
    pub fn resolve_timestamps_into(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        out.len = 0;
        out.all_written = false;
        let resolved = self.resolve_timestamps_read(range, main, out);
        if resolved.is_err() {
            out.len = 0;
            out.all_written = false;
            out.laid = ResolvedCounters::default();
        }
        resolved
    }

    pub(super) fn resolve_timestamps_read(
        &self,
        range: Range<u64>,
        main: &dyn QueryRead,
        out: &mut ResolvedTimestamps,
    ) -> Result<()> {
        if self.set != CommonCounterSet::Timestamp {
            return Err(InvalidInput::Argument(format!(
                "{} holds {} samples, not timestamps",
                self.label, self.set
            ))
            .into());
        }
        let (first, count, mut slots) = self.lock_for_cpu_resolve(&range)?;
        let (lo, hi) = self.span(&slots, first, count);
        if (lo, hi) != (first, first + count) {
            // Aliases lead outside the range: the usual resolve follows them.
            drop(slots);
            self.resolve_cpu_into(range, main, None, &mut out.laid)?;
            out.len = out.laid.len();
            return Ok(());
        }
        slots.prune_tickets(lo as usize..hi as usize);
        let (f, n) = (first as usize, count as usize);
        // The driver writes into the caller's memory, which keeps it as is
        // when every sample turns out written.
        let pairs = &mut out.pairs;
        if pairs.len() < 2 * n {
            pairs.resize(2 * n, 0);
        }
        let data = &mut pairs[..2 * n];
        let states = &slots.state[f..f + n];
        let threads = resolve_threads(count);
        let job = |(a, chunk): (usize, &mut [u64])| -> Result<bool> {
            main.read((f + a) as u32, (chunk.len() / 2) as u32, chunk)?;
            Ok(all_recorded_and_available(
                chunk,
                &states[a..a + chunk.len() / 2],
            ))
        };
        let all = if threads <= 1 {
            job((0, data))?
        } else {
            let per = n.div_ceil(threads);
            let jobs = data
                .chunks_mut(2 * per)
                .enumerate()
                .map(|(k, chunk)| (k * per, chunk))
                .collect();
            run_jobs(jobs, job)?
        };
        let no_tickets = slots.tickets == 0;
        if all && no_tickets {
            // Recorded and available with nothing pending: written (see
            // `SampleTable::seen`).
            slots.seen[f..f + n].fill(true);
            out.len = n;
            out.all_written = true;
            out.mask = self.valid_mask;
            return Ok(());
        }
        // Not all written: lay out what was read, as the usual resolve does.
        let (mut bytes, mut status) = out.laid.take_buffers();
        bytes.clear();
        bytes.reserve(n * 8);
        status.clear();
        status.reserve(n);
        let table = &mut *slots;
        let seen = if no_tickets {
            Some(&mut table.seen[f..f + n])
        } else {
            None
        };
        let laid = Out {
            bytes: &mut bytes.spare_capacity_mut()[..n * 8],
            status: &mut status.spare_capacity_mut()[..n],
            seen,
        };
        layout_timestamps(
            &out.pairs[..2 * n],
            &table.state[f..f + n],
            self.valid_mask,
            laid,
        );
        // SAFETY: `layout_timestamps` initialised every one of the first
        // `n * 8` bytes and `n` statuses of spare capacity.
        unsafe {
            bytes.set_len(n * 8);
            status.set_len(n);
        }
        self.fix_timestamp_exceptions(
            &slots,
            (first, first),
            &out.pairs[..2 * n],
            (&mut bytes, &mut status),
        );
        if !no_tickets {
            // What the resolve saw written stays so (see `resolve_cpu_into`).
            let t = &mut *slots;
            for ((seen, st), state) in t.seen[f..f + n]
                .iter_mut()
                .zip(&status)
                .zip(&t.state[f..f + n])
            {
                *seen |= (*st == SampleStatus::Written) & (*state == SlotState::Recorded);
            }
        }
        drop(slots);
        out.laid = ResolvedCounters::new(self.set, first, bytes, status)?;
        out.len = n;
        Ok(())
    }

    /// What timestamp index `s` resolves to when it is not simply recorded,
    /// complete and current.
    #[cold]
    pub(super) fn timestamp_exception(
        &self,
        slots: &SampleTable,
        s: u32,
        lo: u32,
        data: &[u64],
    ) -> (u64, SampleStatus) {
        let i = s as usize;
        let at = |s: u32| 2 * (s - lo) as usize;
        let mut value = COUNTER_ERROR_VALUE;
        let status = match slots.state[i] {
            SlotState::Fresh => SampleStatus::NotWritten,
            _ if slots.stale(i) => SampleStatus::NotReady,
            SlotState::Invalidated => SampleStatus::Invalidated,
            state => {
                let (src, ok) = if state == SlotState::Alias {
                    let t = slots.link[i];
                    let same_gen = slots.gen[t as usize] == slots.link_gen[i];
                    (
                        t,
                        same_gen && slots.state[t as usize] == SlotState::Recorded,
                    )
                } else {
                    (s, true)
                };
                if !ok {
                    SampleStatus::Error
                } else if slots.stale(src as usize) {
                    SampleStatus::NotReady
                } else if data[at(src) + 1] == QUERY_FAILED {
                    SampleStatus::Error
                } else if data[at(src) + 1] != 0 {
                    value = data[at(src)] & self.valid_mask;
                    SampleStatus::Written
                } else {
                    SampleStatus::NotReady
                }
            }
        };
        if status == SampleStatus::Invalidated {
            value = 0;
        }
        (value, status)
    }
}

/// Queries a thread of a parallel CPU resolve reads at least.
pub(super) const RESOLVE_CHUNK: u32 = 1 << 15;
/// Threads a CPU resolve uses at most.
pub(super) const RESOLVE_THREADS: usize = 16;

/// The CPU resolve's own thread pool, started on first use: at most
/// [`RESOLVE_THREADS`] threads; `None` where it could not be started.
///
/// Its own rather than rayon's global pool: the resolve holds its sample
/// set's lock while the parts run, and only resolve parts run here, none of
/// which takes that lock (a global pool's workers could be busy with the
/// caller's own long tasks, too).
#[cfg(feature = "rayon")]
pub(super) fn resolve_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(RESOLVE_THREADS))
            .thread_name(|i| format!("gpu-counters resolve {i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Threads for a CPU resolve reading `span` queries: 1 below two chunks'
/// worth (handing parts out would cost more than it saves), and then
/// without starting the pool: a program that only resolves small ranges
/// never starts its threads.
pub(super) fn resolve_threads(span: u32) -> usize {
    let parts = (span / RESOLVE_CHUNK) as usize;
    if parts < 2 {
        return 1;
    }
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(feature = "rayon")]
    let threads = resolve_pool().map_or_else(cores, rayon::ThreadPool::current_num_threads);
    #[cfg(not(feature = "rayon"))]
    let threads = cores();
    threads.min(RESOLVE_THREADS).min(parts).max(1)
}

/// Runs `work` on every job in parallel, on the resolve's pool (its
/// threads are started once per process, not once per resolve). Returns
/// whether every job returned `true`, or the first error.
#[cfg(feature = "rayon")]
pub(super) fn run_jobs<J: Send>(
    jobs: Vec<J>,
    work: impl Fn(J) -> Result<bool> + Sync,
) -> Result<bool> {
    use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
    match resolve_pool() {
        // A thread of any rayon pool (the caller's own, say) that waits for
        // another pool keeps running its own pool's tasks meanwhile, and
        // one of those could want the lock this resolve holds: such a
        // caller gets threads of its own instead.
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(|| {
            jobs.into_par_iter()
                // One part per task: the parts were sized for one thread each.
                .with_max_len(1)
                .map(&work)
                .try_reduce(|| true, |a, b| Ok(a & b))
        }),
        _ => run_on_scoped_threads(jobs, work),
    }
}

/// Runs `work` on every job in parallel, on scoped threads (without the
/// `rayon` feature). Returns whether every job returned `true`, or the first
/// error.
#[cfg(not(feature = "rayon"))]
pub(super) fn run_jobs<J: Send>(
    jobs: Vec<J>,
    work: impl Fn(J) -> Result<bool> + Sync,
) -> Result<bool> {
    run_on_scoped_threads(jobs, work)
}

/// Runs `work` on every job, one scoped thread each (the first on this
/// thread; where a thread cannot be started, its job runs here). Returns
/// whether every job returned `true`, or the first error.
pub(super) fn run_on_scoped_threads<J: Send>(
    jobs: Vec<J>,
    work: impl Fn(J) -> Result<bool> + Sync,
) -> Result<bool> {
    let work = &work;
    std::thread::scope(|scope| {
        let mut jobs = jobs.into_iter();
        let here = jobs.next();
        let mut inline = Vec::new();
        let mut handles = Vec::new();
        for job in jobs {
            let (tx, rx) = std::sync::mpsc::channel::<J>();
            match std::thread::Builder::new()
                .name("gpu-counters resolve".into())
                .spawn_scoped(scope, move || rx.recv().map(work))
            {
                Ok(h) => {
                    // The thread owns the receiver, so the send succeeds.
                    let _ = tx.send(job);
                    handles.push(h);
                }
                Err(_) => inline.push(job),
            }
        }
        let mut all = true;
        let mut first_error = None;
        for r in here.into_iter().chain(inline).map(work) {
            match r {
                Ok(ok) => all &= ok,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for h in handles {
            match h.join() {
                Ok(Ok(Ok(ok))) => all &= ok,
                Ok(Ok(Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Ok(Err(_)) | Err(_) => {
                    first_error.get_or_insert(Error::Internal("a resolve thread failed".into()));
                }
            }
        }
        first_error.map_or(Ok(all), Err)
    })
}

/// Where a part of a timestamp resolve lays out its samples: 8 bytes and a
/// status each, and (when nothing is pending) whether each was seen written.
pub(super) struct Out<'a> {
    pub(super) bytes: &'a mut [MaybeUninit<u8>],
    pub(super) status: &'a mut [MaybeUninit<SampleStatus>],
    pub(super) seen: Option<&'a mut [bool]>,
}

impl<'a> Out<'a> {
    /// The first `k` samples' part, and the rest.
    fn split_at(self, k: usize) -> (Out<'a>, Out<'a>) {
        let (b0, b1) = self.bytes.split_at_mut(8 * k);
        let (s0, s1) = self.status.split_at_mut(k);
        let (n0, n1) = match self.seen {
            Some(seen) => {
                let (n0, n1) = seen.split_at_mut(k);
                (Some(n0), Some(n1))
            }
            None => (None, None),
        };
        (
            Out {
                bytes: b0,
                status: s0,
                seen: n0,
            },
            Out {
                bytes: b1,
                status: s1,
                seen: n1,
            },
        )
    }
}

with_avx2! {
    /// Whether every timestamp sample of `states` is recorded and its query in
    /// `pairs` (value, availability) available: branch-free, so it vectorises.
    #[inline(never)]
    pub(super) fn all_recorded_and_available / all_recorded_and_available_avx2 =
        all_recorded_and_available_loop(pairs: &[u64], states: &[SlotState]) -> bool;
}

#[inline(always)]
pub(super) fn all_recorded_and_available_loop(pairs: &[u64], states: &[SlotState]) -> bool {
    // Two passes, each of which compiles to a tight loop: the states as
    // bytes (vectorised), then the availability words.
    let recorded = states
        .iter()
        .fold(true, |all, &state| all & (state == SlotState::Recorded));
    let unavailable = pairs
        .chunks_exact(2)
        .fold(0u8, |any, q| any | u8::from(!available(q[1])));
    recorded & (unavailable == 0) & (pairs.len() == 2 * states.len())
}

with_avx2! {
    /// Lays out the (value, availability) `pairs` of timestamp samples in
    /// `states` into `out`: the masked value where the sample is recorded and
    /// available, the error value elsewhere, and status `Written` for every
    /// sample (the caller's exception pass corrects the others when this
    /// returns `false`); where `out.seen` is given, it is set for the samples
    /// recorded and available. Returns whether every sample was. Initialises
    /// every byte and status of `out`. Branch-free, so it vectorises: with
    /// AVX2 where the CPU has it, since baseline x86-64 has no 64-bit vector
    /// compare and the loop stays scalar there (16 instructions a sample
    /// against 8 under callgrind).
    #[inline(never)]
    pub(super) fn layout_timestamps / layout_timestamps_avx2 =
        layout_timestamps_loop(
            pairs: &[u64],
            states: &[SlotState],
            mask: u64,
            out: Out<'_>
        ) -> bool;
}

#[inline(always)]
pub(super) fn layout_timestamps_loop(
    pairs: &[u64],
    states: &[SlotState],
    mask: u64,
    out: Out<'_>,
) -> bool {
    // The error value is all ones: `(!ok as u64).wrapping_neg()` selects it.
    const _: () = assert!(COUNTER_ERROR_VALUE == u64::MAX);
    let n = states.len();
    assert!(pairs.len() == 2 * n && out.bytes.len() == 8 * n && out.status.len() == n);
    let mut all = true;
    for ((dst, q), &state) in out
        .bytes
        .chunks_exact_mut(8)
        .zip(pairs.chunks_exact(2))
        .zip(states)
    {
        let ok = (state == SlotState::Recorded) & available(q[1]);
        all &= ok;
        let v = (q[0] & mask) | (!ok as u64).wrapping_neg();
        dst.copy_from_slice(&v.to_ne_bytes().map(MaybeUninit::new));
    }
    out.status.fill(MaybeUninit::new(SampleStatus::Written));
    match out.seen {
        // Every sample was: a fill, not a second pass over the pairs.
        Some(seen) if all => seen.fill(true),
        Some(seen) => {
            for ((seen, q), &state) in seen.iter_mut().zip(pairs.chunks_exact(2)).zip(states) {
                *seen |= (state == SlotState::Recorded) & available(q[1]);
            }
        }
        None => {}
    }
    all
}
