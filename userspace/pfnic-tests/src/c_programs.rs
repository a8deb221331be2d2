//! C programs built against rdma-core's `<infiniband/verbs.h>` and linked with Debian's own
//! `libibverbs.so.1`, which reaches pfnic through pfnic's rdma-core provider and the RDMA
//! core: the RC ping-pong (`userspace/examples/rc_pingpong.c`, installed as
//! `/usr/bin/pfnic-rc-pingpong`), in one process and two, with ordinary and on-demand MRs,
//! busy polling and completion events; and the API checks of `userspace/examples/verbs_api.c`
//! (`/usr/bin/pfnic-verbs-api-test`). With a global route to the port's own GIDs (`-g`), and
//! between a `--server` and a client that exchange their addresses over TCP as rdma-core's
//! `ibv_rc_pingpong` does. They need the guest's Debian layer (`scripts/run-guest.sh
//! --debian`) and skip without it.

use pfnic_cli::outln;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{sh, tcp_listening};
use crate::ibv_common::{ibv_ctx, requires_odp, sva_mode};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{port_attr, PortAddress, ODP_RECV, ODP_SEND};
use crate::verbs_port::{port_with_addresses, TEST_ADDR};

/// The ping-pong in the guest's root file system.
const PINGPONG: &str = "/usr/bin/pfnic-rc-pingpong";
/// The C API checks.
const API_TEST: &str = "/usr/bin/pfnic-verbs-api-test";
/// The dynamic loader they need (the guest's Debian layer).
const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
/// Round trips per run: enough to repeat every path, few enough for TCG.
const ITERS: &str = "20";

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_c_verbs_api",
        run: test_c_verbs_api,
    },
    &Test {
        name: "test_c_pingpong",
        run: test_c_pingpong,
    },
    &Test {
        name: "test_c_pingpong_fork",
        run: test_c_pingpong_fork,
    },
    &Test {
        name: "test_c_pingpong_odp_cold",
        run: test_c_pingpong_odp_cold,
    },
    &Test {
        name: "test_c_pingpong_odp_cold_fork_1m",
        run: test_c_pingpong_odp_cold_fork_1m,
    },
    &Test {
        name: "test_c_pingpong_implicit_prefetch",
        run: test_c_pingpong_implicit_prefetch,
    },
    &Test {
        name: "test_c_pingpong_events",
        run: test_c_pingpong_events,
    },
    &Test {
        name: "test_c_pingpong_events_fork",
        run: test_c_pingpong_events_fork,
    },
    &Test {
        name: "test_c_pingpong_bad_args",
        run: test_c_pingpong_bad_args,
    },
    &Test {
        name: "test_c_pingpong_gid",
        run: test_c_pingpong_gid,
    },
    &Test {
        name: "test_c_pingpong_tcp",
        run: test_c_pingpong_tcp,
    },
];

/// What a successful run reported on its "ok:" line.
struct Report {
    line: String,
    page_requests: u64,
    events: u64,
}

/// Runs the ping-pong with `args`; skips without verbs.
fn run(args: &[&str]) -> Result<Output, Failure> {
    run_bin(PINGPONG, args)
}

/// Runs `bin` with `args`; skips without verbs, or when the guest has no loader (no Debian
/// layer).
fn run_bin(bin: &str, args: &[&str]) -> Result<Output, Failure> {
    // Skip (not fail) where the device has no verbs; the context is closed before the run.
    drop(ibv_ctx()?);
    if !std::path::Path::new(LOADER).exists() {
        return Err(Failure::Skip(format!(
            "no {LOADER} for {bin}: the guest has no Debian layer (scripts/run-guest.sh --debian)"
        )));
    }
    Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| Failure::Fail(format!("cannot run {bin}: {e}")))
}

/// The number just before `what` on `line` (e.g. "12 page requests").
fn count_before(line: &str, what: &str) -> Result<u64, Failure> {
    let head = line
        .split(what)
        .next()
        .filter(|_| line.contains(what))
        .ok_or_else(|| Failure::Fail(format!("no '{what}' in {line:?}")))?;
    head.rsplit([' ', ','])
        .find(|w| !w.is_empty())
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| Failure::Fail(format!("no count before '{what}' in {line:?}")))
}

/// Runs a ping-pong that must succeed: exit status 0 and an "ok:" line naming the run.
/// Skips when the run needs on-demand paging (`--odp`, `--implicit`) and the device has none
/// in this context's memory mode, as rdma-core's tests skip on a missing capability.
fn run_ok(args: &[&str], expect: &str) -> Result<Report, Failure> {
    run_ok_bin(PINGPONG, args, expect)
}

