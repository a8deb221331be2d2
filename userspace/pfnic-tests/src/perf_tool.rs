//! `pfnic-perf --compare`, the benchmark `make bench` runs: a short run in the guest, its JSON
//! read back, so that a benchmark that stops measuring what it says fails here rather than in
//! a night's numbers.

use pfnic_cli::outln;
use serde_json::Value;

use crate::common::sh;
use crate::ibv_common::{ibv_ctx, requires_odp};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{ODP_READ, ODP_WRITE};

const PERF: &str = "/usr/bin/pfnic-perf";
const JSON: &str = "/tmp/pfnic-perf-compare.json";
/// Pages of one message (64 KiB), on each side.
const PAGES: f64 = 16.0;

pub const TESTS: &[&Test] = &[&Test {
    name: "test_perf_compare_waits",
    run: test_perf_compare_waits,
}];

fn number(row: &Value, path: &[&str]) -> Result<f64, Failure> {
    path.iter()
        .fold(row, |v, k| &v[*k])
        .as_f64()
        .ok_or_else(|| Failure::Fail(format!("{}: not a number in {row}", path.join("."))))
}

/// WRITE and READ of 64 KiB on on-demand MRs, each row polled and by events: four rows, in
/// that order, each with every page of both buffers faulted in every cold iteration and none
/// in the warm ones, a device cost and a CPU reference that exist.
fn test_perf_compare_waits() -> TestResult {
    requires_odp(&ibv_ctx()?, ODP_WRITE | ODP_READ, false)?;
    let json = format!("--json={JSON}");
    let (ok, out) = sh(
        PERF,
        &[
            "--compare",
            "--odp",
            "--waits=poll,events",
            "-s",
            "65536",
            "-n",
            "3",
            "--reps",
            "2",
            &json,
            "write",
            "read",
        ],
    )?;
    check!(ok, "{PERF} failed: {out}");
    let text = std::fs::read_to_string(JSON)?;
    let _ = std::fs::remove_file(JSON);
    let doc: Value = serde_json::from_str(&text)?;
    check!(
        doc["waits"] == serde_json::json!(["poll", "events"]),
        "waits {} in the JSON",
        doc["waits"]
    );
    let Some(rows) = doc["rows"].as_array() else {
        fail!("no rows in the JSON");
    };
    let want = [
        ("write", "poll"),
        ("write", "events"),
        ("read", "poll"),
        ("read", "events"),
    ];
    check!(
        rows.len() == want.len(),
        "{} rows, not {}",
        rows.len(),
        want.len()
    );
    for (row, (op, wait)) in rows.iter().zip(want) {
        check!(
            row["op"] == op && row["wait"] == wait && row["size"] == 65536,
            "row {} {} {}, not {op} {wait} 65536",
            row["op"],
            row["wait"],
            row["size"]
        );
        let what = format!("{op} {wait}");
        let (read, write) = (
            number(row, &["read_faults_per_iter"])?,
            number(row, &["write_faults_per_iter"])?,
        );
        check!(
            read == PAGES && write == PAGES,
            "{what}: {read} read and {write} write faults per cold iteration, not {PAGES} each"
        );
        let groups = number(row, &["groups_per_iter"])?;
        check!(
            (2.0..=4.0).contains(&groups),
            "{what}: {groups} page request groups per cold iteration (one or two a side)"
        );
        check!(
            number(row, &["warm_faults_per_iter"])? == 0.0,
            "{what}: warm iterations faulted"
        );
        // The device's cost is (cold - warm) / faults over 3 iterations x 2 repetitions: a
        // noisy warm median (an events row's wake-up on a loaded host) can exceed the cold
        // one, so its sign is not checked (a timed assertion), only that the ratio is it.
        let device = number(row, &["device_us_per_fault"])?;
        let cpu = number(row, &["cpu", "weighted_us_per_page"])?;
        let ratio = number(row, &["device_over_cpu"])?;
        check!(
            device.is_finite() && cpu > 0.0 && (ratio - device / cpu).abs() <= 1e-9 * ratio.abs(),
            "{what}: device {device} us, CPU {cpu} us, device/CPU {ratio}"
        );
        // The table on the console has the row too.
        check!(
            out.lines()
                .any(|l| l.starts_with(op) && l.contains("64 KiB") && l.contains(wait)),
            "{what}: no such row in the table:\n{out}"
        );
        outln!("# {what}: device/CPU {ratio:.2}x");
    }
    Ok(())
}
