//! The NIC in Linux's RDMA core (ib_core): every bound pfnic is an RDMA device `pfnicN`, as
//! `/sys/class/infiniband/` and Debian's `rdma` tool (iproute2, the guest's Debian layer) show
//! it, and what the core says of it agrees with the device's own queries (`/dev/pfnicN`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::nic;
use crate::ibv_common::ibv_ctx;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::port_attr;
use pfnic_cli::outln;
use pfnic_sys::uapi;
use pfnic_verbs::{LINK_LAYER_ETHERNET, LINK_LAYER_INFINIBAND};

const RDMA: &str = "/usr/bin/rdma";

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_rdma_core_device",
        run: test_rdma_core_device,
    },
    &Test {
        name: "test_rdma_core_port",
        run: test_rdma_core_port,
    },
    &Test {
        name: "test_rdma_core_rdma_tool",
        run: test_rdma_core_rdma_tool,
    },
    &Test {
        name: "test_rdma_core_statistic",
        run: test_rdma_core_statistic,
    },
    &Test {
        name: "test_wire_rdma_core_roce_port",
        run: test_wire_rdma_core_roce_port,
    },
    &Test {
        name: "test_rdma_core_uverbs_objects",
        run: test_rdma_core_uverbs_objects,
    },
    &Test {
        name: "test_rdma_core_object_counters",
        run: test_rdma_core_object_counters,
    },
    &Test {
        name: "test_rdma_core_kernel_clients",
        run: test_rdma_core_kernel_clients,
    },
];

/// A C program built against rdma-core's `<infiniband/verbs.h>` that drives pfnic's verbs
/// objects through the RDMA core (`userspace/rdma-provider/tests/pfnic-uverbs-test.c`).
pub const UVERBS_TEST: &str = "/usr/lib/pfnic/pfnic-uverbs-test";

/// A command running [`UVERBS_TEST`] on Debian's own libibverbs.so.1 and pfnic's provider;
/// skips in a guest without Debian's library (no `--debian` layer).
pub fn uverbs_test(args: &[&str]) -> Result<Command, Failure> {
    let lib = crate::debian_tools::LIBIBVERBS;
    if !Path::new(lib).exists() {
        return Err(Failure::Skip(format!(
            "no {lib}: the guest has no Debian layer (scripts/run-guest.sh --debian)"
        )));
    }
    let mut cmd = Command::new(UVERBS_TEST);
    cmd.args(args);
    Ok(cmd)
}

/// The RDMA core's name for the first pfnic: its character device's, `pfnicN`.
pub fn ib_name() -> Result<String, Failure> {
    let path = pfnic_sys::devices()?
        .into_iter()
        .next()
        .ok_or_else(|| Failure::Fail("no /dev/pfnicN".into()))?;
    Ok(path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Failure::Fail(format!("{path:?} has no name")))?
        .to_string())
}

/// `/sys/class/infiniband/NAME`.
pub fn ib_sysfs(name: &str) -> PathBuf {
    Path::new("/sys/class/infiniband").join(name)
}

/// A sysfs attribute, without its newline.
fn attr(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_end().to_string())
        .map_err(|e| Failure::Fail(format!("read {}: {e}", path.display())))
}

