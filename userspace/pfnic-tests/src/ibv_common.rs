//! Verbs resources through Debian's own `libibverbs.so.1` and pfnic's provider, the way every
//! RDMA program reaches pfnic (the `ibv` crate): a context on `pfnicN`, and the sides and
//! pairs of [`crate::verbs_common`] built there. Skips when libibverbs lists no `pfnicN` or
//! a capability is missing.
//!
//! The helpers that do not depend on the path (patterns, byte and completion checks, the
//! attribute masks) are [`crate::verbs_common`]'s.

use std::sync::Arc;

use crate::ktap::Failure;
use crate::verbs_common::{fail, MrKind, ACCESS_ALL, PAGE, WC_TIMEOUT};
use ibv::{
    Buffer, ConnectAttr, Context, Cq, Mr, Pd, Qp, QpInitAttr, QpType, RecvWr, SendWr, Sge, Wc,
    WcOpcode, WcStatus, WrOpcode, ACCESS_ON_DEMAND,
};

pub use crate::verbs_common::{
    check_bytes, check_wc, filled_buffer, init_attr, pattern, requester_opcode, INIT_MASK,
    ODP_READ, ODP_RECV, ODP_SEND, ODP_WRITE, RTR_MASK,
};

/// A context on the pfnic under test through libibverbs, in the memory mode the driver
/// chooses (or `PFNIC_MEM_MODE`'s); skips without libibverbs' device or without verbs.
pub fn ibv_ctx() -> Result<Context, Failure> {
    let name = crate::rdma_core::ib_name()?;
    let names = ibv::device_names().map_err(|e| fail("ibv_get_device_list", e))?;
    if !names.contains(&name) {
        return Err(Failure::Skip(format!(
            "libibverbs lists no {name} (devices: {names:?})"
        )));
    }
    Context::open(&name).map_err(|e| fail(&format!("ibv_open_device({name})"), e))
}

/// Opens the pfnic under test with `PFNIC_MEM_MODE` set to `mode`, as a program started with
/// it does (pfnic's provider asks the driver for that memory mode when it opens the device),
/// and gives the environment back as it was. libibverbs' answer, as it is: the driver
/// refuses a mode the platform lacks with `EOPNOTSUPP`, the provider a name it does not know
/// with `EINVAL`.
pub fn ibv_open_with_mem_mode(mode: &str) -> Result<std::io::Result<Context>, Failure> {
    // The suite runs one test at a time on its main thread, and no other thread it has
    // reads the environment, so changing it races with nothing.
    Ok(Context::open_with_env(
        &crate::rdma_core::ib_name()?,
        &[(pfnic_verbs::MEM_MODE_ENV, mode)],
    ))
}

/// A context on the pfnic under test in memory mode `mode` ([`ibv_open_with_mem_mode`]), or
/// `None` where the platform lacks it.
pub fn ibv_ctx_in_mode(mode: pfnic_verbs::MemMode) -> Result<Option<Context>, Failure> {
    match ibv_open_with_mem_mode(mode.name())? {
        Ok(ctx) => Ok(Some(ctx)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(e) => fail!(
            "ibv_open_device with {}={}: {e}",
            pfnic_verbs::MEM_MODE_ENV,
            mode.name()
        ),
    }
}

/// The entries of `rdma -j ARGS` (a JSON array) on the context's device (`ifname`) whose
/// `key` is `value`.
fn rdma_entries(
    ctx: &Context,
    args: &[&str],
    key: &str,
    value: &serde_json::Value,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, Failure> {
    let name = ctx.name();
    let mut a = vec!["-j"];
    a.extend_from_slice(args);
    let out = crate::rdma_core::rdma(&a)?;
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .map_err(|e| fail(&format!("rdma {}: JSON", a.join(" ")), e))?;
    Ok(v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_object())
        .filter(|e| {
            e.get("ifname").and_then(|v| v.as_str()) == Some(name.as_str())
                && e.get(key) == Some(value)
        })
        .cloned()
        .collect())
}

/// The number `name` of the one entry `entries` should hold.
fn entry_u64(
    what: &str,
    entries: &[serde_json::Map<String, serde_json::Value>],
    name: &str,
) -> Result<u64, Failure> {
    match entries {
        [e] => e
            .get(name)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| Failure::Fail(format!("{what}: no {name} in {e:?}"))),
        _ => Err(Failure::Fail(format!(
            "{what}: {} entries: {entries:?}",
            entries.len()
        ))),
    }
}

