//! pfnic-info: show every pfnic, its capabilities as the driver and the PCI core see them, and
//! prove its interrupts work.
//!
//! usage: pfnic-info [--no-selftest]

use pfnic_sys::pci::{self, Config};
use pfnic_sys::{uapi, Device};
use std::process::ExitCode;

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn show(dev: &Device, selftest: bool) -> Result<(), String> {
    let q = dev
        .query()
        .map_err(|e| format!("{}: query: {e}", dev.path().display()))?;
    let bdf = format!(
        "0000:{:02x}:{:02x}.{}",
        q.pci_rid >> 8,
        (q.pci_rid >> 3) & 0x1f,
        q.pci_rid & 7
    );
    println!("{}: pfnic at {bdf}", dev.path().display());
    println!(
        "  ids:           {:04x}:{:04x} (subsystem {:04x}:{:04x}) rev {}",
        q.vendor_id, q.device_id, q.subsystem_vendor_id, q.subsystem_id, q.revision
    );
    println!(
        "  versions:      device ABI {}.{}, firmware {}.{}.{}, uAPI {}",
        q.device_abi >> 16,
        q.device_abi & 0xffff,
        q.fw_version >> 24,
        (q.fw_version >> 16) & 0xff,
        q.fw_version & 0xffff,
        q.uapi_version
    );
    println!(
        "  resources:     {} MSI-X vectors, {} contexts",
        q.num_vectors, q.num_contexts
    );
    println!(
        "  driver caps:   ATS {}, PASID {} ({} bits), PRI {} ({} requests)",
        yes(q.caps & uapi::PFNIC_CAP_ATS != 0),
        yes(q.caps & uapi::PFNIC_CAP_PASID != 0),
        q.pasid_width,
        yes(q.caps & uapi::PFNIC_CAP_PRI != 0),
        q.pri_max_requests
    );
    if q.caps & uapi::PFNIC_CAP_VERBS != 0 {
        let v = dev
            .query_verbs()
            .map_err(|e| format!("{}: query verbs: {e}", dev.path().display()))?;
        let p = dev
            .query_port()
            .map_err(|e| format!("{}: query port: {e}", dev.path().display()))?;
        println!(
            "  verbs:         RC, {} QPs x {} WRs, {} CQs, {} MRs, {} SGEs; ODP{}{}",
            v.max_qp,
            v.max_qp_wr,
            v.max_cq,
            v.max_mr,
            v.max_sge,
            if v.odp_general_caps & uapi::PFNIC_ODP_SUPPORT != 0 {
                " yes"
            } else {
                " no"
            },
            if v.odp_general_caps & uapi::PFNIC_ODP_SUPPORT_IMPLICIT != 0 {
                " (implicit too)"
            } else {
                ""
            }
        );
        println!(
            "  port 1:        {}, LID {}, loopback",
            if p.state == 4 { "ACTIVE" } else { "down" },
            p.lid
        );
    }
    match Config::read(&bdf) {
        Ok(cfg) => {
            let names: Vec<String> = cfg
                .ext_caps()
                .iter()
                .map(|&(id, off)| match id {
                    pci::EXT_CAP_ATS => format!("ATS@{off:#x}"),
                    pci::EXT_CAP_PASID => format!("PASID@{off:#x}"),
                    pci::EXT_CAP_PRI => format!("PRI@{off:#x}"),
                    other => format!("{other:#x}@{off:#x}"),
                })
                .collect();
            println!("  config space:  {}", names.join(" "));
        }
        Err(e) => println!("  config space:  unreadable ({e})"),
    }
    if selftest {
        let mut lat = Vec::new();
        for v in 0..q.num_vectors {
            let cookie = 0x1234_5678 ^ v;
            let r = dev
                .selftest(v, cookie)
                .map_err(|e| format!("self-test on vector {v}: {e}"))?;
            if r.echo != !cookie {
                return Err(format!("self-test on vector {v}: wrong echo {:#x}", r.echo));
            }
            lat.push(r.latency_ns / 1000);
        }
        println!(
            "  interrupts:    self-test passed on all {} vectors, round trip (us): {:?}",
            q.num_vectors, lat
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let selftest = !std::env::args().any(|a| a == "--no-selftest");
    let paths = match pfnic_sys::devices() {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => {
            eprintln!("pfnic-info: no /dev/pfnicN (is the pfnic module loaded?)");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("pfnic-info: /dev: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for p in paths {
        let r = Device::open(&p)
            .map_err(|e| format!("{}: {e}", p.display()))
            .and_then(|d| show(&d, selftest));
        if let Err(e) = r {
            eprintln!("pfnic-info: {e}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
