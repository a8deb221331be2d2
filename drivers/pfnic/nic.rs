// SPDX-License-Identifier: GPL-2.0

//! State of one pfnic shared by the PCI binding, the interrupt handlers and open files.
//!
//! A [`Nic`] is reference counted: open files keep it alive after the PCI device is unbound,
//! but its BAR is a device-managed resource that is revoked at unbind, so every hardware
//! access goes through [`Nic::with_bar`] and fails with `ENODEV` once the device is gone.
//!
//! - [`contexts`]: hardware contexts, their SVA bonds, and revocation at unbind;
//! - [`submit`]: the driver-owned descriptor rings;
//! - [`interrupts`]: the MSI-X handlers and the interrupt self-test;
//! - [`stats`]: counters for the ioctls and debugfs.

mod contexts;
mod interrupts;
pub(crate) mod stats;
mod submit;

use contexts::ContextTable;
use interrupts::NO_SELFTEST;
pub(crate) use interrupts::{IrqOutcome, VectorStats};

use crate::{doorbells::DoorbellPages, eth::EthPort, regs, ring::Rings, uapi, verbs::Verbs};
use kernel::{
    device::{self, BindScope, Bound},
    dma::Coherent,
    io::{poll::read_poll_timeout, Io},
    new_condvar, new_mutex, new_spinlock_irq, pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, AtomicFlag},
        CondVar, Mutex, SpinLockIrq,
    },
    time::Delta,
};

/// The mapped control registers.
pub(crate) type Bar0<'a> = pci::Bar<'a, { regs::BAR0_SIZE }>;

/// How long a reset may take before the device is declared dead (docs/registers.md).
const RESET_TIMEOUT: Delta = Delta::from_millis(100);
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
    /// BAR2, the doorbell pages, for mapping one into a process.
    pub(crate) doorbells: DoorbellPages,
}

impl NicInfo {
    /// Whether the device's implicit MR may have a table (the `odp` mode's implicit MR).
    pub(crate) fn implicit_tables(&self) -> bool {
        self.caps & uapi::PFNIC_CAP_FAULTS != 0
            && self.device_abi & 0xffff >= regs::ABI_MINOR_IMPLICIT_TABLES
    }
}

/// One pfnic.
#[pin_data]
pub(crate) struct Nic {
    bar: pci::DevresBar<{ regs::BAR0_SIZE }>,
    /// BAR2: one doorbell page per context. Processes map their page; the driver writes only
    /// its kernel clients' context's ([`Nic::ring_doorbell`]).
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
    /// Where the driver uses the device as bound outside a driver callback
    /// ([`Nic::with_bound`]: DMA allocations and SVA binds from file operations). Closed first
    /// thing at unbind, which waits for the sections inside it to finish.
    bound: BindScope,
    /// Set at unbind: files may map nothing any more. Held across a mapping, so that none is
    /// made after the revocation that would miss it.
    #[pin]
    mappings_revoked: Mutex<bool>,
    /// Set once the first SVA bind has been logged.
    sva_announced: AtomicFlag,
    /// Set once the first context without a PASID has been logged.
    no_pasid_announced: AtomicFlag,
    pub(crate) counters: Counters,
    /// The verbs engine, on devices that have one (`CAPS.VERBS`).
    pub(crate) verbs: Option<Pin<KBox<Verbs>>>,
    /// The port's Ethernet queues, on devices with a wire and the queues (`CAPS.ETH`).
    pub(crate) eth: Option<Pin<KBox<EthPort>>>,
}

/// Device-wide event counters (`PFNIC_IOCTL_QUERY_STATS`).
pub(crate) struct Counters {
    pub(crate) contexts_created: Atomic<u64>,
    pub(crate) contexts_stopped_by_exit: Atomic<u64>,
    pub(crate) contexts_stuck: Atomic<u64>,
    pub(crate) context_failures: Atomic<u64>,
    /// Verbs objects the device did not let go of (`verbs::Verbs::quarantine`).
    pub(crate) objects_quarantined: Atomic<u64>,
}

