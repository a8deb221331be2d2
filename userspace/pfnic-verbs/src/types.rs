//! Verbs types with libibverbs' numbers, names and strings.

use core::fmt;
use std::io;

/// QP capabilities, as `ibv_qp_cap`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline data (0: not supported).
    pub max_inline_data: u32,
}

/// QP attributes, as the fields of `ibv_qp_attr` pfnic's QPs use (`ibv_modify_qp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttr {
    /// `IBV_QPS_*`.
    pub qp_state: u32,
    /// `IBV_QPS_*`: the state the caller believes the QP is in (with `CUR_STATE`).
    pub cur_qp_state: u32,
    /// `IBV_MTU_*`.
    pub path_mtu: u32,
    /// `IBV_ACCESS_REMOTE_*` bits: what peers may do through this QP.
    pub qp_access_flags: u32,
    /// Partition key index (0).
    pub pkey_index: u32,
    /// Port (1).
    pub port_num: u32,
    /// The connected QP's number.
    pub dest_qp_num: u32,
    /// Receive PSN (24 bits).
    pub rq_psn: u32,
    /// Send PSN (24 bits).
    pub sq_psn: u32,
    /// RNR NAK timer, IB encoding 0..31.
    pub min_rnr_timer: u32,
    /// Local ACK timeout, IB encoding 0..31.
    pub timeout: u32,
    /// Retries on timeout, 0..7.
    pub retry_cnt: u32,
    /// Retries on RNR NAK, 0..7 (7: forever).
    pub rnr_retry: u32,
    /// Outstanding RDMA READ/atomics as initiator.
    pub max_rd_atomic: u32,
    /// Outstanding RDMA READ/atomics as responder.
    pub max_dest_rd_atomic: u32,
    /// Address vector: destination LID.
    pub dlid: u32,
    /// Address vector: service level.
    pub sl: u32,
    /// Address vector: nonzero if `dgid` and the other global route fields are given
    /// (`ah_attr.is_global`). A RoCE address vector always has them.
    pub is_global: u32,
    /// Global route: index of the source GID in the port's table.
    pub sgid_index: u32,
    /// Global route: hop limit (IPv4 TTL; 0 is 64).
    pub hop_limit: u32,
    /// Global route: traffic class (IPv4 TOS).
    pub traffic_class: u32,
    /// Global route: flow label (20 bits; not used on IPv4).
    pub flow_label: u32,
    /// Global route: the destination GID, network order. `::ffff:a.b.c.d` names the IPv4
    /// address of the peer; one of the port's own GIDs means loopback.
    pub dgid: [u8; 16],
}

/// A scatter/gather entry, as `ibv_sge`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of an MR covering the range.
    pub lkey: u32,
}

/// `IBV_ACCESS_LOCAL_WRITE`.
pub const ACCESS_LOCAL_WRITE: u32 = pfnic_sys::uapi::PFNIC_ACCESS_LOCAL_WRITE;
/// `IBV_ACCESS_REMOTE_WRITE` (an MR also needs `LOCAL_WRITE`).
pub const ACCESS_REMOTE_WRITE: u32 = pfnic_sys::uapi::PFNIC_ACCESS_REMOTE_WRITE;
/// `IBV_ACCESS_REMOTE_READ`.
pub const ACCESS_REMOTE_READ: u32 = pfnic_sys::uapi::PFNIC_ACCESS_REMOTE_READ;
/// `IBV_ACCESS_REMOTE_ATOMIC` (an MR also needs `LOCAL_WRITE`).
pub const ACCESS_REMOTE_ATOMIC: u32 = pfnic_sys::uapi::PFNIC_ACCESS_REMOTE_ATOMIC;
/// `IBV_ACCESS_ON_DEMAND`.
pub const ACCESS_ON_DEMAND: u32 = pfnic_sys::uapi::PFNIC_ACCESS_ON_DEMAND;

/// `IBV_SEND_FENCE`.
pub const SEND_FENCE: u32 = 1;
/// `IBV_SEND_SIGNALED`.
pub const SEND_SIGNALED: u32 = 2;
/// `IBV_SEND_SOLICITED`.
pub const SEND_SOLICITED: u32 = 4;
/// The send flags the device accepts (`IBV_SEND_INLINE` is not supported).
pub const SEND_FLAGS_SUPPORTED: u32 = SEND_FENCE | SEND_SIGNALED | SEND_SOLICITED;

/// `IBV_WC_WITH_IMM` in [`Wc::wc_flags`].
pub const WC_WITH_IMM: u32 = 2;

