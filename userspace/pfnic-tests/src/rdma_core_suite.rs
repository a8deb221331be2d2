//! rdma-core's own test suite (the `tests/` of rdma-core 44, which Debian ships with its
//! Python bindings, `python3-pyverbs`) on pfnic: `run_tests.py --dev pfnicN`, through
//! Debian's unmodified `libibverbs.so.1`, pfnic's provider and the RDMA core. It is the
//! reference for how verbs behave for rdma-core's users; its tests skip themselves where a
//! device reports it lacks something (UD, XRC, memory windows, a vendor's direct verbs).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::ktap::{Failure, Test, TestResult};
use crate::rdma_core::ib_name;
use pfnic_cli::outln;

pub const TESTS: &[&Test] = &[&Test {
    name: "test_rdma_core_suite",
    run: test_rdma_core_suite,
}];

/// rdma-core's test runner, where the guest's Debian layer puts it.
const RUN_TESTS: &str = "/usr/share/doc/rdma-core/tests/run_tests.py";

/// rdma-core's tests that fail on pfnic, by unittest id, each with why. One that passes
/// fails the run too, so that it leaves this list.
const KNOWN: &[(&str, &str)] = &[];

/// The ids of the tests unittest reports as failed (`FAIL: name (id)`, `ERROR: name (id)`).
fn failed_ids(out: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| {
            l.strip_prefix("FAIL: ")
                .or_else(|| l.strip_prefix("ERROR: "))
        })
        .filter_map(|l| {
            let (_, id) = l.split_once(" (")?;
            Some(id.trim_end_matches(')').to_string())
        })
        .collect()
}

/// unittest's count in `Ran N tests`, and the skipped count of its last line.
fn counts(out: &str) -> (usize, usize) {
    let ran = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let skipped = out
        .lines()
        .rev()
        .find_map(|l| {
            let at = l.find("skipped=")? + "skipped=".len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    (ran, skipped)
}

/// Every test rdma-core runs on the device passes or skips itself, but the [`KNOWN`] ones,
/// which must fail; the counts and each known failure go to KTAP comments.
fn test_rdma_core_suite() -> TestResult {
    if !Path::new(RUN_TESTS).exists() {
        skip!("no {RUN_TESTS}: the guest has no Debian layer (scripts/run-guest.sh --debian)");
    }
    let name = ib_name()?;
    let out = Command::new("python3")
        .args([RUN_TESTS, "--dev", &name, "-v"])
        .output()
        .map_err(|e| Failure::Fail(format!("cannot run {RUN_TESTS}: {e}")))?;
    // unittest reports on standard error.
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let (ran, skipped) = counts(&text);
    let failed = failed_ids(&text);
    let known: BTreeSet<String> = KNOWN.iter().map(|(id, _)| id.to_string()).collect();
    outln!(
        "# rdma-core's tests on {name}: {ran} run, {} passed, {skipped} skipped, {} failed",
        ran.saturating_sub(skipped + failed.len()),
        failed.len()
    );
    for (id, why) in KNOWN {
        outln!("# known failure {id}: {why}");
    }
    let new: Vec<&String> = failed.difference(&known).collect();
    let fixed: Vec<&String> = known.difference(&failed).collect();
    if ran == 0 || !new.is_empty() || !fixed.is_empty() {
        // The failures' tracebacks, for the log.
        let report = text
            .find("\n======")
            .map_or(text.as_str(), |at| &text[at..]);
        for l in report.lines() {
            outln!("# {l}");
        }
    }
    check!(
        ran > 0,
        "rdma-core's runner ran no test ({}): {text}",
        out.status
    );
    check!(
        new.is_empty(),
        "rdma-core's tests failed on {name}: {new:?}"
    );
    check!(
        fixed.is_empty(),
        "known failures passed (take them off the list): {fixed:?}"
    );
    Ok(())
}
