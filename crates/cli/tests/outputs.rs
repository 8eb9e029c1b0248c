//! `gpu-counters run`'s outputs end to end: files, symlinks, devices and
//! FIFOs written through, paths refused before any GPU work, and a stdout
//! or stderr that fails: exit codes, one error line, nothing destroyed.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

#[test]
fn unwritable_outputs_exit_2_and_leave_no_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-dir").join("t.json");
    bad_input(
        &["run", "compute", "--trace", missing.to_str().unwrap()],
        "does not exist",
    );
    bad_input(
        &["run", "compute", "--csv", dir.path().to_str().unwrap()],
        "--csv",
    );
    // A size error found before the device is opened, and one found by the
    // workload after the output's temporary file exists: neither leaves a
    // file.
    let svg = dir.path().join("out.svg");
    bad_input(
        &[
            "run",
            "render",
            "--triangles",
            "0",
            "--svg",
            svg.to_str().unwrap(),
        ],
        "--triangles 0",
    );
    bad_input(
        &[
            "run",
            "mixed",
            "--workgroup-size",
            "4294967295",
            "--svg",
            svg.to_str().unwrap(),
            "--trace",
            dir.path().join("t.json").to_str().unwrap(),
        ],
        "--workgroup-size 4294967295",
    );
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}

#[test]
fn one_file_given_to_two_outputs_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let a = d.join("a.json");
    let a = a.to_str().unwrap();
    // The same spelling, under every pair of options.
    for (f1, f2) in [
        ("--trace", "--csv"),
        ("--trace", "--svg"),
        ("--csv", "--svg"),
    ] {
        bad_input(
            &as_strs(&tiny(&[f1, a, f2, a])),
            &format!("{f2} {a}: is the same file as {f1} {a}"),
        );
    }
    // Two spellings of one new file.
    let other_spelling = format!("{}/./a.json", d.display());
    bad_input(
        &as_strs(&tiny(&["--trace", a, "--svg", &other_spelling])),
        "is the same file as --trace",
    );
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let dotdot = format!("{}/../a.json", sub.display());
    bad_input(
        &as_strs(&tiny(&["--csv", a, "--svg", &dotdot])),
        "is the same file as --csv",
    );
    // A symlink and its target.
    let target = d.join("t.json");
    std::fs::write(&target, "old").unwrap();
    let link = d.join("l.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    bad_input(
        &as_strs(&tiny(&[
            "--trace",
            link.to_str().unwrap(),
            "--csv",
            target.to_str().unwrap(),
        ])),
        "is the same file as --trace",
    );
    // Nothing was written or left behind.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
    let mut names = files_in(d);
    names.sort();
    assert_eq!(names, ["l.json", "sub", "t.json"]);
}

#[test]
fn same_file_name_in_two_directories_is_fine() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (x, y) = (dir.path().join("x"), dir.path().join("y"));
    std::fs::create_dir(&x).unwrap();
    std::fs::create_dir(&y).unwrap();
    let (a, b) = (x.join("out"), y.join("out"));
    ok(&as_strs(&tiny(&[
        "--trace",
        a.to_str().unwrap(),
        "--csv",
        b.to_str().unwrap(),
    ])));
    assert!(std::fs::read_to_string(&a).unwrap().contains("traceEvents"));
    assert!(std::fs::read_to_string(&b).unwrap().starts_with("frame,"));
}

#[test]
fn output_symlink_is_followed_and_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    ok(&as_strs(&tiny(&["--trace", link.to_str().unwrap()])));
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("traceEvents"), "{text}");
    let mut names = files_in(dir.path());
    names.sort();
    assert_eq!(names, ["link.json", "target.json"]);

    // A dangling link is refused, and stays as it was.
    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink(dir.path().join("missing.json"), &dangling).unwrap();
    bad_input(
        &as_strs(&tiny(&["--svg", dangling.to_str().unwrap()])),
        "--svg",
    );
    assert!(std::fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!dir.path().join("missing.json").exists());
}

#[test]
fn output_to_dev_null_writes_through_and_keeps_the_device() {
    use std::os::unix::fs::FileTypeExt;
    let is_char_device = |p: &Path| {
        std::fs::symlink_metadata(p)
            .map(|m| m.file_type().is_char_device())
            .unwrap_or(false)
    };
    assert!(is_char_device(Path::new("/dev/null")));
    // First through a link to /dev/null in a temporary directory: code that
    // replaces outputs would replace the link here, and fail the test,
    // without touching the real /dev/null (run as root, it would replace
    // /dev/null itself with a regular file).
    let dir = tempfile::tempdir().expect("temp dir");
    let link = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    ok(&as_strs(&tiny(&["--trace", link.to_str().unwrap()])));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link to /dev/null was replaced"
    );
    assert_eq!(files_in(dir.path()), ["null"]);
    // Then /dev/null itself.
    ok(&as_strs(&tiny(&["--trace", "/dev/null"])));
    assert!(
        is_char_device(Path::new("/dev/null")),
        "/dev/null is no longer a character device"
    );
}

