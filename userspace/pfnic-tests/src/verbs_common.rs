//! Layered verbs resources for the tests, in rdma-core's style: a context, a PD, a CQ and an
//! RC QP per side, two sides connected by loopback; skips when a capability is missing.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{nic, platform_has_pri};
use crate::ktap::Failure;
use pfnic_sys::uapi;
use pfnic_verbs::{
    qp_attr, Buffer, CompChannel, ConnectAttr, Context, Cq, Mr, Pd, Qp, QpAttr, QpInitAttr,
    QpState, SendWr, Sge, Wc, WcOpcode, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND,
    ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

pub const PAGE: usize = 4096;
/// How long a test waits for a completion (TCG is slow, page requests more so).
pub const WC_TIMEOUT: Duration = Duration::from_secs(60);
/// Every access an MR can have.
pub const ACCESS_ALL: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// A verbs context on the pfnic under test, in the driver's default memory mode (SVA where the
/// platform has it, else `pinned`): skips without verbs, or without both SVA and translation
/// tables.
pub fn verbs_ctx() -> Result<Context, Failure> {
    let n = nic()?;
    let q = n.dev.query()?;
    if q.caps & uapi::PFNIC_CAP_TABLES == 0 && !platform_has_pri(&n.bdf)? {
        return Err(Failure::Skip("no PRI on this platform".into()));
    }
    if q.caps & uapi::PFNIC_CAP_VERBS == 0 {
        return Err(Failure::Skip(
            "the device has no verbs (PFNIC_CAP_VERBS)".into(),
        ));
    }
    Context::from_device(n.dev).map_err(|e| Failure::Fail(format!("verbs context: {e}")))
}

/// Whether `ctx` runs in the `sva` memory mode, where page faults are page requests that the
/// QPs and completions count (in the `odp` mode they are events to the driver, counted only
/// in the MRs' counters).
pub fn sva_mode(ctx: &Context) -> Result<bool, Failure> {
    Ok(ctx.mem_mode()? == pfnic_verbs::MemMode::Sva)
}

/// Skips unless the device reports on-demand paging for RC with `rc_caps`
/// (`IBV_ODP_SUPPORT_*` transport bits), and implicit MRs if `implicit`.
pub fn requires_odp(ctx: &Context, rc_caps: u32, implicit: bool) -> Result<(), Failure> {
    let v = ctx.query_device_ex()?.verbs;
    if v.odp_general_caps & uapi::PFNIC_ODP_SUPPORT == 0 {
        return Err(Failure::Skip(
            "no on-demand paging (IBV_ODP_SUPPORT)".into(),
        ));
    }
    if v.odp_rc_caps & rc_caps != rc_caps {
        return Err(Failure::Skip(format!(
            "RC ODP caps {:#x} lack {rc_caps:#x}",
            v.odp_rc_caps
        )));
    }
    if implicit && v.odp_general_caps & uapi::PFNIC_ODP_SUPPORT_IMPLICIT == 0 {
        return Err(Failure::Skip(
            "no implicit ODP (IBV_ODP_SUPPORT_IMPLICIT)".into(),
        ));
    }
    Ok(())
}

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

/// One side of a connection: context → PD → CQ → QP, and a registered buffer.
pub struct Side {
    pub qp: Qp,
    pub cq: Cq,
    pub mr: Mr,
    pub buf: Arc<Buffer>,
    pub pd: Pd,
}

impl Side {
    /// A side in `ctx`: a new PD, a CQ of `cqe` entries, an RC QP of `max_wr` work requests
    /// of up to 4 SGEs, and a `len`-byte buffer registered with `access`.
    pub fn new(
        ctx: &Context,
        len: usize,
        access: u32,
        kind: MrKind,
        cqe: u32,
        max_wr: u32,
    ) -> Result<Self, Failure> {
        Self::from_opts(
            ctx,
            &PairOpts {
                len,
                access,
                kind,
                cqe,
                max_wr,
                ..Default::default()
            },
        )
    }

    /// A side in `ctx` as `o` describes it.
    pub fn from_opts(ctx: &Context, o: &PairOpts) -> Result<Self, Failure> {
        Self::with_channel(ctx, o, None)
    }

    /// A side in `ctx` as `o` describes it, whose CQ's completion events go to `channel`.
    pub fn with_channel(
        ctx: &Context,
        o: &PairOpts,
        channel: Option<&CompChannel>,
    ) -> Result<Self, Failure> {
        let (len, access, kind) = (o.len, o.access, o.kind);
        let pd = ctx.alloc_pd().map_err(|e| fail("alloc_pd", e))?;
        let cq = ctx
            .create_cq(o.cqe, channel, 0)
            .map_err(|e| fail("create_cq", e))?;
        let qp = pd
            .create_qp(&QpInitAttr {
                recv_fault_backup: o.recv_fault_backup,
                ..QpInitAttr::new(&cq, &cq, o.max_wr, 4)
            })
            .map_err(|e| fail("create_qp", e))?;
        let buf = Arc::new(Buffer::new(len)?);
        let access = match kind {
            MrKind::Plain => access,
            MrKind::Odp => access | ACCESS_ON_DEMAND,
        };
        if kind == MrKind::Plain {
            // Plain MRs are made present at registration; give them initialized pages.
            buf.fill(0);
        }
        let mr = pd.reg_mr(&buf, access).map_err(|e| fail("reg_mr", e))?;
        Ok(Self {
            qp,
            cq,
            mr,
            buf,
            pd,
        })
    }

    /// A side in `ctx` with a `len`-byte buffer registered with every access, a CQ of 16
    /// entries and a QP of 8 work requests.
    pub fn basic(ctx: &Context, len: usize, kind: MrKind) -> Result<Self, Failure> {
        Self::new(ctx, len, ACCESS_ALL, kind, 16, 8)
    }

    /// An SGE over `[off, off + len)` of the side's buffer.
    pub fn sge(&self, off: usize, len: usize) -> Sge {
        self.mr.sge(off as u64, len as u32)
    }

    /// Posts one send work request.
    pub fn post(&self, wr: SendWr<'_>) -> Result<(), Failure> {
        self.qp
            .post_send(&[wr])
            .map_err(|e| Failure::Fail(format!("post_send {:?}: {e}", wr.opcode)))
    }

    /// A work request of `op` gathering `sges`, aimed at `off` bytes into `peer`'s buffer
    /// through `peer`'s rkey (RDMA and atomics).
    pub fn rdma_wr<'a>(
        &self,
        wr_id: u64,
        op: WrOpcode,
        sges: &'a [Sge],
        peer: &Side,
        off: usize,
    ) -> SendWr<'a> {
        SendWr::new(wr_id, op, sges).remote(peer.buf.addr() + off as u64, peer.mr.rkey())
    }

    /// Waits for exactly `n` completions on the side's CQ.
    pub fn wait(&self, n: usize) -> Result<Vec<Wc>, Failure> {
        wait_cq(&self.cq, n)
    }

    /// Waits for exactly one completion and checks its status and opcode.
    pub fn wait_wc(&self, status: WcStatus, opcode: Option<WcOpcode>) -> Result<Wc, Failure> {
        let wc = self.wait(1)?[0];
        check_wc(&wc, status, opcode)?;
        Ok(wc)
    }

    /// Posts `wr` and waits for its successful completion, of the opcode `wr` asks for.
    pub fn post_ok(&self, wr: SendWr<'_>) -> Result<Wc, Failure> {
        self.post(wr)?;
        self.wait_wc(WcStatus::SUCCESS, Some(requester_opcode(wr.opcode)))
    }
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

