// SPDX-License-Identifier: GPL-2.0

//! Binding to the PCI device: probe brings a pfnic up, unbind quiesces it.

use crate::{
    auxdev::{self, AuxDevices},
    chardev::{self, NicIndex, PfnicFile},
    doorbells::DoorbellPages,
    eth::EthPort,
    irq::{self, VectorRegistration},
    nic::{self, Nic, NicInfo},
    pci_caps::ExtCaps,
    regs,
    ring::Rings,
    uapi,
    verbs::{dm::DeviceMemory, Limits, Verbs},
};
use kernel::{
    debugfs,
    device::Core,
    dma::{Device as _, DmaMask},
    io::Io,
    miscdevice::MiscDeviceRegistration,
    new_mutex, pci,
    prelude::*,
    sync::{Arc, Mutex},
};

/// The device's vendor and device ID (docs/registers.md).
const PFNIC_VENDOR: pci::Vendor = pci::Vendor::REDHAT_QUMRANET;
const PFNIC_DEVICE: u32 = 0x10f5;
/// At least an admin/event vector and one completion vector.
const MIN_VECTORS: u32 = 2;

pub(crate) struct PfnicDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <PfnicDriver as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(PFNIC_VENDOR, PFNIC_DEVICE), ())]
);

/// Driver data of one bound pfnic. Fields drop in order: the auxiliary devices (the RDMA
/// core's device, the netdev) and the character device go first so nothing new can start,
/// then the interrupt handlers, then the driver's reference to the [`Nic`] (open files may
/// hold more).
#[pin_data]
pub(crate) struct PfnicData<'bound> {
    /// `pfnic.rdma.N`, whose driver registers `pfnicN` in the RDMA core, and `pfnic.eth.N`,
    /// whose driver registers the port's netdev (`ethN`); removed at unbind, the RDMA one
    /// first (the RDMA core holds the netdev while the RDMA device is registered).
    #[pin]
    aux: Mutex<AuxDevices<'bound>>,
    #[pin]
    misc: MiscDeviceRegistration<PfnicFile>,
    /// `/sys/kernel/debug/pfnicN/stats`. The file keeps its directory.
    _stats: Pin<KBox<debugfs::File<Arc<Nic>>>>,
    irqs: KVec<Pin<KBox<VectorRegistration<'bound>>>>,
    nic: Arc<Nic>,
    index: NicIndex,
    pdev: &'bound pci::Device,
}

