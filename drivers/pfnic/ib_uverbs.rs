// SPDX-License-Identifier: GPL-2.0

//! User verbs through the RDMA core (`/dev/infiniband/uverbsN`): a user context owns a
//! hardware context and its verbs objects, and the core's PDs, MRs, CQs and QPs are the ones
//! [`VerbsFile`] keeps for it.
//!
//! The provider maps the context's doorbell page (offset 0) and each CQ's and QP's ring memory
//! (at the offset its creation answered) from the uverbs file. When the device goes away, the
//! core destroys the context's objects, then disassociates the context: its mappings are
//! removed from the processes and the ring memory is freed before the device is unbound.

use crate::{
    context::Context,
    kverbs::{FastPages, KernelCq, KernelQp, KernelQps, KernelSrq},
    nic::{stats::translation_named, Nic},
    uapi,
    verbs::{args, file::VerbsFile, port::gid_ipv4, PORT_LID},
};
use kernel::{
    fs::file::FileMappings,
    mm::virt::VmaNew,
    new_mutex, new_spinlock_irq,
    prelude::*,
    rdma::{
        dm::{DmAllocAttr, DmMrAttr},
        kverbs::{CqNotify, RecvWrs, SendWrs, WcSink},
        qp::{qp_type, AhAttr, GlobalRoute, QpAttr, QpCap, QpInitAttr, QpQuery, SrqAttr},
        rereg,
        restrack::{Counters, DriverDetails},
        udata::UData,
        CqInitAttr, CqNotifier, MrKeys, ObjectEvents, Sge, UserMr,
    },
    sync::{Arc, Mutex, SpinLockIrq},
};
use zerocopy::{FromZeros, IntoBytes};

/// `IB_UVERBS_ACCESS_OPTIONAL_RANGE`: access flags a device may ignore (bits 20-29; relaxed
/// ordering is the first).
const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// `IB_UVERBS_ACCESS_ZERO_BASED`: an MR whose addresses are offsets into it.
const ACCESS_ZERO_BASED: u32 = 1 << 5;

/// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`: the core's flag for a CQ whose completions carry
/// the device clock.
const CQ_FLAGS_TIMESTAMP_COMPLETION: u32 = 1;

/// A GRH's flow label: 20 bits.
const FLOW_LABEL_MASK: u32 = 0xf_ffff;

/// The driver's part of a user context. Fields drop in order: the verbs objects are destroyed
/// in the device before the hardware context stops and its PASID is unbound.
#[pin_data]
pub(crate) struct UContext {
    nic: Arc<Nic>,
    verbs: VerbsFile,
    ctx: Context,
    /// The shared mappings of the uverbs file, known from its first `mmap()`; removed when
    /// the context is disassociated.
    #[pin]
    mappings: Mutex<Option<FileMappings>>,
    /// The context of the RDMA core's kernel clients ([`UContext::new_kernel`]), not a
    /// process's: the driver runs its queues ([`crate::kverbs`]).
    kernel: bool,
    /// The kernel clients' QPs by number, for their completions (empty for a process's).
    #[pin]
    kernel_qps: SpinLockIrq<KernelQps>,
}

/// A protection domain: its handle in the context's objects.
pub(crate) struct Pd(u32);
/// A completion queue: its CQN, and, for a kernel client's, the driver's view of its ring.
pub(crate) struct Cq {
    num: u32,
    kernel: Option<Pin<KBox<KernelCq>>>,
}
/// A memory region: its handle in the context's objects, and a kernel client's
/// fast-registration MR's page list.
pub(crate) struct Mr(u32, Option<FastPages>);
/// A queue pair: its QPN, and, for a kernel client's, the driver's view of its queues.
pub(crate) struct Qp {
    num: u32,
    kernel: Option<Pin<KBox<KernelQp>>>,
}
/// A shared receive queue: its SRQN, and for a kernel client's the driver's view of its ring.
pub(crate) struct Srq {
    num: u32,
    kernel: Option<Pin<KBox<KernelSrq>>>,
}
/// A device memory allocation: its handle in the context's objects.
pub(crate) struct Dm(u32);
/// An address handle: the address vector a UD work queue entry carries (the provider keeps its
/// own copy for a process; the driver writes it for a kernel client).
pub(crate) struct Ah(pub(crate) uapi::IbCreateAhResp);

