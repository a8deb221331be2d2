//! Debian's own rdma-core binaries (bookworm's `ibverbs-utils` and `perftest`, unmodified) on
//! pfnic, on Debian's own `libibverbs.so.1` (the guest's Debian layer,
//! `scripts/run-guest.sh --debian`), which reaches pfnic through pfnic's rdma-core provider
//! and the RDMA core; perftest runs its bandwidth and latency tests over loopback, and
//! rdma-core 56.1's own examples (`scripts/build-rdma-examples.sh`) run like Debian's
//! binaries of them. `ibv_devices` and `ibv_devinfo -v` must describe the device as pfnic's
//! own queries do; `ibv_rc_pingpong` runs a server and a client in this guest over loopback
//! with the option sets pfnic supports (the new send API and the extended CQ with `-N`,
//! completion timestamps with `-t`, device memory with `-j`), and so does `ibv_srq_pingpong`
//! (its QPs sharing one SRQ); on a device or in a mode without a feature, the option must
//! fail the way rdma-core's programs report a missing capability: a message and exit status
//! 1, not a crash.

use pfnic_cli::outln;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::nic;
use crate::common::tcp_listening;
use crate::ibv_common::{ibv_ctx, mem_mode, requires_odp};
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{port_attr, PortAddress, ODP_RECV, ODP_SEND};
use pfnic_sys::uapi;
use pfnic_verbs::MemMode;

const IBV_DEVICES: &str = "/usr/bin/ibv_devices";
const IBV_DEVINFO: &str = "/usr/bin/ibv_devinfo";
const RC_PINGPONG: &str = "/usr/bin/ibv_rc_pingpong";
const SRQ_PINGPONG: &str = "/usr/bin/ibv_srq_pingpong";
const UD_PINGPONG: &str = "/usr/bin/ibv_ud_pingpong";
const ASYNCWATCH: &str = "/usr/bin/ibv_asyncwatch";
/// perftest's tools, `ib_<test>`.
const PERFTEST_DIR: &str = "/usr/bin";
/// perftest's iterations: enough for its statistics, few enough for TCG.
const PERFTEST_ITERS: &str = "200";
/// A ping-pong that does not finish in this time is stuck.
const PINGPONG_TIMEOUT: Duration = Duration::from_secs(120);

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_debian_ibv_devices",
        run: test_debian_ibv_devices,
    },
    &Test {
        name: "test_debian_libibverbs_provider",
        run: test_debian_libibverbs_provider,
    },
    &Test {
        name: "test_debian_ibv_devinfo",
        run: test_debian_ibv_devinfo,
    },
    &Test {
        name: "test_debian_ibv_asyncwatch",
        run: test_debian_ibv_asyncwatch,
    },
    &Test {
        name: "test_debian_unsupported_pingpongs",
        run: test_debian_unsupported_pingpongs,
    },
    &Test {
        name: "test_debian_lib_rc_pingpong",
        run: test_debian_lib_rc_pingpong,
    },
    &Test {
        name: "test_debian_lib_rc_pingpong_timestamps",
        run: test_debian_lib_rc_pingpong_timestamps,
    },
    &Test {
        name: "test_debian_lib_rc_pingpong_dm",
        run: test_debian_lib_rc_pingpong_dm,
    },
    &Test {
        name: "test_debian_lib_rc_pingpong_odp",
        run: test_debian_lib_rc_pingpong_odp,
    },
    &Test {
        name: "test_debian_lib_srq_pingpong",
        run: test_debian_lib_srq_pingpong,
    },
    &Test {
        name: "test_debian_rc_pingpong",
        run: test_debian_rc_pingpong,
    },
    &Test {
        name: "test_debian_rc_pingpong_events_64k",
        run: test_debian_rc_pingpong_events_64k,
    },
    &Test {
        name: "test_debian_rc_pingpong_gid_check",
        run: test_debian_rc_pingpong_gid_check,
    },
    &Test {
        name: "test_debian_rc_pingpong_odp",
        run: test_debian_rc_pingpong_odp,
    },
    &Test {
        name: "test_debian_rc_pingpong_implicit_prefetch",
        run: test_debian_rc_pingpong_implicit_prefetch,
    },
    &Test {
        name: "test_debian_rc_pingpong_new_send",
        run: test_debian_rc_pingpong_new_send,
    },
    &Test {
        name: "test_debian_rc_pingpong_timestamps",
        run: test_debian_rc_pingpong_timestamps,
    },
    &Test {
        name: "test_debian_srq_pingpong",
        run: test_debian_srq_pingpong,
    },
    &Test {
        name: "test_debian_ud_pingpong",
        run: test_debian_ud_pingpong,
    },
    &Test {
        name: "test_debian_perftest_bw",
        run: test_debian_perftest_bw,
    },
    &Test {
        name: "test_debian_perftest_lat",
        run: test_debian_perftest_lat,
    },
    &Test {
        name: "test_debian_perftest_odp",
        run: test_debian_perftest_odp,
    },
    &Test {
        name: "test_debian_rdma_core_examples",
        run: test_debian_rdma_core_examples,
    },
    &Test {
        name: "test_debian_rc_pingpong_dm",
        run: test_debian_rc_pingpong_dm,
    },
];

/// Skips where the guest has no Debian layer, or the device no verbs.
fn needs(tool: &str) -> Result<(), Failure> {
    if !Path::new(tool).exists() {
        return Err(Failure::Skip(format!(
            "no {tool}: the guest has no Debian layer (scripts/run-guest.sh --debian)"
        )));
    }
    drop(ibv_ctx()?);
    Ok(())
}

/// The device's name as the library lists it: `pfnicN` of the device the tests use.
fn device_name() -> Result<String, Failure> {
    crate::rdma_core::ib_name()
}

/// stdout and stderr of a finished program, for messages.
fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn run(tool: &str, args: &[&str]) -> Result<Output, Failure> {
    Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| Failure::Fail(format!("cannot run {tool}: {e}")))
}

fn test_debian_ibv_devices() -> TestResult {
    devices(IBV_DEVICES)
}

