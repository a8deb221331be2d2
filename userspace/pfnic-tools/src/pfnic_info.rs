//! pfnic-info: show every pfnic, its capabilities as the driver and the PCI core see them, its
//! port (link layer, addresses, GIDs, counters), and prove its interrupts work; or set the
//! port's IPv4 address.
//!
//! usage: pfnic-info [--no-selftest] [--device /dev/pfnicN]
//!        pfnic-info [--device /dev/pfnicN] --set-ipv4 A.B.C.D|none

use pfnic_cli::{errln, outln};
use pfnic_sys::pci::{self, Config};
use pfnic_sys::{uapi, Device, QueryPort};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

const ABOUT: &str = "\
Shows every pfnic (or the one --device names): identity, capabilities, port 1 (link layer, MAC,
IPv4 address, GIDs, counters), and runs the interrupt self-test on every vector unless
--no-selftest.";

/// A GID as rdma-core prints it: eight groups of four hex digits.
fn gid_str(gid: &[u8; 16]) -> String {
    let groups: Vec<String> = gid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    groups.join(":")
}

fn show_port(p: &QueryPort) {
    let state = if p.state == 4 { "ACTIVE" } else { "DOWN" };
    if p.port_flags & uapi::PFNIC_PORT_WIRE == 0 {
        outln!("  port 1:        {state}, LID {}, loopback", p.lid);
    } else {
        outln!(
            "  port 1:        {state}, Ethernet (RoCEv2), link {}, MTU {}",
            if p.port_flags & uapi::PFNIC_PORT_LINK_UP != 0 {
                "up"
            } else {
                "down"
            },
            128u32 << p.active_mtu.min(5)
        );
    }
    if p.port_flags & uapi::PFNIC_PORT_ADDRESSES == 0 {
        return;
    }
    let m = p.mac;
    outln!(
        "  addresses:     MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, IPv4 {}",
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5],
        if p.ipv4 == 0 {
            "none".to_string()
        } else {
            Ipv4Addr::from(p.ipv4).to_string()
        }
    );
    for (i, gid) in p.gids.iter().enumerate().take(p.gid_tbl_len as usize) {
        outln!("  GID {i}:         {}", gid_str(gid));
    }
    let counters: Vec<String> = uapi::PFNIC_PORT_COUNTER_NAMES
        .iter()
        .zip(p.counters.iter())
        .map(|(name, v)| format!("{name} {v}"))
        .collect();
    for (i, line) in counters.chunks(4).enumerate() {
        let head = if i == 0 { "port counters:" } else { "" };
        outln!("  {head:<14} {}", line.join(", "));
    }
}

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
    outln!("{}: pfnic at {bdf}", dev.path().display());
    outln!(
        "  ids:           {:04x}:{:04x} (subsystem {:04x}:{:04x}) rev {}",
        q.vendor_id,
        q.device_id,
        q.subsystem_vendor_id,
        q.subsystem_id,
        q.revision
    );
    outln!(
        "  versions:      device ABI {}.{}, firmware {}.{}.{}, uAPI {}",
        q.device_abi >> 16,
        q.device_abi & 0xffff,
        q.fw_version >> 24,
        (q.fw_version >> 16) & 0xff,
        q.fw_version & 0xffff,
        q.uapi_version
    );
    outln!(
        "  resources:     {} MSI-X vectors, {} contexts",
        q.num_vectors,
        q.num_contexts
    );
    outln!(
        "  driver caps:   ATS {}, PASID {} ({} bits), PRI {} ({} requests)",
        yes(q.caps & uapi::PFNIC_CAP_ATS != 0),
        yes(q.caps & uapi::PFNIC_CAP_PASID != 0),
        q.pasid_width,
        yes(q.caps & uapi::PFNIC_CAP_PRI != 0),
        q.pri_max_requests
    );
    if let Ok(c) = dev.query_context() {
        // This process's context: SVA if it got a PASID; odp and pinned with translation tables.
        let mut modes = Vec::new();
        if c.pasid != 0 {
            modes.push("sva");
        }
        if q.caps & uapi::PFNIC_CAP_FAULTS != 0 {
            modes.push("odp");
        }
        if q.caps & uapi::PFNIC_CAP_TABLES != 0 {
            modes.push("pinned");
        }
        let default = match c.mem_mode {
            uapi::PFNIC_MEM_MODE_SVA => "sva",
            uapi::PFNIC_MEM_MODE_PINNED => "pinned",
            uapi::PFNIC_MEM_MODE_ODP => "odp",
            _ => "?",
        };
        outln!(
            "  memory modes:  {} (default {default}; PFNIC_MEM_MODE chooses)",
            modes.join(", ")
        );
    }
    if q.caps & uapi::PFNIC_CAP_VERBS != 0 {
        let v = dev
            .query_verbs()
            .map_err(|e| format!("{}: query verbs: {e}", dev.path().display()))?;
        let p = dev
            .query_port()
            .map_err(|e| format!("{}: query port: {e}", dev.path().display()))?;
        outln!(
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
        outln!(
            "  more verbs:    {} SRQs x {} WRs; completion timestamps {}; device memory {} KiB per context",
            v.max_srq,
            v.max_srq_wr,
            if v.completion_timestamp_mask != 0 {
                "yes"
            } else {
                "no"
            },
            v.max_dm_size / 1024
        );
        show_port(&p);
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
            outln!("  config space:  {}", names.join(" "));
        }
        Err(e) => outln!("  config space:  unreadable ({e})"),
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
        outln!(
            "  interrupts:    self-test passed on all {} vectors, round trip (us): {:?}",
            q.num_vectors,
            lat
        );
    }
    Ok(())
}

