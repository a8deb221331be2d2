// SPDX-License-Identifier: GPL-2.0

//! The data path of the RDMA core's kernel clients (ib_mad's QP1, the connection manager,
//! NVMe over RDMA): their CQs, QPs and SRQs live in the driver's own hardware context, without
//! a PASID, and the driver writes their work queue entries, reads their completions and rings
//! their doorbells itself, as a provider does for a process (docs/verbs.md, "Queue formats",
//! "User doorbells").
//!
//! Posting, polling and arming may come in any context (ib_mad posts under a spinlock with
//! interrupts off): nothing here sleeps or allocates. A queue's tail and a CQ's consumer index
//! are each under an interrupt-safe spinlock.
//!
//! Fast registration (NVMe over RDMA's, docs/verbs.md "Fast registration"): an MR of
//! `ib_alloc_mr()` has a page list in DMA memory ([`FastPages`]), which `ib_map_mr_sg()` fills
//! and a `REG_MR` work queue entry hands the device, which copies it when it runs the entry.

use crate::{
    ib_uverbs::{Ah, Mr, UContext},
    nic::Nic,
    queue_abi::*,
    uapi::IbCreateAhResp,
    verbs::{args, file::Ring, mr::FAST_PAGE_SIZE},
};
use core::mem::offset_of;
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::kverbs::{send_flags, CqNotify, QpRef, RecvWrs, SendOp, SendWr, SendWrs, Wc, WcSink},
    sync::{
        atomic::{Atomic, Relaxed},
        barrier::{dma_mb, Read, Write},
        Arc, SpinLockIrq,
    },
};

/// The access bits a `REG_MR` entry carries (`IB_ACCESS_*` local write, remote write, remote
/// read, remote atomic); the core's optional bits (`IB_ACCESS_OPTIONAL`, hints such as relaxed
/// ordering) are dropped, any other is refused.
const REG_MR_ACCESS: u32 = 0xf;
const ACCESS_OPTIONAL: u32 = 0x3ff0_0000;

/// The send flags a work queue entry carries (`IBV_SEND_*`, the same bits as the core's).
const SEND_FLAGS: u32 = send_flags::FENCE | send_flags::SIGNALED | send_flags::SOLICITED;

/// The QPs of the kernel clients' context by number, for naming them in completions. A QP is
/// in it from its creation until its destruction.
pub(crate) struct KernelQps {
    by_qpn: KVec<Option<QpRef>>,
}

impl KernelQps {
    /// Room for QPNs below `max_qps`.
    pub(crate) fn new(max_qps: u32) -> Result<Self> {
        let mut by_qpn = KVec::with_capacity(max_qps as usize, GFP_KERNEL)?;
        for _ in 0..max_qps {
            by_qpn.push(None, GFP_KERNEL)?;
        }
        Ok(Self { by_qpn })
    }

    /// Sets QP `qpn`'s entry (`None`: removed).
    pub(crate) fn set(&mut self, qpn: u32, qp: Option<QpRef>) {
        if let Some(slot) = self.by_qpn.get_mut(qpn as usize) {
            *slot = qp;
        }
    }

    fn get(&self, qpn: u32) -> Option<QpRef> {
        self.by_qpn.get(qpn as usize).copied().flatten()
    }
}

/// A kernel client's completion queue.
#[pin_data]
pub(crate) struct KernelCq {
    nic: Arc<Nic>,
    /// The hardware context (whose doorbell page arms the CQ).
    ctx: u32,
    cqn: u32,
    ring: Ring,
    /// CQEs in the ring (a power of two), and their size.
    entries: u32,
    cqe_size: usize,
    /// Where the record (the consumer index the device reads) is.
    record: usize,
    /// CQEs consumed, free-running.
    #[pin]
    ci: SpinLockIrq<u32>,
}

