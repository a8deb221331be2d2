//! What the verbs tests share whichever way they reach the device: the attribute masks,
//! completion and byte checks, patterns, and the port's device-file knobs (its address, which
//! a port without a wire takes from `/dev/pfnicN`). The verbs resources themselves are
//! [`crate::ibv_common`]'s, through libibverbs.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::nic;
use crate::ktap::Failure;
use pfnic_verbs::{
    gid_from_ipv4, qp_attr, Buffer, PortAttr, QpAttr, QpState, Wc, WcOpcode, WcStatus, WrOpcode,
    ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

pub const PAGE: usize = 4096;
/// How long a test waits for a completion (TCG is slow, page requests more so).
pub const WC_TIMEOUT: Duration = Duration::from_secs(60);
/// Every access an MR can have.
pub const ACCESS_ALL: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// ODP transport bits (`ibv_odp_transport_cap_bits`).
pub const ODP_SEND: u32 = 1;
pub const ODP_RECV: u32 = 2;
pub const ODP_WRITE: u32 = 4;
pub const ODP_READ: u32 = 8;
pub const ODP_ATOMIC: u32 = 16;

/// How a side's buffer is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrKind {
    /// Populated at registration.
    Plain,
    /// `IBV_ACCESS_ON_DEMAND`.
    Odp,
}

/// The attributes of RESET→INIT on port 1 with remote `access`.
pub fn init_attr(access: u32) -> QpAttr {
    QpAttr {
        qp_state: QpState::Init as u32,
        port_num: 1,
        qp_access_flags: access,
        ..Default::default()
    }
}

/// The attributes libibverbs requires for RESET→INIT.
pub const INIT_MASK: u32 =
    qp_attr::STATE | qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::ACCESS_FLAGS;

/// The attributes libibverbs requires for INIT→RTR.
pub const RTR_MASK: u32 = qp_attr::STATE
    | qp_attr::AV
    | qp_attr::PATH_MTU
    | qp_attr::DEST_QPN
    | qp_attr::RQ_PSN
    | qp_attr::MAX_DEST_RD_ATOMIC
    | qp_attr::MIN_RNR_TIMER;

/// The attributes libibverbs requires for RTR→RTS.
pub const RTS_MASK: u32 = qp_attr::STATE
    | qp_attr::TIMEOUT
    | qp_attr::RETRY_CNT
    | qp_attr::RNR_RETRY
    | qp_attr::SQ_PSN
    | qp_attr::MAX_QP_RD_ATOMIC;

/// The opcode of the requester's completion of a successful `op` (spelled out here rather
/// than taken from the library, so that the tests check the library's mapping).
pub fn requester_opcode(op: WrOpcode) -> WcOpcode {
    match op {
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RDMA_WRITE,
        WrOpcode::Send | WrOpcode::SendWithImm => WcOpcode::SEND,
        WrOpcode::RdmaRead => WcOpcode::RDMA_READ,
        WrOpcode::AtomicCmpAndSwp => WcOpcode::COMP_SWAP,
        WrOpcode::AtomicFetchAndAdd => WcOpcode::FETCH_ADD,
    }
}

/// Keeps a send queue of `sq` entries full of `total` signaled `op`s (RDMA WRITE or READ),
/// `post(i)` posting the `i`th, and refills every batch of completions `poll` returns right
/// after the poll; fails if a post finds the queue full. Returns the number of batches of
/// more than one completion.
pub fn refill_at_once(
    sq: usize,
    op: WrOpcode,
    total: usize,
    post: impl Fn(usize) -> std::io::Result<()>,
    mut poll: impl FnMut(&mut [Wc]) -> usize,
) -> Result<(usize, usize), Failure> {
    let post = |i: usize, after: &str| {
        post(i).map_err(|e| Failure::Fail(format!("{op:?} {i}, right after {after}: {e:?}")))
    };
    for i in 0..sq {
        post(i, "the queue was empty")?;
    }
    let (mut posted, mut done, mut bursts) = (sq, 0, 0);
    let mut wcs = vec![Wc::default(); sq];
    let start = std::time::Instant::now();
    while done < total {
        let n = poll(&mut wcs);
        for wc in &wcs[..n] {
            check_wc(wc, WcStatus::SUCCESS, Some(requester_opcode(op)))?;
        }
        bursts += usize::from(n > 1);
        done += n;
        // Refill at once, with nothing in between: the narrowest window.
        for _ in 0..n {
            if posted < total {
                post(posted, &format!("a batch of {n} completions"))?;
                posted += 1;
            }
        }
        if start.elapsed() > WC_TIMEOUT {
            return Err(Failure::Fail(format!(
                "{done} of {total} {op:?}s after {WC_TIMEOUT:?}"
            )));
        }
    }
    Ok((sq, bursts))
}

pub fn fail(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::Fail(format!("{what}: {e}"))
}

/// Checks one completion's status and opcode.
pub fn check_wc(wc: &Wc, status: WcStatus, opcode: Option<WcOpcode>) -> Result<(), Failure> {
    if wc.status != status {
        return Err(Failure::Fail(format!(
            "wr_id {:#x}: status {:?} \"{}\", expected {:?} (completion {wc:?})",
            wc.wr_id, wc.status, wc.status, status
        )));
    }
    if let Some(op) = opcode {
        if wc.opcode != op {
            return Err(Failure::Fail(format!(
                "wr_id {:#x}: opcode {:?}, expected {op:?}",
                wc.wr_id, wc.opcode
            )));
        }
    }
    Ok(())
}