/// What the command line asks.
#[derive(clap::Parser)]
#[command(name = "pfnic-info", about = ABOUT)]
struct Args {
    /// Do not run the interrupt self-test
    #[arg(long = "no-selftest", action = clap::ArgAction::SetFalse)]
    selftest: bool,
    /// Only this device (e.g. /dev/pfnic1)
    #[arg(short, long, value_name = "/dev/pfnicN")]
    device: Option<PathBuf>,
    /// Set the port's IPv4 address (its GID 1, the address RoCEv2 peers reach it at) on
    /// /dev/pfnic0, or on the --device one; 'none' or 0.0.0.0 clears it. Needs CAP_NET_ADMIN
    #[arg(long, value_name = "A.B.C.D|none", value_parser = ipv4_or_none)]
    set_ipv4: Option<PortAddress>,
}

/// `--set-ipv4`'s value: an address, or `None` to clear it.
#[derive(Clone, Copy)]
struct PortAddress(Option<Ipv4Addr>);

fn ipv4_or_none(v: &str) -> Result<PortAddress, String> {
    if v == "none" {
        return Ok(PortAddress(None));
    }
    let addr: Ipv4Addr = v
        .parse()
        .map_err(|_| format!("'{v}' is not an IPv4 address"))?;
    Ok(PortAddress((!addr.is_unspecified()).then_some(addr)))
}

/// `--set-ipv4`: sets the address of one device and says so.
fn set_ipv4(path: &PathBuf, addr: Option<Ipv4Addr>) -> Result<(), String> {
    let dev = Device::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    dev.set_port_ipv4(addr).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) => " (needs CAP_NET_ADMIN)",
            Some(libc::EINVAL) => " (not a unicast host address)",
            Some(libc::EOPNOTSUPP) => " (the device has no port registers: ABI 1.5 or later)",
            _ => "",
        };
        format!("{}: set IPv4 address: {e}{why}", path.display())
    })?;
    let p = dev
        .query_port()
        .map_err(|e| format!("{}: query port: {e}", path.display()))?;
    match addr {
        Some(a) => outln!(
            "{}: IPv4 address {a}, GID 1 {}",
            path.display(),
            gid_str(&p.gids[1])
        ),
        None => outln!("{}: IPv4 address cleared", path.display()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    if let Some(PortAddress(addr)) = args.set_ipv4 {
        let path = args.device.unwrap_or_else(|| PathBuf::from("/dev/pfnic0"));
        return match set_ipv4(&path, addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                errln!("pfnic-info: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let selftest = args.selftest;
    let paths = match args.device {
        Some(p) => Ok(vec![p]),
        None => pfnic_sys::devices(),
    };
    let paths = match paths {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => {
            errln!("pfnic-info: no /dev/pfnicN (is the pfnic module loaded?)");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            errln!("pfnic-info: /dev: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for p in paths {
        let r = Device::open(&p)
            .map_err(|e| format!("{}: {e}", p.display()))
            .and_then(|d| show(&d, selftest));
        if let Err(e) = r {
            errln!("pfnic-info: {e}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
