// SPDX-License-Identifier: GPL-2.0

//! The device's event queue (docs/verbs.md, "Event queue"): driver memory the device writes
//! 16-byte entries into, signalled on one MSI-X vector. The handler consumes entries by their
//! owner parity, routes `COMPLETION` events to the RDMA core's completion channel of the CQ,
//! the asynchronous events (`QP_FATAL`, `CQ_ERROR`, `SRQ_LIMIT`, `LAST_WQE_REACHED`) to the
//! core for the object they name, and `PORT_CHANGE` to the core's device (as
//! `IBV_EVENT_PORT_ACTIVE` or `IBV_EVENT_PORT_ERR`),
//! queues `PAGE_FAULT` events for the interrupt's thread (which may sleep to serve them,
//! [`super::odp`]) and advances `EQ_HEAD`.

use crate::{nic::Bar0, regs, uapi};
use kernel::rdma::{CqNotifier, ObjectEvents, PortEvents};
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
        SpinLockIrq,
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
const EVENT_PAGE_FAULT: u8 = 5;
const EVENT_SRQ_LIMIT: u8 = 6;
const EVENT_LAST_WQE_REACHED: u8 = 7;
const EVENT_PORT_CHANGE: u8 = 8;

/// `PORT_CHANGE` flags (byte 1): `PORT_STATUS` after the change; its link-up bit.
const PORT_LINK_UP: u8 = 1 << 1;
/// The device's one port, as events name it.
pub(crate) const PORT_NUM: u32 = 1;

/// `PAGE_FAULT` flag (byte 1): the work writes the pages.
const FAULT_WRITE: u8 = 1 << 0;

/// Page faults the handler queues for its thread. A full queue leaves the next event in the
/// event queue (the device holds the rest), so none is lost: the thread takes it when it has
/// room. The device has at most one outstanding event per waiting work.
const FAULT_QUEUE_ENTRIES: usize = 256;

/// One event queue entry, as the device writes it.
#[repr(C)]
#[derive(Clone, Copy, Default, ZFromBytes, ZIntoBytes, Immutable)]
pub(crate) struct Eqe {
    kind: u8,
    /// Type-specific flags (`PAGE_FAULT`: [`FAULT_WRITE`]; `PORT_CHANGE`: `PORT_STATUS`).
    flags: u8,
    reserved: u8,
    owner: u8,
    object: u32,
    /// Type-specific data (`PAGE_FAULT`: the first entry's bits 31:0 in bits 31:0 and its bits
    /// 47:32 in 63:48, the count in 47:32).
    data: u64,
}

kernel::static_assert!(core::mem::size_of::<Eqe>() == 16);

// SAFETY: `Eqe` is `repr(C)` with integer fields only and no padding (the zerocopy `IntoBytes`
// derive above proves it), so every bit pattern is valid.
unsafe impl kernel::transmute::FromBytes for Eqe {}
// SAFETY: as above: no padding, so every byte of an `Eqe` is initialized.
unsafe impl kernel::transmute::AsBytes for Eqe {}

/// Where the events of one CQ go.
pub(crate) struct Route {
    /// The RDMA core's completion channel of the CQ; `None`: the CQ has none, and its
    /// completion events go nowhere.
    pub(crate) events: Option<CqNotifier>,
}

/// Where the asynchronous events of one QP or SRQ go: the RDMA core's object (`None`:
/// nowhere, and they are counted as dropped).
pub(crate) struct OwnerRoute {
    pub(crate) core: Option<ObjectEvents>,
}

/// A `PAGE_FAULT` event: the device misses entries `first..first + count` of MR `mr`'s
/// translation table (docs/verbs.md, "Driver-managed faults").
#[derive(Clone, Copy, Default)]
pub(crate) struct PageFault {
    pub(crate) mr: u32,
    pub(crate) first: u64,
    pub(crate) count: u32,
    /// The work writes the pages.
    pub(crate) write: bool,
}

impl PageFault {
    fn decode(entry: &Eqe) -> Self {
        Self {
            mr: entry.object,
            // Bits 47:32 of the first entry (an implicit table's) are at 63:48.
            first: (entry.data & 0xffff_ffff) | (entry.data >> 48) << 32,
            count: ((entry.data >> 32) & 0xffff) as u32,
            write: entry.flags & FAULT_WRITE != 0,
        }
    }
}

