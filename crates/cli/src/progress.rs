//! The progress bar of `run`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};

/// The progress bar: hidden for `--json`, for a single frame and when stderr
/// is not a terminal; otherwise shown on stderr once the run has taken a
/// second. indicatif discards the errors of its draws, so a stderr that
/// fails (a closed terminal) never stops or panics the run.
pub(crate) struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
    shown: std::cell::Cell<bool>,
    /// Where the bar draws once shown.
    target: fn() -> ProgressDrawTarget,
    /// How long the run goes before the bar is shown.
    show_after: Duration,
}

impl Bar {
    pub(crate) fn new(enabled: bool, frames: u32) -> Self {
        Self::drawing_on(
            enabled,
            frames,
            ProgressDrawTarget::stderr,
            Duration::from_secs(1),
        )
    }

    /// A bar that draws on `target` once the run has taken `show_after`.
    fn drawing_on(
        enabled: bool,
        frames: u32,
        target: fn() -> ProgressDrawTarget,
        show_after: Duration,
    ) -> Self {
        let bar = enabled.then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(frames.into()), ProgressDrawTarget::hidden());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} frame {pos}/{len} {wide_bar} {elapsed} (eta {eta})",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            bar,
            started: Instant::now(),
            shown: std::cell::Cell::new(false),
            target,
            show_after,
        }
    }

    pub(crate) fn frame_done(&self) {
        let Some(bar) = &self.bar else { return };
        bar.inc(1);
        if !self.shown.get() && self.started.elapsed() >= self.show_after {
            self.shown.set(true);
            bar.set_draw_target((self.target)());
            bar.enable_steady_tick(Duration::from_millis(100));
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal on which every write fails, counting the attempts.
    #[derive(Debug)]
    struct FailingTerm;

    static TERM_WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl FailingTerm {
        fn fail() -> std::io::Result<()> {
            TERM_WRITES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
    }

    impl indicatif::TermLike for FailingTerm {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Self::fail()
        }
        fn write_line(&self, _: &str) -> std::io::Result<()> {
            Self::fail()
        }
        fn write_str(&self, _: &str) -> std::io::Result<()> {
            Self::fail()
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Self::fail()
        }
        fn flush(&self) -> std::io::Result<()> {
            Self::fail()
        }
    }

    /// The progress bar drawn on a terminal that fails every write (a
    /// stderr whose terminal went away): the run goes on, nothing panics,
    /// and the bar did try to draw.
    #[test]
    fn a_progress_bar_on_a_failing_terminal_never_panics() {
        let bar = Bar::drawing_on(
            true,
            3,
            || ProgressDrawTarget::term_like(Box::new(FailingTerm)),
            Duration::ZERO,
        );
        for _ in 0..3 {
            bar.frame_done();
        }
        bar.finish();
        assert!(bar.shown.get());
        assert!(TERM_WRITES.load(std::sync::atomic::Ordering::SeqCst) > 0);
    }
}