/// `ibv_devices` (`tool`) lists the device with its node GUID.
fn devices(tool: &str) -> TestResult {
    needs(tool)?;
    let name = device_name()?;
    let guid = u64::from_be(ibv_ctx()?.query_device()?.node_guid);
    let out = run(tool, &[])?;
    check!(out.status.success(), "ibv_devices: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .ok_or_else(|| Failure::Fail(format!("{name} not listed: {stdout:?}")))?;
    outln!("# {}", line.trim());
    check_eq!(
        line.split_whitespace().nth(1),
        Some(format!("{guid:016x}").as_str())
    );
    Ok(())
}

/// Debian's `ibv_asyncwatch` (see [`asyncwatch`]).
fn test_debian_ibv_asyncwatch() -> TestResult {
    asyncwatch(ASYNCWATCH)
}

/// Debian's ping-pongs of the transports pfnic does not have (UC, XRC) stop at once with
/// their own message and exit status 1, because the library refuses the QP (or the XRC
/// domain) with `EOPNOTSUPP`: no crash, no hang, nothing created half-way.
fn test_debian_unsupported_pingpongs() -> TestResult {
    let name = device_name()?;
    let eopnotsupp = libc::EOPNOTSUPP.to_string();
    for (tool, says) in [
        ("/usr/bin/ibv_uc_pingpong", "Couldn't create QP".to_string()),
        (
            "/usr/bin/ibv_xsrq_pingpong",
            format!("Couldn't Open the XRC Domain {eopnotsupp}"),
        ),
    ] {
        needs(tool)?;
        let child = Command::new(tool)
            .args(["-d", &name, "-p", "18599"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Fail(format!("cannot run {tool}: {e}")))?;
        // One still running is a server waiting for a client: a hang here.
        let out = wait_output(child, tool)?;
        let t = text(&out);
        check!(
            out.status.code() == Some(1) && t.contains(&says),
            "{tool}: {}, expected exit status 1 and {says:?}: {t}",
            out.status
        );
        outln!("# {tool}: exit status 1: {}", t.trim().replace('\n', " | "));
    }
    // The failed programs left the device as it was.
    drop(ibv_ctx()?);
    Ok(())
}

/// A running `ibv_asyncwatch` and what it printed so far (read by a thread of its own: the
/// tool prints line by line, and runs until it is killed).
pub(crate) struct AsyncWatch {
    child: Child,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl AsyncWatch {
    /// Runs `tool -d name`, and waits until it has opened its context.
    pub(crate) fn start(tool: &str, name: &str) -> Result<Self, Failure> {
        Self::start_env(tool, name, &[])
    }

    /// [`AsyncWatch::start`] with `env` set.
    fn start_env(tool: &str, name: &str, env: &[(&str, &str)]) -> Result<Self, Failure> {
        needs(tool)?;
        let mut child = Command::new(tool)
            .args(["-d", name])
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Fail(format!("cannot run {tool}: {e}")))?;
        let mut stdout = child.stdout.take().expect("piped");
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_str(&text);
            }
        });
        let w = Self {
            child,
            out,
            reader: Some(reader),
        };
        w.wait_for(&format!("{name}: async event FD"), Duration::from_secs(30))?;
        Ok(w)
    }

    /// Debian's `ibv_asyncwatch` on device `name`, or `None` (said in a KTAP comment) in a
    /// guest without the Debian layer.
    pub(crate) fn debian(name: &str) -> Result<Option<Self>, Failure> {
        match Self::start(ASYNCWATCH, name) {
            Ok(w) => Ok(Some(w)),
            Err(Failure::Skip(why)) => {
                outln!("# without ibv_asyncwatch: {why}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Waits until the tool has printed `what` (`Fail` after `limit`, or if it exited).
    pub(crate) fn wait_for(&self, what: &str, limit: Duration) -> TestResult {
        let start = Instant::now();
        loop {
            let text = self.out.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if text.contains(what) {
                return Ok(());
            }
            if start.elapsed() > limit || self.reader.as_ref().is_none_or(|r| r.is_finished()) {
                fail!("ibv_asyncwatch did not print {what:?} within {limit:?}: {text:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the tool has printed each of `lines` (30 s each), stops it, and shows
    /// what it printed in a KTAP comment.
    pub(crate) fn expect(self, lines: &[&str]) -> TestResult {
        let seen = lines
            .iter()
            .try_for_each(|l| self.wait_for(l, Duration::from_secs(30)));
        let t = self.finish();
        seen?;
        outln!("# ibv_asyncwatch: {}", t.trim().replace('\n', " | "));
        Ok(())
    }

    /// As [`AsyncWatch::expect`], and the tool printed no other event: each event exactly
    /// once, in that order.
    pub(crate) fn expect_only(self, lines: &[&str]) -> TestResult {
        let seen = lines
            .iter()
            .try_for_each(|l| self.wait_for(l, Duration::from_secs(30)));
        // A duplicate would follow the last one closely.
        std::thread::sleep(Duration::from_millis(300));
        let t = self.finish();
        seen?;
        outln!("# ibv_asyncwatch: {}", t.trim().replace('\n', " | "));
        let events: Vec<&str> = t
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("event_type"))
            .collect();
        let want: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
        check!(
            events == want,
            "ibv_asyncwatch printed the events {events:?}, want exactly {want:?}"
        );
        Ok(())
    }

    /// The tool has not exited.
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the tool; what it printed.
    fn finish(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let text = self.out.lock().unwrap_or_else(|e| e.into_inner()).clone();
        text
    }
}

impl Drop for AsyncWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ibv_asyncwatch` (`tool`) opens the device through the RDMA core and waits for its
/// events. A change of the port's address reaches the core's GID cache: Debian's
/// `ibv_devinfo -v` shows the new GID 1. On this InfiniBand-style port (no wire) Linux's RDMA
/// core updates that cache without passing the driver's `IB_EVENT_GID_CHANGE` on to its
/// clients (`drivers/infiniband/core/cache.c`, `ib_cache_event_task`: it announces changed
/// entries one by one, and only a RoCE port's), so the watcher sees no event here; it must
/// still be waiting, not have failed. On a RoCE port the GIDs are the netdev's addresses and
/// the port's events reach it (`test_wire_port_events`).
fn asyncwatch(tool: &str) -> TestResult {
    needs(tool)?;
    let name = device_name()?;
    let mut w = AsyncWatch::start(tool, &name)?;
    let (guard, addr) = PortAddress::change()?;
    // ibv_devinfo prints a RoCE GID as an IPv6 address, an InfiniBand one in 16-bit groups.
    let o = addr.octets();
    let want = [
        format!("::ffff:{addr}"),
        format!(
            "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
            o[0], o[1], o[2], o[3]
        ),
    ];
    let start = Instant::now();
    loop {
        let out = run_debian_lib(IBV_DEVINFO, &["-v", "-d", &name], false)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let gid1 = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("GID[  1]:"))
            .map(|l| l.trim().to_string());
        if gid1
            .as_deref()
            .is_some_and(|l| want.iter().any(|w| l.ends_with(w.as_str())))
        {
            outln!("# {name} through the core: {}", gid1.unwrap_or_default());
            break;
        }
        if start.elapsed() > Duration::from_secs(10) {
            fail!("the core's GID 1 is {gid1:?} 10 s after the port's address became {addr}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(guard);
    std::thread::sleep(Duration::from_millis(300));
    let running = w.running();
    let text = w.finish();
    check!(
        running,
        "{tool} stopped after the port's address changed: {text:?}"
    );
    outln!("# {tool}: {}", text.trim().replace('\n', " | "));
    Ok(())
}

/// `ibv_devinfo`'s "key: value" lines, keys trimmed, values trimmed (every occurrence).
fn fields(out: &str) -> HashMap<String, Vec<String>> {
    let mut m: HashMap<String, Vec<String>> = HashMap::new();
    for l in out.lines() {
        if let Some((k, v)) = l.split_once(':') {
            m.entry(k.trim().to_string())
                .or_default()
                .push(v.trim().to_string());
        }
    }
    m
}

/// Debian's own `libibverbs.so.1` (rdma-core 44, unmodified: the Debian layer's).
pub(crate) const LIBIBVERBS: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
/// The MD5 sums of the files of Debian's `libibverbs1` package, as dpkg keeps them
/// (`scripts/build-rootfs.sh` copies them from the package).
const LIBIBVERBS_MD5SUMS: &str = "/usr/lib/pfnic/libibverbs1.md5sums";
/// pfnic's rdma-core provider, where Debian's library looks for providers.
const PROVIDER: &str = "/usr/lib/x86_64-linux-gnu/libibverbs/libpfnic-rdmav34.so";

/// The library the guest's programs load is Debian's package's, byte for byte: its MD5 sum
/// is the one in the package's `md5sums`.
fn unmodified_libibverbs() -> TestResult {
    let real = std::fs::canonicalize(LIBIBVERBS)
        .map_err(|e| Failure::Fail(format!("{LIBIBVERBS}: {e}")))?;
    let sums = std::fs::read_to_string(LIBIBVERBS_MD5SUMS)
        .map_err(|e| Failure::Fail(format!("{LIBIBVERBS_MD5SUMS}: {e}")))?;
    // dpkg's md5sums name each file relative to /, without the slash.
    let rel = real.to_string_lossy().trim_start_matches('/').to_string();
    let want = sums
        .lines()
        .find_map(|l| {
            l.split_once("  ")
                .filter(|(_, f)| *f == rel)
                .map(|(m, _)| m)
        })
        .ok_or_else(|| Failure::Fail(format!("{rel} is not in {LIBIBVERBS_MD5SUMS}")))?;
    let out = run("/usr/bin/md5sum", &[&real.to_string_lossy()])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got = stdout.split_whitespace().next().unwrap_or_default();
    check!(
        out.status.success() && got == want,
        "{} has MD5 {got:?}, Debian's package {want}",
        real.display()
    );
    outln!("# {}: Debian's libibverbs1, MD5 {got}", real.display());
    Ok(())
}

/// Runs `tool` (with the loader's trace of the files it opens when `debug`).
fn run_debian_lib(tool: &str, args: &[&str], debug: bool) -> Result<Output, Failure> {
    let mut cmd = Command::new(tool);
    cmd.args(args);
    if debug {
        cmd.env("LD_DEBUG", "files");
    }
    cmd.output()
        .map_err(|e| Failure::Fail(format!("cannot run {tool}: {e}")))
}

/// Debian's unmodified libibverbs.so.1 finds the device through the RDMA core and pfnic's
/// rdma-core provider (`libpfnic-rdmav34.so`, matched by the PCI IDs): `ibv_devices` lists it
/// with its node GUID, and `ibv_devinfo -v` (a context opened through the core, checking the
/// driver's ABI, and the core's device and port queries) describes it as the device's own
/// queries do.
fn test_debian_libibverbs_provider() -> TestResult {
    needs(IBV_DEVINFO)?;
    for f in [LIBIBVERBS, PROVIDER] {
        check!(Path::new(f).exists(), "no {f} in the guest");
    }
    unmodified_libibverbs()?;
    let name = device_name()?;
    // Debian's tools through the core, against the device file's identity and this process's
    // libibverbs, whose limits test_verbs_query_device checks against docs/verbs.md.
    let dev = nic()?.dev.query()?;
    let ctx = ibv_ctx()?;
    let attr = ctx.query_device_ex()?.orig_attr;
    let port = ctx.query_port(1)?;

    // The loader's trace shows which libraries the program really used.
    let out = run_debian_lib(IBV_DEVICES, &[], true)?;
    check!(out.status.success(), "ibv_devices: {}", text(&out));
    let trace = String::from_utf8_lossy(&out.stderr);
    let loaded = |file: &str| {
        trace
            .lines()
            .any(|l| l.contains("file=") && l.contains(file))
    };
    check!(
        loaded(LIBIBVERBS),
        "Debian's libibverbs.so.1 was not the one loaded"
    );
    check!(loaded(PROVIDER), "the provider was not loaded");
    let guid = format!("{:016x}", u64::from_be(attr.node_guid));
    let stdout = String::from_utf8_lossy(&out.stdout);
    check!(
        stdout.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w == [name.as_str(), guid.as_str()]
        }),
        "ibv_devices does not list {name} {guid}: {stdout}"
    );

    let out = run_debian_lib(IBV_DEVINFO, &["-v", "-d", &name], false)?;
    check!(
        out.status.success() && out.stderr.is_empty(),
        "ibv_devinfo -v: {}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let f = fields(&stdout);
    let one = |k: &str| first_field(&f, k, &stdout);
    let fw = dev.fw_version;
    check_eq!(one("hca_id")?, name.as_str());
    check_eq!(
        one("fw_ver")?,
        format!("{}.{}.{}", fw >> 24, (fw >> 16) & 0xff, fw & 0xffff)
    );
    let g = u64::from_be(attr.node_guid).to_be_bytes();
    let guid = format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    );
    check_eq!(one("node_guid")?, guid.as_str());
    check_eq!(one("sys_image_guid")?, guid.as_str());
    check_eq!(one("vendor_id")?, format!("{:#x}", dev.vendor_id));
    check_eq!(one("vendor_part_id")?, dev.device_id.to_string());
    check_eq!(one("phys_port_cnt")?, "1");
    let v = &attr;
    for (k, want) in [
        ("max_qp", v.max_qp),
        ("max_qp_wr", v.max_qp_wr),
        ("max_sge", v.max_sge),
        ("max_cq", v.max_cq),
        ("max_cqe", v.max_cqe),
        ("max_mr", v.max_mr),
        ("max_pd", v.max_pd),
        ("max_qp_rd_atom", v.max_qp_rd_atom),
        ("max_srq", v.max_srq),
        ("max_srq_wr", v.max_srq_wr),
        ("max_srq_sge", v.max_srq_sge),
    ] {
        check_eq!((k, one(k)?), (k, want.to_string().as_str()));
    }
    let atomic = if v.atomic_cap == 1 {
        "ATOMIC_HCA (1)"
    } else {
        "ATOMIC_NONE (0)"
    };
    check_eq!(one("atomic_cap")?, atomic);
    let state = match port.state {
        4 => "PORT_ACTIVE (4)",
        1 => "PORT_DOWN (1)",
        s => return Err(Failure::Fail(format!("port state {s}"))),
    };
    check_eq!(one("state")?, state);
    let link = link_layer_name(port.link_layer.into());
    check_eq!(one("link_layer")?, link);
    check_eq!(one("port_lid")?, port.lid.to_string());
    outln!(
        "# Debian's libibverbs: {name} through libpfnic-rdmav34.so, fw {}",
        one("fw_ver")?
    );
    Ok(())
}

/// A port's link layer as `ibv_devinfo` names it.
fn link_layer_name(link_layer: u32) -> &'static str {
    if link_layer == pfnic_verbs::LINK_LAYER_ETHERNET {
        "Ethernet"
    } else {
        "InfiniBand"
    }
}

/// The first value of field `k` of `ibv_devinfo -v`'s output `out` (parsed as `f`).
fn first_field<'a>(
    f: &'a HashMap<String, Vec<String>>,
    k: &str,
    out: &str,
) -> Result<&'a str, Failure> {
    f.get(k)
        .and_then(|v| v.first())
        .map(String::as_str)
        .ok_or_else(|| Failure::Fail(format!("no '{k}:' in ibv_devinfo -v: {out}")))
}

fn test_debian_ibv_devinfo() -> TestResult {
    needs(IBV_DEVINFO)?;
    let name = device_name()?;
    let dev = nic()?.dev.query()?;
    let ctx = ibv_ctx()?;
    let ex = ctx.query_device_ex()?;
    let attr = ex.orig_attr;
    let port = ctx.query_port(1)?;
    let out = run(IBV_DEVINFO, &["-v", "-d", &name])?;
    check!(out.status.success(), "ibv_devinfo -v: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let f = fields(&stdout);
    let one = |k: &str| first_field(&f, k, &stdout);
    check_eq!(one("hca_id")?, name.as_str());
    check_eq!(one("vendor_id")?, format!("{:#x}", dev.vendor_id));
    check_eq!(one("max_qp")?, attr.max_qp.to_string());
    check_eq!(one("max_qp_wr")?, attr.max_qp_wr.to_string());
    check_eq!(one("max_cqe")?, attr.max_cqe.to_string());
    check_eq!(one("max_mr")?, attr.max_mr.to_string());
    check_eq!(one("phys_port_cnt")?, "1");
    check_eq!(one("state")?, format!("PORT_ACTIVE ({})", port.state));
    let link = link_layer_name(port.link_layer.into());
    check_eq!(one("link_layer")?, link);
    check_eq!(one("port_lid")?, port.lid.to_string());
    // The ODP capabilities are the context's memory mode's: listed exactly when it has them.
    let general = ex.odp_caps.general_caps;
    let odp = general & pfnic_verbs::pfnic_sys::uapi::PFNIC_ODP_SUPPORT != 0;
    let implicit = general & pfnic_verbs::pfnic_sys::uapi::PFNIC_ODP_SUPPORT_IMPLICIT != 0;
    let has_line = |w: &str| stdout.lines().any(|l| l.trim() == w);
    check_eq!(has_line("ODP_SUPPORT"), odp);
    check_eq!(has_line("ODP_SUPPORT_IMPLICIT"), implicit);
    check_eq!(has_line("SUPPORT_SEND") && has_line("SUPPORT_RECV"), odp);
    // The GIDs the port has ("GID[  0]: fe80:..."; an unset one is not listed), with their
    // type on a RoCE port. GID 0 is the link-local one of the node GUID or MAC.
    let gids: Vec<&String> = f
        .iter()
        .filter(|(k, _)| k.starts_with("GID["))
        .flat_map(|(_, v)| v)
        .collect();
    let gid0 = ctx.query_gid(1, 0)?;
    let gid0 = gid0
        .chunks(2)
        .map(|b| format!("{:02x}{:02x}", b[0], b[1]))
        .collect::<Vec<_>>()
        .join(":");
    check!(
        f.get("GID[  0]").is_some_and(|v| v[0].starts_with(&gid0)),
        "GID 0 is not {gid0}: {gids:?}"
    );
    if link == "Ethernet" {
        check!(
            gids.iter().all(|g| g.ends_with("RoCE v2")),
            "GID types: {gids:?}"
        );
    }
    let gids = gids.len();
    outln!(
        "# {name}: {} GIDs, ODP {odp}, implicit {implicit}, link {link}",
        gids
    );

    // A device that does not exist: rdma-core's message, exit status not 0.
    let out = run(IBV_DEVINFO, &["-d", "nosuchdev0"])?;
    check!(
        !out.status.success() && text(&out).contains("wasn't found"),
        "ibv_devinfo -d nosuchdev0: {} {}",
        out.status,
        text(&out)
    );
    Ok(())
}

/// Waits for `child` to exit within the ping-pong timeout; kills it otherwise.
fn wait_output(mut child: Child, what: &str) -> Result<Output, Failure> {
    let start = Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > PINGPONG_TIMEOUT {
            let _ = child.kill();
            let out = child.wait_with_output()?;
            fail!(
                "{what} did not finish in {PINGPONG_TIMEOUT:?}: {}",
                text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output()?)
}

/// A ping-pong's summary: its QPN, its peer's, and the "iters" line.
struct Side {
    local_qpn: String,
    remote_qpn: String,
    iters: String,
}

/// Parses a successful side's output.
fn side(out: &Output, what: &str) -> Result<Side, Failure> {
    let t = text(out);
    check!(
        out.status.success(),
        "{what} exited with {}: {t}",
        out.status
    );
    let qpn = |prefix: &str| -> Result<String, Failure> {
        t.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.split("QPN ").nth(1))
            .and_then(|r| r.split(',').next())
            .map(str::to_string)
            .ok_or_else(|| Failure::Fail(format!("{what}: no '{prefix}' line: {t}")))
    };
    let iters = t
        .lines()
        .find(|l| l.contains(" iters in "))
        .ok_or_else(|| Failure::Fail(format!("{what}: no 'iters in' line: {t}")))?
        .to_string();
    Ok(Side {
        local_qpn: qpn("local address:")?,
        remote_qpn: qpn("remote address:")?,
        iters,
    })
}

/// Runs `tool` as a server and as a client of it over loopback, both with `args` and a TCP
/// port of their own (`-p`), and returns their outputs (server, client).
fn server_client(tool: &str, args: &[&str]) -> Result<(Output, Output), Failure> {
    server_client_env(tool, args, &[])
}

/// [`server_client`] with `env` set for both.
fn server_client_env(
    tool: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(Output, Output), Failure> {
    /// One TCP port per run, so that a run never meets a previous one's socket.
    static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(18600);
    let port = NEXT_PORT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let port_s = port.to_string();
    let mut all: Vec<&str> = vec!["-p", &port_s];
    all.extend_from_slice(args);
    let server = Command::new(tool)
        .args(&all)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Failure::Fail(format!("cannot run {tool}: {e}")))?;
    let start = Instant::now();
    while !tcp_listening(port)? {
        if start.elapsed() > PINGPONG_TIMEOUT {
            let out = wait_output(server, "the server")?;
            fail!("the server never listened on {port}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    all.push("127.0.0.1");
    let client = Command::new(tool)
        .args(&all)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let c = wait_output(client, "the client")?;
    let s = wait_output(server, "the server")?;
    Ok((s, c))
}

/// Runs `tool` (an rdma-core ping-pong) as a server and a client with `args`; both must
/// succeed, each reporting the other's QP, and `iters` round trips.
fn pingpong(tool: &str, args: &[&str], iters: u32) -> Result<(), Failure> {
    pingpong_env(tool, args, iters, &[])
}

/// [`pingpong`] with `env` set for both sides.
fn pingpong_env(
    tool: &str,
    args: &[&str],
    iters: u32,
    env: &[(&str, &str)],
) -> Result<(), Failure> {
    let n = iters.to_string();
    let mut all: Vec<&str> = vec!["-n", &n];
    all.extend_from_slice(args);
    let (s, c) = server_client_env(tool, &all, env)?;
    let (s, c) = (side(&s, "the server")?, side(&c, "the client")?);
    check_eq!(s.remote_qpn, c.local_qpn);
    check_eq!(c.remote_qpn, s.local_qpn);
    check!(
        c.iters.trim_start().starts_with(&format!("{iters} iters")),
        "client: {}",
        c.iters
    );
    outln!("# {tool} {}: {}", args.join(" "), c.iters.trim());
    Ok(())
}

fn test_debian_rc_pingpong() -> TestResult {
    needs(RC_PINGPONG)?;
    pingpong(RC_PINGPONG, &[], 200)
}

fn test_debian_rc_pingpong_events_64k() -> TestResult {
    needs(RC_PINGPONG)?;
    pingpong(RC_PINGPONG, &["-e", "-s", "65536"], 50)
}

/// With a global route to GID 0 (`-g 0`), and every received buffer validated (`-c`).
fn test_debian_rc_pingpong_gid_check() -> TestResult {
    needs(RC_PINGPONG)?;
    pingpong(RC_PINGPONG, &["-g", "0", "-c", "-s", "8192"], 50)
}

/// The ping-pongs through Debian's library run in one guest, over the port's loopback; a port
/// with a wire is RoCE, addressed by its netdev's GID, which the two-guest suites use.
fn loopback_port() -> Result<(), Failure> {
    if port_attr()?.has_wire() {
        return Err(Failure::Skip(
            "the port is RoCE (a wire): the pair tests address it by its netdev's GID".into(),
        ));
    }
    Ok(())
}

/// Debian's unmodified `ibv_rc_pingpong` on Debian's unmodified libibverbs.so.1: every verb
/// through the RDMA core and pfnic's provider, posting and polling in the provider's Rust
/// data path; each received buffer validated (`-c`); with completion events (`-e`) through
/// the core's completion channel. On the InfiniBand-style port (by LID):
/// a RoCE port's GID table stays empty until the port has a netdev.
fn test_debian_lib_rc_pingpong() -> TestResult {
    needs(RC_PINGPONG)?;
    loopback_port()?;
    let name = device_name()?;
    pingpong_env(RC_PINGPONG, &["-d", &name, "-c", "-s", "4096"], 200, &[])?;
    pingpong_env(
        RC_PINGPONG,
        &["-d", &name, "-c", "-s", "65536", "-r", "64"],
        50,
        &[],
    )?;
    pingpong_env(RC_PINGPONG, &["-d", &name, "-s", "1"], 100, &[])?;
    // Completion events through the core's completion channel (`ibv_get_cq_event`).
    pingpong_env(
        RC_PINGPONG,
        &["-d", &name, "-e", "-c", "-s", "8192"],
        100,
        &[],
    )
}

/// Debian's `ibv_srq_pingpong` on Debian's libibverbs through the RDMA core: several QPs take
/// their receives from one SRQ (created, posted to and torn down through the core and the
/// provider), with completion events too.
fn test_debian_lib_srq_pingpong() -> TestResult {
    needs(SRQ_PINGPONG)?;
    loopback_port()?;
    if ibv_ctx()?.query_device()?.max_srq == 0 {
        return Err(Failure::Skip("the device has no SRQs".into()));
    }
    let name = device_name()?;
    pingpong_env(SRQ_PINGPONG, &["-d", &name, "-q", "8"], 100, &[])?;
    pingpong_env(SRQ_PINGPONG, &["-d", &name, "-q", "4", "-e"], 100, &[])?;
    pingpong_env(
        SRQ_PINGPONG,
        &["-d", &name, "-q", "4", "-s", "65536"],
        20,
        &[],
    )
}

/// The on-demand paging Debian's `ibv_devinfo -v` shows through the RDMA core: (ODP, implicit
/// ODP, RC operations that may fault).
fn core_odp_caps(name: &str) -> Result<(bool, bool, Vec<String>), Failure> {
    let out = run_debian_lib(IBV_DEVINFO, &["-v", "-d", name], false)?;
    check!(out.status.success(), "ibv_devinfo -v: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut section = "";
    let (mut odp, mut implicit, mut rc) = (false, false, Vec::new());
    for l in stdout.lines() {
        let t = l.trim();
        if t.ends_with(':') && !t.contains(' ') {
            section = if t == "general_odp_caps:" || t == "rc_odp_caps:" {
                t
            } else {
                ""
            };
            continue;
        }
        match section {
            "general_odp_caps:" => {
                odp |= t == "ODP_SUPPORT";
                implicit |= t == "ODP_SUPPORT_IMPLICIT";
            }
            "rc_odp_caps:" if !t.is_empty() && !t.contains(':') => rc.push(t.to_string()),
            _ => section = "",
        }
    }
    Ok((odp, implicit, rc))
}

/// Debian's `ibv_rc_pingpong` with on-demand MRs (`-o`, 1 MiB, cold) and the implicit MR
/// (`-O`), on Debian's libibverbs through the RDMA core: `ibv_devinfo -v` must report ODP
/// where the context's memory mode (`PFNIC_MEM_MODE`) faults on demand (SVA, or the device's
/// own translation tables' faults in the `odp` mode) and none in the `pinned` mode, as pfnic's
/// own library reports it; every received buffer checked.
fn test_debian_lib_rc_pingpong_odp() -> TestResult {
    needs(RC_PINGPONG)?;
    loopback_port()?;
    let name = device_name()?;
    let caps = pfnic_sys::Device::open(format!("/dev/{name}"))?
        .query()?
        .caps;
    let sva = uapi::PFNIC_CAP_ATS | uapi::PFNIC_CAP_PASID | uapi::PFNIC_CAP_PRI;
    let (faults, _) = odp_caps()?;
    let (odp, implicit, rc) = core_odp_caps(&name)?;
    outln!(
        "# ibv_devinfo -v: ODP {odp}, implicit {implicit}, RC {}",
        rc.join(" ")
    );
    check_eq!(odp, faults);
    if caps & sva == sva && mem_mode()? == MemMode::Sva {
        check!(implicit, "an SVA device without the implicit MR");
    }
    if !odp {
        return Err(Failure::Skip("the device does not fault on demand".into()));
    }
    for op in [
        "SUPPORT_SEND",
        "SUPPORT_RECV",
        "SUPPORT_WRITE",
        "SUPPORT_READ",
    ] {
        check!(rc.iter().any(|c| c == op), "rc_odp_caps lacks {op}: {rc:?}");
    }
    pingpong_env(
        RC_PINGPONG,
        &["-d", &name, "-o", "-c", "-s", "65536"],
        20,
        &[],
    )?;
    if implicit {
        pingpong_env(
            RC_PINGPONG,
            &["-d", &name, "-O", "-c", "-s", "8192"],
            20,
            &[],
        )?;
    }
    Ok(())
}

/// Whether this context's memory mode has RC on-demand paging (and the implicit MR), as the
/// ODP tests' capability check finds it.
fn odp_caps() -> Result<(bool, bool), Failure> {
    let has = |implicit| match requires_odp(&ibv_ctx()?, ODP_SEND | ODP_RECV, implicit) {
        Ok(()) => Ok(true),
        Err(Failure::Skip(_)) => Ok(false),
        Err(e) => Err(e),
    };
    Ok((has(false)?, has(true)?))
}

/// Runs a client alone with `args`: it must fail before it connects, with `message`.
fn fails_with(tool: &str, args: &[&str], message: &str) -> Result<(), Failure> {
    let mut all = args.to_vec();
    all.push("127.0.0.1");
    let out = run(tool, &all)?;
    let t = text(&out);
    check_eq!(out.status.code(), Some(1));
    check!(t.contains(message), "{tool} {}: {t:?}", all.join(" "));
    outln!("# {tool} {}: {}", args.join(" "), t.trim());
    Ok(())
}

/// `-o`: the ping-pong's buffers on-demand MRs, 1 MiB, cold on both sides. In a memory mode
/// without ODP, rdma-core's own capability check must refuse it.
fn test_debian_rc_pingpong_odp() -> TestResult {
    needs(RC_PINGPONG)?;
    if odp_caps()?.0 {
        pingpong(RC_PINGPONG, &["-o", "-s", "1048576"], 20)
    } else {
        fails_with(RC_PINGPONG, &["-o"], "isn't ODP capable")
    }
}

/// `-O -P`: the implicit MR (the whole address space), prefetched with `ibv_advise_mr`.
fn test_debian_rc_pingpong_implicit_prefetch() -> TestResult {
    needs(RC_PINGPONG)?;
    if odp_caps()?.1 {
        pingpong(RC_PINGPONG, &["-O", "-P", "-s", "65536"], 50)
    } else {
        // Without ODP at all, rdma-core's first check (ODP) refuses it.
        let message = if odp_caps()?.0 { "implicit ODP" } else { "ODP" };
        fails_with(RC_PINGPONG, &["-O"], message)
    }
}

/// `-N`: the QP made with `ibv_create_qp_ex` and its sends built with `ibv_wr_start`,
/// `ibv_wr_send`, `ibv_wr_set_sge` and `ibv_wr_complete`; with completion events, and with
/// ODP buffers where the memory mode has ODP.
fn test_debian_rc_pingpong_new_send() -> TestResult {
    needs(RC_PINGPONG)?;
    if odp_caps()?.0 {
        pingpong(RC_PINGPONG, &["-N", "-e", "-o", "-s", "65536"], 50)
    } else {
        pingpong(RC_PINGPONG, &["-N", "-e", "-s", "65536"], 50)
    }
}

/// `ibv_srq_pingpong`: several QPs on each side take their receives from one SRQ; plain
/// with its 16 QPs, with 4 QPs and completion events, and with 4 QPs and 64 KiB messages.
fn test_debian_srq_pingpong() -> TestResult {
    needs(SRQ_PINGPONG)?;
    pingpong(SRQ_PINGPONG, &[], 100)?;
    pingpong(SRQ_PINGPONG, &["-q", "4", "-e"], 100)?;
    pingpong(SRQ_PINGPONG, &["-q", "4", "-s", "65536"], 20)
}

/// Debian's `ibv_ud_pingpong` through the RDMA core: UD QPs and address handles, every
/// received buffer validated (`-c`), addressed by the port's LID (no GRH: the 40 bytes before
/// each message are left alone) and by GID 0 (a GRH, which the device writes there), with
/// completion events too. One guest, so the datagrams run on the device's loopback: a port
/// with a wire is RoCE, which the two-guest suites use (`debian_ud_pingpong`).
fn test_debian_ud_pingpong() -> TestResult {
    needs(UD_PINGPONG)?;
    loopback_port()?;
    let name = device_name()?;
    pingpong(UD_PINGPONG, &["-d", &name, "-c"], 200)?;
    pingpong(
        UD_PINGPONG,
        &["-d", &name, "-c", "-g", "0", "-s", "4096"],
        100,
    )?;
    pingpong(UD_PINGPONG, &["-d", &name, "-e", "-s", "1"], 100)
}

/// `-j`: the ping-pong's buffer is device memory (`ibv_alloc_dm`, `ibv_reg_dm_mr` with
/// `IBV_ACCESS_ZERO_BASED`, `ibv_memcpy_to_dm`/`_from_dm`), validated with `-c`; on a device
/// without it, rdma-core's own check refuses it.
fn test_debian_rc_pingpong_dm() -> TestResult {
    needs(RC_PINGPONG)?;
    if nic()?.dev.query()?.caps & uapi::PFNIC_CAP_DM == 0 {
        return fails_with(RC_PINGPONG, &["-j"], "doesn't support dm allocation");
    }
    pingpong(RC_PINGPONG, &["-j", "-c"], 100)?;
    pingpong(RC_PINGPONG, &["-j", "-e", "-s", "8192"], 50)
}

/// Whether the device stamps completions with its clock.
fn has_timestamps() -> Result<bool, Failure> {
    Ok(nic()?.dev.query()?.caps & uapi::PFNIC_CAP_TIMESTAMPS != 0)
}

/// `-t`: the CQ made with `ibv_create_cq_ex` and `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`,
/// each completion read with `ibv_wc_read_completion_ts`; both sides report the clock cycles
/// between receive completions, whose maximum must be above zero (the device's nanoseconds). On a
/// device without a clock, rdma-core's own check refuses it.
fn timestamps_pingpong(tool: &str, args: &[&str], iters: u32) -> TestResult {
    timestamps_pingpong_env(tool, args, iters, &[])
}

/// [`timestamps_pingpong`] with `env` set for both sides.
fn timestamps_pingpong_env(
    tool: &str,
    args: &[&str],
    iters: u32,
    env: &[(&str, &str)],
) -> TestResult {
    if !has_timestamps()? {
        return fails_with(tool, &["-t"], "isn't completion timestamp capable");
    }
    let n = iters.to_string();
    let mut all = vec!["-t", "-n", &n];
    all.extend_from_slice(args);
    let (s, c) = server_client_env(tool, &all, env)?;
    for (out, what) in [(&s, "the server"), (&c, "the client")] {
        side(out, what)?;
        let t = text(out);
        let max = t
            .lines()
            .find_map(|l| l.strip_prefix("Max receive completion clock cycles = "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| Failure::Fail(format!("{what}: no clock cycles: {t}")))?;
        check!(
            max > 0,
            "{what}: at most {max} clock cycles between receives"
        );
        outln!(
            "# {tool} -t {}: {what}: at most {max} ns between receives",
            args.join(" ")
        );
    }
    Ok(())
}

/// Not with `-e`: rdma-core's example treats an empty CQ after a completion event as an
/// error (`poll CQ failed 2`), but an event may announce a completion an earlier poll already
/// took (it polls two at a time), on any device; the plain `-e` path polls without that check.
fn test_debian_rc_pingpong_timestamps() -> TestResult {
    needs(RC_PINGPONG)?;
    timestamps_pingpong(RC_PINGPONG, &[], 100)?;
    timestamps_pingpong(RC_PINGPONG, &["-s", "8192"], 50)?;
    timestamps_pingpong(RC_PINGPONG, &["-N"], 50)
}

/// `-t` on Debian's libibverbs through the RDMA core: the provider's `ibv_create_cq_ex`, its
/// extended poll and `ibv_wc_read_completion_ts`.
fn test_debian_lib_rc_pingpong_timestamps() -> TestResult {
    needs(RC_PINGPONG)?;
    loopback_port()?;
    let name = device_name()?;
    timestamps_pingpong_env(RC_PINGPONG, &["-d", &name], 100, &[])?;
    timestamps_pingpong_env(RC_PINGPONG, &["-d", &name, "-s", "8192"], 50, &[])
}

/// Debian's `ibv_rc_pingpong -j` on Debian's own `libibverbs.so.1` through the RDMA core: its
/// buffer is device memory (the core's `DM_ALLOC` and `DM_MR_REG`, copied through the uverbs
/// file's mapping of it), every message validated with `-c`; with completion events and 8 KiB
/// messages too.
fn test_debian_lib_rc_pingpong_dm() -> TestResult {
    needs(RC_PINGPONG)?;
    loopback_port()?;
    let name = device_name()?;
    if nic()?.dev.query()?.caps & uapi::PFNIC_CAP_DM == 0 {
        return Err(Failure::Skip("the device has no device memory".into()));
    }
    pingpong_env(RC_PINGPONG, &["-d", &name, "-j", "-c"], 100, &[])?;
    pingpong_env(
        RC_PINGPONG,
        &["-d", &name, "-j", "-c", "-e", "-s", "8192"],
        50,
        &[],
    )
}

/// Runs perftest's `ib_<test>` server and client with `args` (and `-d` the device, `-F`: no
/// CPU frequency warning); both must exit 0 and the client print its result row: the
/// message size, the iterations, then numbers, the first of them (peak bandwidth, or minimum
/// latency) above zero. perftest calibrates the CPU clock against the wall clock before it
/// reports; under TCG that fails now and then ("Correlation coefficient"), more often while
/// the two-guest suites run beside it: such runs are repeated, up to six times, and if the
/// last one's calibration fails too, its row (perftest divided by a CPU frequency of 0) is
/// reported void: the run completed, its numbers mean nothing.
fn perftest(test: &str, args: &[&str], size: &str) -> Result<(), Failure> {
    /// Runs of one perftest tool, while its clock calibration fails.
    const PERFTEST_ATTEMPTS: u32 = 6;
    let tool = format!("{PERFTEST_DIR}/ib_{test}");
    needs(&tool)?;
    let name = device_name()?;
    let mut all = vec!["-d", &name, "-F", "-n", PERFTEST_ITERS];
    all.extend_from_slice(args);
    for attempt in 1..=PERFTEST_ATTEMPTS {
        let (s, c) = server_client(&tool, &all)?;
        let (st, ct) = (text(&s), text(&c));
        let uncalibrated = (st + &ct).contains("Correlation coefficient");
        if uncalibrated && attempt < PERFTEST_ATTEMPTS {
            outln!("# ib_{test}: perftest's clock calibration failed, run {attempt} repeated");
            continue;
        }
        check!(
            s.status.success(),
            "ib_{test} server: {}: {}",
            s.status,
            text(&s)
        );
        check!(c.status.success(), "ib_{test} client: {}: {ct}", c.status);
        let row = ct
            .lines()
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<_>>)
            .find(|w| w.len() >= 5 && w[0] == size && w[1] == PERFTEST_ITERS)
            .ok_or_else(|| Failure::Fail(format!("ib_{test}: no result row: {ct}")))?;
        if uncalibrated {
            outln!(
                "# ib_{test} {}: {} (void: perftest's clock calibration failed in all {} runs)",
                args.join(" "),
                row.join(" "),
                PERFTEST_ATTEMPTS
            );
            return Ok(());
        }
        let first: f64 = row[2]
            .parse()
            .map_err(|_| Failure::Fail(format!("ib_{test}: result row {row:?}")))?;
        let positive = first > 0.0;
        check!(positive, "ib_{test}: result row {row:?}");
        outln!("# ib_{test} {}: {}", args.join(" "), row.join(" "));
        return Ok(());
    }
    unreachable!("the last attempt returns")
}

/// perftest's bandwidth tests: RDMA WRITE, READ, SEND (64 KiB) and fetch-and-add.
fn test_debian_perftest_bw() -> TestResult {
    for t in ["write_bw", "read_bw", "send_bw"] {
        perftest(t, &["-s", "65536"], "65536")?;
    }
    perftest("atomic_bw", &[], "8")
}

/// perftest's latency tests (2-byte messages, perftest's default; fetch-and-add's 8 bytes),
/// and WRITE and SEND with 64-byte inline payloads (`-I`).
fn test_debian_perftest_lat() -> TestResult {
    for t in ["write_lat", "send_lat", "read_lat"] {
        perftest(t, &[], "2")?;
    }
    perftest("atomic_lat", &[], "8")?;
    for t in ["write_lat", "send_lat"] {
        perftest(t, &["-s", "64", "-I", "64"], "64")?;
    }
    Ok(())
}

/// perftest with on-demand paging (`--odp`), where the memory mode has it.
fn test_debian_perftest_odp() -> TestResult {
    if !odp_caps()?.0 {
        return Err(Failure::Skip(
            "no on-demand paging in this memory mode".into(),
        ));
    }
    perftest("write_bw", &["--odp", "-s", "1048576"], "1048576")?;
    perftest("send_bw", &["--odp", "-s", "65536"], "65536")
}

/// rdma-core 56.1's examples, built against rdma-core's headers and linked with Debian's
/// `libibverbs.so.1` (`scripts/build-rdma-examples.sh`): `ibv_devices`, `ibv_asyncwatch`,
/// `ibv_rc_pingpong` plain, with the new send API and events, with ODP buffers (or the
/// implicit MR with prefetch) where the memory mode has them, with timestamps, with device
/// memory where the device has it, and `ibv_srq_pingpong`.
fn test_debian_rdma_core_examples() -> TestResult {
    let dir = "/usr/libexec/rdma-core-examples";
    devices(&format!("{dir}/ibv_devices"))?;
    asyncwatch(&format!("{dir}/ibv_asyncwatch"))?;
    let pp = format!("{dir}/ibv_rc_pingpong");
    needs(&pp)?;
    pingpong(&pp, &["-s", "8192"], 100)?;
    pingpong(&pp, &["-N", "-e"], 50)?;
    let (odp, implicit) = odp_caps()?;
    if odp {
        pingpong(&pp, &["-o", "-s", "65536"], 20)?;
    }
    if implicit {
        pingpong(&pp, &["-O", "-P"], 20)?;
    }
    timestamps_pingpong(&pp, &[], 50)?;
    if nic()?.dev.query()?.caps & uapi::PFNIC_CAP_DM != 0 {
        pingpong(&pp, &["-j", "-c"], 50)?;
    }
    let srq = format!("{dir}/ibv_srq_pingpong");
    needs(&srq)?;
    pingpong(&srq, &["-q", "8"], 100)
}