impl Nic {
    pub(crate) fn new(
        bar: pci::DevresBar<{ regs::BAR0_SIZE }>,
        doorbells: pci::DevresBar,
        rings: Rings,
        dev: &device::Device<Bound>,
        info: NicInfo,
        verbs: Option<Pin<KBox<Verbs>>>,
        eth: Option<Pin<KBox<EthPort>>>,
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
        let bound = BindScope::new(dev)?;
        let dev: ARef<device::Device> = dev.into();
        Ok(try_pin_init!(Self {
            bar,
            doorbells,
            rings,
            dev,
            bound,
            info,
            vectors,
            selftest_lock <- new_mutex!(()),
            selftest_vector: Atomic::new(NO_SELFTEST),
            ring_progress <- new_spinlock_irq!(0),
            ring_wait <- new_condvar!("pfnic ring"),
            contexts <- new_mutex!(contexts),
            mappings_revoked <- new_mutex!(false),
            sva_announced: AtomicFlag::new(false),
            no_pasid_announced: AtomicFlag::new(false),
            counters: Counters {
                contexts_created: Atomic::new(0),
                contexts_stopped_by_exit: Atomic::new(0),
                contexts_stuck: Atomic::new(0),
                context_failures: Atomic::new(0),
                objects_quarantined: Atomic::new(0),
            },
            verbs,
            eth,
        }? Error))
    }

    /// The PCI device, for messages and IOMMU bindings.
    pub(crate) fn device(&self) -> &device::Device {
        &self.dev
    }

    /// Runs `f` with the device known to be bound, or fails with `ENODEV` once it is unbound.
    /// Unbinding waits for `f` to return. For file operations, which hold a reference to the
    /// device but no proof that it is still bound; `f` may sleep, and must not wait for
    /// anything that waits for an unbind.
    pub(crate) fn with_bound<R>(
        &self,
        f: impl FnOnce(&device::Device<Bound>) -> Result<R>,
    ) -> Result<R> {
        self.bound.with(f).unwrap_or(Err(ENODEV))
    }

    /// Ends [`Nic::with_bound`], once every running `with_bound` is done. Called first thing at
    /// unbind.
    pub(crate) fn mark_unbound(&self, dev: &device::Device<Bound>) {
        self.bound.close(dev);
    }

    /// Allocates `bytes` of zeroed coherent DMA memory for the device (rings mapped into a
    /// process). `ENODEV` once the device is unbound.
    pub(crate) fn alloc_coherent(&self, bytes: usize) -> Result<Coherent<[u8]>> {
        self.with_bound(|dev| Coherent::zeroed_slice(dev, bytes, GFP_KERNEL))
    }

    /// Writes `value` to the doorbell at `offset` of context `ctx`'s page in BAR2: the driver
    /// rings its kernel clients' queues itself (docs/verbs.md, "User doorbells"). Never
    /// sleeps; `ENODEV` once the device is unbound.
    pub(crate) fn ring_doorbell(&self, ctx: u32, offset: usize, value: u32) -> Result {
        let at = ctx as usize * regs::DB_PAGE_SIZE + offset;
        self.doorbells
            .try_access_with(|bar| bar.try_write32(value, at))
            .ok_or(ENODEV)?
    }

    /// Runs `f` on the control registers, or fails with `ENODEV` once the device is unbound.
    /// `f` runs in an RCU read-side critical section (the BAR can be revoked meanwhile): it
    /// must not sleep, so waits for the device poll with one `with_bar` per read.
    pub(crate) fn with_bar<R>(&self, f: impl FnOnce(&Bar0<'_>) -> R) -> Result<R> {
        self.bar.try_access_with(|bar| f(bar)).ok_or(ENODEV)
    }

    /// Resets the bound device and waits until it reports ready: [`Nic::reset`] through the
    /// revocable BAR, polled outside its critical section.
    pub(crate) fn reset_device(&self) -> Result {
        self.with_bar(|bar| bar.write_reg(regs::CONTROL::zeroed().with_reset(true)))?;
        read_poll_timeout(
            || self.with_bar(|bar| bar.read(regs::STATUS).ready()),
            |ready: &bool| *ready,
            Delta::from_micros(100),
            RESET_TIMEOUT,
        )?;
        Ok(())
    }

    /// Resets the device and waits until it reports ready (at probe, before the BAR is
    /// shared).
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
