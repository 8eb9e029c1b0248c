//! Output files (`run --trace`, `--perfetto`, `--csv`, `--svg`): checked before any GPU
//! work, written only once the run has succeeded, and never destroying what
//! gpu-counters did not create.
//!
//! What an output path may be, and what happens to it:
//!
//! - **a new file** in an existing directory, or **an existing regular
//!   file**: written atomically, to a temporary file in the destination's
//!   directory that is renamed over the destination once complete (an
//!   existing file keeps its permission bits);
//! - **a symbolic link** to an existing file: the link is followed; the link
//!   stays and its final target is treated as above (a regular target is
//!   replaced atomically in the target's own directory). A dangling link is
//!   refused;
//! - **a FIFO or a character device** (`/dev/null`, `/dev/stdout`, a pipe
//!   from `>(...)`): written through directly, never replaced. It is opened
//!   for writing before any GPU work, as a shell redirection would, so
//!   opening a FIFO waits for its reader;
//! - refused, with exit code 2 and one `error:` line naming the option: a
//!   directory, a path ending in `/`, a path whose directory is missing, a
//!   block device, a socket, and one file given to two options (also under
//!   two spellings, `a.json` and `./a.json`, or as a link and its target).
//!
//! [`PendingOutput::prepare`] runs before any GPU work, so a path that cannot
//! be written is reported up front; dropping a [`PendingOutput`] (on any
//! error, a failed write to stdout included) removes its temporary file, so
//! a failed run leaves no file behind.
//!
//! A write that fails halfway (a full disk, a file size limit, a FIFO whose
//! reader went away) is exit code 1 and one `error: --flag PATH: cannot
//! write: ...` line; the temporary file is removed and the destination is
//! left as it was (an existing file keeps its content). Outputs are written
//! one after the other (`--trace`, `--perfetto`, `--csv`, `--svg`): those
//! after a failed one are not written. Paths in messages are quoted and
//! escaped where they hold a line break, another control character, a
//! quote or a backslash, so a message stays on one line.

use crate::error::{CliError, CliResult};
use crate::stdio;
use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// Where the content goes.
#[derive(Debug)]
enum Sink {
    /// A temporary file, renamed over `dest` once complete.
    Atomic { tmp: NamedTempFile, dest: PathBuf },
    /// A FIFO or character device, opened for writing and written through.
    Direct(File),
}

/// Which file an output path names, to find one file given twice.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    /// An existing file (links followed): its device and inode.
    Existing { dev: u64, ino: u64 },
    /// A file to be created: its directory's canonical path and its name.
    New(PathBuf),
}

/// An output file that is ready to be written: its temporary file exists,
/// or the FIFO or device it writes through is open.
#[derive(Debug)]
pub struct PendingOutput {
    flag: &'static str,
    path: PathBuf,
    identity: Identity,
    sink: Sink,
}

/// Whether the path, as typed, ends in a separator or `.`: it names a
/// directory (`out.json/`), not a file, although [`Path::file_name`] ignores
/// the trailing part.
fn names_a_directory(path: &Path) -> bool {
    let s = path.as_os_str().as_encoded_bytes();
    let sep = |b: &u8| *b == b'/' || (cfg!(windows) && *b == b'\\');
    s.last().is_some_and(sep)
        || s == b"."
        || (s.ends_with(b".") && s.len() >= 2 && sep(&s[s.len() - 2]))
}

#[cfg(unix)]
fn identity_of(_path: &Path, m: &Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    Identity::Existing {
        dev: m.dev(),
        ino: m.ino(),
    }
}

