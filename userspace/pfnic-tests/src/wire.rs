//! The wire (docs/wire.md): two pfnics in one guest, joined by a QEMU hub, speaking RoCEv2
//! to each other through libibverbs and the RDMA core, each port addressed through its
//! netdev. Every RC operation at every path MTU, messages up to 8 MiB, cold ODP buffers on
//! both sides (receive faults answered with RNR NAKs, or parked in the backup buffer), and
//! the rule that keeps one process out of another's connection. Skips unless the guest has
//! two pfnics with a wire (the "wire" guest of `make test`).

use pfnic_cli::outln;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::common::sh;
use crate::ibv_common::*;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::{fail, gid_sysfs, MrKind, PAGE};
use crate::wire_netdev::{set_link, wait_carrier, wire_netdevs, Netdev};
use ibv::{
    event_type, gid_from_ipv4, ConnectAttr, Context, Element, GlobalRoute, QpState, SendWr,
    WcOpcode, WcStatus, WrOpcode, WC_WITH_IMM,
};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_wire_port",
        run: test_wire_port,
    },
    &Test {
        name: "test_wire_rc_ops",
        run: test_wire_rc_ops,
    },
    &Test {
        name: "test_wire_slot_free_at_completion",
        run: test_wire_slot_free_at_completion,
    },
    &Test {
        name: "test_wire_large",
        run: test_wire_large,
    },
    &Test {
        name: "test_wire_cold_rnr",
        run: test_wire_cold_rnr,
    },
    &Test {
        name: "test_wire_cold_backup",
        run: test_wire_cold_backup,
    },
    &Test {
        name: "test_wire_one_peer",
        run: test_wire_one_peer,
    },
    &Test {
        name: "test_wire_port_events",
        run: test_wire_port_events,
    },
    &Test {
        name: "test_wire_ud",
        run: test_wire_ud,
    },
];

/// The addresses the two ports get (they exist only on the emulated link).
const IP: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
/// Every path MTU: `IBV_MTU_256` (1) .. `IBV_MTU_4096` (5), and its bytes.
const MTUS: [(u32, usize); 5] = [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)];

/// One port's netdev up with its address of [`IP`], which becomes the port's RoCE GID; down
/// and without it again when dropped.
///
/// Both ports are this kernel's, cabled to each other: each must accept packets from an
/// address that is its own (`accept_local`), or the kernel drops the other port's ARP
/// requests as martians and the RDMA core cannot resolve a QP's destination MAC.
struct Addressed {
    netdev: Netdev,
    addr: String,
    accept_local: String,
}

impl Addressed {
    fn new(netdev: Netdev, ip: Ipv4Addr) -> Result<Self, Failure> {
        let knob = accept_local_knob(&netdev);
        let accept_local = std::fs::read_to_string(&knob)?.trim().to_string();
        std::fs::write(&knob, "1")?;
        let addr = format!("{ip}/24");
        let a = Self {
            netdev,
            addr,
            accept_local,
        };
        let (ok, out) = sh("ip", &["addr", "add", &a.addr, "dev", &a.netdev.name])?;
        check!(ok, "ip addr add {} dev {}: {out}", a.addr, a.netdev.name);
        set_link(&a.netdev, true)?;
        wait_carrier(&a.netdev, true)?;
        Ok(a)
    }
}

/// `net.ipv4.conf.DEV.accept_local`.
fn accept_local_knob(dev: &Netdev) -> String {
    format!("/proc/sys/net/ipv4/conf/{}/accept_local", dev.name)
}

impl Drop for Addressed {
    fn drop(&mut self) {
        let _ = set_link(&self.netdev, false);
        let _ = sh("ip", &["addr", "del", &self.addr, "dev", &self.netdev.name]);
        let _ = std::fs::write(accept_local_knob(&self.netdev), &self.accept_local);
    }
}

/// The two pfnics of the wire guest through libibverbs, each port's netdev up with its
/// address, and each port's GID index of that address (what a QP's route names, as
/// `ibv_rc_pingpong -g` does).
struct Wire {
    ctx: [Context; 2],
    names: [String; 2],
    gid_index: [u8; 2],
    netdevs: [Addressed; 2],
}

impl Wire {
    fn new() -> Result<Self, Failure> {
        Self::with_env(&[])
    }

