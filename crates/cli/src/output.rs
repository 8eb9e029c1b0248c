//! Output files written atomically: a temporary file in the destination's
//! directory, renamed over the destination only once it is complete.
//!
//! [`PendingOutput::prepare`] runs before any GPU work, so a path that cannot
//! be written is reported up front; dropping a [`PendingOutput`] (on any
//! error) removes its temporary file, so a failed run leaves no file behind.

use crate::error::{CliError, CliResult};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// An output file that is ready to be written: its temporary file exists.
#[derive(Debug)]
pub struct PendingOutput {
    flag: &'static str,
    path: PathBuf,
    tmp: NamedTempFile,
}

impl PendingOutput {
    /// Checks that `path` (given with option `flag`) can be written and
    /// creates the temporary file beside it. Fails with a usage error naming
    /// the option and the path.
    pub fn prepare(flag: &'static str, path: &Path) -> CliResult<Self> {
        let shown = path.display();
        let bad = |why: String| CliError::Usage(format!("{flag} {shown}: {why}"));
        if path.as_os_str().is_empty() {
            return Err(bad("the path is empty".into()));
        }
        if path.is_dir() {
            return Err(bad("is a directory".into()));
        }
        let file_name = path
            .file_name()
            .ok_or_else(|| bad("the path does not name a file".into()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.exists() {
            return Err(bad(format!("directory {} does not exist", dir.display())));
        }
        if !dir.is_dir() {
            return Err(bad(format!("{} is not a directory", dir.display())));
        }
        let prefix = format!(".{}.", file_name.to_string_lossy());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // Read and write for everyone, less the umask, as `File::create`
        // gives (temporary files are owner-only by default).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder
            .tempfile_in(dir)
            .map_err(|e| bad(format!("cannot write in {}: {e}", dir.display())))?;
        Ok(Self {
            flag,
            path: path.to_path_buf(),
            tmp,
        })
    }

    /// Writes the content with `write`, then renames the temporary file over
    /// the destination. On any error the temporary file is removed.
    pub fn commit(
        mut self,
        write: impl FnOnce(&mut BufWriter<&mut std::fs::File>) -> io::Result<()>,
    ) -> CliResult<()> {
        let fail = |flag: &str, path: &Path, e: io::Error| {
            CliError::Failure(format!("{flag} {}: cannot write: {e}", path.display()))
        };
        {
            let mut w = BufWriter::new(self.tmp.as_file_mut());
            write(&mut w)
                .and_then(|()| w.flush())
                .map_err(|e| fail(self.flag, &self.path, e))?;
        }
        self.tmp
            .as_file()
            .sync_all()
            .map_err(|e| fail(self.flag, &self.path, e))?;
        let (flag, path) = (self.flag, self.path);
        self.tmp
            .persist(&path)
            .map_err(|e| fail(flag, &path, e.error))?;
        Ok(())
    }
}