impl UContext {
    /// A user context for the calling process on `nic`: a hardware context in its address
    /// space (bound by SVA where the platform can) and an empty set of verbs objects, in the
    /// memory mode `mem_mode` (`PFNIC_MEM_MODE_*`, 0 for the platform's default).
    pub(crate) fn new(nic: &Arc<Nic>, mem_mode: u32) -> Result<Pin<KBox<Self>>> {
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let ctx = Context::new(nic, mm)?;
        // No per-file share of the device's tables: the core charges the context's objects to
        // the process's rdma cgroup (`rdma.max`), and the device's limits are what it reports.
        let verbs = VerbsFile::new(nic, ctx.index(), ctx.has_pasid())?;
        if mem_mode != 0 {
            verbs.set_mem_mode(mem_mode)?;
        }
        KBox::try_pin_init(
            try_pin_init!(Self {
                nic: nic.clone(),
                verbs,
                ctx,
                mappings <- new_mutex!(None),
                kernel: false,
                kernel_qps <- new_spinlock_irq!(KernelQps::new(0)?),
            }),
            GFP_KERNEL,
        )
    }

    /// The context of the RDMA core's kernel clients: a hardware context without a PASID and
    /// their verbs objects, whose queues the driver runs.
    pub(crate) fn new_kernel(nic: &Arc<Nic>) -> Result<Pin<KBox<Self>>> {
        let ctx = Context::new_kernel(nic)?;
        let verbs = VerbsFile::new_kernel(nic, ctx.index())?;
        let max_qps = nic.verbs()?.limits.max_qps;
        KBox::try_pin_init(
            try_pin_init!(Self {
                nic: nic.clone(),
                verbs,
                ctx,
                mappings <- new_mutex!(None),
                kernel: true,
                kernel_qps <- new_spinlock_irq!(KernelQps::new(max_qps)?),
            }),
            GFP_KERNEL,
        )
    }

    /// The context's memory mode and the on-demand paging it has: `(mode, general, rc)`.
    pub(crate) fn mem_mode(&self) -> Result<(u32, u64, u32)> {
        let v = self.verbs.query_verbs()?;
        Ok((self.verbs.mem_mode(), v.odp_general_caps, v.odp_rc_caps))
    }

    /// The context's memory mode, hardware context, PASID and translation counters, for `rdma
    /// resource show ctx -dd`, on the thread of whoever asks (not the owner's).
    pub(crate) fn ctx_details(&self, out: &mut DriverDetails<'_>) -> Result {
        let mode = match self.verbs.mem_mode() {
            uapi::PFNIC_MEM_MODE_SVA => c"sva",
            uapi::PFNIC_MEM_MODE_PINNED => c"pinned",
            uapi::PFNIC_MEM_MODE_ODP => c"odp",
            _ => c"unknown",
        };
        out.put_str(c"mem_mode", mode)?;
        // A context whose device is gone (unbound, the context disassociated) has nothing
        // more to show.
        let Ok(q) = self.ctx.query() else {
            return Ok(());
        };
        out.put_u32(c"context", q.context)?;
        out.put_u32(c"pasid", q.pasid)?;
        for (name, value) in translation_named(&q.translation) {
            out.put_u32(name, value)?;
        }
        out.put_u64(c"remote_access_errors", q.remote_access_errors)
    }

    /// Every verb fails for another process than the one that opened the context (a child
    /// that inherited the file across fork): the device works in the opener's address space.
    /// Device memory is the exception ([`Self::alloc_dm`]): it is in no address space.
    fn owner_only(&self) -> Result {
        self.nic.with_bar(|_| ())?;
        if self.kernel {
            // The core's own clients, from any thread.
            return Ok(());
        }
        let task = kernel::current!();
        if self.ctx.owned_by(task.mm()) {
            Ok(())
        } else {
            Err(EPERM)
        }
    }

    /// Maps the doorbell page (offset 0) or a CQ's or QP's ring memory, into the opener's
    /// address space only; or device memory, into any process that has the file.
    pub(crate) fn mmap(&self, vma: &VmaNew) -> Result {
        if !self.ctx.owned_by(Some(vma.mm())) && !self.verbs.is_dm_token(vma.pgoff() as u64) {
            return Err(EPERM);
        }
        {
            let mut mappings = self.mappings.lock();
            if mappings.is_none() {
                *mappings = Some(vma.file().ok_or(EINVAL)?.mappings());
            }
        }
        self.verbs.mmap(vma)
    }