impl KernelCq {
    /// The driver's view of CQ `cq`, which the verbs engine just made in hardware context
    /// `ctx` with `ring`.
    pub(crate) fn new(
        nic: &Arc<Nic>,
        ctx: u32,
        ring: Ring,
        cq: &args::CreateCq,
    ) -> impl PinInit<Self> + use<> {
        // Read now: the initialiser runs later, without the borrows.
        let (nic, cqn, entries) = (nic.clone(), cq.cqn, cq.entries);
        let (cqe_size, record) = (cq.cqe_size as usize, cq.record_offset as usize);
        pin_init!(Self {
            nic,
            ctx,
            cqn,
            ring,
            entries,
            cqe_size,
            record,
            ci <- new_spinlock_irq!(0),
        })
    }

    /// Whether the CQE the consumer index `ci` names is written (its owner bit has the
    /// parity of the pass over the ring).
    fn ready(&self, ci: u32) -> bool {
        let slot = self.slot(ci);
        // `entries` is a power of two.
        let parity = (ci.checked_shr(self.entries.trailing_zeros()).unwrap_or(0) & 1) ^ 1;
        // SAFETY: The kernel clients' context is never disassociated: its rings are not
        // revoked.
        u32::from(unsafe { self.ring.read_u8(slot + CQE_OWNER) } & 1) == parity
    }

    /// The byte offset of the CQE the consumer index `ci` names.
    fn slot(&self, ci: u32) -> usize {
        (ci & self.entries.wrapping_sub(1)) as usize * self.cqe_size
    }

    /// Moves completions into `out`, naming their QPs from `qps`; those of a QP that is gone
    /// are dropped.
    pub(crate) fn poll(&self, qps: &SpinLockIrq<KernelQps>, out: &mut WcSink<'_>) {
        let mut ci = self.ci.lock();
        let start = *ci;
        while out.has_room() && self.ready(*ci) {
            // The rest of the CQE was written before its owner byte.
            dma_mb(Read);
            let at = self.slot(*ci);
            // SAFETY: As in `ready`.
            let (wc, qpn) = unsafe { self.decode(at) };
            *ci = ci.wrapping_add(1);
            if let Some(qp) = qps.lock().get(qpn) {
                // SAFETY: The QP was in the table, so its `destroy_qp` had not returned (it
                // removes the QP from the table first); and a kernel client does not destroy a
                // QP while it polls the QP's CQ for it (it drains the QP first, as the core's
                // `ib_drain_qp()` does), so the QP outlives the completion's use.
                unsafe { out.push(&wc, qp) };
            }
        }
        if *ci != start {
            // The CQEs were read before the slots are handed back.
            dma_mb(Write);
            // SAFETY: As in `ready`.
            unsafe { self.ring.write_u32(self.record, *ci) };
        }
    }

    /// The completion at byte `at` of the ring, and its QP's number.
    ///
    /// # Safety
    ///
    /// The ring is not revoked.
    unsafe fn decode(&self, at: usize) -> (Wc, u32) {
        let r = &self.ring;
        // SAFETY: The caller guarantees the ring.
        unsafe {
            let flags = r.read_u8(at + CQE_FLAGS);
            let wc = Wc {
                wr_id: r.read_u64(at + CQE_WR_ID),
                status: u32::from(r.read_u8(at + CQE_STATUS)),
                opcode: u32::from(r.read_u8(at + CQE_OPCODE)),
                vendor_err: r.read_u32(at + CQE_VENDOR_ERR),
                byte_len: r.read_u32(at + CQE_BYTE_LEN),
                // As the sender posted it: the bytes, not a number.
                imm: (flags & CQE_FLAG_WITH_IMM != 0)
                    .then(|| u32::from_ne_bytes(r.read_u32(at + CQE_IMM).to_le_bytes())),
                // A number: the key the device invalidated.
                invalidated_rkey: (flags & CQE_FLAG_WITH_INV != 0)
                    .then(|| r.read_u32(at + CQE_IMM)),
                src_qp: r.read_u32(at + CQE_SRC_QP),
                grh: flags & CQE_FLAG_GRH != 0,
                ..Wc::default()
            };
            (wc, r.read_u32(at + CQE_QP_NUM))
        }
    }

