// SPDX-License-Identifier: GPL-2.0

//! The device's event queue (docs/verbs.md, "Event queue"): driver memory the device writes
//! 16-byte entries into, signalled on one MSI-X vector. The handler consumes entries by their
//! owner parity, routes `COMPLETION` events to the file that owns the CQ and advances
//! `EQ_HEAD`.

use super::events::CompletionEvents;
use crate::{nic::Bar0, regs, uapi};
use kernel::{
    bitmap::BitmapVec,
    device::{Bound, Device},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::{io_project, io_read, Io},
    new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        barrier::{dma_mb, Read},
        Arc, SpinLockIrq,
    },
};
use zerocopy_derive::{FromBytes as ZFromBytes, Immutable, IntoBytes as ZIntoBytes};

/// Entries in the event queue (a power of two).
pub(crate) const EQ_ENTRIES: u32 = 1024;
/// The MSI-X vector of the event queue: the device's own vector 0, which also serves the
/// self-test.
pub(crate) const EQ_VECTOR: u32 = 0;

/// Event types.
const EVENT_COMPLETION: u8 = 1;
const EVENT_QP_FATAL: u8 = 2;
const EVENT_CQ_ERROR: u8 = 3;
const EVENT_ACCESS_ERROR: u8 = 4;

/// One event queue entry, as the device writes it.
#[repr(C)]
#[derive(Clone, Copy, Default, ZFromBytes, ZIntoBytes, Immutable)]
pub(crate) struct Eqe {
    kind: u8,
    reserved0: u8,
    reserved1: u8,
    owner: u8,
    object: u32,
    reserved2: u64,
}

kernel::static_assert!(core::mem::size_of::<Eqe>() == 16);

// SAFETY: `Eqe` is `repr(C)` with integer fields only and no padding (the zerocopy `IntoBytes`
// derive above proves it), so every bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Eqe {}
// SAFETY: as above: no padding, so every byte of an `Eqe` is initialized.
unsafe impl kernel::transmute::AsBytes for Eqe {}

/// Where the completion events of one CQ go.
pub(crate) struct Route {
    /// Its channel; `None`: the CQ has none, and its events go nowhere.
    pub(crate) events: Option<Arc<CompletionEvents>>,
    pub(crate) cq_context: u64,
}

/// Events seen, for statistics.
pub(crate) struct EqCounters {
    pub(crate) completions: Atomic<u64>,
    pub(crate) qp_fatal: Atomic<u64>,
    pub(crate) cq_errors: Atomic<u64>,
    /// Completion events for a CQ no file owns (destroyed in the meantime), or dropped
    /// because the owner's queue was full.
    pub(crate) dropped: Atomic<u64>,
    /// `ACCESS_ERROR` events: a context's first refused remote access since its count was
    /// last read.
    pub(crate) access_errors: Atomic<u64>,
}

/// The event queue and the CQ routing table.
#[pin_data]
pub(crate) struct EventQueue {
    /// Freed at unbind (the device was reset by then and writes no more events).
    mem: Devres<Coherent<[Eqe]>>,
    /// The DMA address of `mem`, kept to program the device after a reset.
    base: DmaAddress,
    /// Entries consumed (free-running), as last written to `EQ_HEAD`.
    #[pin]
    consumed: SpinLockIrq<u32>,
    /// Slot `cqn` says which file gets the CQ's completion events.
    #[pin]
    routes: SpinLockIrq<KVec<Option<Route>>>,
    /// Bit `i`: context `i` had an `ACCESS_ERROR` event not yet reported. Set by the
    /// interrupt handler and cleared by the reporter with atomic bit operations only.
    alerts: BitmapVec,
    pub(crate) counters: EqCounters,
}

