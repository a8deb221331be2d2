//! RC queue pairs: work requests written straight into the mapped queues.

use std::io;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use pfnic_sys::uapi;
use pfnic_sys::Mapping;

use crate::cq::CqInner;
use crate::queue::{
    map_queue, put_sges, record_word, write_wqe, Poster, Wqe, WQE_MAX_SGE, WQE_SIZE,
};
use crate::srq::{Srq, SrqInner};
use crate::types::{PostError, RecvWr, SendWr, SEND_FLAGS_SUPPORTED};
use crate::{errno, Cq, Ctx, QpAttr, QpCap, DB_RQ, DB_SQ};

/// `ibv_qp_init_attr` for an RC QP.
#[derive(Clone, Copy)]
pub struct QpInitAttr<'a> {
    pub send_cq: &'a Cq,
    pub recv_cq: &'a Cq,
    /// Requested capabilities; [`Qp::cap`] gives the actual ones.
    pub cap: QpCap,
    /// Signal every send work request (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// On the wire, a receive-side page fault parks the payload in the driver's backup
    /// buffer instead of answering RNR NAK (docs/wire.md, "Receive faults").
    pub recv_fault_backup: bool,
    /// The SRQ the QP takes its receives from (the receive capabilities are then ignored,
    /// and [`Qp::post_recv`] fails with `EINVAL`).
    pub srq: Option<&'a Srq>,
    /// Returned with the QP's asynchronous events.
    pub qp_context: u64,
}

impl<'a> QpInitAttr<'a> {
    /// `max_wr` send and receive work requests of up to `max_sge` SGEs each.
    pub fn new(send_cq: &'a Cq, recv_cq: &'a Cq, max_wr: u32, max_sge: u32) -> Self {
        Self {
            send_cq,
            recv_cq,
            cap: QpCap {
                max_send_wr: max_wr,
                max_recv_wr: max_wr,
                max_send_sge: max_sge,
                max_recv_sge: max_sge,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            recv_fault_backup: false,
            srq: None,
            qp_context: 0,
        }
    }
}

/// The global route of an address vector (`struct ibv_global_route`): where a QP's peer is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// The peer's GID: an IPv4-mapped GID (`::ffff:a.b.c.d`, [`crate::gid_from_ipv4`]) names
    /// a peer across the wire; one of this port's own GIDs means loopback.
    pub dgid: crate::Gid,
    /// Index of the source GID in the port's table (1: the IPv4 address, as rxe's).
    pub sgid_index: u8,
    /// IPv4 TTL (0: 64).
    pub hop_limit: u8,
    /// IPv4 TOS.
    pub traffic_class: u8,
    /// Flow label (20 bits; unused on IPv4).
    pub flow_label: u32,
}

/// What [`Qp::connect`] sets besides the peer's QP number.
#[derive(Clone, Copy, Debug)]
pub struct ConnectAttr {
    /// `IBV_ACCESS_REMOTE_*`: what the peer may do through this QP.
    pub access: u32,
    /// RNR NAK timer the peer waits when this QP has no receive WQE (IB encoding 0..31).
    pub min_rnr_timer: u32,
    /// Retries when the peer has no receive WQE, 0..7 (7: forever).
    pub rnr_retry: u32,
    /// Transport retries, 0..7.
    pub retry_cnt: u32,
    /// Local ACK timeout (IB encoding).
    pub timeout: u32,
    /// Outstanding RDMA READ/atomics this QP may have at the peer (`max_rd_atomic`).
    pub max_rd_atomic: u32,
    /// Incoming RDMA READ/atomics this QP holds resources for (`max_dest_rd_atomic`);
    /// `None`: the same as `max_rd_atomic`.
    pub max_dest_rd_atomic: Option<u32>,
    /// `IBV_MTU_*`; 0: the port's active MTU.
    pub path_mtu: u32,
    /// The address vector's global route (`is_global`); `None`: the peer is on this device,
    /// addressed by the port's LID.
    pub grh: Option<GlobalRoute>,
    /// The first PSN this QP sends (24 bits).
    pub sq_psn: u32,
    /// The first PSN this QP expects: the peer's `sq_psn`.
    pub rq_psn: u32,
}