/// [`run_ok`] with the ping-pong `bin`.
fn run_ok_bin(bin: &str, args: &[&str], expect: &str) -> Result<Report, Failure> {
    let implicit = args.contains(&"--implicit");
    if implicit || args.contains(&"--odp") {
        requires_odp(&ibv_ctx()?, ODP_SEND | ODP_RECV, implicit)?;
    }
    let out = run_bin(bin, args)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Failure::Fail(format!(
            "{bin} {} exited with {}: {}{}",
            args.join(" "),
            out.status,
            stderr.trim(),
            stdout.trim()
        )));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ok: "))
        .ok_or_else(|| Failure::Fail(format!("no 'ok:' line in {stdout:?}")))?
        .to_string();
    if !line.contains(expect) {
        return Err(Failure::Fail(format!("{line:?} does not say {expect:?}")));
    }
    outln!("# {line}");
    Ok(Report {
        page_requests: count_before(&line, " page requests")?,
        events: count_before(&line, " completion events")?,
        line,
    })
}

fn test_c_pingpong() -> TestResult {
    let r = run_ok(&["-n", ITERS], "20 iterations of 4096 bytes, 1 process")?;
    check_eq!(r.events, 0);
    Ok(())
}

fn test_c_pingpong_fork() -> TestResult {
    run_ok(
        &["-n", ITERS, "-s", "8192", "--fork"],
        "20 iterations of 8192 bytes, 2 processes",
    )?;
    Ok(())
}

/// Receive buffers dropped before every receive: every message faults the receiver's pages
/// back in, which the sending WQEs' `vendor_err` counts.
/// The device's page faults during `f`: the program's own count (the completions' page
/// requests) in the `sva` mode; in the `odp` mode, where faults are events to the driver that
/// completions do not count, the pages the driver faulted in for the device (debugfs).
fn faults_during(f: impl FnOnce() -> Result<Report, Failure>) -> Result<(u64, Report), Failure> {
    let sva = sva_mode()?;
    if sva {
        let r = f()?;
        return Ok((r.page_requests, r));
    }
    // Pages the driver faulted in for page-fault events.
    let before = crate::common::debugfs_stat("odp_fault_pages")?;
    let r = f()?;
    Ok((crate::common::debugfs_stat("odp_fault_pages")? - before, r))
}

fn test_c_pingpong_odp_cold() -> TestResult {
    let (faults, r) = faults_during(|| {
        run_ok(
            &["-n", ITERS, "--odp", "--cold"],
            "1 process, ODP MRs, cold",
        )
    })?;
    // At least one page per message, both directions.
    check!(
        faults >= 40,
        "{faults} page faults for 40 cold messages: {}",
        r.line
    );
    Ok(())
}

fn test_c_pingpong_odp_cold_fork_1m() -> TestResult {
    let (faults, r) = faults_during(|| {
        run_ok(
            &["-n", "4", "-s", "1048576", "--odp", "--cold", "--fork"],
            "4 iterations of 1048576 bytes, 2 processes, ODP MRs, cold",
        )
    })?;
    // 8 messages into dropped buffers: each faults. Not every one of its 256 pages needs a
    // request of its own: a page request group's faults may map their neighbours too (a
    // transparent huge page, fault-around), which the next group's probe finds present.
    check!(
        faults >= 8,
        "{faults} page faults for 8 cold 1 MiB messages: {}",
        r.line
    );
    Ok(())
}

/// `ibv_advise_mr(PREFETCH_WRITE, FLUSH)` of each dropped receive buffer, through the implicit
/// MR: the pages are present again before the message arrives, so no WQE faults.
fn test_c_pingpong_implicit_prefetch() -> TestResult {
    let r = run_ok(
        &["-n", ITERS, "--implicit", "--cold", "--prefetch"],
        "implicit ODP MR, cold, prefetch",
    )?;
    check_eq!(r.page_requests, 0);
    Ok(())
}

fn test_c_pingpong_events() -> TestResult {
    let r = run_ok(&["-n", ITERS, "--events"], "1 process, events")?;
    check!(r.events > 0, "no completion event: {}", r.line);
    Ok(())
}

fn test_c_pingpong_events_fork() -> TestResult {
    let r = run_ok(
        &["-n", ITERS, "--events", "--fork", "--odp"],
        "2 processes, ODP MRs, events",
    )?;
    check!(r.events > 0, "no completion event: {}", r.line);
    Ok(())
}