/// A GUID as sysfs writes it: four groups of four hex digits.
fn guid_text(guid: u64) -> String {
    let b = guid.to_be_bytes();
    format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A GID as sysfs writes it: eight groups of four hex digits.
fn gid_text(gid: &[u8; 16]) -> String {
    gid.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs Debian's `rdma` tool; its standard output.
pub(crate) fn rdma(args: &[&str]) -> Result<String, Failure> {
    if !Path::new(RDMA).exists() {
        skip!("no {RDMA} (the guest has no Debian layer)");
    }
    let out = Command::new(RDMA).args(args).output()?;
    if !out.status.success() {
        return Err(Failure::Fail(format!(
            "rdma {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `/sys/class/infiniband/pfnicN`: the device is there, a child of the pfnic's PCI function,
/// with the node GUID, firmware version and node type the device's own queries give.
fn test_rdma_core_device() -> TestResult {
    let n = nic()?;
    let name = ib_name()?;
    let dir = ib_sysfs(&name);
    check!(dir.exists(), "{} does not exist", dir.display());
    let parent = std::fs::read_link(dir.join("device"))?;
    check_eq!(
        parent.file_name().and_then(|f| f.to_str()),
        Some(n.bdf.as_str())
    );
    // libibverbs' node GUID is big-endian, as on the wire.
    let guid = u64::from_be(ibv_ctx()?.query_device()?.node_guid);
    check_eq!(attr(&dir.join("node_guid"))?, guid_text(guid));
    check_eq!(attr(&dir.join("sys_image_guid"))?, guid_text(guid));
    let fw = n.dev.query()?.fw_version;
    check_eq!(
        attr(&dir.join("fw_ver"))?,
        format!("{}.{}.{}", fw >> 24, (fw >> 16) & 0xff, fw & 0xffff)
    );
    check_eq!(attr(&dir.join("node_type"))?, "1: CA");
    check_eq!(attr(&dir.join("node_desc"))?, "pfnic");
    // One port, numbered 1.
    let ports: Vec<String> = std::fs::read_dir(dir.join("ports"))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    check_eq!(ports, vec!["1".to_string()]);
    Ok(())
}

/// Port 1 in sysfs agrees with `PFNIC_IOCTL_QUERY_PORT`: link layer, state, LID, the P_Key,
/// and (on an InfiniBand-style port, whose GIDs the driver reports) every GID.
fn test_rdma_core_port() -> TestResult {
    let name = ib_name()?;
    let port = ib_sysfs(&name).join("ports/1");
    let ctx = ibv_ctx()?;
    let q = port_attr()?.0;
    let link_layer = attr(&port.join("link_layer"))?;
    match q.link_layer {
        LINK_LAYER_INFINIBAND => check_eq!(link_layer, "InfiniBand"),
        LINK_LAYER_ETHERNET => check_eq!(link_layer, "Ethernet"),
        other => return Err(Failure::Fail(format!("link layer {other}"))),
    }
    let (state, phys) = match q.state {
        4 => ("4: ACTIVE", "5: LinkUp"),
        1 => ("1: DOWN", "3: Disabled"),
        other => return Err(Failure::Fail(format!("port state {other}"))),
    };
    check_eq!(attr(&port.join("state"))?, state);
    check_eq!(attr(&port.join("phys_state"))?, phys);
    check_eq!(attr(&port.join("pkeys/0"))?, "0xffff");
    if q.link_layer == LINK_LAYER_INFINIBAND {
        check_eq!(attr(&port.join("lid"))?, format!("0x{:x}", q.lid));
        for i in 0..q.gid_tbl_len {
            check_eq!(
                attr(&port.join(format!("gids/{i}")))?,
                gid_text(&ctx.query_gid(1, i)?)
            );
        }
        // The table ends where the device's does.
        check!(
            std::fs::read_to_string(port.join(format!("gids/{}", q.gid_tbl_len))).is_err(),
            "GID {} beyond the table is readable",
            q.gid_tbl_len
        );
    } else {
        check_eq!(attr(&port.join("lid"))?, "0x0");
    }
    Ok(())
}

/// Debian's `rdma` tool lists the device and its port, with the port's state, through the
/// RDMA core's netlink.
fn test_rdma_core_rdma_tool() -> TestResult {
    let name = ib_name()?;
    let devs = rdma(&["dev", "show"])?;
    let line = devs
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(&format!("{name}:")))
        .ok_or_else(|| Failure::Fail(format!("`rdma dev show` lists no {name}:\n{devs}")))?;
    let guid = u64::from_be(ibv_ctx()?.query_device()?.node_guid);
    check!(
        line.contains(&format!("node_guid {}", guid_text(guid))),
        "{line}"
    );
    let links = rdma(&["link", "show", &format!("{name}/1")])?;
    let state = if port_attr()?.0.state == 4 {
        "state ACTIVE physical_state LINK_UP"
    } else {
        "state DOWN physical_state DISABLED"
    };
    check!(
        links.starts_with(&format!("link {name}/1 ")) && links.contains(state),
        "`rdma link show {name}/1`: {links}"
    );
    outln!("# {}", links.trim_end());
    Ok(())
}

/// With a wire, port 1 is a RoCE v2 port in the core: an Ethernet link layer, active while
/// the link is up. (Its GIDs come from a netdev, which the port does not have yet.)
fn test_wire_rdma_core_roce_port() -> TestResult {
    let p = port_attr()?;
    if !p.has_wire() {
        skip!("the device has no wire");
    }
    let port = ib_sysfs(&ib_name()?).join("ports/1");
    check_eq!(attr(&port.join("link_layer"))?, "Ethernet");
    check!(p.link_up(), "the wire guest's link is down");
    // The port's state in the core is its netdev's, as on every RoCE device: down while the
    // netdev is, active once it is up with its carrier.
    let netdev = crate::wire_netdev::netdev_by_mac(p.mac())?;
    check!(!netdev.carrier(), "{} is up before the test", netdev.name);
    check_eq!(attr(&port.join("state"))?, "1: DOWN");
    let _up = crate::wire_netdev::UpNetdev::new(&netdev)?;
    check_eq!(attr(&port.join("state"))?, "4: ACTIVE");
    test_rdma_core_port()?;
    test_rdma_core_rdma_tool()?;
    let link = rdma(&["link", "show", &format!("{}/1", ib_name()?)])?;
    check!(
        link.contains(&format!("netdev {}", netdev.name)),
        "rdma link does not tie the port to {}: {link}",
        netdev.name
    );
    Ok(())
}

/// Every counter of the port, named, from the device's own queries.
fn private_counters() -> Result<Vec<(String, u64)>, Failure> {
    let port = port_attr()?.0;
    let t = nic()?.dev.query_stats()?.translation;
    let mut all: Vec<(String, u64)> = uapi::PFNIC_PORT_COUNTER_NAMES
        .iter()
        .zip(port.counters)
        .map(|(n, c)| (n.to_string(), u64::from(c)))
        .collect();
    let translation = [
        t.page_requests,
        t.pri_success,
        t.pri_failed,
        t.atc_hits,
        t.atc_misses,
        t.invalidations,
    ];
    all.extend(
        uapi::PFNIC_TRANSLATION_COUNTER_NAMES
            .iter()
            .zip(translation)
            .map(|(n, c)| (n.to_string(), u64::from(c))),
    );
    Ok(all)
}

/// `rdma statistic show link pfnicN/1` (the core's netlink) and sysfs' `hw_counters` show the
/// port's counters and the device's translation counters, each between what the device's own
/// queries said just before and just after.
fn test_rdma_core_statistic() -> TestResult {
    let name = ib_name()?;
    let before = private_counters()?;
    // The core keeps values it read for 10 ms: let any earlier reading expire.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = rdma(&["statistic", "show", "link", &format!("{name}/1")])?;
    let dir = ib_sysfs(&name).join("ports/1/hw_counters");
    let mut sysfs = Vec::new();
    for (n, _) in &before {
        sysfs.push(attr(&dir.join(n))?);
    }
    let after = private_counters()?;
    let words: Vec<&str> = out.split_whitespace().collect();
    check!(
        words.len() >= 2 && words[0] == "link" && words[1] == format!("{name}/1"),
        "`rdma statistic show link {name}/1`: {out}"
    );
    let shown: Vec<(&str, &str)> = words[2..]
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0], c[1]))
        .collect();
    check_eq!(
        shown.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
        before.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
    );
    for (i, ((n, lo), (_, hi))) in before.iter().zip(&after).enumerate() {
        for (what, text) in [("rdma statistic", shown[i].1), ("sysfs", sysfs[i].as_str())] {
            let v: u64 = text
                .parse()
                .map_err(|_| Failure::Fail(format!("{what}: {n} is {text:?}")))?;
            check!(
                *lo <= v && v <= *hi,
                "{what}: {n} = {v}, the device said {lo} then {hi}"
            );
        }
    }
    outln!(
        "# {}",
        shown
            .iter()
            .filter(|(_, v)| *v != "0")
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// PDs, MRs, CQs and RC QPs through `/dev/infiniband/uverbsN` on Debian's libibverbs: created
/// as asked, taken RESET -> INIT -> RTR -> RTS, refused with libibverbs' errnos where pfnic
/// lacks something or a verb is invalid, out of reach of a fork child (`EPERM`), and up to
/// the device's limits (no per-process share of the QP table); an SRQ's limit event reaches
/// the context's asynchronous event file through the core; inline sends (the provider copies
/// the payload at posting); the memory modes `PFNIC_MEM_MODE` chooses (ordinary MRs pinned
/// where the mode pins, `ENOMEM` at once beyond `RLIMIT_MEMLOCK`, the mode's ODP caps); the
/// extended CQ's poll and readers, with completion timestamps; `ibv_advise_mr` (pages
/// resident after a flushed prefetch, each invalid advice refused); the rdma cgroup's
/// `rdma.max` limiting a process's contexts and objects (`EAGAIN` beyond); another process's
/// keys refused (`REM_ACCESS_ERR`, `LOC_PROT_ERR`), its memory untouched. The
/// program's own checks (KTAP) must all pass.
fn test_rdma_core_uverbs_objects() -> TestResult {
    let name = ib_name()?;
    let out = uverbs_test(&[&name])?
        .output()
        .map_err(|e| Failure::Fail(format!("cannot run {UVERBS_TEST}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    for l in stdout.lines() {
        outln!("# {l}");
    }
    let oks = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    // The plan the program printed ("1..N"): every case must report.
    let planned = stdout
        .lines()
        .find_map(|l| l.strip_prefix("1.."))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    check!(
        out.status.success() && planned >= UVERBS_TEST_CASES && oks == planned,
        "{UVERBS_TEST} {name}: {oks} of {planned} passed (at least {UVERBS_TEST_CASES} \
         expected), {}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The cases `pfnic-uverbs-test` has: objects, qp_states, refused, fork_child, limits,
/// srq_limit_event, inline, mem_modes, recv_fault_env, cq_ex, advise_mr, rdma_cgroup,
/// cross_process_keys, dm, rereg_mr, ud, kernel_paths.
const UVERBS_TEST_CASES: usize = 17;

/// What the rdma tool shows of a user's objects, from another process than their owner: a QP's
/// counters in its driver details (`rdma resource show qp -dd`) and an on-demand MR's page
/// faults (`rdma statistic mr`, mlx5's counter names), counting the traffic just moved; an
/// MR populated at registration takes none.
fn test_rdma_core_object_counters() -> TestResult {
    use crate::ibv_common::{mr_counter, qp_counter, Pair, PairOpts, ODP_WRITE};
    use crate::verbs_common::{check_bytes, pattern, MrKind, PAGE};
    let p = Pair::odp(ODP_WRITE, 8 * PAGE)?;
    let ctx = &p.a.ctx;
    check_eq!(qp_counter(ctx, &p.a.qp, "wqes")?, 0);
    let faults_before = mr_counter(&p.b.ctx, &p.b.mr, "page_faults")?;
    let data = pattern(3, 8 * PAGE);
    p.a.buf.write(0, &data);
    p.b.buf.dontneed()?;
    let sge = [p.a.sge(0, 8 * PAGE)];
    p.a.post_ok(p.a.rdma_wr(1, ibv::WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
    check_bytes("RDMA write", &p.b.buf, 0, &data)?;
    check_eq!(qp_counter(ctx, &p.a.qp, "wqes")?, 1);
    check_eq!(qp_counter(ctx, &p.a.qp, "bytes")?, 8 * PAGE as u64);
    let faults = mr_counter(&p.b.ctx, &p.b.mr, "page_faults")? - faults_before;
    check!(
        faults >= 1,
        "the target MR counted {faults} page faults for 8 dropped pages"
    );
    // A plain MR is present from registration: nothing to fault.
    let q = Pair::new(&PairOpts {
        kind: MrKind::Plain,
        ..Default::default()
    })?;
    q.a.buf.write(0, &pattern(4, PAGE));
    let sge = [q.a.sge(0, PAGE)];
    q.a.post_ok(q.a.rdma_wr(2, ibv::WrOpcode::RdmaWrite, &sge, &q.b, 0))?;
    check_eq!(mr_counter(&q.b.ctx, &q.b.mr, "page_faults")?, 0);
    Ok(())
}

/// pfnic is a kernel verbs provider: the RDMA core's MAD layer (ib_mad, a kernel client) has
/// opened QP1 on its port, and QP0 too on a port without a wire (InfiniBand-style), UD QPs of
/// the driver's own context, in RTS, which `rdma resource show qp` lists as the kernel's
/// (`comm` ib_core) with the driver's details; and their PD's local DMA key is the driver's.
fn test_rdma_core_kernel_clients() -> TestResult {
    let name = ib_name()?;
    let out = rdma(&["-j", "-dd", "resource", "show", "qp"])?;
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .map_err(|e| Failure::Fail(format!("rdma -j resource show qp: {e}: {out}")))?;
    let entry = |qpn: u64| {
        v.as_array().into_iter().flatten().find(|e| {
            e.get("ifname").and_then(|n| n.as_str()) == Some(name.as_str())
                && e.get("lqpn").and_then(|n| n.as_u64()) == Some(qpn)
        })
    };
    let ethernet = port_attr()?.0.link_layer == LINK_LAYER_ETHERNET;
    let mut want = vec![(1, "GSI")];
    if !ethernet {
        want.push((0, "SMI"));
    }
    for (qpn, kind) in want {
        let e = entry(qpn)
            .ok_or_else(|| Failure::Fail(format!("no QP {qpn} ({kind}) on {name}: {out}")))?;
        let field = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or("");
        check!(
            field("type") == kind && field("state") == "RTS" && field("comm") == "ib_core",
            "QP {qpn}: {e}"
        );
        check!(
            e.get("drv_wqes").is_some(),
            "QP {qpn} has no driver details: {e}"
        );
        outln!("# QP {qpn}: {kind}, RTS, ib_core's");
    }
    if ethernet {
        check!(entry(0).is_none(), "a RoCE port has no QP0: {out}");
    }
    let pds = rdma(&["resource", "show", "pd"])?;
    check!(
        pds.lines().any(|l| l.contains(&format!("dev {name} "))
            && l.contains("local_dma_lkey 0x")
            && l.contains("comm [ib_core]")),
        "no kernel PD with a local DMA key on {name}: {pds}"
    );
    Ok(())
}