/// A QP's counter `name` from the driver's details the RDMA core reports of it (`rdma
/// resource show qp -dd`: `drv_NAME`), as a user (or monitoring) sees them.
pub fn qp_counter(ctx: &Context, qp: &ibv::Qp, name: &str) -> Result<u64, Failure> {
    let qpn = qp.qp_num();
    let e = rdma_entries(ctx, &["-dd", "resource", "show", "qp"], "lqpn", &qpn.into())?;
    entry_u64(
        &format!("rdma resource show qp, QP {qpn}"),
        &e,
        &format!("drv_{name}"),
    )
}

/// The number `name` (`mrn`, `pdn`) of MR `mr`'s entry in `rdma resource show mr`, found by
/// its rkey.
fn mr_entry(ctx: &Context, mr: &ibv::Mr, name: &str) -> Result<u64, Failure> {
    // The rdma tool's JSON has keys as hexadecimal strings without 0x.
    let rkey = format!("{:x}", mr.rkey());
    let res = rdma_entries(
        ctx,
        &["resource", "show", "mr"],
        "rkey",
        &rkey.clone().into(),
    )?;
    entry_u64(&format!("rdma resource show mr, rkey {rkey}"), &res, name)
}

/// An MR's counters as `rdma statistic mr` reports them (the MR found by its rkey in `rdma
/// resource show mr`), by name.
pub fn mr_counters(ctx: &Context, mr: &ibv::Mr) -> Result<MrCounters, Failure> {
    let mrn = mr_entry(ctx, mr, "mrn")?;
    let e = rdma_entries(ctx, &["statistic", "mr"], "mrn", &mrn.into())?;
    let [e] = e.as_slice() else {
        fail!("rdma statistic mr, MR {mrn}: {} entries: {e:?}", e.len());
    };
    Ok(MrCounters {
        what: format!("rdma statistic mr, MR {mrn}"),
        values: e.clone(),
    })
}

/// One MR's counters from `rdma statistic mr`.
pub struct MrCounters {
    what: String,
    values: serde_json::Map<String, serde_json::Value>,
}

impl MrCounters {
    /// The counter `name` (`page_faults`, `pages_pinned`, ...).
    pub fn get(&self, name: &str) -> Result<u64, Failure> {
        self.values
            .get(name)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| Failure::Fail(format!("{}: no {name} in {:?}", self.what, self.values)))
    }
}

/// An MR's counters as `rdma statistic mr` shows them: mlx5's on-demand paging counters by
/// their names, and pfnic's own (docs/uapi.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrStats {
    /// Pages the device found missing: page requests (`sva`) or page-fault events' pages
    /// (`odp`).
    pub page_faults: u64,
    /// Those made present.
    pub page_faults_handled: u64,
    /// Invalidations overlapping the MR.
    pub page_invalidations: u64,
    /// Those the device applied.
    pub page_invalidations_handled: u64,
    /// Pages made present by prefetch.
    pub page_prefetch: u64,
    /// Remote uses of the MR's key the device refused.
    pub remote_access_errors: u64,
    /// Page request groups or page-fault events the faults went out in.
    pub page_fault_groups: u64,
    /// Pages the registration pinned.
    pub pages_pinned: u64,
    /// Pages the device's translation table maps now.
    pub pages_mapped: u64,
}

/// An MR's counters from `rdma statistic mr`.
pub trait MrStatsExt {
    /// The MR's counters now.
    fn stats(&self) -> Result<MrStats, Failure>;
}