    /// The device is going away: the core destroyed the context's objects and removed the
    /// mappings it made; remove ours and free the ring memory (the device was not reset yet,
    /// but uses no ring of the context: its CQs and QPs are destroyed).
    pub(crate) fn disassociate(&self) {
        if let Some(mappings) = &*self.mappings.lock() {
            mappings.unmap_all();
        }
        // SAFETY: The mappings of the uverbs file are removed above, and the core makes no new
        // one once it disassociates a context (its `mmap()` finds the device gone).
        unsafe { self.verbs.objects.lock().revoke() };
    }

    pub(crate) fn alloc_pd(&self, udata: &mut UData<'_>) -> Result<Pd> {
        self.owner_only()?;
        udata.read(&mut [])?;
        Ok(Pd(self.verbs.alloc_pd()?))
    }

    pub(crate) fn dealloc_pd(&self, pd: &Pd) -> Result {
        self.verbs.dealloc_pd(pd.0)
    }

    pub(crate) fn create_cq(
        &self,
        attr: &CqInitAttr,
        notifier: CqNotifier,
        udata: &mut UData<'_>,
    ) -> Result<(Cq, u32)> {
        self.owner_only()?;
        let mut req = uapi::IbCreateCqReq::new_zeroed();
        udata.read(req.as_mut_bytes())?;
        if req.reserved != 0 {
            return Err(EINVAL);
        }
        // The core's flags: timestamps, as the provider's flag asks (`ibv_create_cq_ex`
        // sets both); pfnic's CQs cannot ignore an overrun.
        if attr.flags & !CQ_FLAGS_TIMESTAMP_COMPLETION != 0 {
            return Err(EOPNOTSUPP);
        }
        let mut flags = req.flags;
        if attr.flags & CQ_FLAGS_TIMESTAMP_COMPLETION != 0 {
            flags |= uapi::PFNIC_CQ_CREATE_TIMESTAMP;
        }
        let mut arg = args::CreateCq {
            cqe: attr.cqe,
            // Completion events go to the core, which has the channel.
            channel: -1,
            flags,
            ..Default::default()
        };
        if self.kernel && flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let ring = self.verbs.create_cq_for(&mut arg, Some(notifier))?;
        let mut cq = Cq {
            num: arg.cqn,
            kernel: None,
        };
        // A kernel client's CQ gets the driver's view of its ring; a process's, the layout.
        let finished = (|| {
            if self.kernel {
                let view = KernelCq::new(&self.nic, self.ctx.index(), ring, &arg);
                cq.kernel = Some(KBox::pin_init(view, GFP_KERNEL)?);
            }
            udata.write(arg.layout().as_bytes())
        })();
        if let Err(e) = finished {
            let _ = self.destroy_cq(&cq);
            return Err(e);
        }
        Ok((cq, arg.entries))
    }

    pub(crate) fn destroy_cq(&self, cq: &Cq) -> Result {
        self.verbs.destroy_cq(cq.num)
    }

    pub(crate) fn reg_user_mr(
        &self,
        pd: &Pd,
        region: &UserMr,
        udata: &mut UData<'_>,
    ) -> Result<(Mr, MrKeys)> {
        self.owner_only()?;
        udata.read(&mut [])?;
        // The device translates addresses as the process sees them.
        if region.iova != region.start {
            return Err(EOPNOTSUPP);
        }
        self.register(
            args::RegMr {
                pd: pd.0,
                // Optional access flags (relaxed ordering) are hints a device may ignore, as
                // the core defines them: perftest's bandwidth tests ask for relaxed ordering.
                access: region.access & !ACCESS_OPTIONAL_RANGE,
                addr: region.start,
                length: region.length,
                ..Default::default()
            },
            udata,
        )
    }

    /// Registers `arg`'s MR, in the verb `udata` belongs to.
    fn register(&self, mut arg: args::RegMr, udata: &UData<'_>) -> Result<(Mr, MrKeys)> {
        self.verbs.reg_mr(&mut arg, udata)?;
        Ok((
            Mr(arg.mr, None),
            MrKeys {
                lkey: arg.lkey,
                rkey: arg.rkey,
            },
        ))
    }

