// SPDX-License-Identifier: GPL-2.0

//! RDMA verbs (docs/verbs.md): the device-wide part.
//!
//! - [`cmd`]: the admin command mailbox;
//! - [`eq`]: the event queue and its interrupt handling;
//! - [`alloc`]: QPN, CQN and memory key index allocation;
//! - [`dm`]: device memory (BAR1), handed out to user contexts, and MRs over it;
//! - [`file`]: the objects of one user context of the RDMA core (PDs, MRs, CQs, SRQs, QPs), with
//!   [`mr`], [`cq`], [`srq`] and [`qp`] for each kind of object;
//! - [`port`]: port 1, its addresses and GIDs (docs/wire.md);
//! - [`quarantine`]: objects the device refused to destroy, kept until it is reset;
//! - [`table`]: translation tables the driver fills; [`pinned`] and [`odp`]: the MRs that use
//!   them in the `pinned` and `odp` memory modes.

pub(crate) mod alloc;
pub(crate) mod args;
pub(crate) mod cmd;
pub(crate) mod cq;
pub(crate) mod dm;
pub(crate) mod eq;
pub(crate) mod file;
pub(crate) mod mr;
pub(crate) mod odp;
pub(crate) mod pinned;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod quarantine;
pub(crate) mod srq;
pub(crate) mod table;

use crate::{
    nic::{Bar0, Nic},
    regs, uapi,
};
use alloc::IndexAllocator;
use eq::EventQueue;
use kernel::{
    bitmap::BitmapVec,
    device::{Bound, Device},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::Io,
    new_mutex,
    prelude::*,
    sync::Arc,
    sync::{atomic::Relaxed, Mutex},
    xarray::{AllocKind, XArray},
};

/// PDs one file may have (the device has no PD table: a PD is a number the driver tags MRs
/// and QPs with).
pub(crate) const MAX_PDS: u32 = 4096;
/// Outstanding RDMA READ/atomic requests per QP reported to users (the device executes work
/// requests one at a time, so any number is honoured).
pub(crate) const MAX_QP_RD_ATOM: u32 = 16;
/// The port's LID (it is alone on its subnet).
pub(crate) const PORT_LID: u16 = 1;
/// Largest message: 2 GiB, as InfiniBand.
pub(crate) const MAX_MSG_SZ: u32 = 1 << 31;
/// The page size the device translates.
const PAGE_SIZE_CAP: u64 = 1 << 12;

/// One user context may hold at most this fraction (1/N) of the device memory, so that one
/// process cannot take it from the others; beyond it, `EDQUOT`. (A process's share of the
/// device's tables is its rdma cgroup's, which the RDMA core charges.)
pub(crate) const FILE_SHARE: u32 = 4;

/// The device's table sizes (read-only registers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_qps: u32,
    pub(crate) max_cqs: u32,
    pub(crate) max_mrs: u32,
    pub(crate) max_wqes: u32,
    pub(crate) max_cqes: u32,
    pub(crate) max_sge: u32,
    /// 0 on a device without SRQs (before ABI 1.11).
    pub(crate) max_srqs: u32,
}

impl Limits {
    /// What one user context may hold of `entries` pages of device memory ([`FILE_SHARE`]).
    pub(crate) fn file_share(entries: u32) -> usize {
        (entries / FILE_SHARE).max(1) as usize
    }