impl Default for ConnectAttr {
    fn default() -> Self {
        Self {
            access: crate::ACCESS_REMOTE_WRITE
                | crate::ACCESS_REMOTE_READ
                | crate::ACCESS_REMOTE_ATOMIC,
            min_rnr_timer: 1,
            rnr_retry: 7,
            retry_cnt: 7,
            timeout: 14,
            max_rd_atomic: 1,
            max_dest_rd_atomic: None,
            path_mtu: 0,
            grh: None,
            sq_psn: 0,
            rq_psn: 0,
        }
    }
}

/// A work queue mapped from the driver: where the next WQE goes.
struct WorkQueue {
    /// WQEs posted: the free-running tail (the doorbell carries its low 16 bits).
    tail: u32,
}

/// A queue pair of the RDMA core (`ibv_qp`), as the provider posts to it. The core destroys
/// it: dropping this only unmaps the queues.
pub struct Qp {
    ctx: Arc<Ctx>,
    _send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
    /// Kept alive while the QP takes receives from it.
    srq: Option<Arc<SrqInner>>,
    qpn: u32,
    cap: QpCap,
    sq_sig_all: bool,
    sq_entries: u32,
    rq_entries: u32,
    queues: Mapping,
    rq_offset: usize,
    record_offset: usize,
    sq: Mutex<WorkQueue>,
    rq: Mutex<WorkQueue>,
}

impl Qp {
    /// An RC QP the RDMA core created for a user context of [`crate::Context::from_core`],
    /// with number `qpn` and the capabilities `cap` it granted; `layout` is the driver's
    /// answer. `attr`'s CQs and SRQ are the ones it was created with. The core destroys it:
    /// dropping this only unmaps the queues.
    pub fn from_core(
        attr: &QpInitAttr<'_>,
        qpn: u32,
        cap: QpCap,
        layout: &uapi::IbCreateQpResp,
    ) -> io::Result<Self> {
        let ctx = &attr.send_cq.inner.ctx;
        if !Arc::ptr_eq(ctx, &attr.recv_cq.inner.ctx)
            || attr.srq.is_some_and(|s| !Arc::ptr_eq(s.inner.ctx(), ctx))
        {
            return Err(errno(libc::EINVAL));
        }
        Self::map(&attr.send_cq.inner.ctx.clone(), attr, qpn, cap, layout)
    }

    /// Checks the driver's `layout` and maps the queues.
    fn map(
        ctx: &Arc<Ctx>,
        attr: &QpInitAttr<'_>,
        qpn: u32,
        cap: QpCap,
        layout: &uapi::IbCreateQpResp,
    ) -> io::Result<Self> {
        let l = layout;
        // The doorbell and the record count WQEs in 16 bits: a queue of 2^16 entries would
        // look empty when full.
        let sq_bytes = u64::from(l.sq_entries) * WQE_SIZE as u64;
        let rq_bytes = u64::from(l.rq_entries) * WQE_SIZE as u64;
        let consistent = if !l.sq_entries.is_power_of_two()
            || !(l.rq_entries.is_power_of_two() || attr.srq.is_some() && l.rq_entries == 0)
            || l.sq_entries > 1 << 15
            || l.rq_entries > 1 << 15
            || l.rq_offset < sq_bytes
            || !l.rq_offset.is_multiple_of(WQE_SIZE as u64)
            || l.record_offset < l.rq_offset + rq_bytes
            || !l.record_offset.is_multiple_of(4)
            || l.record_offset + 16 > l.mmap_len
            || cap.max_send_sge as usize > WQE_MAX_SGE
            || cap.max_recv_sge as usize > WQE_MAX_SGE
        {
            Err(format!("QP layout: {l:?}, {cap:?}"))
        } else {
            Ok(())
        };
        let queues = map_queue(ctx, consistent, l.mmap_offset, l.mmap_len, || {})?;
        Ok(Self {
            ctx: ctx.clone(),
            _send_cq: attr.send_cq.inner.clone(),
            _recv_cq: attr.recv_cq.inner.clone(),
            srq: attr.srq.map(|s| s.inner.clone()),
            qpn,
            cap,
            sq_sig_all: attr.sq_sig_all,
            sq_entries: l.sq_entries,
            rq_entries: l.rq_entries,
            queues,
            rq_offset: l.rq_offset as usize,
            record_offset: l.record_offset as usize,
            sq: Mutex::new(WorkQueue { tail: 0 }),
            rq: Mutex::new(WorkQueue { tail: 0 }),
        })
    }

