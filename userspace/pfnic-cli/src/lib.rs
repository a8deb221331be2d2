//! What pfnic's command-line tools share: their output.
//!
//! A tool whose reader has gone (`pfnic-info | head -1`) must end as the system's tools do,
//! quietly. `println!` panics instead ("failed printing to stdout: Broken pipe"), and with
//! `panic = "abort"` the tool dies of `SIGABRT`. Rust programs ignore `SIGPIPE`, so a write to
//! a closed pipe returns `EPIPE`; resetting `SIGPIPE` to its default for the whole process
//! would end it quietly, but would also kill a process that writes to its children's pipes
//! (the test runner) when a child exits early.
//!
//! So the tools print with [`outln!`], [`out!`] and [`errln!`] (`println!`, `print!` and
//! `eprintln!` are refused by clippy in this workspace), and a closed pipe on standard output
//! or standard error ends the process through [`closed_pipe`]: killed by `SIGPIPE`, as
//! coreutils' `seq 100000 | head -1` ends, so that a shell's `pipefail` sees a tool that did
//! not finish. Any other error on standard output (`> /dev/full`) is reported on standard
//! error and ends the tool with status 1.

use std::fmt;
use std::io::{self, Write};

/// Like `print!`: writes to standard output; see the crate's documentation for errors.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout(::std::format_args!($($arg)*))
    };
}

/// Like `println!`: writes a line to standard output; see the crate's documentation for
/// errors.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// Like `eprintln!`: writes a line to standard error; a closed pipe ends the process, other
/// errors are dropped (there is nowhere left to report them).
#[macro_export]
macro_rules! errln {
    () => {
        $crate::stderr(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stderr(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// Writes `args` to standard output ([`out!`] and [`outln!`] call this). A closed pipe ends
/// the process ([`closed_pipe`]); any other error is reported and ends it with status 1.
pub fn stdout(args: fmt::Arguments<'_>) {
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            closed_pipe();
        }
        stderr(format_args!("{}: standard output: {e}\n", program()));
        std::process::exit(1);
    }
}

/// Writes `args` to standard error ([`errln!`] calls this). A closed pipe ends the process
/// ([`closed_pipe`]); any other error is dropped.
pub fn stderr(args: fmt::Arguments<'_>) {
    if let Err(e) = io::stderr().lock().write_fmt(args) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            closed_pipe();
        }
    }
}

/// Ends the process as a closed pipe ends the system's tools: killed by `SIGPIPE`, with
/// nothing printed.
pub fn closed_pipe() -> ! {
    // SAFETY: `signal()` only changes how the process takes SIGPIPE (Rust's runtime set it to
    // SIG_IGN; no handler of ours is involved), and `raise()` sends it to this thread, whose
    // default action ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Only reached with SIGPIPE blocked: the status a shell gives a process it killed.
    std::process::exit(128 + libc::SIGPIPE)
}

/// This program's name, for messages.
fn program() -> String {
    std::env::args_os()
        .next()
        .map(|a| {
            std::path::Path::new(&a)
                .file_name()
                .unwrap_or(&a)
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_else(|| "pfnic".into())
}