    /// Reads the limits of a device of ABI `device_abi`; `EIO` if the device reports nonsense
    /// (the allocators size tables by them).
    pub(crate) fn read(bar: &Bar0<'_>, device_abi: u32) -> Result<Self> {
        let caps = bar.read(regs::CAPS);
        let srq = caps.srq() && device_abi & 0xffff >= regs::ABI_MINOR_SRQ;
        let limits = Self {
            max_qps: bar.read(regs::MAX_QPS).value().get(),
            max_cqs: bar.read(regs::MAX_CQS).value().get(),
            max_mrs: bar.read(regs::MAX_MRS).value().get(),
            max_wqes: bar.read(regs::MAX_WQES).value().get(),
            max_cqes: bar.read(regs::MAX_CQES).value().get(),
            max_sge: bar.read(regs::MAX_SGE).value().get(),
            max_srqs: if srq {
                bar.read(regs::MAX_SRQS).value().get()
            } else {
                0
            },
        };
        let sane = (3..=1 << 16).contains(&limits.max_qps)
            && (1..=1 << 16).contains(&limits.max_cqs)
            && (1..=1 << 24).contains(&limits.max_mrs)
            && limits.max_wqes.is_power_of_two()
            && limits.max_wqes <= 1 << 15
            && limits.max_cqes.is_power_of_two()
            && limits.max_cqes <= 1 << 20
            && (1..=4).contains(&limits.max_sge)
            && limits.max_srqs <= 1 << 16;
        if sane {
            Ok(limits)
        } else {
            Err(EIO)
        }
    }
}

/// Device-wide indices in use.
pub(crate) struct Ids {
    pub(crate) qpns: IndexAllocator,
    pub(crate) cqns: IndexAllocator,
    pub(crate) mrs: IndexAllocator,
    /// Empty on a device without SRQs.
    pub(crate) srqns: IndexAllocator,
    /// Bit `i`: page `i` of device memory belongs to a file (empty without device memory).
    pub(crate) dm_pages: BitmapVec,
    /// Bit `n`: special QP `n` (0 the SMI's, 1 the GSI's) exists.
    pub(crate) special_qps: u8,
}

impl Ids {
    /// Takes QPN `qpn`, a special QP's (0 or 1): `EBUSY` if it exists.
    pub(crate) fn take_special_qpn(&mut self, qpn: u32) -> Result<u32> {
        let bit = match qpn {
            0 | 1 => 1u8 << qpn,
            _ => return Err(EINVAL),
        };
        if self.special_qps & bit != 0 {
            return Err(EBUSY);
        }
        self.special_qps |= bit;
        Ok(qpn)
    }

    /// Lets go of QPN `qpn`, a special QP's or an allocated one.
    pub(crate) fn free_qpn(&mut self, qpn: u32) {
        match qpn {
            0 | 1 => self.special_qps &= !(1u8 << qpn),
            _ => self.qpns.free(qpn),
        }
    }
}

/// The verbs engine of one device.
#[pin_data]
pub(crate) struct Verbs {
    pub(crate) limits: Limits,
    /// Serializes admin commands.
    #[pin]
    pub(crate) cmd_lock: Mutex<cmd::CmdState>,
    #[pin]
    pub(crate) ids: Mutex<Ids>,
    #[pin]
    pub(crate) eq: EventQueue,
    /// Where a wire QP parks payloads whose page is not present (docs/wire.md, "Receive
    /// faults"); on a device with a wire only. The driver never reads it; freed at unbind.
    pub(crate) backup: Option<Devres<Coherent<[u8]>>>,
    /// The DMA address of `backup`, to give it to the device after a reset.
    backup_base: DmaAddress,
    /// Where `MTT_WRITE` reads translation table entries from (used under `cmd_lock`).
    pub(crate) table_stage: table::TableStage,
    /// The MRs of the `odp` mode, by index in the device's key table: where page-fault events
    /// go.
    #[pin]
    pub(crate) odp_mrs: XArray<Arc<odp::OdpMr>>,
    pub(crate) odp_stats: odp::OdpStats,
    /// Device memory, on a device that has it.
    pub(crate) dm: Option<dm::DeviceMemory>,
    /// Objects the device refused to destroy ([`quarantine`]); freed with the device's verbs,
    /// after its reset at unbind.
    #[pin]
    pub(crate) quarantined: Mutex<KVec<quarantine::Quarantined>>,
}