    /// The QP number, which a peer connects to.
    pub fn qp_num(&self) -> u32 {
        self.qpn
    }

    /// The actual capabilities (at least those requested).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// Whether every send work request is signaled.
    pub fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    /// Entries of the send and receive queues.
    pub fn queue_entries(&self) -> (u32, u32) {
        (self.sq_entries, self.rq_entries)
    }

    /// The 32-bit word at `offset` of the QP record (0: send head, 4: receive head).
    fn record(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the record is 16 bytes at a 4-byte aligned offset inside the mapping
        // (checked at creation), alive as long as `self`.
        unsafe { record_word(&self.queues, self.record_offset + offset) }
    }

    /// Writes a WQE into slot `slot` of the queue at `queue_offset`.
    fn write_wqe(&self, queue_offset: usize, slot: u32, wqe: &Wqe) {
        // SAFETY: `slot` is below the queue's entries, so the 128-byte WQE lies inside the
        // queue inside the mapping (checked at creation); the device only reads a WQE after
        // the doorbell that follows.
        unsafe { write_wqe(&self.queues, queue_offset + slot as usize * WQE_SIZE, wqe) }
    }

    /// `ibv_post_send`: queues `wrs` in order and rings the doorbell once. Fails at the first
    /// work request with too many SGEs or unsupported flags (`EINVAL`) or that finds the send
    /// queue full (`ENOMEM`); those before it are posted.
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        self.post_send_iter(wrs.iter().map(|wr| Some(*wr)))
    }

    /// [`Qp::post_send`] of work requests made one at a time (from a C list, say), without
    /// collecting them first. A `None` is a work request the caller could not make: it fails
    /// with `EINVAL` like one with bad flags. Nothing is taken from `wrs` after a failure.
    pub fn post_send_iter<'b>(
        &self,
        wrs: impl IntoIterator<Item = Option<SendWr<'b>>>,
    ) -> Result<(), PostError> {
        let mut sq = self.sq.lock().unwrap_or_else(|e| e.into_inner());
        let valid = |wr: &SendWr<'_>| {
            wr.sg_list.len() <= self.cap.max_send_sge as usize
                && wr.send_flags & !SEND_FLAGS_SUPPORTED == 0
        };
        let (result, posted) = Poster {
            tail: &mut sq.tail,
            entries: self.sq_entries,
            head: self.record(0),
        }
        .post(wrs, valid, send_wqe, |slot, wqe| {
            self.write_wqe(0, slot, wqe)
        });
        if posted {
            self.ctx.ring(DB_SQ, self.qpn << 16 | (sq.tail & 0xffff));
        }
        result
    }

    /// `ibv_post_recv`: as [`Qp::post_send`], for the receive queue.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.post_recv_iter(wrs.iter().map(|wr| Some(*wr)))
    }

    /// [`Qp::post_recv`] of work requests made one at a time, as [`Qp::post_send_iter`].
    pub fn post_recv_iter<'b>(
        &self,
        wrs: impl IntoIterator<Item = Option<RecvWr<'b>>>,
    ) -> Result<(), PostError> {
        if self.srq.is_some() {
            // Its receives come from the SRQ (libibverbs: `EINVAL`).
            return Err(PostError::new(0, libc::EINVAL));
        }
        let mut rq = self.rq.lock().unwrap_or_else(|e| e.into_inner());
        let (result, posted) = Poster {
            tail: &mut rq.tail,
            entries: self.rq_entries,
            head: self.record(4),
        }
        .post_recv(wrs, self.cap.max_recv_sge, |slot, wqe| {
            self.write_wqe(self.rq_offset, slot, wqe)
        });
        if posted {
            self.ctx.ring(DB_RQ, self.qpn << 16 | (rq.tail & 0xffff));
        }
        result
    }
}

