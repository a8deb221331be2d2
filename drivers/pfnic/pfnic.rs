// SPDX-License-Identifier: GPL-2.0

//! pfnic: driver for a PCIe RDMA NIC that DMAs into unpinned, pageable process memory through
//! ATS, PASID and PRI (see docs/ in the pfnic repository for the device and its interfaces).
//!
//! The driver binds the device, checks its identity and ABI, proves its MSI-X interrupt path
//! and exposes `/dev/pfnicN`. Every open file owns a hardware context bound to the opener's
//! address space through the IOMMU (SVA), with the PASID programmed into the device, and the
//! RDMA verbs objects (PDs, MRs, CQs, RC QPs) it creates, whose rings it maps (`verbs/`).

mod chardev;
mod context;
mod driver;
mod irq;
mod nic;
mod pci_caps;
mod regs;
mod ring;
pub mod uapi;
mod verbs;

kernel::module_pci_driver! {
    type: driver::PfnicDriver,
    name: "pfnic",
    authors: ["pfnic authors"],
    description: "pfnic RDMA NIC with ATS, PASID and PRI",
    license: "GPL",
}