/// `IBV_ADVISE_MR_ADVICE_*` of [`crate::Pd::advise_mr`].
pub const ADVISE_PREFETCH: u32 = pfnic_sys::uapi::PFNIC_ADVISE_PREFETCH;
/// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`.
pub const ADVISE_PREFETCH_WRITE: u32 = pfnic_sys::uapi::PFNIC_ADVISE_PREFETCH_WRITE;
/// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`.
pub const ADVISE_PREFETCH_NO_FAULT: u32 = pfnic_sys::uapi::PFNIC_ADVISE_PREFETCH_NO_FAULT;
/// `IBV_ADVISE_MR_FLAG_FLUSH`: return once the pages are present.
pub const ADVISE_FLAG_FLUSH: u32 = pfnic_sys::uapi::PFNIC_ADVISE_FLAG_FLUSH;

/// `IBV_LINK_LAYER_INFINIBAND`: a port without a wire.
pub const LINK_LAYER_INFINIBAND: u32 = pfnic_sys::uapi::PFNIC_LINK_LAYER_INFINIBAND;
/// `IBV_LINK_LAYER_ETHERNET`: a RoCEv2 port.
pub const LINK_LAYER_ETHERNET: u32 = pfnic_sys::uapi::PFNIC_LINK_LAYER_ETHERNET;

/// A GID, network order (`union ibv_gid`'s `raw`).
pub type Gid = [u8; 16];

/// The IPv4-mapped GID `::ffff:a.b.c.d` (what RoCEv2 and rxe use for an IPv4 address).
pub fn gid_from_ipv4(addr: std::net::Ipv4Addr) -> Gid {
    addr.to_ipv6_mapped().octets()
}

/// The IPv4 address an IPv4-mapped GID names.
pub fn gid_to_ipv4(gid: &Gid) -> Option<std::net::Ipv4Addr> {
    std::net::Ipv6Addr::from(*gid).to_ipv4_mapped()
}

/// Port 1 as `PFNIC_IOCTL_QUERY_PORT` describes it, with accessors for what `ibv_port_attr`
/// does not hold.
#[derive(Clone, Copy, Debug)]
pub struct PortAttr(pub pfnic_sys::QueryPort);

impl PortAttr {
    /// `IBV_LINK_LAYER_*`.
    pub fn link_layer(&self) -> u32 {
        self.0.link_layer
    }

    /// Whether the device has a wire (a RoCEv2 Ethernet port).
    pub fn has_wire(&self) -> bool {
        self.0.port_flags & pfnic_sys::uapi::PFNIC_PORT_WIRE != 0
    }

    /// Whether the wire's link is up.
    pub fn link_up(&self) -> bool {
        self.0.port_flags & pfnic_sys::uapi::PFNIC_PORT_LINK_UP != 0
    }

    /// Whether the device has the port registers (an IPv4 address and GID 1).
    pub fn has_addresses(&self) -> bool {
        self.0.port_flags & pfnic_sys::uapi::PFNIC_PORT_ADDRESSES != 0
    }

    /// The MAC address (zero without the port registers).
    pub fn mac(&self) -> [u8; 6] {
        self.0.mac
    }

    /// The port's IPv4 address, if one is set.
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        (self.0.ipv4 != 0).then(|| std::net::Ipv4Addr::from(self.0.ipv4))
    }

    /// The valid GIDs (`gid_tbl_len` of them).
    pub fn gids(&self) -> &[Gid] {
        let n = (self.0.gid_tbl_len as usize).min(self.0.gids.len());
        &self.0.gids[..n]
    }

    /// The port counters with their names (docs/wire.md).
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, u32)> + '_ {
        pfnic_sys::uapi::PFNIC_PORT_COUNTER_NAMES
            .iter()
            .copied()
            .zip(self.0.counters.iter().copied())
    }
}

/// Work request opcodes (`enum ibv_wr_opcode`), as the WQE's opcode byte.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrOpcode {
    /// `IBV_WR_RDMA_WRITE`.
    RdmaWrite = 0,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = 1,
    /// `IBV_WR_SEND`.
    Send = 2,
    /// `IBV_WR_SEND_WITH_IMM`.
    SendWithImm = 3,
    /// `IBV_WR_RDMA_READ`.
    RdmaRead = 4,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp = 5,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd = 6,
}

impl WrOpcode {
    /// The opcode with libibverbs number `v`, if the device implements it.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            _ => return None,
        })
    }
}

/// A completion status (`enum ibv_wc_status`). A number rather than an enum: the value is what
/// the device wrote, whatever it is.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WcStatus(pub u32);