impl pci::Driver for PfnicDriver {
    type IdInfo = ();
    type Data<'bound> = PfnicData<'bound>;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            pdev.enable_device_mem()?;
            pdev.set_master();
            // The device takes 64-bit DMA addresses everywhere (`_LO`/`_HI` registers, 64-bit
            // queue fields: docs/registers.md, docs/verbs.md). Setting the mask also tells the
            // DMA core whether the device needs syncs (it does not, being coherent), which the
            // core's ODP umems ask before they map user pages.
            // SAFETY: Nothing allocates or maps DMA memory for the device before this: probe has
            // only enabled it.
            unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>())? };

            let bar = pdev.iomap_region_sized::<{ regs::BAR0_SIZE }>(0, c"pfnic/bar0")?;
            let (device_abi, fw_version, hw_caps) = nic::identify(pdev, &bar)?;
            Nic::reset(&bar)
                .inspect_err(|_| dev_err!(pdev, "device did not come out of reset\n"))?;
            let hw_caps = regs::CAPS::from_raw(hw_caps);
            let hw_vectors = bar.read(regs::NUM_VECTORS).value().get();
            let num_contexts = bar.read(regs::NUM_CONTEXTS).value().get();
            let ext = ExtCaps::read(pdev).inspect_err(|_| {
                dev_err!(
                    pdev,
                    "extended config space unreadable (no ECAM?): ATS/PASID/PRI unknown\n"
                )
            })?;

            let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
            let vectors = pdev
                .alloc_irq_vectors_managed(MIN_VECTORS, hw_vectors.max(MIN_VECTORS), msix)
                .inspect_err(|e| dev_err!(pdev, "cannot allocate MSI-X vectors: {:?}\n", e))?;

            let index = NicIndex::alloc()
                .inspect_err(|_| dev_err!(pdev, "more than {} pfnics\n", chardev::MAX_NICS))?;
            let verbs = if hw_caps.verbs() {
                let limits = Limits::read(&bar, device_abi)
                    .inspect_err(|_| dev_err!(pdev, "verbs limits out of range; verbs disabled\n"));
                // Device memory (ABI 1.13): without it, or if BAR1 is not what `DM_SIZE`
                // says, the device works on without.
                let dm_size = bar.read(regs::DM_SIZE).value().get();
                let dm = (hw_caps.dm() && device_abi & 0xffff >= regs::ABI_MINOR_DM)
                    .then(|| DeviceMemory::new(pdev, dm_size))
                    .transpose()
                    .inspect_err(|_| {
                        dev_err!(
                            pdev,
                            "BAR1 is not the device memory; none used
"
                        )
                    })
                    .unwrap_or(None);
                match limits {
                    Ok(limits) => Some(KBox::pin_init(
                        Verbs::new(
                            pdev.as_ref(),
                            limits,
                            num_contexts,
                            hw_caps.wire() && device_abi & 0xffff >= regs::ABI_MINOR_PORT,
                            dm,
                        )?,
                        GFP_KERNEL,
                    )?),
                    Err(_) => None,
                }
            } else {
                None
            };
            let mut caps = caps(pdev, hw_caps, &ext);
            if verbs.is_none() {
                caps &= !(uapi::PFNIC_CAP_VERBS | uapi::PFNIC_CAP_WIRE);
            }
            // The port registers came with ABI 1.5: an older device that claims a wire is
            // driven as the loopback port it can only be to this driver.
            if device_abi & 0xffff < regs::ABI_MINOR_PORT {
                caps &= !uapi::PFNIC_CAP_WIRE;
            }
            if verbs.as_ref().is_some_and(|v| v.limits.max_srqs != 0) {
                caps |= uapi::PFNIC_CAP_SRQ;
            }
            if verbs.as_ref().is_some_and(|v| v.dm.is_some()) {
                caps |= uapi::PFNIC_CAP_DM;
            }
            if verbs.is_some()
                && hw_caps.timestamps()
                && device_abi & 0xffff >= regs::ABI_MINOR_TIMESTAMPS
            {
                caps |= uapi::PFNIC_CAP_TIMESTAMPS;
            }
            // Driver-managed faults need the tables and came with ABI 1.9.
            if caps & uapi::PFNIC_CAP_TABLES != 0 && device_abi & 0xffff >= regs::ABI_MINOR_FAULTS {
                caps |= uapi::PFNIC_CAP_FAULTS;
            }
            // The port's Ethernet queues (ABI 1.16), behind a netdev: on the last vector (the
            // descriptor rings' completions may share it).
            let eth = if caps & uapi::PFNIC_CAP_WIRE != 0
                && hw_caps.eth()
                && device_abi & 0xffff >= regs::ABI_MINOR_ETH
            {
                let lo = bar.read(regs::PORT_MAC_LO).value().get().to_le_bytes();
                let hi = bar.read(regs::PORT_MAC_HI).value().get().to_le_bytes();
                let mac = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]];
                let vector = u32::try_from(vectors.len() - 1)?;
                Some(KBox::pin_init(
                    EthPort::new(pdev.as_ref(), vector, mac)?,
                    GFP_KERNEL,
                )?)
            } else {
                None
            };
            let (doorbell_pages, doorbells) = DoorbellPages::new(pdev)?;
            let info = NicInfo {
                index: index.get(),
                device_abi,
                fw_version,
                vendor_id: pdev.vendor_id().as_raw(),
                device_id: pdev.device_id(),
                subsystem_vendor_id: pdev.subsystem_vendor_id(),
                subsystem_id: pdev.subsystem_device_id(),
                revision: pdev.revision_id(),
                pci_rid: pdev.dev_id(),
                caps,
                pasid_width: if ext.pasid.is_some() {
                    ext.pasid_width
                } else {
                    0
                },
                pri_max_requests: if ext.pri.is_some() {
                    ext.pri_max_requests
                } else {
                    0
                },
                num_vectors: u32::try_from(vectors.len())?,
                num_contexts,
                doorbells: doorbell_pages,
            };

            let rings = Rings::new(pdev.as_ref(), num_contexts)?;
            let nic = Arc::pin_init(
                Nic::new(
                    bar.into_devres()?,
                    doorbells,
                    rings,
                    pdev.as_ref(),
                    info,
                    verbs,
                    eth,
                )?,
                GFP_KERNEL,
            )?;
            nic.program_rings()?;
            nic.program_backup()?;
            let irqs = irq::register_all(vectors, &nic)?;

            // Prove the interrupt path before anyone can use the device.
            let test = nic.selftest(0, 0x5eed_cafe).inspect_err(|e| {
                dev_err!(pdev, "interrupt self-test on vector 0 failed: {:?}\n", e)
            })?;
            if test.echo != !0x5eed_cafe_u32 {
                dev_err!(pdev, "self-test echoed {:#x}\n", test.echo);
                return Err(EIO);
            }

            dev_info!(
                pdev,
                "pfnic{}: ABI {}.{} fw {:#x}, {} MSI-X vectors (self-test {} us), {} contexts, \
                 ATS {}, PASID {} ({} bits), PRI {} ({} requests)\n",
                info.index,
                device_abi >> 16,
                device_abi & 0xffff,
                fw_version,
                info.num_vectors,
                test.latency.as_micros_ceil(),
                num_contexts,
                on_off(info.caps & uapi::PFNIC_CAP_ATS != 0),
                on_off(info.caps & uapi::PFNIC_CAP_PASID != 0),
                info.pasid_width,
                on_off(info.caps & uapi::PFNIC_CAP_PRI != 0),
                info.pri_max_requests,
            );

            let stats = KBox::pin_init(
                debugfs::Dir::new(index.name()).read_callback_file(
                    c"stats",
                    nic.clone(),
                    &|nic: &Arc<Nic>, f| nic.write_stats(f),
                ),
                GFP_KERNEL,
            )?;

            // The netdev first: the RDMA device ties its port to it. A device whose driver
            // fails to bind stays, unbound; the NIC works on without it.
            let eth = nic
                .eth
                .is_some()
                .then(|| auxdev::add(pdev.as_ref(), auxdev::ETH, &index, &nic))
                .transpose()
                .inspect_err(|e| dev_warn!(pdev, "no Ethernet auxiliary device: {:?}\n", e))
                .unwrap_or(None);
            let rdma = nic
                .verbs()
                .is_ok()
                .then(|| auxdev::add(pdev.as_ref(), auxdev::RDMA, &index, &nic))
                .transpose()
                .inspect_err(|e| dev_warn!(pdev, "no RDMA auxiliary device: {:?}\n", e))
                .unwrap_or(None);
            // Together at once (nothing in between returns early), so they drop in order.
            let aux = AuxDevices {
                _rdma: rdma,
                _eth: eth,
            };

            Ok(try_pin_init!(PfnicData {
                aux <- new_mutex!(aux),
                misc <- chardev::register(&index, nic.clone()),
                _stats: stats,
                irqs,
                nic,
                index,
                pdev,
            }? Error))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // First, while the device works, `pfnic.rdma.N` goes: its driver unregisters
        // `pfnicN`, and the RDMA core destroys the objects of every user context through the
        // driver and disassociates the contexts, which frees their rings and stops their
        // hardware contexts.
        // Then `pfnic.eth.N`, whose netdev the RDMA core let go of: it stops its queues.
        let aux = core::mem::take(&mut *this.aux.lock());
        drop(aux);
        // No file operation uses the device as bound from now on (SVA binds, DMA allocations).
        this.nic.mark_unbound(pdev.as_ref());
        // Quiesce the hardware while its interrupt handlers are still registered: the reset
        // stops every context, after which their PASIDs can be unbound.
        let reset = this.nic.reset_device().is_ok();
        if !reset {
            dev_warn!(this.pdev, "device did not reset at unbind\n");
        }
        this.nic.revoke_contexts();
        // The reset emptied the device's tables: what it refused to destroy goes now.
        if let (true, Ok(verbs)) = (reset, this.nic.verbs()) {
            verbs.quarantined.lock().clear();
        }
        dev_info!(this.pdev, "pfnic{} unbound\n", this.index.get());
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// The capabilities userspace may rely on: what the device implements *and* what its config
/// space advertises. A mismatch means a broken device model and is reported.
fn caps(pdev: &pci::Device<Core<'_>>, hw: regs::CAPS, ext: &ExtCaps) -> u64 {
    let mut caps = 0;
    for (name, in_hw, in_cfg, bit) in [
        ("ATS", hw.ats(), ext.ats.is_some(), uapi::PFNIC_CAP_ATS),
        (
            "PASID",
            hw.pasid(),
            ext.pasid.is_some(),
            uapi::PFNIC_CAP_PASID,
        ),
        ("PRI", hw.pri(), ext.pri.is_some(), uapi::PFNIC_CAP_PRI),
    ] {
        if in_hw != in_cfg {
            dev_warn!(
                pdev,
                "{} is {} in CAPS but {} in config space; not using it\n",
                name,
                on_off(in_hw),
                on_off(in_cfg)
            );
        }
        if in_hw && in_cfg {
            caps |= bit;
        }
    }
    if hw.selftest() {
        caps |= uapi::PFNIC_CAP_SELFTEST;
    }
    if hw.verbs() {
        caps |= uapi::PFNIC_CAP_VERBS;
    }
    if hw.wire() {
        caps |= uapi::PFNIC_CAP_WIRE;
    }
    if hw.tables() {
        caps |= uapi::PFNIC_CAP_TABLES;
    }
    caps
}