    /// [`Wire::new`], the contexts opened with `env` set (`PFNIC_RECV_FAULT=backup`).
    fn with_env(env: &[(&str, &str)]) -> Result<Self, Failure> {
        let [(na, da), (nb, db)] = wire_netdevs()?;
        // Addresses first: the contexts opened after them get no GID change events of the
        // setup (the port events tests count theirs).
        let netdevs = [Addressed::new(da, IP[0])?, Addressed::new(db, IP[1])?];
        let names = [na, nb];
        let gid_index = [gid_of(&names[0], IP[0])?, gid_of(&names[1], IP[1])?];
        let open = |name: &str| -> Result<Context, Failure> {
            // One test at a time, on the suite's main thread: nothing else reads the environment.
            Context::open_with_env(name, env)
                .map_err(|e| fail(&format!("ibv_open_device({name})"), e))
        };
        let ctx = [open(&names[0])?, open(&names[1])?];
        for (c, n) in ctx.iter().zip(&names) {
            let p = c.query_port(1)?;
            check_eq!(u32::from(p.link_layer), ibv::sys::IBV_LINK_LAYER_ETHERNET);
            check!(
                p.state == PORT_ACTIVE,
                "{n}: port 1 is not active ({})",
                p.state
            );
        }
        Ok(Self {
            ctx,
            names,
            gid_index,
            netdevs,
        })
    }

    /// Where side `i` of a wire pair sends from, to the other side's address.
    fn route(&self, i: usize) -> GlobalRoute {
        GlobalRoute {
            dgid: gid_from_ipv4(IP[1 - i]),
            sgid_index: self.gid_index[i],
            hop_limit: 64,
            ..Default::default()
        }
    }

    /// Side `a` on the first pfnic and `b` on the second, connected across the wire with
    /// path MTU `mtu` (`IBV_MTU_*`) and PSNs that wrap around 2^24 soon.
    fn pair(&self, o: &PairOpts, mtu: u32) -> Result<Pair, Failure> {
        let a = Side::from_opts(&self.ctx[0], o)?;
        let b = Side::from_opts(&self.ctx[1], o)?;
        let (psn_a, psn_b) = (0xff_fff0, 0x12_3456);
        let to = |i, sq, rq| ConnectAttr {
            path_mtu: mtu,
            grh: Some(self.route(i)),
            sq_psn: sq,
            rq_psn: rq,
            ..o.connect
        };
        a.qp.connect(b.qp.qp_num(), &to(0, psn_a, psn_b))
            .map_err(|e| fail("connect a", e))?;
        b.qp.connect(a.qp.qp_num(), &to(1, psn_b, psn_a))
            .map_err(|e| fail("connect b", e))?;
        Ok(Pair { a, b })
    }

    /// Port 1's counter `name` of device `i` (`hw_counters`, what `rdma statistic` shows).
    fn port_counter(&self, i: usize, name: &str) -> Result<u64, Failure> {
        let path = format!(
            "/sys/class/infiniband/{}/ports/1/hw_counters/{name}",
            self.names[i]
        );
        Ok(std::fs::read_to_string(&path)
            .map_err(|e| fail(&path, e))?
            .trim()
            .parse()?)
    }

