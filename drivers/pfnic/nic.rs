// SPDX-License-Identifier: GPL-2.0

//! State of one pfnic shared by the PCI binding, the interrupt handlers and open files.
//!
//! A [`Nic`] is reference counted: open files keep it alive after the PCI device is unbound,
//! but its BAR is a device-managed resource that is revoked at unbind, so every hardware
//! access goes through [`Nic::with_bar`] and fails with `ENODEV` once the device is gone.

use crate::{
    regs,
    ring::{self, Desc, Rings},
    uapi,
    verbs::Verbs,
};
use kernel::{
    device::{self, Bound},
    dma::Coherent,
    fs::file::FileMappings,
    io::{poll::read_poll_timeout, register::Array, Io},
    iommu::sva::SvaBond,
    new_condvar, new_mutex, new_spinlock_irq,
    num::Bounded,
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Acquire, Atomic, AtomicFlag, Relaxed, Release},
        CondVar, CondVarTimeoutResult, Mutex, SpinLockIrq,
    },
    time::{msecs_to_jiffies, Delta, Instant, Monotonic},
};

/// The mapped control registers.
pub(crate) type Bar0<'a> = pci::Bar<'a, { regs::BAR0_SIZE }>;

/// How long a reset may take before the device is declared dead (docs/registers.md).
const RESET_TIMEOUT: Delta = Delta::from_millis(100);
/// How long a context may take to stop once disabled (docs/registers.md).
const CONTEXT_STOP_TIMEOUT: Delta = Delta::from_millis(100);
/// How long a self-test interrupt may take (TCG guests on a loaded host are slow).
const SELFTEST_TIMEOUT: Delta = Delta::from_millis(2000);
/// How long one submitted descriptor may take: 1 GiB of faulting pages under TCG is slow.
const SUBMIT_TIMEOUT: Delta = Delta::from_secs(120);
/// [`Nic::selftest_vector`] when no self-test runs.
const NO_SELFTEST: u32 = u32::MAX;

/// What the driver learnt about the device at probe time; immutable afterwards.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NicInfo {
    pub(crate) index: u32,
    pub(crate) device_abi: u32,
    pub(crate) fw_version: u32,
    pub(crate) vendor_id: u16,
    pub(crate) device_id: u16,
    pub(crate) subsystem_vendor_id: u16,
    pub(crate) subsystem_id: u16,
    pub(crate) revision: u8,
    pub(crate) pci_rid: u16,
    /// `uapi::PFNIC_CAP_*`.
    pub(crate) caps: u64,
    pub(crate) pasid_width: u32,
    pub(crate) pri_max_requests: u32,
    pub(crate) num_vectors: u32,
    pub(crate) num_contexts: u32,
    /// Physical address of BAR2 (the doorbell pages), for mapping one into a process.
    pub(crate) doorbell_phys: u64,
    /// Length of BAR2 in bytes.
    pub(crate) doorbell_len: u64,
}

/// Per-MSI-X-vector counters, written by that vector's interrupt handler.
pub(crate) struct VectorStats {
    /// Interrupts handled.
    pub(crate) interrupts: Atomic<u64>,
    /// Self-test completions seen; a waiter watches this advance.
    pub(crate) selftests: Atomic<u64>,
    /// `SELFTEST_ECHO` read by the last self-test completion on this vector.
    pub(crate) last_echo: Atomic<u32>,
}

impl VectorStats {
    fn new() -> Self {
        Self {
            interrupts: Atomic::new(0),
            selftests: Atomic::new(0),
            last_echo: Atomic::new(0),
        }
    }
}