    /// `ibv_rereg_mr`: without a new translation, `mr` itself gets the new PD and access and
    /// keeps its keys (`None`), as on mlx5 and rxe, where the device can change it so;
    /// otherwise a new MR with what `flags` changes and the rest of `mr`'s registration, which
    /// replaces `mr` (the core deregisters it then), with new keys: the core answers them,
    /// and libibverbs updates the MR's. On failure `mr` is untouched.
    pub(crate) fn rereg_user_mr(
        &self,
        mr: &Mr,
        flags: u32,
        region: &UserMr,
        pd: &Pd,
        udata: &mut UData<'_>,
    ) -> Result<Option<(Mr, MrKeys)>> {
        self.owner_only()?;
        udata.read(&mut [])?;
        let mut arg = self.verbs.mr_registration(mr.0)?;
        // The core's `pd` is the new one, or the MR's own.
        arg.pd = pd.0;
        if flags & rereg::TRANS != 0 {
            if region.iova != region.start {
                return Err(EOPNOTSUPP);
            }
            arg.addr = region.start;
            arg.length = region.length;
        }
        if flags & rereg::ACCESS != 0 {
            arg.access = region.access & !ACCESS_OPTIONAL_RANGE;
        }
        if flags & rereg::TRANS == 0 {
            match self.verbs.modify_mr(mr.0, arg.pd, arg.access) {
                Ok(()) => return Ok(None),
                Err(e) if e == EOPNOTSUPP => {}
                Err(e) => return Err(e),
            }
        }
        self.register(arg, udata).map(Some)
    }

    /// `ibv_advise_mr` on ranges of the PD's on-demand MRs, eight at a time (the verbs
    /// engine's batch); with `FLUSH`, every range is present when it returns.
    pub(crate) fn advise_mr(&self, pd: &Pd, advice: u32, flags: u32, sges: &[Sge]) -> Result {
        self.owner_only()?;
        for batch in sges.chunks(uapi::PFNIC_ADVISE_MAX_SGE) {
            let mut arg = args::AdviseMr {
                advice,
                flags,
                num_sge: batch.len() as u32,
                ..Default::default()
            };
            for (to, from) in arg.sge.iter_mut().zip(batch) {
                *to = args::Sge {
                    addr: from.addr,
                    length: from.length,
                    lkey: from.lkey,
                };
            }
            self.verbs.advise_mr_of(&arg, Some(pd.0))?;
        }
        Ok(())
    }

    /// The MR's counters for `rdma statistic mr`: mlx5's on-demand paging counters by their
    /// names, and pfnic's own. Read-only, so for anyone who may see the device's resources
    /// (the core asks on the `rdma` tool's thread), not only the context's owner.
    pub(crate) fn mr_counters(&self, mr: &Mr, out: &mut Counters<'_>) -> Result {
        let mut q = args::QueryMr {
            mr: mr.0,
            ..Default::default()
        };
        self.verbs.query_mr(&mut q)?;
        out.put(c"page_faults", q.page_faults)?;
        out.put(c"page_faults_handled", q.page_faults_handled)?;
        out.put(c"page_invalidations", q.page_invalidations)?;
        out.put(c"page_invalidations_handled", q.page_invalidations_handled)?;
        out.put(c"page_prefetch", q.page_prefetch)?;
        out.put(c"page_fault_groups", q.page_fault_groups)?;
        out.put(c"remote_access_errors", q.remote_access_errors)?;
        out.put(c"pages_pinned", q.pages_pinned)?;
        out.put(c"pages_mapped", q.pages_mapped)
    }

    pub(crate) fn dereg_mr(&self, mr: &Mr) -> Result {
        self.verbs.dereg_mr(mr.0)
    }

    /// `ibv_alloc_dm`: pages of BAR1 for the context, which the provider maps from the uverbs
    /// file where the response says. Device memory is in no address space, so a process that
    /// shares the file (a fork child) may allocate, map and free it too, as on mlx5 (rdma-core's
    /// own tests allocate it from several children of the opener at once); it counts against
    /// the context's share.
    pub(crate) fn alloc_dm(&self, attr: &DmAllocAttr, udata: &mut UData<'_>) -> Result<Dm> {
        // Bound: a verb on an unbound device fails with EIO, as every other.
        self.nic.with_bar(|_| ())?;
        udata.read(&mut [])?;
        let mut arg = args::AllocDm {
            length: attr.length,
            log_align_req: attr.log_align,
            ..Default::default()
        };
        self.verbs.alloc_dm(&mut arg)?;
        let dm = Dm(arg.dm);
        let resp = uapi::IbAllocDmResp {
            mmap_offset: arg.mmap_offset,
            mmap_len: arg.mmap_len,
        };
        if let Err(e) = udata.write(resp.as_bytes()) {
            let _ = self.dealloc_dm(&dm);
            return Err(e);
        }
        Ok(dm)
    }