impl WcStatus {
    pub const SUCCESS: Self = Self(0);
    pub const LOC_LEN_ERR: Self = Self(1);
    pub const LOC_QP_OP_ERR: Self = Self(2);
    pub const LOC_EEC_OP_ERR: Self = Self(3);
    pub const LOC_PROT_ERR: Self = Self(4);
    pub const WR_FLUSH_ERR: Self = Self(5);
    pub const MW_BIND_ERR: Self = Self(6);
    pub const BAD_RESP_ERR: Self = Self(7);
    pub const LOC_ACCESS_ERR: Self = Self(8);
    pub const REM_INV_REQ_ERR: Self = Self(9);
    pub const REM_ACCESS_ERR: Self = Self(10);
    pub const REM_OP_ERR: Self = Self(11);
    pub const RETRY_EXC_ERR: Self = Self(12);
    pub const RNR_RETRY_EXC_ERR: Self = Self(13);
    pub const LOC_RDD_VIOL_ERR: Self = Self(14);
    pub const REM_INV_RD_REQ_ERR: Self = Self(15);
    pub const REM_ABORT_ERR: Self = Self(16);
    pub const INV_EECN_ERR: Self = Self(17);
    pub const INV_EEC_STATE_ERR: Self = Self(18);
    pub const FATAL_ERR: Self = Self(19);
    pub const RESP_TIMEOUT_ERR: Self = Self(20);
    pub const GENERAL_ERR: Self = Self(21);
    pub const TM_ERR: Self = Self(22);
    pub const TM_RNDV_INCOMPLETE: Self = Self(23);

    /// `ibv_wc_status_str()`: libibverbs' description of the status.
    pub fn as_str(self) -> &'static str {
        const STR: [&str; 24] = [
            "success",
            "local length error",
            "local QP operation error",
            "local EE context operation error",
            "local protection error",
            "Work Request Flushed Error",
            "memory management operation error",
            "bad response error",
            "local access error",
            "remote invalid request error",
            "remote access error",
            "remote operation error",
            "transport retry counter exceeded",
            "RNR retry counter exceeded",
            "local RDD violation error",
            "remote invalid RD request",
            "aborted error",
            "invalid EE context number",
            "invalid EE context state",
            "fatal error",
            "response timeout error",
            "general error",
            "TM error",
            "TM software rendezvous",
        ];
        STR.get(self.0 as usize).copied().unwrap_or("unknown")
    }

    /// libibverbs' enumerator name (`IBV_WC_SUCCESS`, ...), for messages.
    pub fn name(self) -> &'static str {
        const NAME: [&str; 24] = [
            "IBV_WC_SUCCESS",
            "IBV_WC_LOC_LEN_ERR",
            "IBV_WC_LOC_QP_OP_ERR",
            "IBV_WC_LOC_EEC_OP_ERR",
            "IBV_WC_LOC_PROT_ERR",
            "IBV_WC_WR_FLUSH_ERR",
            "IBV_WC_MW_BIND_ERR",
            "IBV_WC_BAD_RESP_ERR",
            "IBV_WC_LOC_ACCESS_ERR",
            "IBV_WC_REM_INV_REQ_ERR",
            "IBV_WC_REM_ACCESS_ERR",
            "IBV_WC_REM_OP_ERR",
            "IBV_WC_RETRY_EXC_ERR",
            "IBV_WC_RNR_RETRY_EXC_ERR",
            "IBV_WC_LOC_RDD_VIOL_ERR",
            "IBV_WC_REM_INV_RD_REQ_ERR",
            "IBV_WC_REM_ABORT_ERR",
            "IBV_WC_INV_EECN_ERR",
            "IBV_WC_INV_EEC_STATE_ERR",
            "IBV_WC_FATAL_ERR",
            "IBV_WC_RESP_TIMEOUT_ERR",
            "IBV_WC_GENERAL_ERR",
            "IBV_WC_TM_ERR",
            "IBV_WC_TM_RNDV_INCOMPLETE",
        ];
        NAME.get(self.0 as usize).copied().unwrap_or("IBV_WC_?")
    }
}

impl fmt::Debug for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A completion's opcode (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WcOpcode(pub u32);

impl WcOpcode {
    pub const SEND: Self = Self(0);
    pub const RDMA_WRITE: Self = Self(1);
    pub const RDMA_READ: Self = Self(2);
    pub const COMP_SWAP: Self = Self(3);
    pub const FETCH_ADD: Self = Self(4);
    pub const RECV: Self = Self(128);
    pub const RECV_RDMA_WITH_IMM: Self = Self(129);