/// One pfnic.
#[pin_data]
pub(crate) struct Nic {
    bar: pci::DevresBar<{ regs::BAR0_SIZE }>,
    /// BAR2: one doorbell page per context. The driver never writes it (processes map their
    /// page); holding the mapping keeps the region claimed while the device is bound.
    doorbells: pci::DevresBar,
    rings: Rings,
    dev: ARef<device::Device>,
    pub(crate) info: NicInfo,
    pub(crate) vectors: KVec<VectorStats>,
    /// The device runs one self-test at a time.
    #[pin]
    selftest_lock: Mutex<()>,
    /// The vector the running self-test signals, or [`NO_SELFTEST`]. `IRQ_STATUS` has no
    /// other cause, so only that vector's handler reads it.
    selftest_vector: Atomic<u32>,
    /// Bumped on every descriptor completion interrupt and every released ring slot; ring
    /// waiters ([`Nic::post`], [`Nic::wait_desc`]) sleep on `ring_wait` until it moves.
    #[pin]
    ring_progress: SpinLockIrq<u64>,
    #[pin]
    ring_wait: CondVar,
    /// The hardware contexts in use and their SVA bonds. The lock also serializes the
    /// CTX_SELECT-then-access register sequences.
    #[pin]
    contexts: Mutex<ContextTable>,
    /// Set at unbind: files may map nothing any more. Held across a mapping, so that none is
    /// made after the revocation that would miss it.
    #[pin]
    mappings_revoked: Mutex<bool>,
    /// Set once the first SVA bind has been logged.
    sva_announced: AtomicFlag,
    pub(crate) counters: Counters,
    /// The verbs engine, on devices that have one (`CAPS.VERBS`).
    pub(crate) verbs: Option<Pin<KBox<Verbs>>>,
}

/// Device-wide event counters (`PFNIC_IOCTL_QUERY_STATS`).
pub(crate) struct Counters {
    pub(crate) contexts_created: Atomic<u64>,
    pub(crate) contexts_stopped_by_exit: Atomic<u64>,
    pub(crate) contexts_stuck: Atomic<u64>,
    pub(crate) context_failures: Atomic<u64>,
}

/// The hardware contexts and the SVA bonds behind them.
///
/// The table, not the open files, owns the bonds: every PASID must be unbound before the PCI
/// device is (the IOMMU core requires it), while files can stay open much longer.
struct ContextTable {
    /// Slot `i` holds hardware context `i` while it is in use.
    slots: KVec<Option<Slot>>,
    /// Set when the device is unbound: no context starts any more.
    revoked: bool,
}

/// A hardware context in use.
struct Slot {
    /// The address space binding; unbound when the slot is emptied.
    bond: SvaBond,
    /// The shared mappings of the file that owns the context (its doorbell page and rings),
    /// revoked at unbind.
    mappings: FileMappings,
    /// Position of the next descriptor to post in the context's ring (free-running).
    tail: u32,
    /// Oldest posted descriptor not yet known to be done and released; `tail - head`
    /// descriptors occupy the ring.
    head: u32,
    /// Ring slots whose poster still waits to read the descriptor back: the slot is not reused
    /// until it is released, even once done.
    claimed: [bool; ring::RING_SIZE as usize],
}

/// Outcome of one interrupt self-test.
pub(crate) struct SelftestResult {
    pub(crate) echo: u32,
    pub(crate) latency: Delta,
    pub(crate) interrupts: u64,
}