/// Two sides connected to each other. Each has its own context (its own open file and PASID)
/// unless built with [`Pair::same_context`].
pub struct Pair {
    pub a: Side,
    pub b: Side,
}

/// How a [`Pair`] is built.
#[derive(Clone, Copy, Debug)]
pub struct PairOpts {
    pub len: usize,
    pub access: u32,
    pub kind: MrKind,
    pub cqe: u32,
    pub max_wr: u32,
    pub connect: ConnectAttr,
    /// QPs park receive-fault payloads in the backup buffer (a wire QP only).
    pub recv_fault_backup: bool,
}

impl Default for PairOpts {
    fn default() -> Self {
        Self {
            len: 4 * PAGE,
            access: ACCESS_ALL,
            kind: MrKind::Plain,
            cqe: 64,
            max_wr: 32,
            connect: ConnectAttr::default(),
            recv_fault_backup: false,
        }
    }
}

impl Pair {
    /// Two sides, each in a new context, connected.
    pub fn new(o: &PairOpts) -> Result<Self, Failure> {
        let ca = verbs_ctx()?;
        let cb = verbs_ctx()?;
        Self::build(&ca, &cb, o)
    }

    pub fn build(ca: &Context, cb: &Context, o: &PairOpts) -> Result<Self, Failure> {
        let a = Side::from_opts(ca, o)?;
        let b = Side::from_opts(cb, o)?;
        a.qp.connect(b.qp.qp_num(), &o.connect)
            .map_err(|e| fail("connect a", e))?;
        b.qp.connect(a.qp.qp_num(), &o.connect)
            .map_err(|e| fail("connect b", e))?;
        Ok(Self { a, b })
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

/// Waits for exactly `n` completions on `cq` (and checks no extra one follows at once).
pub fn wait_cq(cq: &Cq, n: usize) -> Result<Vec<Wc>, Failure> {
    let wcs = cq.poll_wait(n, WC_TIMEOUT);
    if wcs.len() < n {
        return Err(Failure::Fail(format!(
            "CQ {}: {} of {n} completions within {:?}: {wcs:?}",
            cq.cqn(),
            wcs.len(),
            WC_TIMEOUT
        )));
    }
    let mut extra = [Wc::default(); 4];
    let more = cq.poll(&mut extra);
    if more > 0 {
        return Err(Failure::Fail(format!(
            "CQ {}: {more} unexpected completions after {n}: {:?}",
            cq.cqn(),
            &extra[..more]
        )));
    }
    Ok(wcs)
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

/// The `CREATE_QP` argument of an RC QP of PD `pd` with `max_wr` work requests of one SGE
/// each way, for tests that drive the ioctls directly.
pub fn raw_rc_qp(pd: u32, send_cq: u32, recv_cq: u32, max_wr: u32) -> uapi::CreateQp {
    uapi::CreateQp {
        pd,
        send_cq,
        recv_cq,
        qp_type: uapi::PFNIC_QPT_RC,
        cap: uapi::QpCap {
            max_send_wr: max_wr,
            max_recv_wr: max_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..Default::default()
    }
}

/// The port address of a context's device, set for a test and put back as it was when this
/// drops (GID 1 follows it; other tests expect the device as they found it).
pub struct PortAddress<'a> {
    ctx: &'a Context,
    before: Option<std::net::Ipv4Addr>,
}

impl<'a> PortAddress<'a> {
    /// Sets the port's IPv4 address of `ctx`'s device to `addr`; skips without
    /// `CAP_NET_ADMIN` (`EPERM`), which setting an address needs.
    pub fn set(ctx: &'a Context, addr: Option<std::net::Ipv4Addr>) -> Result<Self, Failure> {
        let before = ctx.port_attr()?.ipv4();
        match ctx.set_port_ipv4(addr) {
            Ok(()) => Ok(Self { ctx, before }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(Failure::Skip(
                "setting the port's address needs CAP_NET_ADMIN".into(),
            )),
            Err(e) => Err(Failure::Fail(format!("set_port_ipv4({addr:?}): {e}"))),
        }
    }

    /// Sets the port's address to one of the tests' own (`10.99.0.1` or `.2`) that it does
    /// not have now: a change of GID 1 whatever the port had. Returns the address too.
    pub fn change(ctx: &'a Context) -> Result<(Self, std::net::Ipv4Addr), Failure> {
        let ours = [
            std::net::Ipv4Addr::new(10, 99, 0, 1),
            std::net::Ipv4Addr::new(10, 99, 0, 2),
        ];
        let now = ctx.port_attr()?.ipv4();
        let new = if now == Some(ours[0]) {
            ours[1]
        } else {
            ours[0]
        };
        Ok((Self::set(ctx, Some(new))?, new))
    }

    /// The address the port had.
    pub fn before(&self) -> Option<std::net::Ipv4Addr> {
        self.before
    }
}

impl Drop for PortAddress<'_> {
    fn drop(&mut self) {
        let _ = self.ctx.set_port_ipv4(self.before);
    }
}