    /// The completion opcode a successful send work request of opcode `op` produces.
    pub fn of(op: WrOpcode) -> Self {
        match op {
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => Self::RDMA_WRITE,
            WrOpcode::Send | WrOpcode::SendWithImm => Self::SEND,
            WrOpcode::RdmaRead => Self::RDMA_READ,
            WrOpcode::AtomicCmpAndSwp => Self::COMP_SWAP,
            WrOpcode::AtomicFetchAndAdd => Self::FETCH_ADD,
        }
    }
}

impl fmt::Debug for WcOpcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0 => "IBV_WC_SEND",
            1 => "IBV_WC_RDMA_WRITE",
            2 => "IBV_WC_RDMA_READ",
            3 => "IBV_WC_COMP_SWAP",
            4 => "IBV_WC_FETCH_ADD",
            128 => "IBV_WC_RECV",
            129 => "IBV_WC_RECV_RDMA_WITH_IMM",
            _ => "IBV_WC_?",
        };
        write!(f, "{name} ({})", self.0)
    }
}

/// QP states (`enum ibv_qp_state`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// The state with libibverbs number `v`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Reset,
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            4 => Self::Sqd,
            5 => Self::Sqe,
            6 => Self::Err,
            _ => return None,
        })
    }
}

/// A work completion (`struct ibv_wc`, the fields the device fills).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Page requests the work request caused (the CQE's `vendor_err` field).
    pub vendor_err: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data, network order as posted, valid with [`WC_WITH_IMM`].
    pub imm_data: u32,
    /// The local QP.
    pub qp_num: u32,
    /// The sending QP (receives).
    pub src_qp: u32,
    /// `IBV_WC_*` flags ([`WC_WITH_IMM`]).
    pub wc_flags: u32,
    /// The device clock (ns) when the completion was written, on a CQ with timestamps
    /// ([`crate::Context::create_cq_timestamped`]); 0 on others.
    pub completion_ts: u64,
}

/// A UD work request's destination (device ABI 1.19): the QP, the Q_Key, and the address
/// vector of the address handle as the driver answered its creation (`IbCreateAhResp`): the
/// work queue entry's bytes 0x18..0x3f (docs/verbs.md, "Work queue entry").
#[derive(Clone, Copy, Debug)]
pub struct UdDest {
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub av: [u8; 40],
}

/// A send work request (`struct ibv_send_wr` without the list link: post a slice instead).
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    /// `SEND_*` flags.
    pub send_flags: u32,
    /// Local buffers (at most the QP's `max_send_sge`; atomics: one of 8 bytes).
    pub sg_list: &'a [Sge],
    /// Immediate data, network order (`*_WITH_IMM`).
    pub imm_data: u32,
    /// Remote address (RDMA, atomics).
    pub remote_addr: u64,
    /// Remote key (RDMA, atomics).
    pub rkey: u32,
    /// Compare value (compare-and-swap) or addend (fetch-and-add).
    pub compare_add: u64,
    /// Swap value (compare-and-swap).
    pub swap: u64,
    /// A UD QP's destination (`None` on an RC QP).
    pub ud: Option<UdDest>,
}

impl<'a> SendWr<'a> {
    /// A signaled work request of `opcode` over `sg_list`, the other fields zero.
    pub fn new(wr_id: u64, opcode: WrOpcode, sg_list: &'a [Sge]) -> Self {
        Self {
            wr_id,
            opcode,
            send_flags: SEND_SIGNALED,
            sg_list,
            imm_data: 0,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ud: None,
        }
    }

    /// Sets the remote address and key (RDMA, atomics).
    pub fn remote(mut self, remote_addr: u64, rkey: u32) -> Self {
        self.remote_addr = remote_addr;
        self.rkey = rkey;
        self
    }

    /// Sets the immediate data (given in host order, stored in network order).
    pub fn imm(mut self, imm_host_order: u32) -> Self {
        self.imm_data = imm_host_order.to_be();
        self
    }

    /// Sets the send flags.
    pub fn flags(mut self, send_flags: u32) -> Self {
        self.send_flags = send_flags;
        self
    }
}

/// A receive work request (`struct ibv_recv_wr` without the list link).
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    pub wr_id: u64,
    /// Buffers, at most the QP's `max_recv_sge`.
    pub sg_list: &'a [Sge],
}

/// Why a post failed: the index of the first work request not posted (`bad_wr`) and the errno
/// libibverbs returns (`ENOMEM`: queue full; `EINVAL`: too many SGEs, bad flags).
#[derive(Debug)]
pub struct PostError {
    /// Index of the first work request that was not posted; those before it were.
    pub bad_wr: usize,
    pub error: io::Error,
}