impl EventQueue {
    pub(crate) fn new(
        dev: &Device<Bound>,
        max_cqs: u32,
        num_contexts: u32,
    ) -> Result<impl PinInit<Self, Error> + use<>> {
        let mem = Coherent::zeroed_slice(dev, EQ_ENTRIES as usize, GFP_KERNEL)?;
        let base = mem.dma_address();
        let mem = Devres::new(dev, mem)?;
        let alerts = BitmapVec::new(num_contexts as usize, GFP_KERNEL)?;
        let mut routes = KVec::with_capacity(max_cqs as usize, GFP_KERNEL)?;
        for _ in 0..max_cqs {
            routes.push(None, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            mem,
            base,
            consumed <- new_spinlock_irq!(0),
            routes <- new_spinlock_irq!(routes),
            alerts,
            counters: EqCounters {
                completions: Atomic::new(0),
                qp_fatal: Atomic::new(0),
                cq_errors: Atomic::new(0),
                dropped: Atomic::new(0),
                access_errors: Atomic::new(0),
            },
        }? Error))
    }

    /// Points the device at the queue (after a reset, which disabled it).
    pub(crate) fn program(&self, bar: &Bar0<'_>) {
        let addr = self.base;
        *self.consumed.lock() = 0;
        bar.write_reg(regs::EQ_BASE_LO::zeroed().with_addr(addr as u32));
        bar.write_reg(regs::EQ_BASE_HI::zeroed().with_addr((addr >> 32) as u32));
        bar.write_reg(regs::EQ_VECTOR::zeroed().with_vector(EQ_VECTOR));
        // Writing the size enables the queue and resets both counters.
        bar.write_reg(regs::EQ_SIZE::zeroed().with_entries(EQ_ENTRIES));
    }

    /// Routes the completion events of `cqn` to `route` (`None`: nowhere). Returns the
    /// previous route, which the caller drops outside the interrupt-disabled section.
    pub(crate) fn set_route(&self, cqn: u32, route: Option<Route>) -> Option<Route> {
        let mut routes = self.routes.lock();
        match routes.get_mut(cqn as usize) {
            Some(slot) => core::mem::replace(slot, route),
            None => route,
        }
    }

    /// Consumes every entry the device has written; returns whether there was any. Called by
    /// the interrupt handler of [`EQ_VECTOR`].
    pub(crate) fn process(&self, bar: &Bar0<'_>) -> bool {
        // The handler and the BAR it was given outlive the queue only during unbind, after the
        // device's reset: nothing is left to consume.
        let Some(mem) = self.mem.try_access() else {
            return false;
        };
        let mem = &*mem;
        let mut consumed = self.consumed.lock();
        let start = *consumed;
        loop {
            let n = *consumed;
            let slot = (n % EQ_ENTRIES) as usize;
            let parity = (((n / EQ_ENTRIES) & 1) ^ 1) as u8;
            let owner: u8 = io_read!(mem, [panic: slot].owner);
            if owner & 1 != parity {
                break;
            }
            // The owner byte is written last: read the rest only after it.
            dma_mb(Read);
            let entry: Eqe = io_project!(mem, [panic: slot]).copy_read();
            *consumed = n.wrapping_add(1);
            self.dispatch(&entry);
        }
        if *consumed == start {
            return false;
        }
        bar.write_reg(regs::EQ_HEAD::zeroed().with_consumed(*consumed));
        true
    }

    fn dispatch(&self, entry: &Eqe) {
        match entry.kind {
            EVENT_COMPLETION => {
                self.counters.completions.add(1, Relaxed);
                let routes = self.routes.lock();
                let delivered = routes
                    .get(entry.object as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|route| match &route.events {
                        Some(events) => events.push(uapi::CqEvent {
                            cq_context: route.cq_context,
                            cqn: entry.object,
                            reserved: 0,
                        }),
                        // Not lost: the process asked for none.
                        None => true,
                    });
                if !delivered {
                    self.counters.dropped.add(1, Relaxed);
                }
            }
            EVENT_QP_FATAL => self.counters.qp_fatal.add(1, Relaxed),
            EVENT_CQ_ERROR => self.counters.cq_errors.add(1, Relaxed),
            EVENT_ACCESS_ERROR => {
                self.counters.access_errors.add(1, Relaxed);
                let ctx = entry.object as usize;
                if ctx < self.alerts.len() {
                    self.alerts.set_bit_atomic(ctx);
                }
            }
            _ => {}
        }
    }

    /// Whether some context had an `ACCESS_ERROR` event not yet reported.
    pub(crate) fn alerts_pending(&self) -> bool {
        self.alerts.len() != 0 && self.alerts.next_bit(0).is_some()
    }

    /// Clears context `index`'s pending `ACCESS_ERROR`; returns whether it was pending.
    pub(crate) fn take_alert(&self, index: u32) -> bool {
        let i = index as usize;
        if i >= self.alerts.len() || self.alerts.next_bit(i) != Some(i) {
            return false;
        }
        self.alerts.clear_bit_atomic(i);
        true
    }

    /// Events the device dropped because the queue was full.
    pub(crate) fn overflow(bar: &Bar0<'_>) -> u32 {
        bar.read(regs::EQ_OVERFLOW).count().get()
    }
}