#[cfg(not(unix))]
fn identity_of(path: &Path, _m: &Metadata) -> Identity {
    Identity::New(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// The kind of a special (neither regular nor directory) file, and whether
/// outputs may be written through it.
#[cfg(unix)]
fn special_kind(m: &Metadata) -> Option<(&'static str, bool)> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_fifo() {
        Some(("a FIFO", true))
    } else if t.is_char_device() {
        Some(("a character device", true))
    } else if t.is_block_device() {
        Some(("a block device", false))
    } else if t.is_socket() {
        Some(("a socket", false))
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(m: &Metadata) -> Option<(&'static str, bool)> {
    (!m.is_file() && !m.is_dir()).then_some(("not a regular file", false))
}

/// A temporary file in `dir` named after `file_name`, read and write for
/// everyone less the umask as `File::create` gives (temporary files are
/// owner-only by default), or with `existing`'s permissions.
fn temp_in(
    dir: &Path,
    file_name: &std::ffi::OsStr,
    existing: Option<&Metadata>,
) -> io::Result<NamedTempFile> {
    let prefix = format!(".{}.", file_name.to_string_lossy());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    match existing {
        Some(m) => {
            builder.permissions(m.permissions());
        }
        None => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                builder.permissions(std::fs::Permissions::from_mode(0o666));
            }
        }
    }
    builder.tempfile_in(dir)
}

impl PendingOutput {
    /// Checks that `path` (given with option `flag`) can be written, as the
    /// module documentation says, and creates the temporary file beside the
    /// destination (or opens the FIFO or device). Fails with a usage error
    /// naming the option and the path.
    pub fn prepare(flag: &'static str, path: &Path) -> CliResult<Self> {
        let shown = stdio::path(path);
        let bad = |why: String| CliError::Usage(format!("{flag} {shown}: {why}"));
        if path.as_os_str().is_empty() {
            return Err(bad("the path is empty".into()));
        }
        if path.is_dir() {
            return Err(bad("is a directory".into()));
        }
        if names_a_directory(path) {
            return Err(bad(
                "the path ends in a separator (or `.`), so it names a directory; give a file path"
                    .into(),
            ));
        }
        let own = |identity, sink| Self {
            flag,
            path: path.to_path_buf(),
            identity,
            sink,
        };
        // What the path names, links followed.
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {
                let is_link = std::fs::symlink_metadata(path)
                    .map(|l| l.file_type().is_symlink())
                    .unwrap_or(false);
                let dest = if is_link {
                    std::fs::canonicalize(path).map_err(|e| {
                        bad(format!("cannot resolve the symbolic link's target: {e}"))
                    })?
                } else {
                    path.to_path_buf()
                };
                let (dir, name) = split(&dest).ok_or_else(|| bad("does not name a file".into()))?;
                let tmp = temp_in(&dir, name, Some(&m))
                    .map_err(|e| bad(format!("cannot write in {}: {e}", stdio::path(&dir))))?;
                Ok(own(identity_of(path, &m), Sink::Atomic { tmp, dest }))
            }
            Ok(m) => match special_kind(&m) {
                Some((kind, true)) => {
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)
                        .map_err(|e| bad(format!("is {kind}; cannot open it for writing: {e}")))?;
                    Ok(own(identity_of(path, &m), Sink::Direct(file)))
                }
                Some((kind, false)) => Err(bad(format!(
                    "is {kind}; outputs are written only to regular files, FIFOs and character devices"
                ))),
                None => Err(bad("is not a regular file".into())),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    let to = std::fs::read_link(path)
                        .map(stdio::path)
                        .unwrap_or_else(|_| "?".into());
                    return Err(bad(format!(
                        "is a dangling symbolic link (its target {to} does not exist)"
                    )));
                }
                let (dir, name) = split(path).ok_or_else(|| bad("does not name a file".into()))?;
                if !dir.exists() {
                    return Err(bad(format!("directory {} does not exist", stdio::path(&dir))));
                }
                if !dir.is_dir() {
                    return Err(bad(format!("{} is not a directory", stdio::path(&dir))));
                }
                let canonical_dir = std::fs::canonicalize(&dir)
                    .map_err(|e| bad(format!("cannot resolve {}: {e}", stdio::path(&dir))))?;
                let tmp = temp_in(&dir, name, None)
                    .map_err(|e| bad(format!("cannot write in {}: {e}", stdio::path(&dir))))?;
                Ok(own(
                    Identity::New(canonical_dir.join(name)),
                    Sink::Atomic {
                        tmp,
                        dest: path.to_path_buf(),
                    },
                ))
            }
            Err(e) => Err(bad(format!("cannot be written: {e}"))),
        }
    }

    /// Fails if this output and `other` name the same file.
    pub fn check_distinct(&self, other: &PendingOutput) -> CliResult<()> {
        if self.identity == other.identity {
            return Err(CliError::Usage(format!(
                "{} {}: is the same file as {} {}; give each output its own file",
                self.flag,
                stdio::path(&self.path),
                other.flag,
                stdio::path(&other.path)
            )));
        }
        Ok(())
    }

    /// Writes the content with `write` (the exporters buffer their writes
    /// themselves and flush the file), then renames the temporary file over
    /// the destination (or, for a FIFO or device, leaves what was written
    /// through). On any error the temporary file is removed and the
    /// destination left as it was.
    pub fn commit(mut self, write: impl FnOnce(&mut File) -> io::Result<()>) -> CliResult<()> {
        let fail = |flag: &str, path: &Path, e: io::Error| {
            CliError::Failure(format!("{flag} {}: cannot write: {e}", stdio::path(path)))
        };
        let file = match &mut self.sink {
            Sink::Atomic { tmp, .. } => tmp.as_file_mut(),
            Sink::Direct(file) => file,
        };
        write(file).map_err(|e| fail(self.flag, &self.path, e))?;
        let (flag, path) = (self.flag, self.path);
        match self.sink {
            Sink::Atomic { tmp, dest } => {
                tmp.as_file().sync_all().map_err(|e| fail(flag, &path, e))?;
                tmp.persist(&dest).map_err(|e| fail(flag, &path, e.error))?;
            }
            Sink::Direct(_) => {}
        }
        Ok(())
    }
}

/// The directory (`.` for a bare name) and the file name of `path`.
fn split(path: &Path) -> Option<(PathBuf, &std::ffi::OsStr)> {
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((dir, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_separators_name_directories() {
        for p in ["out.json/", "a/b/", ".", "a/.", "/"] {
            assert!(names_a_directory(Path::new(p)), "{p}");
        }
        for p in ["out.json", "a/b", "a.", "a/.b", "./a.json"] {
            assert!(!names_a_directory(Path::new(p)), "{p}");
        }
    }
}