impl MrStatsExt for ibv::Mr {
    fn stats(&self) -> Result<MrStats, Failure> {
        let c = mr_counters(&self.pd().context(), self)?;
        Ok(MrStats {
            page_faults: c.get("page_faults")?,
            page_faults_handled: c.get("page_faults_handled")?,
            page_invalidations: c.get("page_invalidations")?,
            page_invalidations_handled: c.get("page_invalidations_handled")?,
            page_prefetch: c.get("page_prefetch")?,
            remote_access_errors: c.get("remote_access_errors")?,
            page_fault_groups: c.get("page_fault_groups")?,
            pages_pinned: c.get("pages_pinned")?,
            pages_mapped: c.get("pages_mapped")?,
        })
    }
}

/// A user context as the RDMA core reports it (`rdma resource show ctx -dd`): the driver's
/// details of it (`drv_mem_mode`, `drv_pasid`, the translation counters), as a user sees them.
pub struct CtxDetails<'a> {
    ctx: &'a Context,
    /// The core's number for the context (`ctxn`).
    pub ctxn: u64,
}

impl<'a> CtxDetails<'a> {
    /// Finds `ctx` among the core's contexts: libibverbs shows no number of a context, but an
    /// MR's rkey names the MR (`rdma resource show mr`), the MR its PD and the PD its context.
    pub fn of(ctx: &'a Context) -> Result<Self, Failure> {
        let pd = ctx.alloc_pd().map_err(|e| fail("ibv_alloc_pd", e))?;
        let buf = Arc::new(Buffer::new(PAGE).map_err(|e| fail("mmap", e))?);
        let mr = pd
            .reg_mr(&buf, ibv::ACCESS_LOCAL_WRITE)
            .map_err(|e| fail("ibv_reg_mr", e))?;
        let pdn = mr_entry(ctx, &mr, "pdn")?;
        let pds = rdma_entries(ctx, &["resource", "show", "pd"], "pdn", &pdn.into())?;
        let ctxn = entry_u64(&format!("rdma resource show pd, PD {pdn}"), &pds, "ctxn")?;
        Ok(Self { ctx, ctxn })
    }

    /// The context's entry now.
    fn entry(&self) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
        let what = format!("rdma resource show ctx, context {}", self.ctxn);
        match rdma_entries(
            self.ctx,
            &["-dd", "resource", "show", "ctx"],
            "ctxn",
            &self.ctxn.into(),
        )?
        .as_slice()
        {
            [e] => Ok(e.clone()),
            e => fail!("{what}: {} entries: {e:?}", e.len()),
        }
    }

    /// The detail `drv_NAME` now, a number.
    pub fn get(&self, name: &str) -> Result<u64, Failure> {
        let e = self.entry()?;
        detail_u64(&e, name).ok_or_else(|| Failure::Fail(format!("no drv_{name} in {e:?}")))
    }

    /// The context's memory mode (`drv_mem_mode`).
    pub fn mem_mode(&self) -> Result<pfnic_verbs::MemMode, Failure> {
        let e = self.entry()?;
        let name = e.get("drv_mem_mode").and_then(|v| v.as_str());
        name.and_then(|n| pfnic_verbs::MemMode::parse(n).ok())
            .ok_or_else(|| Failure::Fail(format!("no memory mode in {e:?}")))
    }

    /// The PASID the device tags the context's DMA with, 0 for none (`drv_pasid`).
    pub fn pasid(&self) -> Result<u32, Failure> {
        Ok(self.get("pasid")? as u32)
    }

    /// The context's translation counters, in the shape of `/dev/pfnicN`'s.
    pub fn translation(&self) -> Result<pfnic_sys::uapi::TranslationStats, Failure> {
        let e = self.entry()?;
        let get = |name: &str| {
            detail_u64(&e, name)
                .map(|v| v as u32)
                .ok_or_else(|| Failure::Fail(format!("no drv_{name} in {e:?}")))
        };
        Ok(pfnic_sys::uapi::TranslationStats {
            page_requests: get("page_requests")?,
            pri_success: get("pri_success")?,
            pri_failed: get("pri_failed")?,
            atc_hits: get("atc_hits")?,
            atc_misses: get("atc_misses")?,
            invalidations: get("invalidations")?,
            prq_full: get("prq_full")?,
            prq_held: get("prq_held")?,
            page_request_groups: get("page_request_groups")?,
            page_request_groups_max: get("page_request_groups_max")?,
            lookahead_pages: get("lookahead_pages")?,
            lookahead_used: get("lookahead_used")?,
            lookahead_wasted: get("lookahead_wasted")?,
            reserved: 0,
        })
    }
}