    /// Arms the CQ for its next completion (or next solicited one) event; with
    /// `report_missed`, whether a completion is already waiting (the device raises no event
    /// for one written before the arm).
    pub(crate) fn arm(&self, how: CqNotify) -> Result<bool> {
        let ci = self.ci.lock();
        self.nic.ring_doorbell(
            self.ctx,
            DB_CQ_ARM,
            self.cqn << 16 | u32::from(how.solicited_only),
        )?;
        Ok(how.report_missed && self.ready(*ci))
    }
}

/// A kernel client's queue pair.
#[pin_data]
pub(crate) struct KernelQp {
    nic: Arc<Nic>,
    ctx: u32,
    qpn: u32,
    ring: Ring,
    /// A UD QP (QP1 among them): its send requests name their destination.
    ud: bool,
    sq_entries: u32,
    rq_entries: u32,
    rq_offset: usize,
    /// Where the record (the heads the device writes) is.
    record: usize,
    /// Work requests posted, free-running (the doorbells carry their low 16 bits).
    #[pin]
    sq_tail: SpinLockIrq<u32>,
    #[pin]
    rq_tail: SpinLockIrq<u32>,
}

/// A work queue entry's bytes, its fields little-endian at `queue_abi`'s offsets.
struct Wqe([u8; WQE_SIZE]);

impl Wqe {
    fn new() -> Self {
        Self([0; WQE_SIZE])
    }

    fn put_bytes(&mut self, at: usize, bytes: &[u8]) {
        self.0[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn put_u32(&mut self, at: usize, v: u32) {
        self.put_bytes(at, &v.to_le_bytes());
    }

    fn put_u64(&mut self, at: usize, v: u64) {
        self.put_bytes(at, &v.to_le_bytes());
    }

    /// Immediate data: its bytes as posted (network order), not a number.
    fn put_imm(&mut self, imm: u32) {
        self.put_bytes(WQE_IMM, &imm.to_ne_bytes());
    }

    /// The opcode, flags and SGE count, the identifier and the SGEs; `EINVAL` beyond the
    /// entry's four SGEs.
    fn put_common(
        &mut self,
        opcode: u8,
        flags: u32,
        wr_id: u64,
        sges: &[kernel::rdma::Sge],
    ) -> Result {
        if sges.len() > WQE_MAX_SGE {
            return Err(EINVAL);
        }
        self.put_bytes(WQE_OPCODE, &[opcode]);
        self.put_bytes(WQE_FLAGS, &[flags as u8]);
        self.put_bytes(WQE_NUM_SGE, &[sges.len() as u8]);
        self.put_u64(WQE_WR_ID, wr_id);
        for (i, sge) in sges.iter().enumerate() {
            let at = WQE_SGE + i * WQE_SGE_SIZE;
            self.put_u64(at, sge.addr);
            self.put_u32(at + 8, sge.length);
            self.put_u32(at + 12, sge.lkey);
        }
        Ok(())
    }

    /// A UD entry's address vector, as `create_ah` resolved it.
    fn put_av(&mut self, av: &IbCreateAhResp) {
        let at = |field| WQE_UD_AV + field;
        self.put_u32(at(offset_of!(IbCreateAhResp, dest_ip)), av.dest_ip);
        self.put_bytes(
            at(offset_of!(IbCreateAhResp, traffic_class)),
            &[av.traffic_class],
        );
        self.put_bytes(at(offset_of!(IbCreateAhResp, hop_limit)), &[av.hop_limit]);
        self.put_bytes(at(offset_of!(IbCreateAhResp, ah_flags)), &[av.ah_flags]);
        self.put_bytes(at(offset_of!(IbCreateAhResp, dmac)), &av.dmac);
        self.put_bytes(at(offset_of!(IbCreateAhResp, dgid)), &av.dgid);
    }

    /// The entry as the little-endian 64-bit words the ring takes.
    fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_le_bytes(b)
        })
    }
}

