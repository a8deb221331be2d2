// SPDX-License-Identifier: GPL-2.0

//! The verbs engine's arguments: what the driver's uverbs operations ([`crate::ib_uverbs`])
//! fill from the RDMA core's verbs and the engine answers in. They were the arguments of
//! `/dev/pfnicN`'s verbs ioctls until uAPI 21; they are the driver's own now, not an ABI.
//! Numbers and flags are libibverbs' own (`IBV_*`, the `PFNIC_*` of [`crate::uapi`]).

use crate::uapi::{IbCreateCqResp, IbCreateQpResp, IbCreateSrqResp, PFNIC_ADVISE_MAX_SGE};

/// Argument of `ibv_reg_mr`: register `[addr, addr + length)` of the caller's address
/// space, as the context's memory mode does it (`verbs/mr.rs`): without `ON_DEMAND` the range
/// is made present (`sva`) or pinned (`pinned`, `odp`) at registration (`EFAULT` if it cannot
/// be); with it, pages fault in when the device first touches them. `addr == 0` with
/// `length == u64::MAX` and `ON_DEMAND` is the implicit MR (the whole address space).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RegMr {
    /// In: the PD handle.
    pub(crate) pd: u32,
    /// In: `PFNIC_ACCESS_*` bits.
    pub(crate) access: u32,
    /// In: start address.
    pub(crate) addr: u64,
    /// In: bytes, nonzero.
    pub(crate) length: u64,
    /// Out: the MR's handle in the context.
    pub(crate) mr: u32,
    /// Out: local key.
    pub(crate) lkey: u32,
    /// Out: remote key (equal to `lkey`).
    pub(crate) rkey: u32,
}

/// A scatter/gather entry, as `ibv_sge`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sge {
    /// Start address.
    pub(crate) addr: u64,
    /// Bytes.
    pub(crate) length: u32,
    /// Local key of an MR of the context covering the range.
    pub(crate) lkey: u32,
}

/// Argument of `ibv_advise_mr`: prefetch ranges of ODP MRs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AdviseMr {
    /// `PFNIC_ADVISE_*` advice.
    pub(crate) advice: u32,
    /// `PFNIC_ADVISE_FLAG_*`.
    pub(crate) flags: u32,
    /// Entries used in `sge`, 1..=8.
    pub(crate) num_sge: u32,
    /// The ranges.
    pub(crate) sge: [Sge; PFNIC_ADVISE_MAX_SGE],
}

/// Argument of `rdma statistic mr`: mlx5's ODP counters of one MR, since registration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QueryMr {
    /// In: the MR's handle.
    pub(crate) mr: u32,
    /// Out: pages the device found missing: page requests sent for the MR's pages
    /// (`PFNIC_MEM_MODE_SVA`), or table entries its page-fault events named
    /// (`PFNIC_MEM_MODE_ODP`).
    pub(crate) page_faults: u64,
    /// Out: those made present (answered with success).
    pub(crate) page_faults_handled: u64,
    /// Out: IOMMU invalidations overlapping the MR (`SVA`), or table entries the driver
    /// invalidated because the process's mappings changed (`ODP`).
    pub(crate) page_invalidations: u64,
    /// Out: those applied by the device.
    pub(crate) page_invalidations_handled: u64,
    /// Out: pages made present by prefetch (`ODP`: also by the registration of an MR without
    /// `ON_DEMAND`).
    pub(crate) page_prefetch: u64,
    /// Out: remote uses of the MR's key the device refused (range, access or PD).
    pub(crate) remote_access_errors: u64,
    /// Out: page request groups (`SVA`) or page-fault events (`ODP`) those faults went out in.
    pub(crate) page_fault_groups: u64,
    /// Out: pages the registration pinned (`PFNIC_MEM_MODE_PINNED`; 0 otherwise).
    pub(crate) pages_pinned: u64,
    /// Out: pages the device's translation table maps now (`PINNED`: every page; `ODP`: those
    /// faulted in or prefetched and not invalidated since; `SVA`: 0, the IOMMU translates).
    pub(crate) pages_mapped: u64,
}