/// The number `drv_NAME` of a driver's details.
fn detail_u64(e: &serde_json::Map<String, serde_json::Value>, name: &str) -> Option<u64> {
    e.get(&format!("drv_{name}")).and_then(|v| v.as_u64())
}

/// An MR's counter `name` ([`mr_counters`]).
pub fn mr_counter(ctx: &Context, mr: &ibv::Mr, name: &str) -> Result<u64, Failure> {
    mr_counters(ctx, mr)?.get(name)
}

/// The memory mode of the contexts this process opens: `PFNIC_MEM_MODE`'s, which the provider
/// asks for, or else the driver's default (what a new context gets, as its details in the
/// RDMA core say). Found once: neither changes while the suite runs.
pub fn mem_mode() -> Result<pfnic_verbs::MemMode, Failure> {
    static MODE: std::sync::OnceLock<pfnic_verbs::MemMode> = std::sync::OnceLock::new();
    if let Some(m) = MODE.get() {
        return Ok(*m);
    }
    let m = match std::env::var(pfnic_verbs::MEM_MODE_ENV) {
        Ok(name) => pfnic_verbs::MemMode::parse(&name)
            .map_err(|e| fail(&format!("{}={name}", pfnic_verbs::MEM_MODE_ENV), e))?,
        Err(_) => CtxDetails::of(&ibv_ctx()?)?.mem_mode()?,
    };
    Ok(*MODE.get_or_init(|| m))
}

/// Whether the contexts this process opens run in the `sva` memory mode, where page faults
/// are page requests that the QPs and completions count (in the `odp` mode they are events to
/// the driver, counted only in the MRs' counters).
pub fn sva_mode() -> Result<bool, Failure> {
    Ok(mem_mode()? == pfnic_verbs::MemMode::Sva)
}

/// Whether an ordinary (not on-demand) MR pins its pages: in every memory mode but `sva`,
/// where the device shares the process's address space (docs/uapi.md, "Memory modes").
pub fn plain_mrs_pin() -> Result<bool, Failure> {
    Ok(mem_mode()? != pfnic_verbs::MemMode::Sva)
}

/// Whether `ctx` runs in the `pinned` memory mode: the mode without on-demand paging, so its
/// device reports none (`IBV_ODP_SUPPORT`), as a program sees it.
pub fn pinned_mode(ctx: &Context) -> Result<bool, Failure> {
    let general = ctx.query_device_ex()?.odp_caps.general_caps as u32;
    Ok(general & ibv::sys::ibv_odp_general_caps_IBV_ODP_SUPPORT == 0)
}