#[test]
fn output_to_a_fifo_writes_through_and_keeps_the_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("trace.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    // The reader: opening a FIFO for reading waits for a writer.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo))
    };
    let out = gpu_counters()
        .args(tiny(&["--trace", fifo.to_str().unwrap()]))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("run gpu-counters");
    // Whatever the command did, release the reader: opening a FIFO for
    // reading and writing never blocks, and closing it ends the reader's
    // read if the command never opened the FIFO.
    drop(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo),
    );
    let read = reader
        .join()
        .expect("reader thread")
        .expect("read the FIFO");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let trace: Value = serde_json::from_slice(&read).expect("the trace read from the FIFO");
    assert!(trace["traceEvents"].is_array());
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(
        meta.file_type().is_fifo(),
        "the FIFO was replaced: {meta:?}"
    );
    assert_eq!(files_in(dir.path()), ["trace.fifo"]);
}

#[test]
fn output_path_ending_in_a_slash_or_in_a_missing_directory_exits_2_before_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    let slash = format!("{}/out.json/", dir.path().display());
    let missing = dir.path().join("missing").join("out.json");
    for (flag, path, needle) in [
        ("--trace", slash.as_str(), "names a directory"),
        ("--csv", "out.csv/", "names a directory"),
        ("--svg", missing.to_str().unwrap(), "does not exist"),
    ] {
        // bad_input also checks that nothing was printed on stdout: no
        // workload ran (a run prints its tables there).
        let start = std::time::Instant::now();
        let line = bad_input(&as_strs(&tiny(&[flag, path])), needle);
        assert!(line.contains(&format!("{flag} {path}")), "{line}");
        assert!(start.elapsed() < std::time::Duration::from_secs(30));
    }
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
    assert!(!Path::new("out.csv").exists());
}

/// Where a spawned command's stdout or stderr goes.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// A pipe read to its end (the test reads it).
    Piped,
    /// `/dev/full`: every write fails with ENOSPC ("No space left on device").
    Full,
    /// A pipe whose read end is closed before the command starts: every
    /// write fails with EPIPE, as in `gpu-counters ... | true`.
    ClosedPipe,
}

impl Stream {
    fn stdio(self) -> std::process::Stdio {
        match self {
            Stream::Piped => std::process::Stdio::piped(),
            Stream::Full => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("open /dev/full")
                .into(),
            Stream::ClosedPipe => {
                let (reader, writer) = std::io::pipe().expect("pipe");
                drop(reader);
                writer.into()
            }
        }
    }
}

/// Runs the command (validation on) with its stdout and stderr as given;
/// returns its exit code (`None`: killed by a signal), stdout and stderr
/// (empty where not piped).
fn spawn(args: &[&str], stdout: Stream, stderr: Stream) -> (Option<i32>, String, String) {
    let runtime_dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-counters"));
    cmd.env("GPU_COUNTERS_VALIDATION", "1");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", runtime_dir.path());
    }
    let out = cmd
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(stdout.stdio())
        .stderr(stderr.stdio())
        .output()
        .expect("run gpu-counters");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Commands that write to stdout, each with an output file given where it
/// takes one (`{out}` is replaced by the path).
fn stdout_writers() -> Vec<Vec<String>> {
    let tiny_bench = [
        "bench",
        "--samples",
        "1",
        "--reps",
        "1",
        "--wgpu-reps",
        "1",
        "--host-reps",
        "1",
        "--drift-seconds",
        "0",
        "--resolve-samples",
        "1",
    ];
    let mut all: Vec<Vec<String>> = vec![
        vec!["devices".into()],
        vec!["devices".into(), "--json".into()],
        tiny(&["--trace", "{out}"]),
        tiny(&["--json", "--trace", "{out}"]),
        tiny(&["--device", "all", "--svg", "{out}"]),
        tiny(&["--device", "all", "--json", "--csv", "{out}"]),
        vec!["--help".into()],
        vec!["--version".into()],
        vec!["run".into(), "--help".into()],
    ];
    all.push(tiny_bench.iter().map(|s| s.to_string()).collect());
    let mut json_bench: Vec<String> = tiny_bench.iter().map(|s| s.to_string()).collect();
    json_bench.push("--json".into());
    all.push(json_bench);
    all
}

/// A file the command did not create, which must survive whatever happens.
const KEEP: &str = "not gpu-counters' file\n";

/// Runs each stdout writer with stdout as `stdout`; its output file (if
/// any) is an existing file of someone else's, which must survive whole,
/// and no other file may appear beside it. Returns the (code, stderr) of
/// each.
fn with_failing_stdout(stdout: Stream, stderr: Stream) -> Vec<(Vec<String>, Option<i32>, String)> {
    let mut results = Vec::new();
    for args in stdout_writers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out.file");
        std::fs::write(&out, KEEP).unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{out}", out.to_str().unwrap()))
            .collect();
        let (code, _, err) = spawn(&as_strs(&args), stdout, stderr);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            KEEP,
            "{args:?} changed a file it did not create"
        );
        assert_eq!(files_in(dir.path()), ["out.file"], "{args:?}");
        results.push((args, code, err));
    }
    results
}

