//! What the collector's threads and the writer's state share: the tables'
//! limits, how a connection ended and what the writer returns. A leaf
//! module: it names no other module of the crate but `summary`.

use crate::summary::Summary;
use std::io;

/// Limits of the collector's tables; beyond each, what does not fit is
/// counted (and drawn more plainly or not at all), never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Strings kept per connection.
    pub strings_per_connection: usize,
    /// Threads kept per connection.
    pub threads_per_connection: usize,
    /// Interned render stages (kernel name and shape); beyond, names go inline.
    pub stages: usize,
    /// Hardware queues (process, context, stream) in the trace.
    pub queues: usize,
    /// Distinct kernel names in the summary; beyond, `(other)`.
    pub summary_kernels: usize,
    /// Distinct NVTX (domain, name) pairs in the summary; beyond, `(other)`.
    pub summary_ranges: usize,
    /// NVTX push/pop depth drawn per thread and domain.
    pub nvtx_depth: usize,
    /// Open NVTX start/end ranges per connection.
    pub open_ranges: usize,
    /// NVTX ranges awaiting their GPU span per connection.
    pub span_ranges: usize,
    /// Distinct notices kept.
    pub notices: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            strings_per_connection: 65_536,
            threads_per_connection: 65_536,
            stages: 65_536,
            queues: 65_536,
            summary_kernels: 100_000,
            summary_ranges: 10_000,
            nvtx_depth: 256,
            open_ranges: 65_536,
            span_ranges: 65_536,
            notices: 1000,
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The peer closed it.
    Eof,
    /// Receiving failed.
    Error(String),
    /// A frame failed its check.
    Refused(String),
    /// [`Collector::finish`](crate::collector::Collector::finish) closed it at the drain deadline.
    Forced,
}

/// What [`Writer::run`](crate::collector::Writer::run) returns.
#[derive(Debug)]
pub struct Outcome {
    /// Everything the summary reports (less what the caller adds: the
    /// command, its exit and the wall time).
    pub summary: Summary,
    /// The first error writing the trace, after which nothing more was
    /// written (the summary still counts everything).
    pub write_error: Option<io::Error>,
}