/// Argument of `ibv_create_cq`. Map `mmap_len` bytes at `mmap_offset` to get the
/// ring (`entries` CQEs of 32 bytes) followed, at `record_offset`, by the CQ record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CreateCq {
    /// In: minimum CQEs, 1..=max_cqe.
    pub(crate) cqe: u32,
    /// In: -1 (the RDMA core's completion channel gets the CQ's completion events).
    pub(crate) channel: i32,
    /// Out: the CQ number.
    pub(crate) cqn: u32,
    /// Out: CQEs in the ring (a power of 2).
    pub(crate) entries: u32,
    /// Out: `mmap()` offset of the ring.
    pub(crate) mmap_offset: u64,
    /// Out: bytes to map.
    pub(crate) mmap_len: u64,
    /// Out: offset of the CQ record in the mapping.
    pub(crate) record_offset: u64,
    /// In: `PFNIC_CQ_CREATE_*` flags.
    pub(crate) flags: u32,
    /// Out: bytes per CQE: 32, or 64 with `PFNIC_CQ_CREATE_TIMESTAMP`.
    pub(crate) cqe_size: u32,
}

/// QP capabilities, as `ibv_qp_cap`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpCap {
    /// Send work requests.
    pub(crate) max_send_wr: u32,
    /// Receive work requests.
    pub(crate) max_recv_wr: u32,
    /// SGEs per send work request.
    pub(crate) max_send_sge: u32,
    /// SGEs per receive work request.
    pub(crate) max_recv_sge: u32,
    /// Inline data (0: not supported).
    pub(crate) max_inline_data: u32,
}

/// Argument of `ibv_create_qp`. Map `mmap_len` bytes at `mmap_offset`: the send queue
/// at offset 0, the receive queue at `rq_offset`, the QP record at `record_offset`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CreateQp {
    /// In: PD handle.
    pub(crate) pd: u32,
    /// In: send CQN (a CQ of the context).
    pub(crate) send_cq: u32,
    /// In: receive CQN.
    pub(crate) recv_cq: u32,
    /// In: `PFNIC_QPT_RC`.
    pub(crate) qp_type: u32,
    /// In: nonzero to signal every send work request.
    pub(crate) sq_sig_all: u32,
    /// In: `PFNIC_QP_CREATE_*` flags.
    pub(crate) flags: u32,
    /// In: requested capabilities; out: the actual ones (at least those requested).
    pub(crate) cap: QpCap,
    /// Out: the QP number.
    pub(crate) qpn: u32,
    /// Out: send queue entries (a power of 2).
    pub(crate) sq_entries: u32,
    /// Out: receive queue entries (a power of 2).
    pub(crate) rq_entries: u32,
    /// Out: `mmap()` offset of the queues.
    pub(crate) mmap_offset: u64,
    /// Out: bytes to map.
    pub(crate) mmap_len: u64,
    /// Out: offset of the receive queue in the mapping.
    pub(crate) rq_offset: u64,
    /// Out: offset of the QP record in the mapping.
    pub(crate) record_offset: u64,
    /// In: with `PFNIC_QP_CREATE_SRQ`, the SRQ (of the context) the QP takes its receive work
    /// requests from; else zero. The QP then has no receive queue (`rq_entries` 0).
    pub(crate) srq: u32,
    /// In: the number of a special QP (0 the SMI's, 1 the GSI's), a UD QP of the RDMA core's
    /// kernel clients; `None` for any other QP.
    pub(crate) special_qpn: Option<u32>,
}