/// The page faults queued for the interrupt thread: a ring of [`FAULT_QUEUE_ENTRIES`].
pub(crate) struct FaultQueue {
    slots: KVec<PageFault>,
    head: usize,
    len: usize,
    /// The handler left a `PAGE_FAULT` in the event queue because this one was full.
    stalled: bool,
}

impl FaultQueue {
    fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(FAULT_QUEUE_ENTRIES, GFP_KERNEL)?;
        for _ in 0..FAULT_QUEUE_ENTRIES {
            slots.push(PageFault::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
            stalled: false,
        })
    }

    fn push(&mut self, fault: PageFault) -> bool {
        let n = self.slots.len();
        if self.len == n {
            self.stalled = true;
            return false;
        }
        // `n` is not 0 here (`len` < `n`): no division by zero, and no panic path in the
        // interrupt handler this is inlined into.
        let slot = (self.head + self.len).checked_rem(n).unwrap_or(0);
        self.slots[slot] = fault;
        self.len += 1;
        true
    }

    fn pop(&mut self) -> Option<PageFault> {
        if self.len == 0 {
            return None;
        }
        let fault = self.slots[self.head];
        self.head = (self.head + 1).checked_rem(self.slots.len()).unwrap_or(0);
        self.len -= 1;
        Some(fault)
    }
}

/// What one pass over the event queue found.
#[derive(Clone, Copy, Default)]
pub(crate) struct Processed {
    /// It consumed entries.
    pub(crate) events: bool,
    /// It queued page faults for the interrupt thread.
    pub(crate) faults: bool,
    /// The link state of the last `PORT_CHANGE` it saw, for the netdev's carrier.
    pub(crate) link: Option<bool>,
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
    /// `PAGE_FAULT` events.
    pub(crate) page_faults: Atomic<u64>,
    /// Times the fault queue was full and an event waited in the event queue.
    pub(crate) fault_queue_full: Atomic<u64>,
    /// `SRQ_LIMIT` events.
    pub(crate) srq_limits: Atomic<u64>,
    /// `LAST_WQE_REACHED` events.
    pub(crate) last_wqe: Atomic<u64>,
    /// `PORT_CHANGE` events.
    pub(crate) port_changes: Atomic<u64>,
    /// Asynchronous events for an object no file owns (destroyed in the meantime), or dropped
    /// because the owner's queue was full.
    pub(crate) async_dropped: Atomic<u64>,
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
    /// Slot `cqn`: where the CQ's events go.
    #[pin]
    routes: SpinLockIrq<KVec<Option<Route>>>,
    /// Slot `qpn`: where the QP's asynchronous events go.
    #[pin]
    qp_owners: SpinLockIrq<KVec<Option<OwnerRoute>>>,
    /// Slot `srqn`: where the SRQ's asynchronous events go.
    #[pin]
    srq_owners: SpinLockIrq<KVec<Option<OwnerRoute>>>,
    /// The RDMA core's device, which gets the port's events for its user contexts (and its
    /// caches and clients), while it is registered.
    #[pin]
    core_port: SpinLockIrq<Option<PortEvents>>,
    /// Page faults for the interrupt thread. Taken inside `consumed`.
    #[pin]
    faults: SpinLockIrq<FaultQueue>,
    /// Bit `i`: context `i` had an `ACCESS_ERROR` event not yet reported. Set by the
    /// interrupt handler and cleared by the reporter with atomic bit operations only.
    alerts: BitmapVec,
    pub(crate) counters: EqCounters,
}