/// Bytes of the backup buffer: 256 slots of one packet (4 KiB) each.
pub(crate) const BACKUP_BYTES: usize = 1 << 20;

impl Verbs {
    /// Sets up the verbs part of a device that has it (`CAPS.VERBS`).
    pub(crate) fn new(
        dev: &Device<Bound>,
        limits: Limits,
        num_contexts: u32,
        wire: bool,
        dm: Option<dm::DeviceMemory>,
    ) -> Result<impl PinInit<Self, Error> + use<>> {
        let ids = Ids {
            // QPNs 0 and 1 are the special QPs' (docs/verbs.md), taken by name.
            qpns: IndexAllocator::new(2, limits.max_qps)?,
            cqns: IndexAllocator::new(0, limits.max_cqs)?,
            mrs: IndexAllocator::new(0, limits.max_mrs)?,
            srqns: IndexAllocator::new(0, limits.max_srqs)?,
            dm_pages: BitmapVec::new(dm.as_ref().map_or(0, |d| d.pages() as usize), GFP_KERNEL)?,
            special_qps: 0,
        };
        let eq_init = EventQueue::new(dev, &limits, num_contexts)?;
        let (backup, backup_base) = if wire {
            let mem = Coherent::zeroed_slice(dev, BACKUP_BYTES, GFP_KERNEL)?;
            let base = mem.dma_address();
            (Some(Devres::new(dev, mem)?), base)
        } else {
            (None, 0)
        };
        let table_stage = table::TableStage::new(dev)?;
        Ok(try_pin_init!(Self {
            limits,
            cmd_lock <- new_mutex!(cmd::CmdState::default()),
            ids <- new_mutex!(ids),
            eq <- eq_init,
            backup,
            backup_base,
            table_stage,
            odp_mrs <- XArray::new(AllocKind::Alloc),
            odp_stats: odp::OdpStats::new(),
            dm,
            quarantined <- new_mutex!(KVec::new()),
        }? Error))
    }

    /// Whether QP `qpn` exists, in any file.
    pub(crate) fn qp_exists(&self, qpn: u32) -> bool {
        let ids = self.ids.lock();
        ids.qpns.is_used(qpn) || (qpn < 2 && ids.special_qps & (1 << qpn) != 0)
    }
}

impl Nic {
    /// Gives the device the backup buffer (after the reset at probe, which removed it).
    pub(crate) fn program_backup(&self) -> Result {
        let Some(verbs) = self.verbs.as_deref().filter(|v| v.backup.is_some()) else {
            return Ok(());
        };
        let [lo, hi] = cmd::split(verbs.backup_base);
        self.command(&cmd::BackupSet {
            addr_lo: lo,
            addr_hi: hi,
            bytes: BACKUP_BYTES as u32,
        })?;
        Ok(())
    }

    /// The verbs engine, or `EOPNOTSUPP` when the device has none.
    pub(crate) fn verbs(&self) -> Result<&Verbs> {
        self.verbs.as_deref().ok_or(EOPNOTSUPP)
    }

    /// The node GUID: the vendor and device IDs, then the device's index and PCI requester ID,
    /// so two pfnics in one machine differ.
    pub(crate) fn node_guid(&self) -> u64 {
        let i = &self.info;
        (u64::from(i.vendor_id) << 48)
            | (u64::from(i.device_id) << 32)
            | (u64::from(i.index) << 16)
            | u64::from(i.pci_rid)
    }

