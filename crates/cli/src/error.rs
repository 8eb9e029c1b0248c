//! The command's error type and its exit codes.

use std::fmt;
use std::io;

/// The exit code of a command whose stdout is a closed pipe: 128 + SIGPIPE
/// (13), the status a shell reports for a Unix tool killed by SIGPIPE
/// (`cat`, `grep`), so that `set -o pipefail` scripts see what they see for
/// those.
pub const CLOSED_PIPE_EXIT: u8 = 128 + 13;

/// Why the command failed, and so which exit code it ends with.
#[derive(Debug)]
pub enum CliError {
    /// Bad input: an option value, a size, a device index or an output path
    /// (exit code 2). Nothing was run and no output file was written.
    Usage(String),
    /// The run itself failed, or its results did not pass the checks: a
    /// Vulkan error, a statistic that differs from the expected count, a
    /// validation-layer message (exit code 1).
    Failure(String),
    /// Writing to stdout failed: exit code 1 and one line, or, for a closed
    /// pipe (EPIPE), [`CLOSED_PIPE_EXIT`] and no line, as a Unix tool ends
    /// on SIGPIPE. Nothing more is written; output files not yet written
    /// are not written.
    Stdout(io::Error),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Stdout(_) if self.is_closed_pipe() => CLOSED_PIPE_EXIT,
            CliError::Failure(_) | CliError::Stdout(_) => 1,
        }
    }

    /// Whether stdout was a closed pipe: the command ends quietly.
    pub fn is_closed_pipe(&self) -> bool {
        matches!(self, CliError::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failure(m) => f.write_str(m),
            CliError::Stdout(e) => write!(f, "writing to stdout: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<gpu_counters_hal::Error> for CliError {
    /// Every error of the counter-sampling layer is a failure of the run:
    /// the command checks its input before it reaches that layer.
    fn from(e: gpu_counters_hal::Error) -> Self {
        CliError::Failure(e.to_string())
    }
}

impl From<gpu_counters_profiler::ProfilerError> for CliError {
    /// The profiler's errors are failures of the run: its options are the
    /// command's own, sized from the checked plan.
    fn from(e: gpu_counters_profiler::ProfilerError) -> Self {
        use gpu_counters_profiler::ProfilerError;
        match e {
            ProfilerError::Counters(e) => e.into(),
            other => CliError::Failure(format!("profiler: {other}")),
        }
    }
}

/// Shorthand for results of the command's steps.
pub type CliResult<T> = Result<T, CliError>;
