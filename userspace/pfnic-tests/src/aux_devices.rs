//! The driver's shape: the PCI function's driver adds auxiliary devices for what other
//! subsystems see (drivers/pfnic/auxdev.rs), `pfnic.eth.N` for the port's netdev and
//! `pfnic.rdma.N` for the RDMA core's `pfnicN`, each bound to its own driver.

use std::path::{Path, PathBuf};

use crate::common::{nic, Nic};
use crate::ktap::{Failure, Test, TestResult};
use crate::lifecycle::{check_working, need_module, uverbs_context_across};
use crate::verbs_common::port_attr;
use pfnic_cli::outln;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_aux_devices",
        run: test_aux_devices,
    },
    &Test {
        name: "test_aux_rdma_unbind",
        run: test_aux_rdma_unbind,
    },
    &Test {
        name: "test_wire_aux_devices",
        run: || with_wire(test_aux_devices),
    },
    &Test {
        name: "test_wire_aux_rdma_unbind",
        run: || with_wire(test_aux_rdma_unbind),
    },
];

/// The wire guest's run of a test: a pfnic with a wire has the netdev's auxiliary device too.
fn with_wire(test: fn() -> TestResult) -> TestResult {
    if !port_attr()?.has_wire() {
        skip!("the device has no wire");
    }
    test()
}

const AUX_DEVICES: &str = "/sys/bus/auxiliary/devices";
const AUX_DRIVERS: &str = "/sys/bus/auxiliary/drivers";

/// The NIC's index N (of `pfnicN`).
fn index() -> Result<u32, Failure> {
    let name = crate::rdma_core::ib_name()?;
    name.trim_start_matches("pfnic")
        .parse()
        .map_err(|_| Failure::Fail(format!("{name} is not pfnicN")))
}

/// `/sys/bus/auxiliary/devices/pfnic.KIND.N`.
fn aux_device(kind: &str, index: u32) -> PathBuf {
    Path::new(AUX_DEVICES).join(format!("pfnic.{kind}.{index}"))
}

fn canonical(p: &Path) -> Result<PathBuf, Failure> {
    std::fs::canonicalize(p).map_err(|e| Failure::Fail(format!("{}: {e}", p.display())))
}

/// The name of the driver bound to a device (its `driver` link), if any.
fn driver_of(dev: &Path) -> Option<String> {
    std::fs::read_link(dev.join("driver"))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// `pfnic.KIND.N` exists, is a child of the PCI function and is bound to `pfnic.KIND`.
fn check_aux_device(n: &Nic, kind: &str, index: u32) -> TestResult {
    let dev = aux_device(kind, index);
    check!(dev.exists(), "no {}", dev.display());
    let pci = canonical(&Path::new("/sys/bus/pci/devices").join(&n.bdf))?;
    let parent = canonical(&dev)?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    check_eq!(parent, pci);
    check_eq!(driver_of(&dev), Some(format!("pfnic.{kind}")));
    Ok(())
}

/// Every pfnic with verbs has `pfnic.rdma.N`, one with a wire (and so the Ethernet queues)
/// `pfnic.eth.N` as well, none other: children of the PCI function, each bound to its own
/// driver. The RDMA core's device and the netdev are still the PCI function's (rdma-core's
/// providers match the device by its PCI IDs; udev names the netdev by its slot). Userspace
/// can unbind the RDMA driver but not the Ethernet one, whose netdev the RDMA device uses.
fn test_aux_devices() -> TestResult {
    let n = nic()?;
    let index = index()?;
    let port = port_attr()?;
    check_aux_device(&n, "rdma", index)?;
    let pci = canonical(&Path::new("/sys/bus/pci/devices").join(&n.bdf))?;
    let ib = crate::rdma_core::ib_sysfs(&crate::rdma_core::ib_name()?);
    check_eq!(canonical(&ib.join("device"))?, pci);
    let eth = aux_device("eth", index);
    if port.has_wire() {
        check_aux_device(&n, "eth", index)?;
        let netdev = crate::wire_netdev::netdev_by_mac(port.mac())?;
        let sys = Path::new("/sys/class/net").join(&netdev.name);
        check_eq!(canonical(&sys.join("device"))?, pci);
    } else {
        check!(
            !eth.exists(),
            "{} exists on a pfnic without a wire",
            eth.display()
        );
    }
    let mine: Vec<String> = std::fs::read_dir(AUX_DEVICES)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pfnic.") && name.ends_with(&format!(".{index}")))
        .collect();
    outln!("# auxiliary devices of pfnic{index}: {mine:?}");
    check_eq!(mine.len(), 1 + usize::from(port.has_wire()));
    let drivers = Path::new(AUX_DRIVERS);
    check!(
        drivers.join("pfnic.rdma/unbind").exists() && drivers.join("pfnic.rdma/bind").exists(),
        "pfnic.rdma has no bind and unbind attributes"
    );
    check!(
        drivers.join("pfnic.eth").exists()
            && !drivers.join("pfnic.eth/unbind").exists()
            && !drivers.join("pfnic.eth/bind").exists(),
        "pfnic.eth is missing, or userspace can bind or unbind it"
    );
    Ok(())
}

fn write_driver_attr(driver: &str, attr: &str, device: &str) -> TestResult {
    let path = Path::new(AUX_DRIVERS).join(driver).join(attr);
    std::fs::write(&path, device)
        .map_err(|e| Failure::Fail(format!("write {device} to {}: {e}", path.display())))
}

/// Unbinding `pfnic.rdma.N` alone takes `pfnicN` out of the RDMA core while a process holds
/// a user context on it (disassociated: its verbs fail, its mappings raise SIGBUS); the PCI
/// function stays bound and `/dev/pfnicN` and the netdev keep working. Binding it again
/// registers `pfnicN` under its name, its RoCE port tied to the netdev again.
fn test_aux_rdma_unbind() -> TestResult {
    need_module()?;
    let index = index()?;
    let device = format!("pfnic.rdma.{index}");
    let ib = crate::rdma_core::ib_sysfs(&crate::rdma_core::ib_name()?);
    let port = port_attr()?;
    let netdev = if port.has_wire() {
        Some(crate::wire_netdev::netdev_by_mac(port.mac())?)
    } else {
        None
    };
    let mut gone = false;
    let mut working = Ok(());
    uverbs_context_across(
        None,
        || {
            write_driver_attr("pfnic.rdma", "unbind", &device)?;
            gone = !ib.exists();
            // The PCI function is still bound, its own interface works, the netdev stays.
            working = check_working().and_then(|()| match &netdev {
                Some(nd) if !Path::new("/sys/class/net").join(&nd.name).exists() => Err(
                    Failure::Fail(format!("{} went with the RDMA device", nd.name)),
                ),
                _ => Ok(()),
            });
            Ok(())
        },
        || write_driver_attr("pfnic.rdma", "bind", &device),
    )?;
    check!(gone, "{} survived unbinding {device}", ib.display());
    working?;
    check_eq!(
        driver_of(&aux_device("rdma", index)),
        Some("pfnic.rdma".into())
    );
    if let Some(nd) = netdev {
        let name = crate::rdma_core::ib_name()?;
        let link = crate::rdma_core::rdma(&["link", "show", &format!("{name}/1")])?;
        check!(
            link.contains(&format!("netdev {}", nd.name)),
            "rdma link does not tie {name}/1 to {} after the bind: {link}",
            nd.name
        );
    }
    Ok(())
}
