//! A minimal KTAP producer (Documentation/dev-tools/ktap.rst).

use pfnic_cli::outln;
use std::fmt;

/// Why a test did not pass.
#[derive(Debug)]
pub enum Failure {
    Fail(String),
    Skip(String),
}

impl<E: fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Fail(e.to_string())
    }
}

pub type TestResult = Result<(), Failure>;

/// Fails the current test with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => { return Err($crate::ktap::Failure::Fail(format!($($arg)*))) };
}

/// Skips the current test with a formatted reason.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)*) => { return Err($crate::ktap::Failure::Skip(format!($($arg)*))) };
}

/// Fails the current test unless `cond` holds.
#[macro_export]
macro_rules! check {
    ($cond:expr) => {
        if !$cond {
            $crate::fail!("check failed: {}", stringify!($cond));
        }
    };
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fail!($($arg)*);
        }
    };
}

/// Fails the current test unless `a == b`, showing both.
#[macro_export]
macro_rules! check_eq {
    ($a:expr, $b:expr) => {
        match (&$a, &$b) {
            (a, b) => {
                if a != b {
                    $crate::fail!("{} is {:?}, expected {:?}", stringify!($a), a, b);
                }
            }
        }
    };
}

pub struct Test {
    pub name: &'static str,
    pub run: fn() -> TestResult,
}

/// The tests that open verbs contexts in the default memory mode: each says which mode that
/// was.
const MODE_PREFIXES: [&str; 4] = ["test_verbs", "test_c_", "test_matrix", "test_fault_path"];

/// A test that takes this long or longer says how long, as a KTAP diagnostic.
const SLOW: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `tests` and prints one KTAP document; returns the number that failed. `mem_mode` is
/// the memory mode a verbs context opens in here, which the verbs tests say they ran in.
/// A closed standard output ends the run (`pfnic-test | head`): nobody reads the results.
pub fn run(tests: &[&Test], mem_mode: Option<&str>) -> usize {
    outln!("KTAP version 1");
    outln!("1..{}", tests.len());
    let mut failed = 0;
    for (i, t) in tests.iter().enumerate() {
        if let Some(mode) = mem_mode.filter(|_| MODE_PREFIXES.iter().any(|p| t.name.starts_with(p)))
        {
            outln!("# {}: memory mode {mode}", t.name);
        }
        let started = std::time::Instant::now();
        let result = (t.run)();
        // The slow ones say so: make test's lanes are bound by the CPU, and this is where a
        // guest's time goes.
        let took = started.elapsed();
        if took >= SLOW {
            outln!("# {}: took {:.1} s", t.name, took.as_secs_f64());
        }
        let n = i + 1;
        let line = match result {
            Ok(()) => format!("ok {n} {}", t.name),
            Err(Failure::Skip(why)) => format!("ok {n} {} # SKIP {why}", t.name),
            Err(Failure::Fail(why)) => {
                failed += 1;
                for l in why.lines() {
                    outln!("# {}: {l}", t.name);
                }
                format!("not ok {n} {}", t.name)
            }
        };
        outln!("{line}");
    }
    failed
}
