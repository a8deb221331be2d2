// SPDX-License-Identifier: GPL-2.0

//! Hardware contexts: the table of contexts in use and the SVA bonds behind them, starting and
//! stopping them, and revoking them (and every mapping of the device) at unbind.

use super::{Bar0, Nic};
use crate::{regs, ring, uapi};
use kernel::{
    io::{poll::read_poll_timeout, Io},
    iommu::sva::SvaBond,
    num::Bounded,
    prelude::*,
    sync::atomic::Relaxed,
    time::Delta,
};

/// How long a context may take to stop once disabled (docs/registers.md).
const CONTEXT_STOP_TIMEOUT: Delta = Delta::from_millis(100);

/// The hardware contexts and the SVA bonds behind them.
///
/// The table, not the open files, owns the bonds: every PASID must be unbound before the PCI
/// device is (the IOMMU core requires it), while files can stay open much longer.
pub(super) struct ContextTable {
    /// Slot `i` holds hardware context `i` while it is in use.
    pub(super) slots: KVec<Option<Slot>>,
    /// Set when the device is unbound: no context starts any more.
    pub(super) revoked: bool,
}

impl ContextTable {
    /// The slot of context `index`, while it is in use.
    pub(super) fn slot_mut(&mut self, index: u32) -> Option<&mut Slot> {
        self.slots.get_mut(index as usize).and_then(Option::as_mut)
    }
}

/// A hardware context in use.
pub(super) struct Slot {
    /// The address space binding, unbound when the slot is emptied; `None` for a context
    /// without a PASID, which reaches memory only through translation tables.
    pub(super) bond: Option<SvaBond>,
    /// Position of the next descriptor to post in the context's ring (free-running).
    pub(super) tail: u32,
    /// Oldest posted descriptor not yet known to be done and released; `tail - head`
    /// descriptors occupy the ring.
    pub(super) head: u32,
    /// Ring slots whose poster still waits to read the descriptor back: the slot is not reused
    /// until it is released, even once done.
    pub(super) claimed: [bool; ring::RING_SIZE as usize],
    /// The device keeps objects of this context it refused to destroy (`verbs::quarantine`):
    /// the slot, with its PASID, stays taken after the context stops, until a reset.
    pub(super) kept: bool,
}

/// Disables hardware context `index`; returns whether the device reports it stopped.
fn disable_context(bar: &Bar0<'_>, index: u32) -> bool {
    bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index));
    bar.write_reg(regs::CTX_CTRL::zeroed());
    !bar.read(regs::CTX_STATUS).active()
}

impl Nic {
    /// Whether this is the first SVA bind on this device since probe.
    pub(crate) fn first_sva_bind(&self) -> bool {
        !self.sva_announced.xchg(true, Relaxed)
    }

    /// Whether this is the first context without a PASID on this device since probe.
    pub(crate) fn first_context_without_pasid(&self) -> bool {
        !self.no_pasid_announced.xchg(true, Relaxed)
    }

