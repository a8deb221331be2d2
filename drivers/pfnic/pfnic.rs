// SPDX-License-Identifier: GPL-2.0

//! pfnic: driver for a PCIe RDMA NIC that DMAs into unpinned, pageable process memory through
//! ATS, PASID and PRI (see docs/ in the pfnic repository for the device and its interfaces).
//!
//! The driver binds the device, checks its identity and ABI, proves its MSI-X interrupt path
//! and exposes `/dev/pfnicN`. The port's netdev and the RDMA core's device are auxiliary
//! devices of the PCI function, each with a driver of its own ([`auxdev`]). Every open file
//! owns a hardware context bound to the opener's address space through the IOMMU (SVA), with
//! the PASID programmed into the device, and the RDMA verbs objects (PDs, MRs, CQs, RC QPs)
//! it creates, whose rings it maps (`verbs/`). The RDMA core's kernel clients (ib_mad's QP1,
//! rdma_cm) get one more context, without a PASID, whose queues the driver runs (`kverbs`).
//!
//! # Lock order
//!
//! Outer first; a lock is only taken while holding the ones above it in its own column:
//!
//! 0. a section of `Nic::bound` (`Nic::with_bound`, SRCU: unbinding waits for it), then the
//!    address space's `mmap_lock` (an SVA bind) or `Nic::contexts` (starting the context); it
//!    is entered holding no lock;
//! 1. the address space's `mmap_lock` (held by the kernel around `mmap()`), then
//!    `Nic::mappings_revoked`, then a file's `VerbsFile::objects`, then a ring's own lock
//!    (`SharedCoherent`, mapping it or, at unbind, freeing it);
//! 2. `VerbsFile::objects`, then `Verbs::ids`, `Verbs::cmd_lock` (the admin mailbox), the
//!    event queue's `routes` spinlock or a channel's `queue` spinlock (closing it at unbind);
//! 3. `Nic::contexts`, then the address space's `i_mmap_rwsem` (revoking mappings at unbind);
//! 4. `CompletionEvents::readers` (a completion channel's), then its `queue` spinlock;
//! 5. the event queue's `routes` spinlock, then a channel's `queue` spinlock;
//! 6. (the `odp` memory mode) `VerbsFile::objects`, then an ODP MR's umem lock (the core's
//!    `ib_umem_odp`), then the MR's `alive` lock (`verbs::odp::Mirror`), then
//!    `Verbs::cmd_lock`; the umem's interval notifier takes the umem lock inside the kernel's
//!    invalidation (with `mmap_lock` held, possibly in reclaim), so nothing allocates memory
//!    or takes `mmap_lock` while holding it, and the core's `hmm_range_fault()` runs before
//!    it is taken;
//! 7. (the RDMA core's kernel clients, `kverbs`) a kernel CQ's consumer index, then the kernel
//!    context's QP table (`UContext::kernel_qps`), both interrupt-safe spinlocks; a kernel QP's
//!    send or receive tail alone. Posting, polling and arming take nothing else (a doorbell
//!    write is an RCU section), since kernel clients call them with interrupts off.
//!
//! The event queue's pending access alerts are a bitmap changed with atomic bit operations
//! only, from the interrupt handler and under `cmd_lock`.
//!
//! Nothing waits for the device's page faults while holding `objects` or `contexts` (a fault
//! takes `mmap_lock`), and `mappings_revoked` is never held while taking `contexts`. The
//! interrupt handlers take only spinlocks (`ring_progress`, the event queue's and its fault
//! queue, a channel's `queue`); the event queue's interrupt thread serves page faults holding
//! no lock across `hmm_range_fault()`. At unbind, `contexts` is released before any file's
//! `objects` is taken.

mod auxdev;
mod chardev;
pub mod cmd_abi;
mod context;
mod doorbells;
mod driver;
mod eth;
mod ib_device;
mod ib_uverbs;
mod irq;
mod kverbs;
mod nic;
mod pci_caps;
pub mod queue_abi;
mod regs;
mod ring;
pub mod uapi;
mod verbs;

use kernel::prelude::*;

/// The module: the PCI driver and the two auxiliary drivers of what it splits off
/// ([`auxdev`]).
#[pin_data]
struct PfnicModule {
    // Fields drop in declaration order: the PCI driver first, which removes its auxiliary
    // devices (the RDMA one before the Ethernet one), then the auxiliary drivers.
    #[pin]
    _pci: kernel::driver::Registration<kernel::pci::Adapter<driver::PfnicDriver>>,
    #[pin]
    _rdma: kernel::driver::Registration<kernel::auxiliary::Adapter<ib_device::RdmaDriver>>,
    #[pin]
    _eth: kernel::driver::Registration<kernel::auxiliary::Adapter<eth::EthDriver>>,
}

impl kernel::InPlaceModule for PfnicModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        // Initialized in the order written: the auxiliary drivers first, so that the devices
        // the PCI driver adds at probe are bound at once, the Ethernet one before the RDMA one.
        try_pin_init!(Self {
            _eth <- kernel::driver::Registration::new(auxdev::ETH_DRIVER, module),
            _rdma <- kernel::driver::Registration::new(auxdev::RDMA_DRIVER, module),
            _pci <- kernel::driver::Registration::new(
                <Self as kernel::ModuleMetadata>::NAME,
                module
            ),
        })
    }
}

module! {
    type: PfnicModule,
    name: "pfnic",
    authors: ["pfnic authors"],
    description: "pfnic RDMA NIC with ATS, PASID and PRI",
    license: "GPL",
}