    pub(crate) fn dealloc_dm(&self, dm: &Dm) -> Result {
        self.verbs.free_dm(dm.0)
    }

    /// `ibv_reg_dm_mr`: an MR over part of the allocation, zero-based (the core checked the
    /// range against the allocation and that the access has `ZERO_BASED`, which every device
    /// memory MR of pfnic is).
    pub(crate) fn reg_dm_mr(&self, pd: &Pd, dm: &Dm, attr: &DmMrAttr) -> Result<(Mr, MrKeys)> {
        self.owner_only()?;
        let mut arg = args::RegDmMr {
            pd: pd.0,
            dm: dm.0,
            access: attr.access & !(ACCESS_ZERO_BASED | ACCESS_OPTIONAL_RANGE),
            dm_offset: attr.offset,
            length: attr.length,
            ..Default::default()
        };
        self.verbs.reg_dm_mr(&mut arg)?;
        Ok((
            Mr(arg.mr, None),
            MrKeys {
                lkey: arg.lkey,
                rkey: arg.rkey,
            },
        ))
    }

    pub(crate) fn create_qp(
        &self,
        pd: &Pd,
        attr: &mut QpInitAttr<'_, crate::ib_device::PfnicIbDevice>,
        events: ObjectEvents,
        udata: &mut UData<'_>,
    ) -> Result<(Qp, u32)> {
        self.owner_only()?;
        let mut req = uapi::IbCreateQpReq::new_zeroed();
        udata.read(req.as_mut_bytes())?;
        if req.reserved != 0 || attr.create_flags != 0 {
            return Err(EINVAL);
        }
        // The special QPs, ib_mad's, are UD QPs of numbers 0 and 1.
        let (qp_type, special_qpn) = match attr.qp_type {
            qp_type::RC => (uapi::PFNIC_QPT_RC, None),
            qp_type::UD => (uapi::PFNIC_QPT_UD, None),
            qp_type::SMI if self.kernel => (uapi::PFNIC_QPT_UD, Some(0)),
            qp_type::GSI if self.kernel => (uapi::PFNIC_QPT_UD, Some(1)),
            _ => return Err(EOPNOTSUPP),
        };
        let c = attr.cap;
        let mut arg = args::CreateQp {
            pd: pd.0,
            send_cq: attr.send_cq.num,
            recv_cq: attr.recv_cq.num,
            qp_type,
            sq_sig_all: u32::from(attr.sq_sig_all),
            flags: req.flags & uapi::PFNIC_QP_CREATE_RECV_FAULT_BACKUP,
            cap: args::QpCap {
                max_send_wr: c.max_send_wr,
                max_recv_wr: c.max_recv_wr,
                max_send_sge: c.max_send_sge,
                max_recv_sge: c.max_recv_sge,
                max_inline_data: c.max_inline_data,
            },
            special_qpn,
            ..Default::default()
        };
        if req.flags != arg.flags {
            return Err(EINVAL);
        }
        if let Some(srq) = attr.srq {
            arg.flags |= uapi::PFNIC_QP_CREATE_SRQ;
            arg.srq = srq.num;
        }
        let qref = events.qp();
        let ring = self.verbs.create_qp_for(&mut arg, Some(events))?;
        let mut qp = Qp {
            num: arg.qpn,
            kernel: None,
        };
        // A kernel client's QP gets the driver's view of its queues, and completions can name
        // it; a process's, the layout.
        let finished = (|| {
            if self.kernel {
                let ud = qp_type == uapi::PFNIC_QPT_UD;
                let view = KernelQp::new(&self.nic, self.ctx.index(), ring, ud, &arg);
                qp.kernel = Some(KBox::pin_init(view, GFP_KERNEL)?);
                self.kernel_qps.lock().set(arg.qpn, qref);
            }
            udata.write(arg.layout().as_bytes())
        })();
        if let Err(e) = finished {
            let _ = self.destroy_qp(&qp);
            return Err(e);
        }
        attr.cap.max_send_wr = arg.cap.max_send_wr;
        attr.cap.max_recv_wr = arg.cap.max_recv_wr;
        attr.cap.max_send_sge = arg.cap.max_send_sge;
        attr.cap.max_recv_sge = arg.cap.max_recv_sge;
        attr.cap.max_inline_data = arg.cap.max_inline_data;
        Ok((qp, arg.qpn))
    }