/// The page list of a kernel client's fast-registration MR (docs/verbs.md, "Fast
/// registration"): DMA addresses of its pages, which `ib_map_mr_sg()` writes and the device
/// reads when it runs the `REG_MR` entry. A client maps and registers an MR one time after
/// another, never two at once (the MR is busy until its registration completes).
pub(crate) struct FastPages {
    list: Ring,
    max: u32,
    /// Pages listed since the last [`FastPages::start`].
    count: Atomic<u32>,
}

impl FastPages {
    /// A list of up to `max` pages, in DMA memory of `nic`.
    pub(crate) fn new(nic: &Nic, max: u32) -> Result<Self> {
        if max == 0 || max > FAST_MAX_PAGES {
            return Err(EINVAL);
        }
        Ok(Self {
            list: Ring::new(nic, max as usize * 8)?,
            max,
            count: Atomic::new(0),
        })
    }

    /// Starts a new list of pages of `page_size` bytes (only 4 KiB ones: `EINVAL`).
    pub(crate) fn start(&self, page_size: u32) -> Result {
        if page_size != FAST_PAGE_SIZE {
            return Err(EINVAL);
        }
        self.count.store(0, Relaxed);
        Ok(())
    }

    /// Adds the page at DMA address `addr`; `ENOMEM` when the list is full.
    pub(crate) fn add(&self, addr: u64) -> Result {
        let n = self.count.load(Relaxed);
        if n >= self.max {
            return Err(ENOMEM);
        }
        // SAFETY: The list is the driver's own memory, never revoked.
        unsafe { self.list.write_u64(n as usize * 8, addr) };
        self.count.store(n + 1, Relaxed);
        Ok(())
    }
}

/// The fields of a `REG_MR` entry for `mr`'s current page list.
fn put_reg_mr(w: &mut Wqe, mr: Option<&Mr>, op: &SendOp) -> Result {
    let SendOp::RegMr {
        key,
        access,
        iova,
        length,
        page_size,
    } = *op
    else {
        return Err(EINVAL);
    };
    let pages = UContext::fast_pages(mr.ok_or(EINVAL)?)?;
    if page_size != FAST_PAGE_SIZE || access & !(REG_MR_ACCESS | ACCESS_OPTIONAL) != 0 {
        return Err(EINVAL);
    }
    w.put_u64(WQE_REG_IOVA, iova);
    w.put_u32(WQE_REG_KEY, key);
    w.put_u32(WQE_REG_ACCESS, access & REG_MR_ACCESS);
    w.put_u64(WQE_REG_LENGTH, length);
    w.put_u64(WQE_REG_PBL, pages.list.mem.dma_address());
    w.put_u32(WQE_REG_PAGES, pages.count.load(Relaxed));
    Ok(())
}

/// The WQE of send request `wr`, on a UD QP if `ud`.
fn send_wqe(wr: &SendWr<'_, Ah, Mr>, ud: bool) -> Result<Wqe> {
    if wr.flags & !SEND_FLAGS != 0 {
        // Inline data: the device has none.
        return Err(EINVAL);
    }
    let mut w = Wqe::new();
    let remote = |w: &mut Wqe, addr, rkey| {
        w.put_u64(WQE_REMOTE_ADDR, addr);
        w.put_u32(WQE_RKEY, rkey);
    };
    let opcode = match wr.op {
        SendOp::Send { imm: None } => WR_SEND,
        SendOp::Send { imm: Some(imm) } => {
            w.put_imm(imm);
            WR_SEND_WITH_IMM
        }
        SendOp::SendWithInv { rkey } => {
            w.put_u32(WQE_IMM, rkey);
            WR_SEND_WITH_INV
        }
        SendOp::RdmaWrite {
            remote_addr,
            rkey,
            imm,
        } => {
            remote(&mut w, remote_addr, rkey);
            match imm {
                None => WR_RDMA_WRITE,
                Some(imm) => {
                    w.put_imm(imm);
                    WR_RDMA_WRITE_WITH_IMM
                }
            }
        }
        SendOp::RdmaRead { remote_addr, rkey } => {
            remote(&mut w, remote_addr, rkey);
            WR_RDMA_READ
        }
        SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            remote(&mut w, remote_addr, rkey);
            w.put_u64(WQE_COMPARE_ADD, compare);
            w.put_u64(WQE_SWAP, swap);
            WR_ATOMIC_CMP_AND_SWP
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            remote(&mut w, remote_addr, rkey);
            w.put_u64(WQE_COMPARE_ADD, add);
            WR_ATOMIC_FETCH_AND_ADD
        }
        SendOp::LocalInv { rkey } if wr.sges.is_empty() => {
            w.put_u32(WQE_IMM, rkey);
            WR_LOCAL_INV
        }
        SendOp::RegMr { .. } if wr.sges.is_empty() => {
            put_reg_mr(&mut w, wr.mr, &wr.op)?;
            WR_REG_MR
        }
        SendOp::LocalInv { .. } | SendOp::RegMr { .. } => return Err(EINVAL),
    };
    match (&wr.ud, ud) {
        (Some(d), true) => {
            w.put_u32(WQE_UD_REMOTE_QPN, d.remote_qpn & 0xff_ffff);
            w.put_u32(WQE_UD_REMOTE_QKEY, d.remote_qkey);
            w.put_av(&d.ah.0);
        }
        (None, false) => {}
        _ => return Err(EINVAL),
    }
    w.put_common(opcode, wr.flags, wr.wr_id, wr.sges)?;
    Ok(w)
}