/// `devices >/dev/full`, `run --json >/dev/full` and every other command
/// whose stdout is full exit 1 with one `error:` line naming stdout and
/// the OS's reason, instead of panicking (exit 101 and a backtrace); a run
/// stops before writing its output files, and removes their temporary
/// files.
#[test]
fn a_full_stdout_is_exit_1_with_one_error_line() {
    for (args, code, err) in with_failing_stdout(Stream::Full, Stream::Piped) {
        assert_eq!(code, Some(1), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(
            lines[0].starts_with("error: writing to stdout: ")
                && lines[0].contains("No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// `run ... | true`: a closed pipe on stdout ends the command quietly, as
/// Unix tools end on SIGPIPE: nothing on stderr and exit status 141 (128 +
/// SIGPIPE, the status a shell reports for `cat` or `grep` killed by
/// SIGPIPE), after removing the temporary files of outputs not yet
/// written.
#[test]
fn a_closed_stdout_pipe_ends_quietly_with_status_141() {
    for (args, code, err) in with_failing_stdout(Stream::ClosedPipe, Stream::Piped) {
        assert_eq!(code, Some(141), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

/// When stderr cannot be written either, the command still ends without a
/// panic: exit 1 for a failed stdout, with nothing written anywhere.
#[test]
fn a_failed_stdout_with_an_unwritable_stderr_is_exit_1_silently() {
    for stderr in [Stream::Full, Stream::ClosedPipe] {
        for (args, code, _) in with_failing_stdout(Stream::Full, stderr) {
            assert_eq!(code, Some(1), "{args:?} with stderr {stderr:?}");
        }
    }
}

/// `run --frames 0 2>/dev/full`: an error that cannot be printed keeps its
/// exit code (2 for bad input, from the command's checks and from the
/// argument parser alike) and never panics; so do the diagnostics a
/// failing run prints on stderr.
#[test]
fn an_unwritable_stderr_keeps_the_exit_code_without_a_panic() {
    for stderr in [Stream::Full, Stream::ClosedPipe] {
        for (args, code) in [
            (&["run", "compute", "--frames", "0"][..], 2),
            (&["run", "bogus"], 2),
            (&["run", "compute", "--no-such-option"], 2),
            (&["devices", "--backend", "metal"], 2),
        ] {
            let (got, out, _) = spawn(args, Stream::Piped, stderr);
            assert_eq!(got, Some(code), "{args:?} with stderr {stderr:?}");
            assert_eq!(out, "", "{args:?}");
        }
    }
}

/// An output that cannot be written (a full device, a file over the size
/// limit) fails the run with exit 1 and one `error:` line naming the
/// option; the files the command did not create are left as they were,
/// and no temporary file is left behind.
#[test]
fn an_output_that_fails_halfway_is_exit_1_and_destroys_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("a.csv");
    std::fs::write(&csv, KEEP).unwrap();
    one_error_line_with_stdout(
        &tiny(&["--trace", "/dev/full", "--csv", csv.to_str().unwrap()]),
        "--trace /dev/full: cannot write: No space left on device",
    );
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), KEEP);
    assert_eq!(files_in(dir.path()), ["a.csv"]);

    // A regular file written through its temporary file: the write fails
    // halfway (a 2 KiB file size limit; SIGXFSZ ignored, so the write
    // fails with EFBIG), the existing file stays whole. The path has a line
    // break: the error stays on one line.
    for flag in ["--trace", "--perfetto", "--csv", "--svg"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out\nfile");
        std::fs::write(&out, KEEP).unwrap();
        let mut args: Vec<String> = vec![
            "-c".into(),
            r#"trap "" XFSZ; ulimit -f 2; exec "$0" "$@""#.into(),
            env!("CARGO_BIN_EXE_gpu-counters").into(),
        ];
        // Enough frames that every output is over 2 KiB.
        args.extend(
            as_strs(&tiny(&[flag, out.to_str().unwrap()]))
                .iter()
                .map(|s| s.to_string()),
        );
        let frames = args.iter().position(|a| a == "--frames").unwrap() + 1;
        args[frames] = "40".into();
        let o = std::process::Command::new("bash")
            .args(&args)
            .env("GPU_COUNTERS_VALIDATION", "1")
            .env("MESA_SHADER_CACHE_DISABLE", "true")
            .output()
            .expect("run bash");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flag}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{flag}: {err}");
        assert!(
            lines[0].starts_with(&format!(
                "error: {flag} {:?}: cannot write: ",
                out.to_str().unwrap()
            )) && lines[0].contains("File too large"),
            "{flag}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), KEEP, "{flag}");
        assert_eq!(files_in(dir.path()), ["out\nfile"], "{flag}");
    }
}

/// Runs the command expecting exit 1 and one `error:` line containing
/// `needle` on stderr (stdout is the run's report).
fn one_error_line_with_stdout(args: &[String], needle: &str) {
    let (code, _, err) = spawn(&as_strs(args), Stream::Piped, Stream::Piped);
    assert_eq!(code, Some(1), "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{args:?}: {err}"
    );
}