/// QP attributes, as the fields of `ibv_qp_attr` an RC QP uses.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpAttr {
    /// `IBV_QPS_*`.
    pub(crate) qp_state: u32,
    /// `IBV_QPS_*`: the state the caller believes the QP is in (with `CUR_STATE`).
    pub(crate) cur_qp_state: u32,
    /// `IBV_MTU_*`.
    pub(crate) path_mtu: u32,
    /// `IBV_ACCESS_REMOTE_*` bits: what peers may do through this QP.
    pub(crate) qp_access_flags: u32,
    /// Partition key index (0).
    pub(crate) pkey_index: u32,
    /// Port (1).
    pub(crate) port_num: u32,
    /// The connected QP's number.
    pub(crate) dest_qp_num: u32,
    /// Receive PSN (24 bits).
    pub(crate) rq_psn: u32,
    /// Send PSN (24 bits).
    pub(crate) sq_psn: u32,
    /// RNR NAK timer, IB encoding 0..31.
    pub(crate) min_rnr_timer: u32,
    /// Local ACK timeout, IB encoding 0..31.
    pub(crate) timeout: u32,
    /// Retries on timeout, 0..7.
    pub(crate) retry_cnt: u32,
    /// Retries on RNR NAK, 0..7 (7: forever).
    pub(crate) rnr_retry: u32,
    /// Outstanding RDMA READ/atomics as initiator.
    pub(crate) max_rd_atomic: u32,
    /// Outstanding RDMA READ/atomics as responder.
    pub(crate) max_dest_rd_atomic: u32,
    /// Address vector: destination LID.
    pub(crate) dlid: u32,
    /// Address vector: service level.
    pub(crate) sl: u32,
    /// Address vector: nonzero if `dgid` and the other global route fields are given
    /// (`ah_attr.is_global`). A RoCE address vector always has them.
    pub(crate) is_global: u32,
    /// Global route: index of the source GID in the port's table.
    pub(crate) sgid_index: u32,
    /// Global route: hop limit (IPv4 TTL; 0 is 64).
    pub(crate) hop_limit: u32,
    /// Global route: traffic class (IPv4 TOS).
    pub(crate) traffic_class: u32,
    /// Global route: flow label (20 bits; not used on IPv4).
    pub(crate) flow_label: u32,
    /// Global route: the destination GID, network order. `::ffff:a.b.c.d` names the IPv4
    /// address of the peer; one of the port's own GIDs means loopback.
    pub(crate) dgid: [u8; 16],
}

/// Argument of `ibv_modify_qp`: `ibv_modify_qp`, with libibverbs' rules on which
/// attributes each RC transition requires and allows (`EINVAL` otherwise).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ModifyQp {
    /// The QP number (a QP of the context).
    pub(crate) qpn: u32,
    /// `PFNIC_QP_*` bits: which attributes to change.
    pub(crate) attr_mask: u32,
    /// The attributes.
    pub(crate) attr: QpAttr,
}

/// Per-QP counters ([`QueryQp::stats`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpStats {
    /// Page requests the QP's work caused, either side.
    pub(crate) page_requests: u64,
    /// Waits for the receiver: no receive WQE, or a receive-side page fault.
    pub(crate) rnr_waits: u64,
    /// WQEs completed (send and receive).
    pub(crate) wqes: u64,
    /// Bytes moved.
    pub(crate) bytes: u64,
    /// Requests the QP refused because they came from a QP that is not its connected peer.
    pub(crate) refused: u64,
    /// Wire QPs (docs/wire.md): the PSN of the next new packet the QP sends.
    pub(crate) next_send_psn: u32,
    /// Wire QPs: the PSN the QP expects next as responder.
    pub(crate) expected_recv_psn: u32,
    /// Wire QPs: packets retransmitted.
    pub(crate) retransmits: u64,
    /// Wire QPs: RNR NAKs sent (no receive WQE, or a receive page not present).
    pub(crate) rnr_naks_sent: u64,
    /// Wire QPs: RNR NAKs received.
    pub(crate) rnr_naks_received: u64,
    /// Wire QPs: PSN sequence error NAKs sent.
    pub(crate) seq_naks_sent: u64,
    /// Wire QPs: duplicate requests received.
    pub(crate) duplicates: u64,
}

/// Argument of `ibv_query_qp`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QueryQp {
    /// In: the QP number (a QP of the context).
    pub(crate) qpn: u32,
    /// Out: nonzero if every send work request is signalled.
    pub(crate) sq_sig_all: u32,
    /// Out: the attributes (`qp_state` is the device's current state).
    pub(crate) attr: QpAttr,
    /// Out: the capabilities.
    pub(crate) cap: QpCap,
    /// Out: the QP's counters.
    pub(crate) stats: QpStats,
}

/// Argument of `ibv_alloc_dm`. Map `mmap_len` bytes at `mmap_offset` to reach the
/// memory from the CPU.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AllocDm {
    /// In: bytes, 1..=`max_dm_size`; the allocation is whole pages.
    pub(crate) length: u64,
    /// In: log2 of the alignment the caller needs (up to the device memory's size).
    pub(crate) log_align_req: u32,
    /// Out: the handle.
    pub(crate) dm: u32,
    /// Out: `mmap()` offset of the memory.
    pub(crate) mmap_offset: u64,
    /// Out: bytes to map (the length rounded up to pages).
    pub(crate) mmap_len: u64,
}