impl EventQueue {
    pub(crate) fn new(
        dev: &Device<Bound>,
        limits: &super::Limits,
        num_contexts: u32,
    ) -> Result<impl PinInit<Self, Error> + use<>> {
        let mem = Coherent::zeroed_slice(dev, EQ_ENTRIES as usize, GFP_KERNEL)?;
        let base = mem.dma_address();
        let mem = Devres::new(dev, mem)?;
        let alerts = BitmapVec::new(num_contexts as usize, GFP_KERNEL)?;
        let routes = empty_table(limits.max_cqs)?;
        let qp_owners = empty_table(limits.max_qps)?;
        let srq_owners = empty_table(limits.max_srqs)?;
        Ok(try_pin_init!(Self {
            mem,
            base,
            consumed <- new_spinlock_irq!(0),
            routes <- new_spinlock_irq!(routes),
            qp_owners <- new_spinlock_irq!(qp_owners),
            srq_owners <- new_spinlock_irq!(srq_owners),
            core_port <- new_spinlock_irq!(None),
            faults <- new_spinlock_irq!(FaultQueue::new()?),
            alerts,
            counters: EqCounters {
                completions: Atomic::new(0),
                qp_fatal: Atomic::new(0),
                cq_errors: Atomic::new(0),
                dropped: Atomic::new(0),
                access_errors: Atomic::new(0),
                page_faults: Atomic::new(0),
                fault_queue_full: Atomic::new(0),
                srq_limits: Atomic::new(0),
                last_wqe: Atomic::new(0),
                port_changes: Atomic::new(0),
                async_dropped: Atomic::new(0),
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

    /// Routes the events of `cqn` to `route` (`None`: nowhere).
    pub(crate) fn set_route(&self, cqn: u32, route: Option<Route>) {
        replace_slot(&mut self.routes.lock(), cqn, route);
    }

    /// Routes the asynchronous events of QP `qpn` to `route` (`None`: nowhere).
    pub(crate) fn set_qp_owner(&self, qpn: u32, route: Option<OwnerRoute>) {
        replace_slot(&mut self.qp_owners.lock(), qpn, route);
    }

    /// Routes the asynchronous events of SRQ `srqn` (see [`EventQueue::set_qp_owner`]).
    pub(crate) fn set_srq_owner(&self, srqn: u32, route: Option<OwnerRoute>) {
        replace_slot(&mut self.srq_owners.lock(), srqn, route);
    }

    /// Makes the RDMA core's device get the port's events (`None`: no more; before it is
    /// unregistered).
    pub(crate) fn set_core_port_events(&self, events: Option<PortEvents>) {
        *self.core_port.lock() = events;
    }

    /// Dispatches the port event `event_type` to the RDMA core, which passes it on to every
    /// user context (and its other clients).
    pub(crate) fn port_event(&self, event_type: u32) {
        if let Some(core) = &*self.core_port.lock() {
            // SAFETY: The driver removes it under this lock before it unregisters the device.
            // The driver's event numbers are libibverbs', which are the core's.
            unsafe { core.dispatch(PORT_NUM, event_type) };
        }
    }

    /// Passes an asynchronous event on to the RDMA core's object `owners[object]`; counts it as
    /// dropped when there is none (destroyed meanwhile).
    fn deliver(
        &self,
        owners: &SpinLockIrq<KVec<Option<OwnerRoute>>>,
        event_type: u32,
        object: u32,
    ) {
        let owners = owners.lock();
        let delivered = owners
            .get(object as usize)
            .and_then(Option::as_ref)
            .is_some_and(|r| match &r.core {
                Some(events) => {
                    // SAFETY: Destroying the object removes its route, under the lock held
                    // here, before the driver's destroy operation returns. The driver's event
                    // numbers are libibverbs', which are the core's.
                    unsafe { events.notify(event_type) };
                    true
                }
                None => false,
            });
        if !delivered {
            self.counters.async_dropped.add(1, Relaxed);
        }
    }

    /// Consumes every entry the device has written, except a `PAGE_FAULT` that finds the fault
    /// queue full, and what follows it. Called by the interrupt handler of [`EQ_VECTOR`], and
    /// by its thread once the fault queue has room again.
    pub(crate) fn process(&self, bar: &Bar0<'_>) -> Processed {
        // The handler and the BAR it was given outlive the queue only during unbind, after the
        // device's reset: nothing is left to consume.
        let Some(mem) = self.mem.try_access() else {
            return Processed::default();
        };
        let mem = &*mem;
        let mut consumed = self.consumed.lock();
        let start = *consumed;
        // Faults queued by this pass: the thread needs waking only for them (it drains the
        // queue before it sleeps, and a push meanwhile wakes it again).
        let mut faults = false;
        let mut link = None;
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
            if !self.dispatch(&entry) {
                self.counters.fault_queue_full.add(1, Relaxed);
                break;
            }
            faults |= entry.kind == EVENT_PAGE_FAULT;
            if entry.kind == EVENT_PORT_CHANGE {
                link = Some(entry.flags & PORT_LINK_UP != 0);
            }
            *consumed = n.wrapping_add(1);
        }
        if *consumed == start {
            return Processed {
                events: false,
                faults,
                link,
            };
        }
        bar.write_reg(regs::EQ_HEAD::zeroed().with_consumed(*consumed));
        Processed {
            events: true,
            faults,
            link,
        }
    }

    /// The next page fault for the interrupt thread; `Err(())` when there is none but the
    /// handler left one in the event queue for want of room (the caller processes the queue
    /// again).
    pub(crate) fn next_fault(&self) -> Result<Option<PageFault>, ()> {
        let mut q = self.faults.lock();
        if let Some(fault) = q.pop() {
            return Ok(Some(fault));
        }
        if core::mem::take(&mut q.stalled) {
            return Err(());
        }
        Ok(None)
    }

    /// Handles one event; `false` (and the event is not consumed) only for a page fault that
    /// finds the fault queue full.
    fn dispatch(&self, entry: &Eqe) -> bool {
        match entry.kind {
            EVENT_COMPLETION => {
                self.counters.completions.add(1, Relaxed);
                let routes = self.routes.lock();
                let delivered = routes
                    .get(entry.object as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|route| match &route.events {
                        Some(notifier) => {
                            // SAFETY: Destroying the CQ removes its route, under the lock
                            // held here, before the driver's `destroy_cq` returns.
                            unsafe { notifier.notify() };
                            true
                        }
                        // Not lost: the process asked for none.
                        None => true,
                    });
                if !delivered {
                    self.counters.dropped.add(1, Relaxed);
                }
            }
            EVENT_QP_FATAL => {
                self.counters.qp_fatal.add(1, Relaxed);
                self.deliver(&self.qp_owners, uapi::PFNIC_EVENT_QP_FATAL, entry.object);
            }
            EVENT_LAST_WQE_REACHED => {
                self.counters.last_wqe.add(1, Relaxed);
                let kind = uapi::PFNIC_EVENT_QP_LAST_WQE_REACHED;
                self.deliver(&self.qp_owners, kind, entry.object);
            }
            EVENT_SRQ_LIMIT => {
                self.counters.srq_limits.add(1, Relaxed);
                let kind = uapi::PFNIC_EVENT_SRQ_LIMIT_REACHED;
                self.deliver(&self.srq_owners, kind, entry.object);
            }
            EVENT_PORT_CHANGE => {
                self.counters.port_changes.add(1, Relaxed);
                self.port_event(if entry.flags & PORT_LINK_UP != 0 {
                    uapi::PFNIC_EVENT_PORT_ACTIVE
                } else {
                    uapi::PFNIC_EVENT_PORT_ERR
                });
            }
            EVENT_CQ_ERROR => {
                self.counters.cq_errors.add(1, Relaxed);
                let routes = self.routes.lock();
                let delivered = routes
                    .get(entry.object as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|r| match &r.events {
                        Some(notifier) => {
                            // SAFETY: As for the completion events above.
                            unsafe { notifier.error() };
                            true
                        }
                        None => false,
                    });
                if !delivered {
                    self.counters.async_dropped.add(1, Relaxed);
                }
            }
            EVENT_ACCESS_ERROR => {
                self.counters.access_errors.add(1, Relaxed);
                let ctx = entry.object as usize;
                if ctx < self.alerts.len() {
                    self.alerts.set_bit_atomic(ctx);
                }
            }
            EVENT_PAGE_FAULT => {
                if !self.faults.lock().push(PageFault::decode(entry)) {
                    return false;
                }
                self.counters.page_faults.add(1, Relaxed);
            }
            _ => {}
        }
        true
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

/// A routing table of `entries` empty slots.
fn empty_table<R>(entries: u32) -> Result<KVec<Option<R>>> {
    let mut table = KVec::with_capacity(entries as usize, GFP_KERNEL)?;
    for _ in 0..entries {
        table.push(None, GFP_KERNEL)?;
    }
    Ok(table)
}

/// Puts `route` in slot `index` of `table` (nothing when the index is out of range).
fn replace_slot<R>(table: &mut KVec<Option<R>>, index: u32, route: Option<R>) {
    if let Some(slot) = table.get_mut(index as usize) {
        *slot = route;
    }
}