/// A new `len`-byte buffer with every byte `byte`.
pub fn filled_buffer(len: usize, byte: u8) -> Result<Arc<Buffer>, Failure> {
    let buf = Arc::new(Buffer::new(len)?);
    buf.fill(byte);
    Ok(buf)
}

/// A byte pattern that differs per `seed` and per offset.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(u32::from(seed) * 101) as u8
                ^ (i >> 12) as u8
        })
        .collect()
}

/// Fails unless `buf[off..off + want.len()]` equals `want`, naming the first difference.
pub fn check_bytes(what: &str, buf: &Buffer, off: usize, want: &[u8]) -> Result<(), Failure> {
    let got = buf.to_vec(off, want.len());
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        return Err(Failure::Fail(format!(
            "{what}: byte {i} is {:#04x}, expected {:#04x}",
            got[i], want[i]
        )));
    }
    Ok(())
}

/// The attributes of the port of the pfnic under test beyond `ibv_query_port`'s (whether it
/// has a wire, its MAC and IPv4 address, its counters), from its device file.
pub fn port_attr() -> Result<PortAttr, Failure> {
    Ok(PortAttr(nic()?.dev.query_port()?))
}

/// The port address of the pfnic under test (its device file's knob, for a port without a
/// wire), set for a test and put back as it was when this drops (GID 1 follows it; other
/// tests expect the device as they found it).
pub struct PortAddress {
    dev: pfnic_sys::Device,
    before: Option<std::net::Ipv4Addr>,
}

impl PortAddress {
    /// Keeps the port's address as it is now, to put it back when this drops.
    pub fn keep() -> Result<Self, Failure> {
        let dev = nic()?.dev;
        let before = PortAttr(dev.query_port()?).ipv4();
        Ok(Self { dev, before })
    }

    /// Sets the port's IPv4 address to `addr`; skips without `CAP_NET_ADMIN` (`EPERM`), which
    /// setting an address needs.
    pub fn set(addr: Option<std::net::Ipv4Addr>) -> Result<Self, Failure> {
        let me = Self::keep()?;
        match me.dev.set_port_ipv4(addr) {
            Ok(()) => {
                core_gid1_is(addr)?;
                Ok(me)
            }
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(Failure::Skip(
                "setting the port's address needs CAP_NET_ADMIN".into(),
            )),
            Err(e) => Err(Failure::Fail(format!("set_port_ipv4({addr:?}): {e}"))),
        }
    }

    /// Sets the port's address to one of the tests' own (`10.99.0.1` or `.2`) that it does
    /// not have now: a change of GID 1 whatever the port had. Returns the address too.
    pub fn change() -> Result<(Self, std::net::Ipv4Addr), Failure> {
        let ours = [
            std::net::Ipv4Addr::new(10, 99, 0, 1),
            std::net::Ipv4Addr::new(10, 99, 0, 2),
        ];
        let now = port_attr()?.ipv4();
        let new = if now == Some(ours[0]) {
            ours[1]
        } else {
            ours[0]
        };
        Ok((Self::set(Some(new))?, new))
    }

    /// The address the port had.
    pub fn before(&self) -> Option<std::net::Ipv4Addr> {
        self.before
    }
}

impl Drop for PortAddress {
    fn drop(&mut self) {
        if let Err(e) = self.dev.set_port_ipv4(self.before) {
            pfnic_cli::outln!("# could not put the port's IPv4 address back: {e}");
        } else if let Err(Failure::Fail(e)) = core_gid1_is(self.before) {
            pfnic_cli::outln!("# putting the port's IPv4 address back: {e}");
        }
    }
}

/// A GID as sysfs shows it (`/sys/class/infiniband/DEV/ports/N/gids/I`): eight groups of four
/// hex digits.
pub fn gid_sysfs(gid: &[u8; 16]) -> String {
    gid.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// Waits until the RDMA core's copy of GID 1 of a port without a wire (what `ibv_query_gid`
/// reads and `ibv_modify_qp` checks a source GID index against) is `addr`'s, or empty without
/// one. The device's table changes at once; the core reads it again in a work item after the
/// port event, so a QP connected from GID 1 right after the change could be refused (seen:
/// `EINVAL` from `test_verbs_qp_av_own_gid_loopback`'s connect, and the old GID from
/// `test_verbs_port_set_ipv4`'s `ibv_query_gid`). A RoCE port's GIDs are its
/// netdev's, which this knob does not change: nothing to wait for there.
pub fn core_gid1_is(addr: Option<Ipv4Addr>) -> Result<(), Failure> {
    if port_attr()?.has_wire() {
        return Ok(());
    }
    let want = gid_sysfs(&addr.map_or([0; 16], gid_from_ipv4));
    let path = crate::rdma_core::ib_sysfs(&crate::rdma_core::ib_name()?).join("ports/1/gids/1");
    let start = Instant::now();
    loop {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now.trim() == want {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(5) {
            return Err(Failure::Fail(format!(
                "{}: {} 5 s after the port's address became {addr:?}, expected {want}",
                path.display(),
                now.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