/// Skips unless the context's device reports on-demand paging for RC with `rc_caps`
/// (`IBV_ODP_SUPPORT_*` transport bits), and implicit MRs if `implicit`.
pub fn requires_odp(ctx: &Context, rc_caps: u32, implicit: bool) -> Result<(), Failure> {
    let odp = ctx.query_device_ex()?.odp_caps;
    let general = odp.general_caps as u32;
    if general & ibv::sys::ibv_odp_general_caps_IBV_ODP_SUPPORT == 0 {
        return Err(Failure::Skip(
            "no on-demand paging (IBV_ODP_SUPPORT)".into(),
        ));
    }
    let rc = odp.per_transport_caps.rc_odp_caps;
    if rc & rc_caps != rc_caps {
        return Err(Failure::Skip(format!(
            "RC ODP caps {rc:#x} lack {rc_caps:#x}"
        )));
    }
    if implicit && general & ibv::sys::ibv_odp_general_caps_IBV_ODP_SUPPORT_IMPLICIT == 0 {
        return Err(Failure::Skip(
            "no implicit ODP (IBV_ODP_SUPPORT_IMPLICIT)".into(),
        ));
    }
    Ok(())
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

/// How a [`Pair`] is built.
#[derive(Clone, Copy, Debug)]
pub struct PairOpts {
    pub len: usize,
    pub access: u32,
    pub kind: MrKind,
    pub cqe: u32,
    pub max_wr: u32,
    pub connect: ConnectAttr,
    /// RC (the default), or UD (`connect` then unused).
    pub qp_type: QpType,
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
            qp_type: QpType::Rc,
        }
    }
}

impl Side {
    /// A side in `ctx` as `o` describes it: a new PD, a CQ, a QP (RC unless `o.qp_type`) of up
    /// to 4 SGEs per work request, and a buffer registered with `o.access`.
    pub fn from_opts(ctx: &Context, o: &PairOpts) -> Result<Self, Failure> {
        let pd = ctx.alloc_pd().map_err(|e| fail("ibv_alloc_pd", e))?;
        let cq = ctx
            .create_cq(o.cqe, None, 0)
            .map_err(|e| fail("ibv_create_cq", e))?;
        let mut attr = QpInitAttr::new(&cq, &cq, o.max_wr, 4);
        attr.qp_type = o.qp_type;
        let qp = pd.create_qp(&attr).map_err(|e| fail("ibv_create_qp", e))?;
        let buf = Arc::new(Buffer::new(o.len)?);
        let access = match o.kind {
            MrKind::Plain => {
                // Plain MRs are made present at registration; give them initialized pages.
                buf.fill(0);
                o.access
            }
            MrKind::Odp => o.access | ACCESS_ON_DEMAND,
        };
        let mr = pd.reg_mr(&buf, access).map_err(|e| fail("ibv_reg_mr", e))?;
        Ok(Self {
            qp,
            cq,
            mr,
            buf,
            pd,
            ctx: ctx.clone(),
        })
    }

    /// A side in `ctx` with a `len`-byte buffer registered with every access, a CQ of 16
    /// entries and a QP of 8 work requests.
    pub fn basic(ctx: &Context, len: usize, kind: MrKind) -> Result<Self, Failure> {
        Self::from_opts(
            ctx,
            &PairOpts {
                len,
                kind,
                cqe: 16,
                max_wr: 8,
                ..Default::default()
            },
        )
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
            .map_err(|e| Failure::Fail(format!("ibv_post_recv: {e}")))
    }

    /// Posts one send work request.
    pub fn post(&self, wr: SendWr<'_>) -> Result<(), Failure> {
        self.qp
            .post_send(&[wr])
            .map_err(|e| Failure::Fail(format!("ibv_post_send {:?}: {e}", wr.opcode)))
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

    /// Posts the SEND `wr` to `peer`, which has a receive posted: both complete successfully.
    /// Returns the receive's completion.
    pub fn send_ok(&self, peer: &Side, wr: SendWr<'_>) -> Result<Wc, Failure> {
        self.post_ok(wr)?;
        peer.wait_wc(WcStatus::SUCCESS, Some(WcOpcode::RECV))
    }

    /// The QP's state as the device reports it.
    pub fn state(&self) -> Result<ibv::QpState, Failure> {
        Ok(self.qp.state()?)
    }

    /// Moves the QP to `state` with no other attribute (ERR, RESET).
    pub fn modify_state(&self, state: ibv::QpState) -> Result<(), Failure> {
        let attr = ibv::QpAttr {
            qp_state: state as u32,
            ..Default::default()
        };
        Ok(self.qp.modify(&attr, ibv::qp_attr::STATE)?)
    }

    /// RESET→INIT on port 1 with remote `access`.
    pub fn modify_to_init(&self, access: u32) -> Result<(), Failure> {
        Ok(self.qp.modify(&init_attr(access), INIT_MASK)?)
    }

    /// Puts a QP that a failed work request left in ERR back in RTS, connected to `peer`.
    pub fn reconnect(&self, peer: u32) -> Result<(), Failure> {
        self.modify_state(ibv::QpState::Reset)?;
        self.qp
            .connect(peer, &ConnectAttr::default())
            .map_err(|e| fail("reconnect", e))
    }
}

/// Two sides connected to each other. Each has its own context (its own uverbs file and
/// hardware context) unless built with [`Pair::same_context`].
pub struct Pair {
    pub a: Side,
    pub b: Side,
}

impl Pair {
    /// Two sides, each in a new context, connected.
    pub fn new(o: &PairOpts) -> Result<Self, Failure> {
        Self::build(&ibv_ctx()?, &ibv_ctx()?, o)
    }