    /// Prints the nonzero port counters of both ports as a KTAP comment (what a run cost on
    /// the wire: retransmissions, NAKs, parked payloads).
    fn report_ports(&self, what: &str) -> Result<(), Failure> {
        for (i, name) in self.names.iter().enumerate() {
            let dir = format!("/sys/class/infiniband/{name}/ports/1/hw_counters");
            let mut line = Vec::new();
            let mut entries: Vec<_> = std::fs::read_dir(&dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            entries.sort();
            for counter in entries.iter().filter(|c| *c != "lifespan") {
                let v = self.port_counter(i, counter)?;
                if v != 0 {
                    line.push(format!("{counter} {v}"));
                }
            }
            outln!("# {what}, {name}: {}", line.join(", "));
        }
        Ok(())
    }

    /// Frames the ports dropped or delayed on purpose (the lossy guests' `x-wire-*`).
    fn injected(&self) -> Result<u64, Failure> {
        Ok(self.port_counter(0, "injected")? + self.port_counter(1, "injected")?)
    }
}

/// The index of `ip`'s GID in the table of port 1 of `ib` (the RDMA core adds it once the
/// netdev has the address; within 5 s).
fn gid_of(ib: &str, ip: Ipv4Addr) -> Result<u8, Failure> {
    let want = gid_sysfs(&gid_from_ipv4(ip));
    let dir = format!("/sys/class/infiniband/{ib}/ports/1/gids");
    let start = Instant::now();
    loop {
        for i in 0..16u8 {
            let gid = std::fs::read_to_string(format!("{dir}/{i}")).unwrap_or_default();
            if gid.trim() == want {
                return Ok(i);
            }
        }
        check!(
            start.elapsed() < Duration::from_secs(5),
            "{ib}: no GID {want} within 5 s of the address"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A full send queue of RDMA READs and of WRITEs across the wire, each batch of completions
/// refilled at once (`test_verbs_slot_free_at_completion`'s contract; here the completions
/// come from the port's receive path, concurrently with the poller, in bursts).
fn test_wire_slot_free_at_completion() -> TestResult {
    let w = Wire::new()?;
    let p = w.pair(
        &PairOpts {
            max_wr: 128,
            cqe: 256,
            connect: ConnectAttr {
                max_rd_atomic: 16,
                ..Default::default()
            },
            ..Default::default()
        },
        3,
    )?;
    for (op, total) in [(WrOpcode::RdmaRead, 3000), (WrOpcode::RdmaWrite, 3000)] {
        let (sq, bursts) = crate::verbs_qp::send_slots_reused_at_once(&p, op, total)?;
        outln!("# {total} {op:?}s through {sq} send slots, {bursts} batches of completions refilled at once");
    }
    Ok(())
}

/// The port: Ethernet link layer; GID 0 the EUI-64 of the netdev's MAC and GID 1 its IPv4
/// address, as rxe's.
fn test_wire_port() -> TestResult {
    let w = Wire::new()?;
    for (i, c) in w.ctx.iter().enumerate() {
        check_eq!(
            u32::from(c.query_port(1)?.link_layer),
            ibv::sys::IBV_LINK_LAYER_ETHERNET
        );
        check_eq!(w.gid_index[i], 1);
        check_eq!(c.query_gid(1, 1)?, gid_from_ipv4(IP[i]));
        let mac = w.netdevs[i].netdev.mac();
        let gid0 = c.query_gid(1, 0)?;
        check_eq!(gid0[..8], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        check_eq!(
            gid0[8..],
            [
                mac[0] ^ 2,
                mac[1],
                mac[2],
                0xff,
                0xfe,
                mac[3],
                mac[4],
                mac[5]
            ]
        );
    }
    Ok(())
}

/// SEND, SEND with immediate, WRITE, WRITE with immediate and READ of sizes around the path
/// MTU, and both atomics, at every path MTU; every byte checked.
fn test_wire_rc_ops() -> TestResult {
    let w = Wire::new()?;
    for (mtu, bytes) in MTUS {
        let p = w.pair(
            &PairOpts {
                len: 96 * 1024,
                ..Default::default()
            },
            mtu,
        )?;
        for (k, len) in [1, bytes - 1, bytes, bytes + 1, 3 * bytes + 5, 65536 + 7]
            .into_iter()
            .enumerate()
        {
            let seed = (k as u8).wrapping_mul(17).wrapping_add(mtu as u8);
            let what = |op: &str| format!("MTU {bytes}, {len} bytes: {op}");
            let data = pattern(seed, len);
            p.a.buf.write(0, &data);
            let sge = [p.a.sge(0, len)];

            p.b.buf.fill(0);
            p.a.post_ok(p.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &p.b, 16))?;
            check_bytes(&what("RDMA WRITE"), &p.b.buf, 16, &data)?;
            check_bytes(&what("before the WRITE"), &p.b.buf, 0, &[0; 16])?;
            check_bytes(&what("after the WRITE"), &p.b.buf, 16 + len, &[0; 8])?;

            p.b.post_recv(2, 0, len + 100)?;
            let r = p.a.send_ok(&p.b, SendWr::new(2, WrOpcode::Send, &sge))?;
            check_eq!(r.byte_len as usize, len);
            check_bytes(&what("SEND"), &p.b.buf, 0, &data)?;

            p.b.buf.fill(0);
            p.b.post_recv(3, 0, len)?;
            let r = p.a.send_ok(
                &p.b,
                SendWr::new(3, WrOpcode::SendWithImm, &sge).imm(0x0102_0304 + k as u32),
            )?;
            check!(
                r.wc_flags & WC_WITH_IMM != 0,
                "{}: no IMM flag",
                what("SEND_IMM")
            );
            check_eq!(u32::from_be(r.imm_data), 0x0102_0304 + k as u32);
            check_bytes(&what("SEND with immediate"), &p.b.buf, 0, &data)?;

            p.b.buf.fill(0);
            p.b.post_recv(4, 0, 0)?;
            p.a.post_ok(
                p.a.rdma_wr(4, WrOpcode::RdmaWriteWithImm, &sge, &p.b, 8)
                    .imm(0xabcd_0000 + k as u32),
            )?;
            let r =
                p.b.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV_RDMA_WITH_IMM))?;
            check_eq!(u32::from_be(r.imm_data), 0xabcd_0000 + k as u32);
            check_bytes(&what("WRITE with immediate"), &p.b.buf, 8, &data)?;

            let back = pattern(seed ^ 0x5a, len);
            p.b.buf.write(32, &back);
            p.a.buf.fill(0);
            p.a.post_ok(p.a.rdma_wr(5, WrOpcode::RdmaRead, &sge, &p.b, 32))?;
            check_bytes(&what("RDMA READ"), &p.a.buf, 0, &back)?;
            check_bytes(&what("after the READ"), &p.a.buf, len, &[0; 8])?;
        }

        p.b.buf.write_u64(64, 100);
        let local = [p.a.sge(0, 8)];
        let mut cas = p.a.rdma_wr(6, WrOpcode::AtomicCmpAndSwp, &local, &p.b, 64);
        cas.compare_add = 100;
        cas.swap = 0x5eed_0000_0000_0001;
        p.a.post_ok(cas)?;
        check_eq!(p.a.buf.read_u64(0), 100);
        check_eq!(p.b.buf.read_u64(64), 0x5eed_0000_0000_0001);
        let mut fadd =
            p.a.rdma_wr(7, WrOpcode::AtomicFetchAndAdd, &local, &p.b, 64);
        fadd.compare_add = 0xffff_ffff;
        p.a.post_ok(fadd)?;
        check_eq!(p.a.buf.read_u64(0), 0x5eed_0000_0000_0001);
        check_eq!(p.b.buf.read_u64(64), 0x5eed_0001_0000_0000);

        if w.injected()? == 0 {
            check_eq!(qp_counter(&w.ctx[0], &p.a.qp, "retransmits")?, 0);
        }
    }
    Ok(())
}

/// The frames per million that each port of the wire guest loses on purpose
/// (`pfnic_wire_loss=PPM` on the kernel command line, as `x-wire-loss`; 0 without).
fn wire_loss_ppm() -> u32 {
    std::fs::read_to_string("/proc/cmdline")
        .ok()
        .and_then(|c| {
            c.split_whitespace()
                .find_map(|w| w.strip_prefix("pfnic_wire_loss="))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// 8 MiB each way (WRITE and READ) at MTU 4096, and a SEND of 1 MiB; on a link that loses 5%
/// of its frames or more, 1 MiB each way and 256 KiB. An RC requester gives up after 7 ACK
/// timeouts in a row without progress (`retry_cnt`, at most 7): at 10% loss and 5% reordering
/// about a third of the timeouts find no progress by the next (a lost retried request, a lost
/// first response, a late guest), and the 8 MiB READ's 600 timeouts ran into 8 in a row in
/// one run of nine (2026-11-29), as RC on any NIC would over such a link. A tenth of the
/// timeouts leaves that about 1%, and the loss is still repaired many times over.
fn test_wire_large() -> TestResult {
    let w = Wire::new()?;
    let lossy = wire_loss_ppm() >= 50_000;
    let len = if lossy { 1 << 20 } else { 8 << 20 };
    let send_len = if lossy { 256 << 10 } else { 1 << 20 };
    let p = w.pair(
        &PairOpts {
            len,
            ..Default::default()
        },
        5,
    )?;
    let data = pattern(0x42, len);
    p.a.buf.write(0, &data);
    let sge = [p.a.sge(0, len)];
    p.a.post_ok(p.a.rdma_wr(1, WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
    check_bytes("the WRITE", &p.b.buf, 0, &data)?;

    let back = pattern(0x24, len);
    p.b.buf.write(0, &back);
    p.a.post_ok(p.a.rdma_wr(2, WrOpcode::RdmaRead, &sge, &p.b, 0))?;
    check_bytes("the READ", &p.a.buf, 0, &back)?;

    let one = [p.a.sge(0, send_len)];
    p.b.post_recv(3, 0, send_len)?;
    p.a.send_ok(&p.b, SendWr::new(3, WrOpcode::Send, &one))?;
    check_bytes("the SEND", &p.b.buf, 0, &back[..send_len])?;
    // On a lossy link (the lossy guest), the loss was repaired by retransmission.
    let retransmits = qp_counter(&w.ctx[0], &p.a.qp, "retransmits")?;
    if w.injected()? > 0 {
        check!(retransmits > 0, "frames were lost but none sent again");
    }
    outln!(
        "# {} KiB WRITE + READ + {} KiB SEND: {retransmits} packets sent again by the requester",
        len >> 10,
        send_len >> 10,
    );
    w.report_ports("after the large transfers")?;
    Ok(())
}

/// Cold ODP buffers on both sides: the receiver's pages are not present when the data
/// arrives, so it starts a page request and answers RNR NAK, and the sender comes back
/// (rxe and mlx5's behaviour); every byte arrives, the NAKs are counted.
fn test_wire_cold_rnr() -> TestResult {
    let w = Wire::new()?;
    requires_odp(&w.ctx[1], ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ, false)?;
    let len = 64 * PAGE;
    let p = w.pair(
        &PairOpts {
            len,
            kind: MrKind::Odp,
            ..Default::default()
        },
        3,
    )?;
    for round in 0..4u8 {
        let data = pattern(round, len);
        p.a.buf.write(0, &data);
        p.dontneed()?;
        p.a.buf.write(0, &data);
        let sge = [p.a.sge(0, len)];
        p.a.post_ok(p.a.rdma_wr(u64::from(round), WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
        check_bytes("cold WRITE", &p.b.buf, 0, &data)?;

        p.dontneed()?;
        p.b.post_recv(9, 0, len)?;
        p.a.buf.write(0, &data);
        p.a.send_ok(&p.b, SendWr::new(9, WrOpcode::Send, &sge))?;
        check_bytes("cold SEND", &p.b.buf, 0, &data)?;
    }
    let sent = qp_counter(&w.ctx[1], &p.b.qp, "rnr_naks_sent")?;
    let received = qp_counter(&w.ctx[0], &p.a.qp, "rnr_naks_received")?;
    check!(sent > 0, "the receiver sent no RNR NAK for its cold pages");
    if w.injected()? == 0 {
        check_eq!(received, sent);
    } else {
        // Some NAKs were lost on the way.
        check!(
            received > 0 && received <= sent,
            "{received} RNR NAKs received of {sent} sent"
        );
    }
    // The receiver's faults: page requests of its QP in the `sva` mode, page-fault events
    // for its MR in the `odp` mode.
    let faults = if sva_mode()? {
        qp_counter(&w.ctx[1], &p.b.qp, "page_requests")?
    } else {
        p.b.mr.stats()?.page_faults
    };
    check!(faults > 0, "no page fault at the receiver");
    outln!(
        "# cold, RNR policy: {faults} page faults and {sent} RNR NAKs at the receiver, 4 rounds of a {} KiB WRITE and SEND",
        len / 1024
    );
    Ok(())
}

/// The backup policy: the receiver parks payloads whose pages are not present in the
/// driver's backup buffer, acknowledges them and places them once the pages are there, so
/// the sender never waits for the receiver's faults (no RNR NAK); a READ and an atomic right
/// after see the parked writes. Every byte checked.
fn test_wire_cold_backup() -> TestResult {
    // The provider asks for the policy for every QP of a context it opens with it.
    let w = Wire::with_env(&[("PFNIC_RECV_FAULT", "backup")])?;
    requires_odp(&w.ctx[1], ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ, false)?;
    let len = 32 * PAGE;
    let p = w.pair(
        &PairOpts {
            len,
            kind: MrKind::Odp,
            ..Default::default()
        },
        5,
    )?;
    let placed = || -> Result<(u64, u64), Failure> {
        Ok((
            w.port_counter(1, "backup_packets")?,
            w.port_counter(1, "backup_placed")?,
        ))
    };
    let (parked0, _) = placed()?;
    for round in 0..3u8 {
        let data = pattern(round.wrapping_add(40), len);
        p.a.buf.write(0, &data);
        p.b.buf.dontneed()?;
        let sge = [p.a.sge(0, len)];
        p.a.post_ok(p.a.rdma_wr(u64::from(round), WrOpcode::RdmaWrite, &sge, &p.b, 0))?;
        // Read back at once, through the wire: the READ waits for the parked writes.
        let mut back = vec![0u8; len];
        p.a.buf.fill(0);
        p.a.post_ok(p.a.rdma_wr(7, WrOpcode::RdmaRead, &sge, &p.b, 0))?;
        p.a.buf.read(0, &mut back);
        check!(
            back == data,
            "round {round}: the READ did not see the parked WRITE"
        );
        check_bytes("parked WRITE", &p.b.buf, 0, &data)?;

        p.b.buf.dontneed()?;
        p.b.post_recv(9, 0, len)?;
        p.a.buf.write(0, &data);
        p.a.send_ok(&p.b, SendWr::new(9, WrOpcode::Send, &sge))?;
        check_bytes("parked SEND", &p.b.buf, 0, &data)?;
    }
    let (parked, placed_now) = placed()?;
    check!(parked > parked0, "nothing was parked in the backup buffer");
    check_eq!(placed_now, parked);
    check_eq!(qp_counter(&w.ctx[1], &p.b.qp, "rnr_naks_sent")?, 0);
    outln!(
        "# cold, backup policy: {} payloads parked and placed, {} page requests, no RNR NAK",
        parked - parked0,
        qp_counter(&w.ctx[1], &p.b.qp, "page_requests")?
    );
    Ok(())
}

/// One QP of a device per remote QP: a second process cannot connect a QP of its own to
/// the remote QP another process is connected to (EBUSY), so it can neither send into that
/// connection nor read through it; the connection still works after the attempt.
fn test_wire_one_peer() -> TestResult {
    let w = Wire::new()?;
    let p = w.pair(&PairOpts::default(), 3)?;
    let other = Context::open(&w.names[0]).map_err(|e| fail("ibv_open_device", e))?;
    let intruder = Side::basic(&other, PAGE, MrKind::Plain)?;
    let attr = ConnectAttr {
        grh: Some(w.route(0)),
        ..Default::default()
    };
    let r = intruder.qp.connect(p.b.qp.qp_num(), &attr);
    check!(
        matches!(&r, Err(e) if e.raw_os_error() == Some(libc::EBUSY)),
        "connecting to a remote QP another QP holds: {r:?}"
    );
    check_eq!(intruder.qp.state()?, QpState::Init);
    // Once the holder lets go (RESET), the remote QP is free to connect to.
    p.a.modify_state(QpState::Reset)?;
    intruder.modify_state(QpState::Reset)?;
    intruder
        .qp
        .connect(p.b.qp.qp_num(), &attr)
        .map_err(|e| fail("connect after the holder's reset", e))?;
    Ok(())
}

/// The netdev whose link the host pulls out and plugs back in on request
/// (`pfnic_link_control=NETDEV` on the kernel command line: scripts/link-control.py follows the
/// results for "# pfnic-host: set_link NETDEV up|down" and runs QMP's `set_link`).
fn link_control() -> Option<String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").ok()?;
    cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pfnic_link_control="))
        .map(str::to_string)
}

/// `IBV_PORT_DOWN`, `IBV_PORT_ACTIVE`.
const PORT_DOWN: u32 = 1;
const PORT_ACTIVE: u32 = 4;

/// How long the host may take to change the link (it follows the results file).
const LINK_EVENT: Duration = Duration::from_secs(60);

/// Asks the host to take the link of `netdev` up or down.
fn request_link(netdev: &str, up: bool) {
    let state = if up { "up" } else { "down" };
    outln!("# pfnic-host: set_link {netdev} {state}");
}

/// The next port state event of `ctx` (waiting for the host) is `kind` for port 1. GID
/// changes are not port state: the core may still be reporting the addresses' (the setup's).
fn link_event(ctx: &Context, kind: u32, what: &str) -> TestResult {
    let deadline = Instant::now() + LINK_EVENT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match ctx.get_async_event(Some(left))? {
            Some(ev) if ev.event_type == event_type::GID_CHANGE => continue,
            Some(ev) if ev.event_type == kind && ev.element == Element::Port(1) => return Ok(()),
            Some(ev) => fail!("after {what}: {ev:?}, expected event type {kind} for port 1"),
            None => fail!("no event within {LINK_EVENT:?} after {what}"),
        }
    }
}

/// The cable of the first port is pulled out and plugged back in (the host's QMP `set_link`
/// on its netdev): every context of that device (two through libibverbs, and Debian's
/// `ibv_asyncwatch`) gets `IBV_EVENT_PORT_ERR`, then `IBV_EVENT_PORT_ACTIVE`, for port 1;
/// `ibv_query_port` follows (`PORT_DOWN`, then `PORT_ACTIVE`), as does the netdev's carrier;
/// the other device, whose link never changed, gets no port event; and the wire carries RC
/// traffic again afterwards.
fn test_wire_port_events() -> TestResult {
    let Some(netdev) = link_control() else {
        skip!("the host controls no link here (the wire guest of make test passes pfnic_link_control=NETDEV)");
    };
    let w = Wire::new()?;
    // `netdev` is QEMU's name for the first pfnic's link; this is the guest's netdev of it.
    let port_netdev = &w.netdevs[0].netdev;
    let second = Context::open(&w.names[0]).map_err(|e| fail("ibv_open_device", e))?;
    let watch = crate::debian_tools::AsyncWatch::debian(&w.names[0])?;

    for (up, kind, state) in [
        (false, event_type::PORT_ERR, PORT_DOWN),
        (true, event_type::PORT_ACTIVE, PORT_ACTIVE),
    ] {
        let what = if up {
            "the link came up"
        } else {
            "the link went down"
        };
        request_link(&netdev, up);
        link_event(&w.ctx[0], kind, what)?;
        link_event(&second, kind, &format!("{what} (second context)"))?;
        check_eq!(w.ctx[0].query_port(1)?.state, state);
        wait_carrier(port_netdev, up)?;
    }
    let quiet_until = Instant::now() + Duration::from_millis(300);
    loop {
        let left = quiet_until.saturating_duration_since(Instant::now());
        match w.ctx[1].get_async_event(Some(left))? {
            Some(ev) if ev.event_type == event_type::GID_CHANGE => {}
            Some(ev) => fail!("the other device's context got {ev:?}; its link never changed"),
            None => break,
        }
    }
    if let Some(watch) = watch {
        watch.expect_only(&[
            "event_type IBV_EVENT_PORT_ERR (10), port 1",
            "event_type IBV_EVENT_PORT_ACTIVE (9), port 1",
        ])?;
    }

    // The link carries RC messages again.
    let p = w.pair(&PairOpts::default(), 3)?;
    p.write_ok(
        0x5a,
        4096,
        "a write across the wire after the link came back",
    )?;
    Ok(())
}

/// UD datagrams across the wire, from the first pfnic to the second: `ibv_ud_pingpong`'s
/// path without its TCP exchange, every size from 4 bytes to the port's MTU. Each datagram
/// that arrives arrives once and whole, after its GRH (20 zero bytes, then the IPv4 header of
/// the packet: UDP, from the sender's address to the receiver's) with the sender's QPN; one
/// carrying another Q_Key is dropped and counted as refused. UD sends nothing again: on the
/// lossy guests' wires (`x-wire-loss`) some datagrams are lost, at most as many as the loss
/// explains (its mean and five standard deviations), and the rest must still be whole.
fn test_wire_ud() -> TestResult {
    // Datagrams sent; the receive queue has one more slot, for the one that must not arrive.
    const N: usize = 128;
    const QKEY: u32 = 0x1357_2468;
    let w = Wire::new()?;
    let mtu = 128usize << w.ctx[1].query_port(1)?.active_mtu;
    let slot = 40 + mtu;
    let end = |i: usize, wrs: u32, len: usize| -> Result<Side, Failure> {
        let s = Side::from_opts(
            &w.ctx[i],
            &PairOpts {
                len,
                access: ibv::ACCESS_LOCAL_WRITE,
                cqe: 2 * wrs,
                max_wr: wrs,
                qp_type: ibv::QpType::Ud,
                ..Default::default()
            },
        )?;
        s.qp.ready_ud(QKEY, 0x77_7700)
            .map_err(|e| fail("ibv_modify_qp(UD) to RTS", e))?;
        Ok(s)
    };
    let a = end(0, N as u32, N * mtu)?;
    let b = end(1, N as u32 + 1, (N + 1) * slot)?;
    let ah =
        a.pd.create_ah(&w.route(0))
            .map_err(|e| fail("ibv_create_ah", e))?;
    for k in 0..=N {
        b.post_recv(k as u64, k * slot, slot)?;
    }
    let size = |k: usize| [4, 17, 256, mtu - 1, mtu][k % 5];
    let payload = |k: usize| {
        let mut d = pattern(k as u8, size(k));
        d[..4].copy_from_slice(&(k as u32).to_le_bytes());
        d
    };
    let to = |qkey| ibv::UdPeer {
        ah: &ah,
        remote_qpn: b.qp.qp_num(),
        remote_qkey: qkey,
    };
    // First a datagram with the wrong Q_Key, then the others, a send queue's worth at a time.
    a.buf.write(0, &payload(N)[..4]);
    let sge = [a.sge(0, 4)];
    a.qp.post_send_ud(
        &[SendWr::new(u64::MAX, WrOpcode::Send, &sge)],
        &to(QKEY ^ 1),
    )
    .map_err(|e| Failure::Fail(format!("ibv_post_send(UD): {e}")))?;
    check_eq!(wait_cq(&a.cq, 1)?[0].status, WcStatus::SUCCESS);
    for batch in (0..N).collect::<Vec<_>>().chunks(32) {
        let sges: Vec<[ibv::Sge; 1]> = batch
            .iter()
            .map(|&k| {
                a.buf.write(k * mtu, &payload(k));
                [a.sge(k * mtu, size(k))]
            })
            .collect();
        let wrs: Vec<SendWr<'_>> = batch
            .iter()
            .zip(&sges)
            .map(|(&k, sge)| SendWr::new(k as u64, WrOpcode::Send, sge))
            .collect();
        a.qp.post_send_ud(&wrs, &to(QKEY))
            .map_err(|e| Failure::Fail(format!("ibv_post_send(UD): {e}")))?;
        for wc in wait_cq(&a.cq, wrs.len())? {
            check!(
                wc.status == WcStatus::SUCCESS && wc.opcode == WcOpcode::SEND,
                "the UD send of datagram {} completed {wc:?}",
                wc.wr_id
            );
        }
    }
    // Datagrams still on their way arrive within a second; a lost one never does.
    let mut wcs = Vec::new();
    let mut last = Instant::now();
    while wcs.len() <= N && last.elapsed() < Duration::from_secs(2) {
        let got = b.cq.poll_wait(1, Duration::from_millis(100));
        if !got.is_empty() {
            last = Instant::now();
        }
        wcs.extend(got);
    }
    let mut seen = [false; N];
    for wc in &wcs {
        let k = wc.wr_id as usize;
        check!(
            wc.status == WcStatus::SUCCESS && wc.opcode == WcOpcode::RECV,
            "a UD receive completed {wc:?}"
        );
        check_eq!(wc.src_qp, a.qp.qp_num());
        check!(
            wc.wc_flags & ibv::sys::ibv_wc_flags_IBV_WC_GRH != 0,
            "a UD receive without its GRH: {wc:?}"
        );
        let got = b.buf.to_vec(k * slot, wc.byte_len as usize);
        check!(got.len() >= 44, "a UD receive of {} bytes", got.len());
        let (grh, data) = got.split_at(40);
        check!(
            grh[..20].iter().all(|&x| x == 0),
            "GRH: the 20 bytes before the IPv4 header are {:02x?}",
            &grh[..20]
        );
        let ip = &grh[20..];
        check!(
            ip[0] == 0x45 && ip[9] == 17,
            "GRH: not the IPv4 header of a UDP packet: {ip:02x?}"
        );
        check_eq!(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]), IP[0]);
        check_eq!(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]), IP[1]);
        let seq = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        check!(
            seq < N,
            "datagram {seq} arrived (the one with another Q_Key is {N})"
        );
        check!(!seen[seq], "datagram {seq} arrived twice");
        seen[seq] = true;
        check!(
            data == payload(seq),
            "datagram {seq} ({} bytes) arrived as {} bytes, or changed",
            size(seq),
            data.len()
        );
    }
    let lost = N - wcs.len();
    let p = f64::from(wire_loss_ppm()) / 1e6;
    let allowed = (N as f64 * p + 5.0 * (N as f64 * p * (1.0 - p)).sqrt()).ceil() as usize;
    let refused = qp_counter(&w.ctx[1], &b.qp, "refused")?;
    outln!(
        "# {N} datagrams of 4..{mtu} bytes: {} arrived whole, {lost} lost (at most {allowed} \
         on this wire); the one with another Q_Key refused {refused} time(s)",
        wcs.len()
    );
    check!(
        lost <= allowed,
        "{lost} of {N} datagrams lost, more than {allowed}"
    );
    if p == 0.0 {
        check_eq!(refused, 1);
    } else {
        check!(refused <= 1, "{refused} datagrams refused, one was sent");
    }
    Ok(())
}
