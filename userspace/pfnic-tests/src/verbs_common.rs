//! Layered verbs resources for the tests, in rdma-core's style: a context, a PD, a CQ and an
//! RC QP per side, two sides connected by loopback; skips when a capability is missing.

use std::sync::Arc;
use std::time::Duration;

use crate::common::sva_nic;
use crate::ktap::Failure;
use pfnic_sys::uapi;
use pfnic_verbs::{
    Buffer, ConnectAttr, Context, Cq, Mr, Pd, Qp, QpInitAttr, QpState, RecvWr, SendWr, Sge, Wc,
    WcOpcode, WcStatus, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_ATOMIC,
    ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

pub const PAGE: usize = 4096;
/// How long a test waits for a completion (TCG is slow, page requests more so).
pub const WC_TIMEOUT: Duration = Duration::from_secs(60);
/// Every access an MR can have.
pub const ACCESS_ALL: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// A verbs context on the pfnic under test: skips without SVA or without verbs.
pub fn verbs_ctx() -> Result<Context, Failure> {
    let n = sva_nic()?;
    let q = n.dev.query()?;
    if q.caps & uapi::PFNIC_CAP_VERBS == 0 {
        return Err(Failure::Skip(
            "the device has no verbs (PFNIC_CAP_VERBS)".into(),
        ));
    }
    Context::from_device(n.dev).map_err(|e| Failure::Fail(format!("verbs context: {e}")))
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
    pub ctx: Context,
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
        let pd = ctx.alloc_pd().map_err(|e| fail("alloc_pd", e))?;
        let cq = ctx
            .create_cq(cqe, None, 0)
            .map_err(|e| fail("create_cq", e))?;
        let qp = pd
            .create_qp(&QpInitAttr::new(&cq, &cq, max_wr, 4))
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
            ctx: ctx.clone(),
        })
    }

    /// An SGE over `[off, off + len)` of the side's buffer.
    pub fn sge(&self, off: usize, len: usize) -> Sge {
        self.mr.sge(off as u64, len as u32)
    }

    /// Posts one receive into `[off, off + len)` of the buffer.
    pub fn post_recv(&self, wr_id: u64, off: usize, len: usize) -> Result<(), Failure> {
        let sge = [self.sge(off, len)];
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: &sge,
            }])
            .map_err(|e| Failure::Fail(format!("post_recv: {e}")))
    }

    /// Posts one send work request.
    pub fn post(&self, wr: SendWr<'_>) -> Result<(), Failure> {
        self.qp
            .post_send(&[wr])
            .map_err(|e| Failure::Fail(format!("post_send {:?}: {e}", wr.opcode)))
    }

    /// Waits for exactly `n` completions on the side's CQ.
    pub fn wait(&self, n: usize) -> Result<Vec<Wc>, Failure> {
        wait_cq(&self.cq, n)
    }

    /// The QP's state as the device reports it.
    pub fn state(&self) -> Result<QpState, Failure> {
        Ok(self.qp.state()?)
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

    /// Two sides in one context, connected.
    pub fn same_context(o: &PairOpts) -> Result<Self, Failure> {
        let c = verbs_ctx()?;
        Self::build(&c, &c, o)
    }

    pub fn build(ca: &Context, cb: &Context, o: &PairOpts) -> Result<Self, Failure> {
        let a = Side::new(ca, o.len, o.access, o.kind, o.cqe, o.max_wr)?;
        let b = Side::new(cb, o.len, o.access, o.kind, o.cqe, o.max_wr)?;
        a.qp.connect(b.qp.qp_num(), &o.connect)
            .map_err(|e| fail("connect a", e))?;
        b.qp.connect(a.qp.qp_num(), &o.connect)
            .map_err(|e| fail("connect b", e))?;
        Ok(Self { a, b })
    }
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

/// The errno of an `io::Result`, or a failure if it succeeded.
pub fn errno_of<T>(what: &str, r: std::io::Result<T>) -> Result<i32, Failure> {
    match r {
        Ok(_) => Err(Failure::Fail(format!(
            "{what} succeeded, expected an error"
        ))),
        Err(e) => Ok(e.raw_os_error().unwrap_or(-1)),
    }
}

/// Fails unless `r` failed with `want`.
pub fn expect_errno<T>(what: &str, r: std::io::Result<T>, want: i32) -> Result<(), Failure> {
    let got = errno_of(what, r)?;
    if got != want {
        return Err(Failure::Fail(format!(
            "{what}: {}, expected {}",
            std::io::Error::from_raw_os_error(got),
            std::io::Error::from_raw_os_error(want)
        )));
    }
    Ok(())
}

/// The "VmPin" line of /proc/self/status, in kB.
pub fn vm_pinned_kb() -> Result<u64, Failure> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmPin:"))
        .ok_or("no VmPin in /proc/self/status")?;
    Ok(line.split_whitespace().nth(1).unwrap_or("?").parse()?)
}