    pub(crate) fn modify_qp(
        &self,
        qp: &Qp,
        a: &QpAttr,
        mask: u32,
        udata: &mut UData<'_>,
    ) -> Result {
        self.owner_only()?;
        udata.read(&mut [])?;
        let grh = a.ah.grh.unwrap_or_default();
        let arg = args::ModifyQp {
            qpn: qp.num,
            attr_mask: mask,
            attr: args::QpAttr {
                qp_state: a.qp_state,
                cur_qp_state: a.cur_qp_state,
                path_mtu: a.path_mtu,
                qp_access_flags: a.qp_access_flags,
                pkey_index: a.pkey_index.into(),
                port_num: a.port_num,
                dest_qp_num: a.dest_qp_num,
                rq_psn: a.rq_psn,
                sq_psn: a.sq_psn,
                min_rnr_timer: a.min_rnr_timer.into(),
                timeout: a.timeout.into(),
                retry_cnt: a.retry_cnt.into(),
                rnr_retry: a.rnr_retry.into(),
                max_rd_atomic: a.max_rd_atomic.into(),
                max_dest_rd_atomic: a.max_dest_rd_atomic.into(),
                dlid: a.ah.dlid.into(),
                sl: a.ah.sl.into(),
                is_global: u32::from(a.ah.grh.is_some()),
                sgid_index: grh.sgid_index.into(),
                hop_limit: grh.hop_limit.into(),
                traffic_class: grh.traffic_class.into(),
                // 20 bits; RoCE v2 over IPv4 carries none. UCX passes all ones (its
                // "automatic"), which devices take as its low 20 bits.
                flow_label: grh.flow_label & FLOW_LABEL_MASK,
                dgid: grh.dgid,
            },
        };
        // The MAC the core resolved for a RoCE address vector (all zeroes otherwise); the
        // Q_Key of a UD QP (an RC QP refuses `IB_QP_QKEY` in its mask).
        self.verbs.modify_qp_to(&arg, Some(a.ah.dmac), a.qkey)
    }

    /// An address handle: the address vector a UD work request carries, as the device reads it
    /// (`uapi::IbCreateAhResp`), for the provider to copy into the work requests.
    pub(crate) fn create_ah(&self, _pd: &Pd, a: &AhAttr, udata: &mut UData<'_>) -> Result<Ah> {
        self.owner_only()?;
        udata.read(&mut [])?;
        if a.port_num != 1 {
            return Err(EINVAL);
        }
        let mut resp = uapi::IbCreateAhResp::new_zeroed();
        if let Some(g) = a.grh {
            let attr = args::QpAttr {
                is_global: 1,
                sgid_index: g.sgid_index.into(),
                dgid: g.dgid,
                ..Default::default()
            };
            resp.dest_ip = self.nic.resolve_dest(&attr)?;
            resp.traffic_class = g.traffic_class;
            resp.hop_limit = g.hop_limit;
            resp.ah_flags = uapi::PFNIC_AH_FLAG_GRH;
            if gid_ipv4(&g.dgid).is_some() {
                resp.ah_flags |= uapi::PFNIC_AH_FLAG_IPV4;
            }
            resp.dgid = g.dgid;
            resp.dmac = a.dmac;
        } else if a.dlid != PORT_LID {
            // A port without a wire reaches only itself (its LID).
            return Err(EINVAL);
        }
        udata.write(resp.as_bytes())?;
        Ok(Ah(resp))
    }

    pub(crate) fn destroy_ah(&self, _ah: &Ah) -> Result {
        Ok(())
    }

