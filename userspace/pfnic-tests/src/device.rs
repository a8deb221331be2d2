//! Probe, identity and capabilities as the guest kernel and the driver see them.

use crate::common::nic;
use crate::ktap::{Test, TestResult};
use pfnic_sys::pci::{self, Config};
use pfnic_sys::uapi;
use std::os::unix::fs::FileTypeExt;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_probe",
        run: test_probe,
    },
    &Test {
        name: "test_query_device",
        run: test_query_device,
    },
    &Test {
        name: "test_pci_caps_guest_view",
        run: test_pci_caps_guest_view,
    },
    &Test {
        name: "test_query_caps_match_config",
        run: test_query_caps_match_config,
    },
];

fn test_probe() -> TestResult {
    let fns = pci::functions()?;
    check_eq!(fns.len(), 1);
    check_eq!(pci::driver(&fns[0]).as_deref(), Some("pfnic"));
    let devs = pfnic_sys::devices()?;
    check_eq!(devs.len(), 1);
    check!(
        std::fs::metadata(&devs[0])?.file_type().is_char_device(),
        "{:?} is not a char device",
        devs[0]
    );
    check_eq!(devs[0].to_str(), Some("/dev/pfnic0"));
    Ok(())
}

fn test_query_device() -> TestResult {
    let n = nic()?;
    let q = n.dev.query()?;
    check_eq!(q.uapi_version, uapi::PFNIC_UAPI_VERSION);
    check_eq!(q.device_abi >> 16, 1);
    check!(q.fw_version != 0, "fw_version is 0");
    check_eq!(q.vendor_id, pci::VENDOR);
    check_eq!(q.device_id, pci::DEVICE);
    let cfg = Config::read(&n.bdf)?;
    check_eq!(q.subsystem_vendor_id, cfg.u16(0x2c));
    check_eq!(q.subsystem_id, cfg.u16(0x2e));
    check_eq!(q.revision, u32::from(cfg.u8(0x08)));
    // 0000:BB:DD.F -> requester ID BB << 8 | DD << 3 | F
    let parts: Vec<u32> = n.bdf[5..]
        .split([':', '.'])
        .map(|p| u32::from_str_radix(p, 16))
        .collect::<Result<_, _>>()?;
    check_eq!(q.pci_rid, (parts[0] << 8) | (parts[1] << 3) | parts[2]);
    check!(q.num_vectors >= 2, "only {} vectors", q.num_vectors);
    check!(q.num_contexts > 0, "no contexts");
    check_eq!(q.index, 0);
    check!(
        q.caps & uapi::PFNIC_CAP_SELFTEST != 0,
        "no self-test capability"
    );
    check_eq!(q.reserved, [0u64; 4]);
    // The vectors the driver allocated are the ones the kernel shows.
    let msi = std::fs::read_dir(pci::sysfs(&n.bdf).join("msi_irqs"))?.count();
    check_eq!(msi, q.num_vectors as usize);
    Ok(())
}

fn test_pci_caps_guest_view() -> TestResult {
    let n = nic()?;
    let cfg = Config::read(&n.bdf)?;
    check_eq!(cfg.size(), 4096);
    let ids: Vec<u16> = cfg.ext_caps().iter().map(|&(id, _)| id).collect();
    check_eq!(
        ids,
        vec![pci::EXT_CAP_ATS, pci::EXT_CAP_PASID, pci::EXT_CAP_PRI]
    );

    let ats = cfg.ext_cap(pci::EXT_CAP_ATS).unwrap_or(0);
    check!(
        cfg.u16(ats + 4) & (1 << 5) != 0,
        "ATS: page-aligned request bit clear"
    );
    let pasid = cfg.ext_cap(pci::EXT_CAP_PASID).unwrap_or(0);
    check_eq!((cfg.u16(pasid + 4) >> 8) & 0x1f, 20);
    let pri = cfg.ext_cap(pci::EXT_CAP_PRI).unwrap_or(0);
    check_eq!(cfg.u32(pri + 8), 2048);
    check!(
        cfg.u16(pri + 6) & (1 << 15) != 0,
        "PRI: PRG response PASID required bit clear"
    );

    let msix = cfg.cap(pci::CAP_MSIX).ok_or("no MSI-X capability")?;
    check!(
        cfg.u16(msix + 2) & 0x8000 != 0,
        "MSI-X not enabled by the driver"
    );
    check!(
        cfg.u16(0x04) & 0x6 == 0x6,
        "memory decoding / bus mastering not enabled"
    );
    Ok(())
}

fn test_query_caps_match_config() -> TestResult {
    let n = nic()?;
    let q = n.dev.query()?;
    let cfg = Config::read(&n.bdf)?;
    check_eq!(
        q.caps & uapi::PFNIC_CAP_ATS != 0,
        cfg.ext_cap(pci::EXT_CAP_ATS).is_some()
    );
    check_eq!(
        q.caps & uapi::PFNIC_CAP_PASID != 0,
        cfg.ext_cap(pci::EXT_CAP_PASID).is_some()
    );
    check_eq!(
        q.caps & uapi::PFNIC_CAP_PRI != 0,
        cfg.ext_cap(pci::EXT_CAP_PRI).is_some()
    );
    check_eq!(q.pasid_width, 20);
    check_eq!(q.pri_max_requests, 2048);
    Ok(())
}
