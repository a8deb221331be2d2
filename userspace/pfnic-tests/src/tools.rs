//! The command-line tools in the guest end quietly when their reader goes away, as the
//! system's do (`pfnic-info | head -1`): killed by `SIGPIPE` or exiting 0, nothing on
//! standard error, never a panic or an abort.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::ktap::{Failure, Test, TestResult};

pub const TESTS: &[&Test] = &[&Test {
    name: "test_tools_closed_pipe",
    run: test_tools_closed_pipe,
}];

/// Every tool installed in the guest, with arguments that make it print and succeed on the
/// test guest: help texts, and a short run of each.
const RUNS: &[(&str, &[&str])] = &[
    ("/usr/bin/pfnic-info", &[]),
    ("/usr/bin/pfnic-info", &["--no-selftest"]),
    ("/usr/bin/pfnic-info", &["--help"]),
    ("/usr/bin/pfnic-perf", &["--help"]),
    (
        "/usr/bin/pfnic-perf",
        &["-n", "5", "-s", "4096", "write_lat", "write_bw"],
    ),
    (
        "/usr/bin/pfnic-perf",
        &["--compare", "-s", "4096", "-n", "2", "--reps", "1", "write"],
    ),
    ("/usr/bin/pfnic-test", &["--help"]),
    ("/usr/bin/pfnic-test", &["--list"]),
    ("/usr/bin/pfnic-test", &["test_query_device"]),
    ("/usr/bin/pfnic-rc-pingpong", &["--help"]),
    ("/usr/bin/pfnic-rc-pingpong", &["-n", "2"]),
];

/// How long one run may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// When the tool's reader goes away.
#[derive(Clone, Copy, Debug)]
enum Reader {
    /// Before the tool starts: its first write fails (`cmd >&-` on a closed pipe).
    Gone,
    /// After the first line (`cmd | head -1`).
    AfterOneLine,
    /// Before the tool starts, with standard error on the same pipe (`cmd 2>&1 | true`).
    GoneWithStderr,
}

/// What one run did: how it ended, its standard error, and the line its reader read.
struct Outcome {
    status: ExitStatus,
    stderr: String,
    first_line: String,
}

/// Runs `cmd args` with its standard output on a pipe whose reader goes away as `reader`
/// says; kills it after [`TIMEOUT`].
fn run(cmd: &str, args: &[&str], reader: Reader) -> Result<Outcome, Failure> {
    // std's pipes are close-on-exec: the child holds no read end that would keep them open.
    let (out_r, out_w) = std::io::pipe()?;
    let (err_r, err_w) = std::io::pipe()?;
    let mut c = Command::new(cmd);
    c.args(args).stdin(Stdio::null());
    let mut out_r = Some(out_r);
    match reader {
        Reader::Gone => {
            drop(out_r.take());
            c.stdout(out_w).stderr(err_w);
        }
        Reader::AfterOneLine => {
            c.stdout(out_w).stderr(err_w);
        }
        Reader::GoneWithStderr => {
            drop(out_r.take());
            drop(err_w);
            c.stderr(out_w.try_clone()?).stdout(out_w);
        }
    }
    let mut child = c.spawn().map_err(|e| format!("{cmd}: {e}"))?;
    // Dropped with the Command: the child holds the only write ends.
    drop(c);
    let line_reader = thread::spawn(move || {
        let mut line = String::new();
        if let Some(r) = out_r {
            let _ = BufReader::new(r).read_line(&mut line);
        }
        line
    });
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(err_r).read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::Fail(format!(
                "{cmd} {}: still running after {TIMEOUT:?} ({reader:?})",
                args.join(" ")
            )));
        }
        thread::sleep(Duration::from_millis(20));
    };
    let first_line = line_reader.join().unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    Ok(Outcome {
        status,
        stderr,
        first_line,
    })
}

/// Each tool, its reader gone before it starts, gone after one line, and gone with its
/// standard error on the same pipe: it exits 0 or is killed by SIGPIPE, and prints nothing on
/// standard error (a panic's "failed printing to stdout: Broken pipe", an abort).
fn test_tools_closed_pipe() -> TestResult {
    let mut bad = Vec::new();
    for &(cmd, args) in RUNS {
        for reader in [Reader::Gone, Reader::AfterOneLine, Reader::GoneWithStderr] {
            let o = run(cmd, args, reader)?;
            let what = format!("{cmd} {} ({reader:?})", args.join(" "));
            let quiet_end = o.status.success() || o.status.signal() == Some(libc::SIGPIPE);
            if !quiet_end || !o.stderr.is_empty() {
                bad.push(format!(
                    "{what}: {}, stderr {:?}",
                    o.status,
                    o.stderr.trim()
                ));
            }
            if matches!(reader, Reader::AfterOneLine) && o.first_line.trim().is_empty() {
                bad.push(format!("{what}: printed no line before its reader went"));
            }
        }
    }
    check!(bad.is_empty(), "{}", bad.join("\n"));
    Ok(())
}