    pub(crate) fn create_srq(
        &self,
        pd: &Pd,
        attr: &mut SrqAttr,
        events: ObjectEvents,
        udata: &mut UData<'_>,
    ) -> Result<Srq> {
        self.owner_only()?;
        udata.read(&mut [])?;
        let mut arg = args::CreateSrq {
            pd: pd.0,
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
            ..Default::default()
        };
        let ring = self.verbs.create_srq_for(&mut arg, Some(events))?;
        let mut srq = Srq {
            num: arg.srqn,
            kernel: None,
        };
        // A kernel client's SRQ gets the driver's view of its ring; a process's, the layout.
        let finished = (|| {
            if self.kernel {
                let view = KernelSrq::new(&self.nic, self.ctx.index(), ring, &arg);
                srq.kernel = Some(KBox::pin_init(view, GFP_KERNEL)?);
            }
            udata.write(arg.layout().as_bytes())
        })();
        if let Err(e) = finished {
            let _ = self.destroy_srq(&srq);
            return Err(e);
        }
        attr.max_wr = arg.max_wr;
        attr.max_sge = arg.max_sge;
        Ok(srq)
    }

    pub(crate) fn modify_srq(
        &self,
        srq: &Srq,
        attr: &SrqAttr,
        mask: u32,
        udata: &mut UData<'_>,
    ) -> Result {
        self.owner_only()?;
        udata.read(&mut [])?;
        self.verbs.modify_srq(&args::ModifySrq {
            srqn: srq.num,
            attr_mask: mask,
            srq_limit: attr.srq_limit,
        })
    }

    pub(crate) fn query_srq(&self, srq: &Srq) -> Result<SrqAttr> {
        self.owner_only()?;
        let mut q = args::QuerySrq {
            srqn: srq.num,
            ..Default::default()
        };
        self.verbs.query_srq(&mut q)?;
        Ok(SrqAttr {
            max_wr: q.max_wr,
            max_sge: q.max_sge,
            srq_limit: q.srq_limit,
        })
    }

    pub(crate) fn destroy_srq(&self, srq: &Srq) -> Result {
        self.verbs.destroy_srq(srq.num)
    }

    /// The QP's attributes as last set, in the device's current state, and its capabilities.
    /// `ibv_query_qp`, and the core's own query for `rdma resource show qp`: read-only, so
    /// for anyone who may see the QP (the core asks on the `rdma` tool's thread), not only the
    /// context's owner.
    pub(crate) fn query_qp(&self, qp: &Qp) -> Result<QpQuery> {
        let mut q = args::QueryQp {
            qpn: qp.num,
            ..Default::default()
        };
        self.verbs.query_qp(&mut q)?;
        let a = &q.attr;
        // The verbs engine keeps them as set: they fit the core's narrower fields.
        let narrow = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        Ok(QpQuery {
            attr: QpAttr {
                qp_state: a.qp_state,
                cur_qp_state: a.cur_qp_state,
                path_mtu: a.path_mtu,
                qkey: self.verbs.qp_qkey(qp.num)?,
                rq_psn: a.rq_psn,
                sq_psn: a.sq_psn,
                dest_qp_num: a.dest_qp_num,
                qp_access_flags: a.qp_access_flags,
                ah: AhAttr {
                    port_num: a.port_num,
                    sl: narrow(a.sl),
                    dlid: u16::try_from(a.dlid).unwrap_or(u16::MAX),
                    dmac: [0; 6],
                    grh: (a.is_global != 0).then_some(GlobalRoute {
                        dgid: a.dgid,
                        sgid_index: narrow(a.sgid_index),
                        hop_limit: narrow(a.hop_limit),
                        traffic_class: narrow(a.traffic_class),
                        flow_label: a.flow_label,
                    }),
                },
                pkey_index: u16::try_from(a.pkey_index).unwrap_or(u16::MAX),
                max_rd_atomic: narrow(a.max_rd_atomic),
                max_dest_rd_atomic: narrow(a.max_dest_rd_atomic),
                min_rnr_timer: narrow(a.min_rnr_timer),
                port_num: a.port_num,
                timeout: narrow(a.timeout),
                retry_cnt: narrow(a.retry_cnt),
                rnr_retry: narrow(a.rnr_retry),
            },
            cap: QpCap {
                max_send_wr: q.cap.max_send_wr,
                max_recv_wr: q.cap.max_recv_wr,
                max_send_sge: q.cap.max_send_sge,
                max_recv_sge: q.cap.max_recv_sge,
                max_inline_data: q.cap.max_inline_data,
            },
            sq_sig_all: q.sq_sig_all != 0,
        })
    }