    /// Takes a free hardware context and starts it in the address space of `bond`, or without
    /// a PASID when `bond` is `None` (it then reaches memory only through translation
    /// tables); returns the context's index. The table keeps the bond until the context stops.
    ///
    /// Fails with `EOPNOTSUPP` when the device refuses the context: the IOMMU did not enable
    /// ATS, PASID and PRI for it, or (without a bond) the device has no translation tables.
    pub(crate) fn start_context(&self, bond: Option<SvaBond>) -> Result<u32> {
        // The IOMMU never hands out PASIDs wider than the device advertised.
        let pasid = match &bond {
            Some(bond) => Some(Bounded::<u32, 20>::try_new(bond.pasid()).ok_or(EINVAL)?),
            None if self.info.caps & uapi::PFNIC_CAP_TABLES == 0 => return Err(EOPNOTSUPP),
            None => None,
        };
        let mut table = self.contexts.lock();
        if table.revoked {
            return Err(ENODEV);
        }
        let index = table.slots.iter().position(Option::is_none).ok_or(EBUSY)?;
        let index_u32 = u32::try_from(index)?;
        let active = self.with_bar(|bar| {
            bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index_u32));
            let ctrl = regs::CTX_CTRL::zeroed().with_enable(true);
            match pasid {
                Some(pasid) => {
                    bar.write_reg(regs::CTX_PASID::zeroed().with_pasid(pasid));
                    bar.write_reg(ctrl);
                }
                None => bar.write_reg(ctrl.with_no_pasid(true)),
            }
            bar.read(regs::CTX_STATUS).active()
        })?;
        if !active {
            match pasid {
                Some(pasid) => dev_info!(
                    self.dev,
                    "pfnic{}: device refused context {} with PASID {}: the IOMMU did not \
                     enable ATS, PASID and PRI for it (no page request support?)\n",
                    self.info.index,
                    index,
                    pasid.get()
                ),
                None => dev_warn!(
                    self.dev,
                    "pfnic{}: device refused context {} without a PASID\n",
                    self.info.index,
                    index
                ),
            }
            return Err(EOPNOTSUPP);
        }
        if let Some(verbs) = &self.verbs {
            // An alert of the context's previous owner, reported at its close, is stale.
            verbs.eq.take_alert(index_u32);
        }
        table.slots[index] = Some(Slot {
            bond,
            tail: 0,
            head: 0,
            claimed: [false; ring::RING_SIZE as usize],
            kept: false,
        });
        Ok(index_u32)
    }

    /// Stops hardware context `index` without freeing it: its owner's address space is going
    /// away, but the file (and with it the slot and the PASID) lives on until it is closed.
    pub(crate) fn quiesce_context(&self, index: u32) {
        let table = self.contexts.lock();
        if table.slots.get(index as usize).is_some_and(Option::is_some) {
            // Nothing to do if the device is gone: its reset stopped every context.
            let _ = self.with_bar(|bar| disable_context(bar, index));
        }
    }

    /// Keeps context `index` out of use once it stops, until the device is reset: the device
    /// holds objects of it that it refused to destroy, which name the context (and so its
    /// PASID and doorbell page) and which a later owner of the slot must not reach.
    pub(crate) fn keep_context(&self, index: u32) {
        if let Some(slot) = self.contexts.lock().slot_mut(index) {
            slot.kept = true;
        }
    }

    /// Stops hardware context `index` and frees it. Once this returns the device no longer
    /// uses the context's PASID. A device already unbound was reset, which stopped it.
    ///
    /// A context the device does not stop within [`CONTEXT_STOP_TIMEOUT`] may still use its
    /// PASID: the slot keeps the PASID bound (so the IOMMU never hands it to another address
    /// space while the device can use it) and stays taken until the device is reset at unbind.
    pub(crate) fn stop_context(&self, index: u32) {
        let mut table = self.contexts.lock();
        let Some(entry) = table.slots.get_mut(index as usize) else {
            return;
        };
        let Some(slot) = entry.take() else {
            return; // revoked at unbind
        };
        // Polled outside the BAR's access guard, which must not sleep. The table lock keeps
        // CTX_SELECT on this context meanwhile.
        let stopped = self
            .with_bar(|bar| disable_context(bar, index))
            .map(|stopped| {
                stopped
                    || read_poll_timeout(
                        || self.with_bar(|bar| bar.read(regs::CTX_STATUS).active()),
                        |active: &bool| !*active,
                        Delta::from_millis(1),
                        CONTEXT_STOP_TIMEOUT,
                    )
                    .is_ok()
            });
        if stopped == Ok(false) {
            self.counters.contexts_stuck.add(1, Relaxed);
            dev_err!(
                self.dev,
                "pfnic{}: context {} did not stop within {} ms: its PASID stays bound and the \
                 context out of use until the device is reset\n",
                self.info.index,
                index,
                CONTEXT_STOP_TIMEOUT.as_millis()
            );
            *entry = Some(slot);
            return;
        }
        if slot.kept {
            dev_warn!(
                self.dev,
                "pfnic{}: context {} stays out of use until the device is reset: the device \
                 keeps objects of it\n",
                self.info.index,
                index
            );
            *entry = Some(slot);
            return;
        }
        drop(table);
        // Only now that the device has stopped using it may the PASID go.
        drop(slot);
    }

    /// Unbinds every context's PASID. Called at unbind, after the device was reset (which
    /// stopped every context) and before the driver core detaches the device's IOMMU domain.
    /// Open files keep their `Context`, which finds its slot empty.
    pub(crate) fn revoke_contexts(&self) {
        // No mapping is made from now on. Those made before were user contexts' of the RDMA
        // core, which removed them when it disassociated the contexts, before this: no process
        // keeps a doorbell page that, after a rebind, would ring another process's queues.
        *self.mappings_revoked.lock() = true;
        let mut table = self.contexts.lock();
        table.revoked = true;
        let mut bonds = KVec::new();
        for slot in table.slots.iter_mut() {
            // On allocation failure the bond drops here, which unbinds it just the same.
            if let Some(bond) = slot.take().and_then(|slot| slot.bond) {
                let _ = bonds.push(bond, GFP_KERNEL);
            }
        }
        drop(table);
        drop(bonds);
        // Wake every waiter at once: they find the table revoked and fail with ENODEV.
        self.ring_progressed();
    }

    /// Runs `map`, which maps something of the device into a process, unless the device is
    /// unbound (`ENODEV`); unbinding waits for it, then removes what it mapped.
    pub(crate) fn map_into_process(&self, map: impl FnOnce() -> Result) -> Result {
        let revoked = self.mappings_revoked.lock();
        if *revoked {
            return Err(ENODEV);
        }
        map()
    }
}