impl KernelQp {
    /// The driver's view of QP `qp` (UD if `ud`), which the verbs engine just made in hardware
    /// context `ctx` with `ring`.
    pub(crate) fn new(
        nic: &Arc<Nic>,
        ctx: u32,
        ring: Ring,
        ud: bool,
        qp: &args::CreateQp,
    ) -> impl PinInit<Self> + use<> {
        // Read now: the initialiser runs later, without the borrows.
        let (nic, qpn, sq_entries, rq_entries) =
            (nic.clone(), qp.qpn, qp.sq_entries, qp.rq_entries);
        let (rq_offset, record) = (qp.rq_offset as usize, qp.record_offset as usize);
        pin_init!(Self {
            nic,
            ctx,
            qpn,
            ring,
            ud,
            sq_entries,
            rq_entries,
            rq_offset,
            record,
            sq_tail <- new_spinlock_irq!(0),
            rq_tail <- new_spinlock_irq!(0),
        })
    }

    /// The send queue (`send`) or the receive queue.
    fn queue(&self, send: bool) -> Queue<'_> {
        Queue {
            nic: &self.nic,
            ctx: self.ctx,
            ring: &self.ring,
            base: if send { 0 } else { self.rq_offset },
            entries: if send {
                self.sq_entries
            } else {
                self.rq_entries
            },
            head_at: self.record + if send { 0 } else { 4 },
            doorbell: if send { DB_SQ } else { DB_RQ },
            num: self.qpn,
        }
    }

    /// Posts send requests; rings the doorbell once for those posted, even if one fails.
    pub(crate) fn post_send(&self, wrs: &mut SendWrs<'_, Ah, Mr>) -> Result {
        let ud = self.ud;
        let mut tail = self.sq_tail.lock();
        self.queue(true)
            .post(&mut tail, wrs.map(|wr| wr.and_then(|wr| send_wqe(&wr, ud))))
    }

    /// Posts receive requests, as [`KernelQp::post_send`].
    pub(crate) fn post_recv(&self, wrs: &mut RecvWrs<'_>) -> Result {
        if self.rq_entries == 0 {
            // Receives come from the QP's SRQ ([`KernelSrq::post`]).
            return Err(EINVAL);
        }
        let mut tail = self.rq_tail.lock();
        self.queue(false)
            .post(&mut tail, wrs.map(|wr| wr.and_then(recv_wqe)))
    }
}

/// A kernel client's shared receive queue: its ring of receive entries, followed by the record
/// the device writes its head to (docs/verbs.md, "Shared receive queues").
#[pin_data]
pub(crate) struct KernelSrq {
    nic: Arc<Nic>,
    ctx: u32,
    srqn: u32,
    ring: Ring,
    entries: u32,
    record: usize,
    /// Work requests posted, free-running (the doorbells carry their low 16 bits).
    #[pin]
    tail: SpinLockIrq<u32>,
}