    /// The QP's counters, for `rdma resource show qp -dd`, as [`UContext::query_qp`].
    pub(crate) fn qp_details(&self, qp: &Qp, out: &mut DriverDetails<'_>) -> Result {
        let mut q = args::QueryQp {
            qpn: qp.num,
            ..Default::default()
        };
        self.verbs.query_qp(&mut q)?;
        let s = &q.stats;
        out.put_u64(c"page_requests", s.page_requests)?;
        out.put_u64(c"rnr_waits", s.rnr_waits)?;
        out.put_u64(c"wqes", s.wqes)?;
        out.put_u64(c"bytes", s.bytes)?;
        out.put_u64(c"refused", s.refused)?;
        out.put_u32(c"next_send_psn", s.next_send_psn)?;
        out.put_u32(c"expected_recv_psn", s.expected_recv_psn)?;
        out.put_u64(c"retransmits", s.retransmits)?;
        out.put_u64(c"rnr_naks_sent", s.rnr_naks_sent)?;
        out.put_u64(c"rnr_naks_received", s.rnr_naks_received)?;
        out.put_u64(c"seq_naks_sent", s.seq_naks_sent)?;
        out.put_u64(c"duplicates", s.duplicates)
    }

    /// A kernel client's PD's local DMA key: a DMA MR over every address the device can
    /// reach, local access only.
    pub(crate) fn get_dma_mr(&self, pd: &Pd, access: u32) -> Result<(Mr, MrKeys)> {
        let (handle, key) = self.verbs.reg_dma_mr(pd.0, access)?;
        Ok((
            Mr(handle, None),
            MrKeys {
                lkey: key,
                rkey: key,
            },
        ))
    }

    /// A kernel client's fast-registration MR for up to `max_pages` pages (`ib_alloc_mr`).
    pub(crate) fn alloc_mr(&self, pd: &Pd, max_pages: u32) -> Result<(Mr, MrKeys)> {
        let pages = FastPages::new(&self.nic, max_pages)?;
        let (handle, key) = self.verbs.reg_fast_mr(pd.0, max_pages)?;
        Ok((
            Mr(handle, Some(pages)),
            MrKeys {
                lkey: key,
                rkey: key,
            },
        ))
    }

    /// The page list of a kernel client's fast-registration MR (`EINVAL` for another MR).
    pub(crate) fn fast_pages(mr: &Mr) -> Result<&FastPages> {
        mr.1.as_ref().ok_or(EINVAL)
    }

    /// A kernel client's QP's queues (`EINVAL` for a process's QP, which its provider runs).
    fn kernel_qp(qp: &Qp) -> Result<&KernelQp> {
        qp.kernel.as_deref().ok_or(EINVAL)
    }

    /// A kernel client's CQ's ring.
    fn kernel_cq(cq: &Cq) -> Result<&KernelCq> {
        cq.kernel.as_deref().ok_or(EINVAL)
    }

    pub(crate) fn post_send(&self, qp: &Qp, wrs: &mut SendWrs<'_, Ah, Mr>) -> Result {
        Self::kernel_qp(qp)?.post_send(wrs)
    }

    pub(crate) fn post_recv(&self, qp: &Qp, wrs: &mut RecvWrs<'_>) -> Result {
        Self::kernel_qp(qp)?.post_recv(wrs)
    }

    pub(crate) fn post_srq_recv(&self, srq: &Srq, wrs: &mut RecvWrs<'_>) -> Result {
        // Only a kernel client's SRQ has the driver's view (a process posts its own).
        srq.kernel.as_deref().ok_or(EINVAL)?.post(wrs)
    }

    pub(crate) fn poll_cq(&self, cq: &Cq, out: &mut WcSink<'_>) -> Result {
        Self::kernel_cq(cq)?.poll(&self.kernel_qps, out);
        Ok(())
    }

    pub(crate) fn req_notify_cq(&self, cq: &Cq, how: CqNotify) -> Result<bool> {
        Self::kernel_cq(cq)?.arm(how)
    }

    pub(crate) fn destroy_qp(&self, qp: &Qp) -> Result {
        if self.kernel {
            // Out of the table first: no completion names the QP once it is destroyed.
            self.kernel_qps.lock().set(qp.num, None);
        }
        self.verbs.destroy_qp(qp.num)
    }
}