/// Failures are reported, with a message and a nonzero status: a device that does not exist,
/// and bad usage.
fn test_c_pingpong_bad_args() -> TestResult {
    let out = run(&["-d", "nosuchdev", "-n", "1"])?;
    check_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    check!(err.contains("no device named nosuchdev"), "stderr: {err:?}");
    let out = run(&["-s", "0"])?;
    check_eq!(out.status.code(), Some(2));
    let out = run(&["--prefetch"])?;
    check_eq!(out.status.code(), Some(2));
    Ok(())
}

/// `-g`: the QPs connect with a global route to the port's own GID, which is loopback: GID 0
/// in one process, GID 1 (the IPv4-mapped address) across two at a 2048-byte path MTU. A GID
/// index beyond the table and an MTU that is none are refused.
fn test_c_pingpong_gid() -> TestResult {
    run_ok(
        &["-n", ITERS, "-g", "0"],
        "20 iterations of 4096 bytes, 1 process",
    )?;
    port_with_addresses()?;
    let _address = PortAddress::set(Some(port_attr()?.ipv4().unwrap_or(TEST_ADDR)))?;
    run_ok(
        &["-n", ITERS, "-g", "1", "-m", "2048", "--fork", "-s", "6000"],
        "20 iterations of 6000 bytes, 2 processes",
    )?;
    let out = run(&["-n", "1", "-g", "9"])?;
    check_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    check!(err.contains("-g 9: port 1 has 2 GIDs"), "stderr: {err:?}");
    let out = run(&["-n", "1", "-m", "1000"])?;
    check_eq!(out.status.code(), Some(2));
    Ok(())
}

/// rdma-core's out-of-band exchange, both sides this program, over the guest's loopback
/// interface: the server listens, the client sends "LID:QPN:PSN:GID" with GID 1, each
/// connects its QP with a global route to the other's GID (the port's own: loopback on one
/// device), and 20 checked round trips follow. Each side prints the other's address.
fn test_c_pingpong_tcp() -> TestResult {
    port_with_addresses()?;
    let addr = port_attr()?.ipv4().unwrap_or(TEST_ADDR);
    let _address = PortAddress::set(Some(addr))?;
    let (ok, out) = sh("ip", &["link", "set", "lo", "up"])?;
    check!(ok, "ip link set lo up: {out}");
    const PORT: u16 = 18516;
    let common = ["-n", ITERS, "-g", "1", "-s", "3000", "--check", "-t", "30"];
    let port = PORT.to_string();
    let mut server = Command::new(PINGPONG)
        .args(["--server", "--port", &port])
        .args(common)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::Fail(format!("cannot run {PINGPONG}: {e}")))?;
    let start = Instant::now();
    while !tcp_listening(PORT)? {
        if start.elapsed() > Duration::from_secs(20) || server.try_wait()?.is_some() {
            let _ = server.kill();
            let out = server.wait_with_output()?;
            fail!(
                "the server never listened on {PORT}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = run(&["127.0.0.1", "--port", &port]
        .into_iter()
        .chain(common)
        .collect::<Vec<_>>());
    let server = server.wait_with_output()?;
    let client = client?;
    let gid = format!("GID ::ffff:{addr}");
    for (who, out, mode) in [
        ("client", &client, "TCP client"),
        ("server", &server, "TCP server"),
    ] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        check!(
            out.status.success(),
            "the {who} exited with {}: {}{stdout}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        check!(
            stdout
                .lines()
                .any(|l| l.contains("remote address:") && l.contains(&gid)),
            "the {who} did not print the peer's {gid}: {stdout}"
        );
        check!(
            stdout
                .lines()
                .any(|l| l.starts_with("ok: 20 iterations of 3000 bytes, ") && l.contains(mode)),
            "the {who} did not report {mode}: {stdout}"
        );
        check!(stdout.contains("20 iters in "), "{stdout}");
    }
    Ok(())
}

/// Queries, errno conventions, every RC operation and error completions, from C on Debian's
/// `libibverbs.so.1`, pfnic's provider and the RDMA core (the extended QP's work request
/// builder `ibv_wr_*`, completion timestamps against the device clock
/// `ibv_query_rt_values_ex`, device memory and inline data included): its TAP must plan and
/// pass every group.
fn test_c_verbs_api() -> TestResult {
    let out = run_bin(API_TEST, &[])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let plan = stdout
        .lines()
        .find_map(|l| l.strip_prefix("1..").and_then(|n| n.parse::<usize>().ok()))
        .ok_or_else(|| Failure::Fail(format!("no TAP plan in {stdout:?}")))?;
    let passed = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("not ok") || l.starts_with("# "))
        .collect();
    if !failed.is_empty() || passed != plan || !out.status.success() {
        return Err(Failure::Fail(format!(
            "{API_TEST}: {passed} of {plan} passed, exit {}:\n{}{}",
            out.status,
            failed.join("\n"),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}
