//! The command's stdout and stderr, written without a panic, and the one-line
//! form of every message.
//!
//! - **stdout** (reports, listings, JSON, help) goes through [`out`] (the
//!   [`outln!`] macro), which returns a failed write as
//!   [`CliError::Stdout`]: the command stops there, its pending output
//!   files are removed (nothing is written after a failure), and it ends
//!   with exit code 1 and one `error: writing to stdout: ...` line, or,
//!   for a closed pipe (EPIPE), quietly with exit code 141 (see
//!   [`CliError::exit_code`]).
//! - **stderr** (the error line, validation messages, mismatches, notes)
//!   goes through [`note`] (the [`errln!`] macro): a line that cannot be
//!   written is dropped, as there is nowhere left to report it, and the
//!   exit code still says how the command ended.
//! - **One line**: every stderr line is written through [`one_line`], so a
//!   line break or other control character in what it quotes (a path, an
//!   option's value, a device or driver's name) is shown escaped (`\n`,
//!   `\u{1b}`) and a message is never spread over several lines. Paths are
//!   quoted where they need it ([`path`]).
//!
//! The progress bar (indicatif) draws on stderr, and indicatif discards
//! the errors of its draws: a bar over a stderr that fails never panics.

use crate::error::{CliError, CliResult};
use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Write};

/// Writes one line to stdout: `outln!("...", args)?` in a function that
/// returns a [`CliResult`].
macro_rules! outln {
    () => {
        $crate::stdio::out(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdio::out(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Writes one line to stderr ([`note`]); a line that cannot be written is
/// dropped.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdio::note(format_args!($($arg)*))
    };
}
pub(crate) use errln;

/// Writes `line` and a line break to stdout.
pub fn out(line: fmt::Arguments<'_>) -> CliResult<()> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}").map_err(CliError::Stdout)
}

/// Writes `text` to stdout as it is.
pub fn out_str(text: &str) -> CliResult<()> {
    io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CliError::Stdout)
}

/// Runs `write` on stdout (locked), for writers of a library that take an
/// [`io::Write`]; its error is [`CliError::Stdout`].
pub fn out_with(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> CliResult<()> {
    let mut stdout = io::stdout().lock();
    write(&mut stdout).map_err(CliError::Stdout)
}

/// Flushes stdout: what is still buffered there fails here, not silently at
/// exit.
pub fn flush() -> CliResult<()> {
    io::stdout().flush().map_err(CliError::Stdout)
}

/// Writes `line`, on one line ([`one_line`]), and a line break to stderr;
/// drops it where stderr cannot be written.
pub fn note(line: fmt::Arguments<'_>) {
    let text = one_line(&line.to_string());
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// `text` with every control character (line breaks, tabs, escape) written
/// as Rust writes it in a string literal (`\n`, `\t`, `\u{1b}`), so that it
/// prints on one line and cannot move the terminal's cursor.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Text a user gave, as a message shows it: as it is where that is
/// unambiguous (no control character, quote or backslash), else quoted and
/// escaped as a Rust string literal (`"a\nb"`).
pub fn text(s: &str) -> String {
    if needs_quotes(s) {
        format!("{s:?}")
    } else {
        s.to_string()
    }
}

/// A path as a message shows it: as [`text`] shows text, and quoted and
/// escaped too where it is not UTF-8 (`"a\xFFb"`).
pub fn path(p: impl AsRef<OsStr>) -> String {
    let p = p.as_ref();
    match p.to_str() {
        Some(s) => text(s),
        None => format!("{p:?}"),
    }
}

fn needs_quotes(s: &str) -> bool {
    s.chars().any(|c| c.is_control() || c == '"' || c == '\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_is_one_line_and_unambiguous() {
        assert_eq!(one_line("a\nb\r\tc\u{1b}[2J é"), r"a\nb\r\tc\u{1b}[2J é");
        assert_eq!(text("out/t.json"), "out/t.json");
        assert_eq!(text("a b'c"), "a b'c");
        assert_eq!(text("no\nsuch"), r#""no\nsuch""#);
        assert_eq!(text(r"a\nb"), r#""a\\nb""#, "a backslash is quoted");
        assert_eq!(text("say \"hi\""), r#""say \"hi\"""#);
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            assert_eq!(path(OsStr::from_bytes(b"a\xffb")), r#""a\xFFb""#);
        }
        assert_eq!(path("dir/x.svg"), "dir/x.svg");
    }
}