    /// The answer to `PFNIC_IOCTL_QUERY_VERBS` and, per memory mode, `ibv_query_device_ex`.
    pub(crate) fn query_verbs(&self) -> Result<uapi::QueryVerbs> {
        let l = self.verbs()?.limits;
        self.with_bar(|_| ())?;
        Ok(uapi::QueryVerbs {
            node_guid: self.node_guid(),
            max_mr_size: u64::MAX,
            page_size_cap: PAGE_SIZE_CAP,
            odp_general_caps: uapi::PFNIC_ODP_SUPPORT | uapi::PFNIC_ODP_SUPPORT_IMPLICIT,
            odp_rc_caps: uapi::PFNIC_ODP_RC_CAPS,
            max_qp: l.max_qps,
            max_qp_wr: l.max_wqes,
            max_sge: l.max_sge,
            max_cq: l.max_cqs,
            max_cqe: l.max_cqes,
            max_mr: l.max_mrs,
            max_pd: MAX_PDS,
            max_qp_rd_atom: MAX_QP_RD_ATOM,
            atomic_cap: 1,
            max_srq: l.max_srqs,
            // An SRQ holds as many receives as a receive queue, with as many SGEs.
            max_srq_wr: if l.max_srqs != 0 { l.max_wqes } else { 0 },
            max_srq_sge: if l.max_srqs != 0 { l.max_sge } else { 0 },
            max_dm_size: self.verbs()?.dm.as_ref().map_or(0, |d| {
                Limits::file_share(d.pages()) as u32 * dm::DM_PAGE as u32
            }),
            // The device clock counts nanoseconds in 64 bits (docs/verbs.md).
            completion_timestamp_mask: if self.info.caps & uapi::PFNIC_CAP_TIMESTAMPS != 0 {
                u64::MAX
            } else {
                0
            },
            hca_core_clock: if self.info.caps & uapi::PFNIC_CAP_TIMESTAMPS != 0 {
                1_000_000
            } else {
                0
            },
        })
    }

    /// Writes the verbs object counts for debugfs.
    pub(crate) fn write_verbs_stats(
        &self,
        f: &mut kernel::fmt::Formatter<'_>,
    ) -> kernel::fmt::Result {
        let Ok(verbs) = self.verbs() else {
            return Ok(());
        };
        let (qps, cqs, mrs, srqs) = {
            let ids = verbs.ids.lock();
            (
                ids.qpns.in_use(),
                ids.cqns.in_use(),
                ids.mrs.in_use(),
                ids.srqns.in_use(),
            )
        };
        writeln!(f, "verbs_qps {qps}")?;
        writeln!(f, "verbs_cqs {cqs}")?;
        writeln!(f, "verbs_mrs {mrs}")?;
        writeln!(f, "verbs_srqs {srqs}")?;
        let c = &verbs.eq.counters;
        writeln!(f, "completion_events {}", c.completions.load(Relaxed))?;
        writeln!(f, "qp_fatal_events {}", c.qp_fatal.load(Relaxed))?;
        writeln!(f, "access_error_events {}", c.access_errors.load(Relaxed))?;
        writeln!(f, "cq_error_events {}", c.cq_errors.load(Relaxed))?;
        writeln!(f, "srq_limit_events {}", c.srq_limits.load(Relaxed))?;
        writeln!(f, "last_wqe_events {}", c.last_wqe.load(Relaxed))?;
        writeln!(f, "port_change_events {}", c.port_changes.load(Relaxed))?;
        writeln!(f, "async_events_dropped {}", c.async_dropped.load(Relaxed))?;
        writeln!(f, "completion_events_dropped {}", c.dropped.load(Relaxed))?;
        writeln!(f, "page_fault_events {}", c.page_faults.load(Relaxed))?;
        writeln!(f, "fault_queue_full {}", c.fault_queue_full.load(Relaxed))?;
        verbs.odp_stats.write(f)?;
        if let Ok(overflow) = self.with_bar(EventQueue::overflow) {
            writeln!(f, "eq_overflow {overflow}")?;
        }
        if let Ok(port) = self.port_state() {
            if port.addresses {
                let names = uapi::PFNIC_PORT_COUNTER_NAMES.iter();
                for (name, count) in names.zip(port.counters.iter()) {
                    writeln!(f, "port_{name} {count}")?;
                }
            }
        }
        Ok(())
    }
}