/// Argument of `ibv_reg_dm_mr`: an MR over `[dm_offset, dm_offset + length)` of a
/// device memory allocation, zero-based (`IBV_ACCESS_ZERO_BASED`: an address `x` with its key
/// is byte `dm_offset + x` of the allocation). Deregistered with `ibv_dereg_mr`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RegDmMr {
    /// In: PD handle.
    pub(crate) pd: u32,
    /// In: the device memory handle.
    pub(crate) dm: u32,
    /// In: `IBV_ACCESS_*` (not `ON_DEMAND`).
    pub(crate) access: u32,
    /// In: where the MR starts in the allocation, a multiple of `PFNIC_DM_ALIGN`.
    pub(crate) dm_offset: u64,
    /// In: bytes, at least 1.
    pub(crate) length: u64,
    /// Out: the MR handle.
    pub(crate) mr: u32,
    /// Out: the local key.
    pub(crate) lkey: u32,
    /// Out: the remote key.
    pub(crate) rkey: u32,
}

/// Argument of `ibv_create_srq`. Map `mmap_len` bytes at `mmap_offset`: the queue
/// (`entries` receive WQEs of 128 bytes) at offset 0, the SRQ record at `record_offset`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CreateSrq {
    /// In: PD handle.
    pub(crate) pd: u32,
    /// In: work requests, 1..=max_srq_wr; out: the actual number.
    pub(crate) max_wr: u32,
    /// In: SGEs per work request, ..=max_srq_sge; out: the actual number.
    pub(crate) max_sge: u32,
    /// In: the limit to arm (0: not armed), at most `max_wr`.
    pub(crate) srq_limit: u32,
    /// Out: the SRQ number.
    pub(crate) srqn: u32,
    /// Out: entries in the queue (a power of 2).
    pub(crate) entries: u32,
    /// Out: `mmap()` offset of the queue.
    pub(crate) mmap_offset: u64,
    /// Out: bytes to map.
    pub(crate) mmap_len: u64,
    /// Out: offset of the SRQ record in the mapping.
    pub(crate) record_offset: u64,
}

/// Argument of `ibv_modify_srq` (input only): `ibv_modify_srq`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ModifySrq {
    /// The SRQ number (an SRQ of the context).
    pub(crate) srqn: u32,
    /// `PFNIC_SRQ_*` bits.
    pub(crate) attr_mask: u32,
    /// With `PFNIC_SRQ_LIMIT`: 1..=the SRQ's work requests arms it, 0 disarms it.
    pub(crate) srq_limit: u32,
}

/// Argument of `ibv_query_srq`: `ibv_query_srq`, and the device's view.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QuerySrq {
    /// In: the SRQ number (an SRQ of the context).
    pub(crate) srqn: u32,
    /// Out: work requests.
    pub(crate) max_wr: u32,
    /// Out: SGEs per work request.
    pub(crate) max_sge: u32,
    /// Out: the armed limit; 0 when disarmed, or once it fired.
    pub(crate) srq_limit: u32,
}

impl CreateCq {
    /// The ring layout of the CQ this creation made, as the RDMA core's provider gets it.
    pub(crate) fn layout(&self) -> IbCreateCqResp {
        IbCreateCqResp {
            cqn: self.cqn,
            entries: self.entries,
            mmap_offset: self.mmap_offset,
            mmap_len: self.mmap_len,
            record_offset: self.record_offset,
            cqe_size: self.cqe_size,
            reserved: 0,
        }
    }
}

impl CreateQp {
    /// The queue layout of the QP this creation made, as the RDMA core's provider gets it.
    pub(crate) fn layout(&self) -> IbCreateQpResp {
        IbCreateQpResp {
            sq_entries: self.sq_entries,
            rq_entries: self.rq_entries,
            mmap_offset: self.mmap_offset,
            mmap_len: self.mmap_len,
            rq_offset: self.rq_offset,
            record_offset: self.record_offset,
        }
    }
}

impl CreateSrq {
    /// The queue layout of the SRQ this creation made, as the RDMA core's provider gets it.
    pub(crate) fn layout(&self) -> IbCreateSrqResp {
        IbCreateSrqResp {
            srqn: self.srqn,
            entries: self.entries,
            mmap_offset: self.mmap_offset,
            mmap_len: self.mmap_len,
            record_offset: self.record_offset,
        }
    }
}