    /// Two sides in one context, connected.
    pub fn same_context(o: &PairOpts) -> Result<Self, Failure> {
        let c = ibv_ctx()?;
        Self::build(&c, &c, o)
    }

    /// Two sides, each in a new context, with on-demand MRs of `len` bytes, connected; skips
    /// unless the device has RC ODP for `rc_caps`.
    pub fn odp(rc_caps: u32, len: usize) -> Result<Self, Failure> {
        let ctx = ibv_ctx()?;
        requires_odp(&ctx, rc_caps, false)?;
        Self::build(
            &ctx,
            &ibv_ctx()?,
            &PairOpts {
                len,
                kind: MrKind::Odp,
                ..Default::default()
            },
        )
    }

    /// Drops the pages of both sides' buffers (`MADV_DONTNEED`).
    pub fn dontneed(&self) -> Result<(), Failure> {
        self.a.buf.dontneed()?;
        self.b.buf.dontneed()?;
        Ok(())
    }

    /// RDMA WRITEs `len` bytes of pattern `seed` from the start of `a`'s buffer to the start
    /// of `b`'s, and checks that they arrived (`what` names the transfer in a failure).
    pub fn write_ok(&self, seed: u8, len: usize, what: &str) -> Result<(), Failure> {
        let want = pattern(seed, len);
        self.a.buf.write(0, &want);
        self.a.post_ok(
            SendWr::new(u64::from(seed), WrOpcode::RdmaWrite, &[self.a.sge(0, len)])
                .remote(self.b.buf.addr(), self.b.mr.rkey()),
        )?;
        check_bytes(what, &self.b.buf, 0, &want)
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

/// Waits for exactly `n` completions on `cq` (and checks no extra one follows at once).
pub fn wait_cq(cq: &Cq, n: usize) -> Result<Vec<Wc>, Failure> {
    let wcs = cq.poll_wait(n, WC_TIMEOUT);
    if wcs.len() < n {
        return Err(Failure::Fail(format!(
            "CQ {}: {} of {n} completions within {WC_TIMEOUT:?}: {wcs:?}",
            cq.handle(),
            wcs.len(),
        )));
    }
    let mut extra = [Wc::default(); 4];
    let more = cq.poll(&mut extra);
    if more > 0 {
        return Err(Failure::Fail(format!(
            "CQ {}: {more} unexpected completions after {n}: {:?}",
            cq.handle(),
            &extra[..more]
        )));
    }
    Ok(wcs)
}

/// Fails unless `cq` holds no completion.
pub fn check_cq_empty(cq: &Cq) -> Result<(), Failure> {
    let mut wc = [Wc::default(); 1];
    if cq.poll(&mut wc) != 0 {
        return Err(Failure::Fail(format!(
            "CQ {}: unexpected completion {:?}",
            cq.handle(),
            wc[0]
        )));
    }
    Ok(())
}