impl KernelSrq {
    /// The driver's view of SRQ `srq`, which the verbs engine just made in hardware context
    /// `ctx` with `ring`.
    pub(crate) fn new(
        nic: &Arc<Nic>,
        ctx: u32,
        ring: Ring,
        srq: &args::CreateSrq,
    ) -> impl PinInit<Self> + use<> {
        let (nic, srqn, entries, record) = (
            nic.clone(),
            srq.srqn,
            srq.entries,
            srq.record_offset as usize,
        );
        pin_init!(Self {
            nic,
            ctx,
            srqn,
            ring,
            entries,
            record,
            tail <- new_spinlock_irq!(0),
        })
    }

    /// Posts receive requests, as [`KernelQp::post_send`].
    pub(crate) fn post(&self, wrs: &mut RecvWrs<'_>) -> Result {
        let mut tail = self.tail.lock();
        Queue {
            nic: &self.nic,
            ctx: self.ctx,
            ring: &self.ring,
            base: 0,
            entries: self.entries,
            head_at: self.record,
            doorbell: DB_SRQ,
            num: self.srqn,
        }
        .post(&mut tail, wrs.map(|wr| wr.and_then(recv_wqe)))
    }
}

/// The entry of receive request `wr`.
fn recv_wqe(wr: kernel::rdma::kverbs::RecvWr<'_>) -> Result<Wqe> {
    let mut w = Wqe::new();
    w.put_common(0, 0, wr.wr_id, wr.sges)?;
    Ok(w)
}

/// A work queue in a ring: a QP's send or receive queue, or an SRQ.
struct Queue<'a> {
    nic: &'a Nic,
    ctx: u32,
    ring: &'a Ring,
    /// Where its entries start in the ring.
    base: usize,
    /// Its entries, a power of two.
    entries: u32,
    /// Where in the ring the device writes its head.
    head_at: usize,
    /// Its doorbell, and the QPN or SRQN the doorbell names.
    doorbell: usize,
    num: u32,
}

impl Queue<'_> {
    /// Writes `wqe` in slot `tail` if the device's head leaves room; `ENOMEM` if full.
    fn put(&self, tail: u32, wqe: &Wqe) -> Result {
        // SAFETY: The kernel clients' context is never disassociated: its rings are not
        // revoked.
        let head = unsafe { self.ring.read_u32(self.head_at) };
        if tail.wrapping_sub(head) & 0xffff >= self.entries {
            return Err(ENOMEM);
        }
        let at = self.base + (tail & self.entries.wrapping_sub(1)) as usize * WQE_SIZE;
        for (i, word) in wqe.words().enumerate() {
            // SAFETY: As above; a slot the device does not read before the doorbell.
            unsafe { self.ring.write_u64(at + 8 * i, word) };
        }
        Ok(())
    }

    /// Writes the entries `wqes` makes, in order, from `tail` (the caller holds the queue's
    /// lock), and rings the doorbell once for those written; stops at the first that fails (a
    /// request it cannot make, or a full queue: `ENOMEM`).
    fn post(&self, tail: &mut u32, wqes: impl Iterator<Item = Result<Wqe>>) -> Result {
        let start = *tail;
        let mut r = Ok(());
        for wqe in wqes {
            if let Err(e) = wqe.and_then(|w| self.put(*tail, &w)) {
                r = Err(e);
                break;
            }
            *tail = tail.wrapping_add(1);
        }
        if *tail != start {
            // The entries are written before the device reads them.
            dma_mb(Write);
            self.nic
                .ring_doorbell(self.ctx, self.doorbell, self.num << 16 | (*tail & 0xffff))?;
        }
        r
    }
}

// The UD address vector of a WQE is `IbCreateAhResp`, up to the SGEs.
const _: () = assert!(WQE_UD_AV + core::mem::size_of::<IbCreateAhResp>() == WQE_SGE);