impl Nic {
    pub(crate) fn new(
        bar: pci::DevresBar<{ regs::BAR0_SIZE }>,
        doorbells: pci::DevresBar,
        rings: Rings,
        dev: ARef<device::Device>,
        info: NicInfo,
        verbs: Option<Pin<KBox<Verbs>>>,
    ) -> Result<impl PinInit<Self, Error>> {
        let n = info.num_vectors as usize;
        let mut vectors = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            vectors.push(VectorStats::new(), GFP_KERNEL)?;
        }
        let mut slots = KVec::with_capacity(info.num_contexts as usize, GFP_KERNEL)?;
        for _ in 0..info.num_contexts {
            slots.push(None, GFP_KERNEL)?;
        }
        let contexts = ContextTable {
            slots,
            revoked: false,
        };
        Ok(try_pin_init!(Self {
            bar,
            doorbells,
            rings,
            dev,
            info,
            vectors,
            selftest_lock <- new_mutex!(()),
            selftest_vector: Atomic::new(NO_SELFTEST),
            ring_progress <- new_spinlock_irq!(0),
            ring_wait <- new_condvar!("pfnic ring"),
            contexts <- new_mutex!(contexts),
            mappings_revoked <- new_mutex!(false),
            sva_announced: AtomicFlag::new(false),
            counters: Counters {
                contexts_created: Atomic::new(0),
                contexts_stopped_by_exit: Atomic::new(0),
                contexts_stuck: Atomic::new(0),
                context_failures: Atomic::new(0),
            },
            verbs,
        }? Error))
    }

    /// The PCI device, for messages and IOMMU bindings.
    pub(crate) fn device(&self) -> &device::Device {
        &self.dev
    }

    /// Whether this is the first SVA bind on this device since probe.
    pub(crate) fn first_sva_bind(&self) -> bool {
        !self.sva_announced.xchg(true, Relaxed)
    }

    /// Allocates `bytes` of zeroed coherent DMA memory for the device (rings mapped into a
    /// process). `ENODEV` once the device is unbound.
    pub(crate) fn alloc_coherent(&self, bytes: usize) -> Result<Coherent<[u8]>> {
        let table = self.contexts.lock();
        if table.revoked {
            return Err(ENODEV);
        }
        // SAFETY: `unbind()` sets `revoked` under this lock, and the driver core calls it
        // before it releases the device. So while we hold the lock and `revoked` is false, the
        // device is bound.
        let dev = unsafe { self.dev.as_bound() };
        let mem = Coherent::zeroed_slice(dev, bytes, GFP_KERNEL);
        drop(table);
        mem
    }

    /// Takes a free hardware context and starts it in the address space of `bond`; returns
    /// the context's index. The table keeps the bond until the context stops.
    ///
    /// Fails with `EOPNOTSUPP` when the device refuses the context: the IOMMU did not enable
    /// ATS, PASID and PRI for it.
    pub(crate) fn start_context(&self, bond: SvaBond, mappings: FileMappings) -> Result<u32> {
        // The IOMMU never hands out PASIDs wider than the device advertised.
        let pasid = Bounded::<u32, 20>::try_new(bond.pasid()).ok_or(EINVAL)?;
        let mut table = self.contexts.lock();
        if table.revoked {
            return Err(ENODEV);
        }
        let index = table.slots.iter().position(Option::is_none).ok_or(EBUSY)?;
        let index_u32 = u32::try_from(index)?;
        let active = self.with_bar(|bar| {
            bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index_u32));
            bar.write_reg(regs::CTX_PASID::zeroed().with_pasid(pasid));
            bar.write_reg(regs::CTX_CTRL::zeroed().with_enable(true));
            bar.read(regs::CTX_STATUS).active()
        })?;
        if !active {
            dev_warn!(
                self.dev,
                "pfnic{}: device refused context {} with PASID {}: the IOMMU did not enable \
                 ATS, PASID and PRI for it (no page request support?)\n",
                self.info.index,
                index,
                pasid.get()
            );
            return Err(EOPNOTSUPP);
        }
        if let Some(verbs) = &self.verbs {
            // An alert of the context's previous owner, reported at its close, is stale.
            verbs.eq.take_alert(index_u32);
        }
        table.slots[index] = Some(Slot {
            bond,
            mappings,
            tail: 0,
            head: 0,
            claimed: [false; ring::RING_SIZE as usize],
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

    /// Points every context at its ring and completion vector. The device keeps these over a
    /// context's start and stop; a reset clears them.
    pub(crate) fn program_rings(&self) -> Result {
        let completion_vectors = self.info.num_vectors.saturating_sub(1).max(1);
        self.with_bar(|bar| {
            // Vector 0 is the device's own; contexts take the others in turn.
            let mut vector = 1;
            for ctx in 0..self.info.num_contexts {
                let addr = self.rings.dma_address(ctx).ok_or(EINVAL)?;
                bar.write_reg(regs::CTX_SELECT::zeroed().with_context(ctx));
                bar.write_reg(regs::CTX_RING_LO::zeroed().with_addr(addr as u32));
                bar.write_reg(regs::CTX_RING_HI::zeroed().with_addr((addr >> 32) as u32));
                bar.write_reg(regs::CTX_RING_SIZE::zeroed().with_entries(ring::RING_SIZE));
                bar.write_reg(regs::CTX_VECTOR::zeroed().with_vector(vector));
                vector = if vector >= completion_vectors {
                    1
                } else {
                    vector + 1
                };
            }
            if let Some(verbs) = &self.verbs {
                verbs.eq.program(bar);
            }
            Ok(())
        })?
    }

    /// Has context `index` execute `desc` and waits for it; returns the completed descriptor
    /// and the time it took.
    ///
    /// Descriptors queued before (asynchronous prefetches) run first. `EINTR` if a signal
    /// arrives while waiting (the device goes on, and the ring slot is reclaimed once the
    /// descriptor is done); `ETIMEDOUT` if the device does not complete it in time.
    pub(crate) fn submit(&self, index: u32, desc: Desc) -> Result<(Desc, Delta)> {
        let pos = self.post(index, desc, true)?;
        let start = Instant::<Monotonic>::now();
        let done = self.wait_desc(index, pos)?;
        Ok((done, start.elapsed()))
    }

    /// Posts `desc` on context `index`'s ring and rings its doorbell; returns its position.
    /// With `claim`, the caller must collect it with [`Nic::wait_desc`]; without, the ring slot
    /// is reclaimed once the device is done with it. Waits while the ring is full.
    pub(crate) fn post(&self, index: u32, desc: Desc, claim: bool) -> Result<u32> {
        self.wait_ring(|| {
            let mut table = self.contexts.lock();
            let slot = table
                .slots
                .get_mut(index as usize)
                .and_then(Option::as_mut)
                .ok_or(ENODEV)?;
            self.reap(index, slot);
            if slot.tail.wrapping_sub(slot.head) >= ring::RING_SIZE {
                return Ok(None);
            }
            let pos = slot.tail;
            self.rings.write(index, pos, desc);
            slot.claimed[ring::slot_index(pos)] = claim;
            slot.tail = pos.wrapping_add(1);
            // The tail is rung under the lock, so the device sees it only grow.
            let context = Bounded::<u32, 16>::try_new(index).ok_or(EINVAL)?;
            // The device takes the low 16 bits and finds the rest from its head.
            let tail = Bounded::<u32, 16>::try_new(slot.tail & 0xffff).ok_or(EINVAL)?;
            self.with_bar(|bar| {
                bar.write_reg(
                    regs::RING_DB::zeroed()
                        .with_context(context)
                        .with_tail(tail),
                )
            })?;
            Ok(Some(pos))
        })
    }

    /// Sleeps until `ready` yields a value, evaluating it again after every descriptor
    /// completion interrupt and every released ring slot. `EINTR` if a signal arrives while
    /// waiting, `ETIMEDOUT` after [`SUBMIT_TIMEOUT`], `ENODEV` as soon as the device is unbound.
    fn wait_ring<T>(&self, mut ready: impl FnMut() -> Result<Option<T>>) -> Result<T> {
        let start = Instant::<Monotonic>::now();
        loop {
            let seen = *self.ring_progress.lock();
            // An unbound device completes nothing more (its reset stopped every context).
            if self.contexts.lock().revoked {
                return Err(ENODEV);
            }
            if let Some(value) = ready()? {
                return Ok(value);
            }
            let left = SUBMIT_TIMEOUT - start.elapsed();
            if left.is_negative() || left.is_zero() {
                return Err(ETIMEDOUT);
            }
            let jiffies =
                msecs_to_jiffies(u32::try_from(left.as_millis_ceil()).unwrap_or(u32::MAX));
            let mut progress = self.ring_progress.lock();
            // Progress after `seen` may have been missed by `ready`: look again. Otherwise the
            // interrupt handler that makes progress takes the lock only once we are queued.
            if *progress == seen {
                let woke = self
                    .ring_wait
                    .wait_interruptible_timeout(&mut progress, jiffies);
                if let CondVarTimeoutResult::Signal { .. } = woke {
                    return Err(EINTR);
                }
            }
        }
    }

    /// Wakes the ring waiters: a descriptor completed or a ring slot was released.
    fn ring_progressed(&self) {
        let mut progress = self.ring_progress.lock();
        *progress = progress.wrapping_add(1);
        drop(progress);
        self.ring_wait.notify_all();
    }

    /// Advances `slot.head` past descriptors that are done and not claimed.
    fn reap(&self, index: u32, slot: &mut Slot) {
        while slot.head != slot.tail {
            let head = slot.head;
            if slot.claimed[ring::slot_index(head)]
                || self.rings.status(index, head) & ring::DESC_DONE == 0
            {
                break;
            }
            slot.head = head.wrapping_add(1);
        }
    }

    /// Waits for the claimed descriptor at `pos` of context `index` and returns it completed.
    /// Releases the claim in every case.
    pub(crate) fn wait_desc(&self, index: u32, pos: u32) -> Result<Desc> {
        let done = self.wait_ring(|| {
            let done = self.rings.status(index, pos) & ring::DESC_DONE != 0;
            Ok(done.then(|| self.rings.read(index, pos)))
        });
        let mut table = self.contexts.lock();
        if let Some(slot) = table.slots.get_mut(index as usize).and_then(Option::as_mut) {
            slot.claimed[ring::slot_index(pos)] = false;
            self.reap(index, slot);
        }
        drop(table);
        // A poster may be waiting for this slot.
        self.ring_progressed();
        done
    }

    /// The device's counters for context `index`, since it started.
    pub(crate) fn context_stats(&self, index: u32) -> Result<uapi::TranslationStats> {
        let _table = self.contexts.lock();
        self.with_bar(|bar| {
            bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index));
            translation_stats(|i| bar.read(regs::CTX_COUNTERS::at(i)).count().get())
        })
    }

    /// Renders the statistics for debugfs (`/sys/kernel/debug/pfnicN/stats`).
    pub(crate) fn write_stats(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let Ok(st) = self.stats() else {
            return writeln!(f, "device unbound");
        };
        writeln!(f, "contexts_active {}", st.contexts_active)?;
        writeln!(f, "contexts_stuck {}", st.contexts_stuck)?;
        writeln!(f, "contexts_created {}", st.contexts_created)?;
        writeln!(
            f,
            "contexts_stopped_by_exit {}",
            st.contexts_stopped_by_exit
        )?;
        writeln!(f, "context_failures {}", st.context_failures)?;
        writeln!(f, "interrupts {}", st.interrupts)?;
        write_translation(f, &st.translation, "\n")?;
        self.write_verbs_stats(f)?;
        write!(f, "fault_latency_us_log2")?;
        for c in st.fault_latency_us_log2 {
            write!(f, " {c}")?;
        }
        writeln!(f)?;
        // One line per context in use.
        let live: KVec<(u32, u32)> = {
            let table = self.contexts.lock();
            let mut v = KVec::new();
            for (i, slot) in table.slots.iter().enumerate() {
                if let Some(slot) = slot {
                    if v.push((i as u32, slot.bond.pasid()), GFP_KERNEL).is_err() {
                        break;
                    }
                }
            }
            v
        };
        for (index, pasid) in live.iter() {
            if let Ok(t) = self.context_stats(*index) {
                write!(f, "context {index} pasid {pasid} ")?;
                write_translation(f, &t, " ")?;
            }
        }
        Ok(())
    }

    /// The answer to `PFNIC_IOCTL_QUERY_STATS`.
    pub(crate) fn stats(&self) -> Result<uapi::DeviceStats> {
        let active = self
            .contexts
            .lock()
            .slots
            .iter()
            .filter(|s| s.is_some())
            .count();
        let mut stats = uapi::DeviceStats {
            contexts_created: self.counters.contexts_created.load(Relaxed),
            contexts_stopped_by_exit: self.counters.contexts_stopped_by_exit.load(Relaxed),
            contexts_stuck: self.counters.contexts_stuck.load(Relaxed),
            context_failures: self.counters.context_failures.load(Relaxed),
            interrupts: self
                .vectors
                .iter()
                .map(|v| v.interrupts.load(Relaxed))
                .sum(),
            contexts_active: u32::try_from(active).unwrap_or(u32::MAX),
            ..Default::default()
        };
        self.with_bar(|bar| {
            stats.translation =
                translation_stats(|i| bar.read(regs::COUNTERS::at(i)).count().get());
            for (i, bucket) in stats.fault_latency_us_log2.iter_mut().enumerate() {
                *bucket = bar.read(regs::STAT_FAULT_LAT::at(i)).count().get();
            }
        })?;
        Ok(stats)
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
        drop(table);
        // Only now that the device has stopped using it may the PASID go.
        drop(slot);
    }

    /// Unbinds every context's PASID. Called at unbind, after the device was reset (which
    /// stopped every context) and before the driver core detaches the device's IOMMU domain.
    /// Open files keep their `Context`, which finds its slot empty.
    pub(crate) fn revoke_contexts(&self) {
        // No mapping is made from now on; those made before are removed below, so no process
        // keeps a doorbell page that, after a rebind, would ring another process's queues.
        *self.mappings_revoked.lock() = true;
        let mut table = self.contexts.lock();
        table.revoked = true;
        let mut bonds = KVec::new();
        for slot in table.slots.iter_mut() {
            if let Some(slot) = slot.take() {
                // A touch of a revoked page raises SIGBUS: the device is gone.
                slot.mappings.unmap_all();
                // On allocation failure the bond drops here, which unbinds it just the same.
                let _ = bonds.push(slot.bond, GFP_KERNEL);
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

    /// Runs `f` on the control registers, or fails with `ENODEV` once the device is unbound.
    pub(crate) fn with_bar<R>(&self, f: impl FnOnce(&Bar0<'_>) -> R) -> Result<R> {
        self.bar.try_access_with(|bar| f(bar)).ok_or(ENODEV)
    }

    /// Resets the device and waits until it reports ready.
    pub(crate) fn reset(bar: &Bar0<'_>) -> Result {
        bar.write_reg(regs::CONTROL::zeroed().with_reset(true));
        read_poll_timeout(
            || Ok(bar.read(regs::STATUS)),
            |s: &regs::STATUS| s.ready(),
            Delta::from_micros(100),
            RESET_TIMEOUT,
        )?;
        Ok(())
    }

    /// Has the device signal `vector` and waits for that vector's handler to see it.
    ///
    /// Proves the whole path: MMIO write, device, MSI-X message through the interrupt
    /// remapping IOMMU, the handler, and the handler's read-back of device state.
    pub(crate) fn selftest(&self, vector: u32, cookie: u32) -> Result<SelftestResult> {
        let stats = self.vectors.get(vector as usize).ok_or(EINVAL)?;
        let _guard = self.selftest_lock.lock();

        let before = stats.selftests.load(Acquire);
        // Published before the trigger, so the handler of `vector` looks at `IRQ_STATUS`.
        self.selftest_vector.store(vector, Release);
        let start = Instant::<Monotonic>::now();
        let done = self
            .with_bar(|bar| {
                bar.write_reg(regs::SELFTEST_COOKIE::zeroed().with_value(cookie));
                bar.write_reg(regs::SELFTEST_TRIGGER::zeroed().with_vector(vector));
            })
            .and_then(|()| {
                read_poll_timeout(
                    || Ok(stats.selftests.load(Acquire)),
                    |seen: &u64| *seen != before,
                    Delta::from_micros(20),
                    SELFTEST_TIMEOUT,
                )
            });
        self.selftest_vector.store(NO_SELFTEST, Relaxed);
        done?;
        Ok(SelftestResult {
            latency: start.elapsed(),
            echo: stats.last_echo.load(Relaxed),
            interrupts: stats.interrupts.load(Relaxed),
        })
    }

    /// Called by the handler of `vector`: consumes the events of the event queue (vector 0),
    /// wakes the ring waiters (other vectors: descriptor completions, which have no cause bit)
    /// and, only while a self-test signals this vector, acknowledges `IRQ_STATUS`.
    ///
    /// Returns whether the device had anything pending.
    pub(crate) fn handle_irq(&self, vector: usize) -> bool {
        let Some(stats) = self.vectors.get(vector) else {
            return false;
        };
        stats.interrupts.add(1, Relaxed);
        let selftest = self.selftest_vector.load(Acquire) as usize == vector;
        let (echo, events) = self
            .with_bar(|bar| {
                // The event queue has no cause bit: its vector looks at the queue itself.
                let events = match &self.verbs {
                    Some(verbs) if vector == crate::verbs::eq::EQ_VECTOR as usize => {
                        verbs.eq.process(bar)
                    }
                    _ => false,
                };
                if !selftest {
                    return (None, events);
                }
                let status = bar.read(regs::IRQ_STATUS);
                if status.into_raw() == 0 {
                    return (None, events);
                }
                bar.write_reg(status); // write 1 to clear what we saw
                let echo = status
                    .selftest()
                    .then(|| bar.read(regs::SELFTEST_ECHO).value().get());
                (echo, events)
            })
            .unwrap_or((None, false));
        if vector != 0 {
            self.ring_progressed();
        }
        if let Some(echo) = echo {
            stats.last_echo.store(echo, Relaxed);
            // Publishes `last_echo` to the waiter in `selftest`.
            stats.selftests.fetch_add(1, Release);
            return true;
        }
        // Vectors other than 0 also signal descriptor completions.
        events || vector != 0
    }

    /// The answer to `PFNIC_IOCTL_QUERY_DEVICE`.
    pub(crate) fn query(&self) -> uapi::QueryDevice {
        let i = &self.info;
        uapi::QueryDevice {
            uapi_version: uapi::PFNIC_UAPI_VERSION,
            device_abi: i.device_abi,
            fw_version: i.fw_version,
            vendor_id: i.vendor_id,
            device_id: i.device_id,
            subsystem_vendor_id: i.subsystem_vendor_id,
            subsystem_id: i.subsystem_id,
            revision: u32::from(i.revision),
            pci_rid: u32::from(i.pci_rid),
            caps: i.caps,
            pasid_width: i.pasid_width,
            pri_max_requests: i.pri_max_requests,
            num_vectors: i.num_vectors,
            num_contexts: i.num_contexts,
            index: i.index,
            ..Default::default()
        }
    }
}

/// Reads identity and features from the registers, checking that this is a pfnic we support.
pub(crate) fn identify(pdev: &pci::Device<Bound>, bar: &Bar0<'_>) -> Result<(u32, u32, u32)> {
    let id = bar.read(regs::ID).value().get();
    if id != regs::ID_VALUE {
        dev_err!(pdev, "not a pfnic: ID register reads {:#010x}\n", id);
        return Err(ENODEV);
    }
    let version = bar.read(regs::VERSION);
    if version.major().get() != regs::ABI_MAJOR || version.minor().get() < regs::ABI_MINOR_MIN {
        dev_err!(
            pdev,
            "unsupported device ABI {}.{} (driver implements {}.{} and later)\n",
            version.major().get(),
            version.minor().get(),
            regs::ABI_MAJOR,
            regs::ABI_MINOR_MIN
        );
        return Err(ENODEV);
    }
    let fw = bar.read(regs::FW_VERSION).value().get();
    Ok((version.into_raw(), fw, bar.read(regs::CAPS).into_raw()))
}

/// Builds counters from a register block read in [`uapi::TranslationStats`] order.
fn translation_stats(read: impl Fn(usize) -> u32) -> uapi::TranslationStats {
    uapi::TranslationStats {
        page_requests: read(0),
        pri_success: read(1),
        pri_failed: read(2),
        atc_hits: read(3),
        atc_misses: read(4),
        invalidations: read(5),
        prq_full: read(6),
    }
}

/// Writes counters as `name value` pairs joined by `sep`, ending the line.
fn write_translation(
    f: &mut kernel::fmt::Formatter<'_>,
    t: &uapi::TranslationStats,
    sep: &str,
) -> kernel::fmt::Result {
    write!(f, "page_requests {}", t.page_requests)?;
    for (name, value) in [
        ("pri_success", t.pri_success),
        ("pri_failed", t.pri_failed),
        ("atc_hits", t.atc_hits),
        ("atc_misses", t.atc_misses),
        ("invalidations", t.invalidations),
        ("prq_full", t.prq_full),
    ] {
        write!(f, "{sep}{name} {value}")?;
    }
    writeln!(f)
}

/// Disables hardware context `index`; returns whether the device reports it stopped.
fn disable_context(bar: &Bar0<'_>, index: u32) -> bool {
    bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index));
    bar.write_reg(regs::CTX_CTRL::zeroed());
    !bar.read(regs::CTX_STATUS).active()
}