impl PostError {
    pub(crate) fn new(bad_wr: usize, errno: i32) -> Self {
        Self {
            bad_wr,
            error: io::Error::from_raw_os_error(errno),
        }
    }

    /// The errno, as `ibv_post_send`/`ibv_post_recv` return it.
    pub fn errno(&self) -> i32 {
        self.error.raw_os_error().unwrap_or(libc::EIO)
    }
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work request {} not posted: {}", self.bad_wr, self.error)
    }
}

impl std::error::Error for PostError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wc_status_strings_are_libibverbs() {
        assert_eq!(WcStatus::SUCCESS.as_str(), "success");
        assert_eq!(WcStatus::LOC_PROT_ERR.as_str(), "local protection error");
        assert_eq!(
            WcStatus::WR_FLUSH_ERR.as_str(),
            "Work Request Flushed Error"
        );
        assert_eq!(WcStatus::REM_ACCESS_ERR.as_str(), "remote access error");
        assert_eq!(
            WcStatus::RNR_RETRY_EXC_ERR.as_str(),
            "RNR retry counter exceeded"
        );
        assert_eq!(
            WcStatus::TM_RNDV_INCOMPLETE.as_str(),
            "TM software rendezvous"
        );
        assert_eq!(WcStatus(24).as_str(), "unknown");
        assert_eq!(WcStatus::REM_INV_REQ_ERR.name(), "IBV_WC_REM_INV_REQ_ERR");
    }

    #[test]
    fn ipv4_mapped_gids() {
        let a = std::net::Ipv4Addr::new(10, 1, 2, 3);
        let gid = gid_from_ipv4(a);
        assert_eq!(gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
        assert_eq!(gid_to_ipv4(&gid), Some(a));
        let mut link_local = [0u8; 16];
        link_local[0] = 0xfe;
        link_local[1] = 0x80;
        assert_eq!(gid_to_ipv4(&link_local), None);
    }
}

/// How a context's MRs reach its memory (`PFNIC_IOCTL_SET_MEM_MODE`, docs/uapi.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemMode {
    /// Through the IOMMU in the process's PASID (SVA): nothing is pinned, ODP MRs fault pages
    /// in with page requests. The default where the platform has SVA with page requests.
    Sva,
    /// Registration pins the pages (`RLIMIT_MEMLOCK`, `VmPin`) and fills the device's
    /// translation table; no ODP MRs. The default where neither SVA nor `Odp` is available.
    Pinned,
    /// The driver fills the device's translation table on demand (`hmm_range_fault`) and
    /// keeps it coherent (`mmu_interval_notifier`): nothing is pinned, no PRI needed; the
    /// implicit ODP MR on device ABI 1.10 or later. The default where SVA is not available.
    Odp,
}

impl MemMode {
    /// The uAPI's number for the mode.
    pub fn raw(self) -> u32 {
        match self {
            MemMode::Sva => pfnic_sys::uapi::PFNIC_MEM_MODE_SVA,
            MemMode::Pinned => pfnic_sys::uapi::PFNIC_MEM_MODE_PINNED,
            MemMode::Odp => pfnic_sys::uapi::PFNIC_MEM_MODE_ODP,
        }
    }

    /// The mode the uAPI number `raw` names.
    pub fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            pfnic_sys::uapi::PFNIC_MEM_MODE_SVA => Some(MemMode::Sva),
            pfnic_sys::uapi::PFNIC_MEM_MODE_PINNED => Some(MemMode::Pinned),
            pfnic_sys::uapi::PFNIC_MEM_MODE_ODP => Some(MemMode::Odp),
            _ => None,
        }
    }

    /// The mode's name, as `PFNIC_MEM_MODE` spells it: `sva`, `pinned`, `odp`.
    pub fn name(self) -> &'static str {
        match self {
            MemMode::Sva => "sva",
            MemMode::Pinned => "pinned",
            MemMode::Odp => "odp",
        }
    }

    /// Every mode, in the order the benchmarks show them.
    pub const ALL: [MemMode; 3] = [MemMode::Pinned, MemMode::Odp, MemMode::Sva];

    /// The mode named `name` (`sva`, `pinned`, `odp`); `EINVAL` for another name.
    pub fn parse(name: &str) -> std::io::Result<Self> {
        match name {
            "sva" => Ok(MemMode::Sva),
            "pinned" => Ok(MemMode::Pinned),
            "odp" => Ok(MemMode::Odp),
            _ => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
}
