//! The kernel's view of pfnic PCI functions, from sysfs and /proc.

use std::fs;
use std::io;
use std::path::PathBuf;

pub const VENDOR: u16 = 0x1af4;
pub const DEVICE: u16 = 0x10f5;

pub const EXT_CAP_ATS: u16 = 0x0f;
pub const EXT_CAP_PRI: u16 = 0x13;
pub const EXT_CAP_PASID: u16 = 0x1b;
pub const CAP_MSIX: u8 = 0x11;

fn read_hex(path: PathBuf) -> io::Result<u32> {
    let s = fs::read_to_string(&path)?;
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: {e}")))
}

/// The PCI address (`0000:01:00.0`) of every pfnic function, bound or not.
pub fn functions() -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in fs::read_dir("/sys/bus/pci/devices")? {
        let e = e?;
        if read_hex(e.path().join("vendor"))? == u32::from(VENDOR)
            && read_hex(e.path().join("device"))? == u32::from(DEVICE)
        {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

pub fn sysfs(bdf: &str) -> PathBuf {
    PathBuf::from("/sys/bus/pci/devices").join(bdf)
}

/// The name of the driver bound to `bdf`, if any.
pub fn driver(bdf: &str) -> Option<String> {
    let link = fs::read_link(sysfs(bdf).join("driver")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// Config space as the kernel exposes it (4096 bytes for PCIe when read by root).
pub struct Config(Vec<u8>);

impl Config {
    pub fn read(bdf: &str) -> io::Result<Self> {
        Ok(Self(fs::read(sysfs(bdf).join("config"))?))
    }

    /// Bytes of config space the kernel let us read.
    pub fn size(&self) -> usize {
        self.0.len()
    }

    pub fn u8(&self, off: usize) -> u8 {
        self.0.get(off).copied().unwrap_or(0xff)
    }

    pub fn u16(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.u8(off), self.u8(off + 1)])
    }

    pub fn u32(&self, off: usize) -> u32 {
        u32::from(self.u16(off)) | (u32::from(self.u16(off + 2)) << 16)
    }

    /// Offset of standard capability `id`.
    pub fn cap(&self, id: u8) -> Option<usize> {
        let mut pos = usize::from(self.u8(0x34) & 0xfc);
        for _ in 0..48 {
            if pos == 0 {
                return None;
            }
            if self.u8(pos) == id {
                return Some(pos);
            }
            pos = usize::from(self.u8(pos + 1) & 0xfc);
        }
        None
    }

    /// The extended capabilities in list order, as (id, offset).
    pub fn ext_caps(&self) -> Vec<(u16, usize)> {
        let mut out = Vec::new();
        let mut pos = 0x100;
        while pos >= 0x100 && pos + 4 <= self.size() && out.len() < 64 {
            let hdr = self.u32(pos);
            if hdr == 0 || hdr == u32::MAX {
                break;
            }
            out.push(((hdr & 0xffff) as u16, pos));
            pos = (hdr >> 20) as usize & !3;
        }
        out
    }

    pub fn ext_cap(&self, id: u16) -> Option<usize> {
        self.ext_caps()
            .into_iter()
            .find(|&(i, _)| i == id)
            .map(|(_, o)| o)
    }
}

/// Interrupt counts of the pfnic's MSI-X vectors from /proc/interrupts, indexed by vector.
pub fn msix_counts(bdf: &str) -> io::Result<Vec<u64>> {
    let text = fs::read_to_string("/proc/interrupts")?;
    let ncpu = text
        .lines()
        .next()
        .map_or(0, |l| l.split_whitespace().count());
    let mut counts = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.contains(bdf) && l.contains("MSIX"))
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let total: u64 = fields
            .iter()
            .skip(1)
            .take(ncpu)
            .filter_map(|f| f.parse::<u64>().ok())
            .sum();
        // "...MSIX-0000:01:00.0 3-edge pfnic": the hardware IRQ number is the vector index.
        let vector = fields
            .iter()
            .find_map(|f| f.strip_suffix("-edge")?.parse::<usize>().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, line.to_string()))?;
        if counts.len() <= vector {
            counts.resize(vector + 1, 0);
        }
        counts[vector] = total;
    }
    Ok(counts)
}

/// The /proc/interrupts lines of the pfnic's MSI-X vectors.
pub fn msix_lines(bdf: &str) -> io::Result<Vec<String>> {
    Ok(fs::read_to_string("/proc/interrupts")?
        .lines()
        .filter(|l| l.contains(bdf) && l.contains("MSIX"))
        .map(str::to_string)
        .collect())
}