/// A send WQE as 16 little-endian words (docs/verbs.md, "Work queue entry").
fn send_wqe(wr: &SendWr<'_>) -> Wqe {
    let mut wqe = [0u64; WQE_SIZE / 8];
    // imm_data is stored as posted: its bytes in memory, whatever the host order.
    wqe[0] = u64::from(wr.opcode as u8)
        | u64::from(wr.send_flags as u8) << 8
        | (wr.sg_list.len() as u64) << 16
        | u64::from(u32::from_le(wr.imm_data)) << 32;
    wqe[1] = wr.wr_id;
    wqe[2] = wr.remote_addr;
    wqe[3] = u64::from(wr.rkey);
    wqe[4] = wr.compare_add;
    wqe[5] = wr.swap;
    if let Some(ud) = &wr.ud {
        // A UD WQE's address vector where an RC WQE has its RDMA and atomic fields.
        wqe[2] = u64::from(ud.remote_qpn) | u64::from(ud.remote_qkey) << 32;
        for (w, b) in wqe[3..8].iter_mut().zip(ud.av.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().unwrap_or_default());
        }
    }
    put_sges(&mut wqe, wr.sg_list);
    wqe
}

/// Sets the global route fields of an address vector (`ah_attr.is_global` and `grh`).
pub fn set_global_route(a: &mut QpAttr, g: &GlobalRoute) {
    a.is_global = 1;
    a.dgid = g.dgid;
    a.sgid_index = g.sgid_index.into();
    a.hop_limit = g.hop_limit.into();
    a.traffic_class = g.traffic_class.into();
    a.flow_label = g.flow_label;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::recv_wqe;
    use crate::Sge;
    use crate::{WrOpcode, SEND_SIGNALED};

    fn bytes(w: &[u64; WQE_SIZE / 8]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn ud_send_wqe_layout() {
        let sge = [Sge {
            addr: 0x1000,
            length: 8,
            lkey: 7,
        }];
        let mut av = [0u8; 40];
        for (i, b) in av.iter_mut().enumerate() {
            *b = 0x80 + i as u8;
        }
        let mut wr = SendWr::new(5, WrOpcode::Send, &sge);
        wr.ud = Some(crate::UdDest {
            remote_qpn: 0x12_3456,
            remote_qkey: 0x8000_0011,
            av,
        });
        let b = bytes(&send_wqe(&wr));
        assert_eq!(b[0x10..0x14], 0x12_3456u32.to_le_bytes());
        assert_eq!(b[0x14..0x18], 0x8000_0011u32.to_le_bytes());
        assert_eq!(b[0x18..0x40], av);
        assert_eq!(b[0x40..0x48], 0x1000u64.to_le_bytes());
    }

    #[test]
    fn send_wqe_layout() {
        let sges = [
            Sge {
                addr: 0x1122_3344_5566_7788,
                length: 0x99,
                lkey: 0xabcd_ef01,
            },
            Sge {
                addr: 2,
                length: 3,
                lkey: 4,
            },
        ];
        let mut wr = SendWr::new(0x0102_0304_0506_0708, WrOpcode::AtomicCmpAndSwp, &sges)
            .remote(0xdead_beef_0000_1000, 0x4242_4242)
            .imm(0x1234_5678)
            .flags(SEND_SIGNALED);
        wr.compare_add = 0x1111;
        wr.swap = 0x2222;
        let b = bytes(&send_wqe(&wr));
        assert_eq!(&b[0..4], &[5, 2, 2, 0]);
        // Network order, as posted.
        assert_eq!(&b[4..8], &[0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&b[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&b[0x10..0x18], &0xdead_beef_0000_1000u64.to_le_bytes());
        assert_eq!(&b[0x18..0x1c], &0x4242_4242u32.to_le_bytes());
        assert_eq!(&b[0x20..0x28], &0x1111u64.to_le_bytes());
        assert_eq!(&b[0x28..0x30], &0x2222u64.to_le_bytes());
        assert_eq!(&b[0x40..0x48], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[0x48..0x4c], &0x99u32.to_le_bytes());
        assert_eq!(&b[0x4c..0x50], &0xabcd_ef01u32.to_le_bytes());
        assert_eq!(&b[0x50..0x58], &2u64.to_le_bytes());
        assert!(b[0x60..].iter().all(|&x| x == 0));
    }

    #[test]
    fn recv_wqe_layout() {
        let sges = [Sge {
            addr: 0x1000,
            length: 64,
            lkey: 0x105,
        }];
        let b = bytes(&recv_wqe(&RecvWr {
            wr_id: 9,
            sg_list: &sges,
        }));
        assert_eq!(&b[0..8], &[0, 0, 1, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &9u64.to_le_bytes());
        assert_eq!(&b[0x40..0x48], &0x1000u64.to_le_bytes());
        assert_eq!(&b[0x48..0x50], &[64, 0, 0, 0, 5, 1, 0, 0]);
    }
}
