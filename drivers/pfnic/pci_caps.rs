// SPDX-License-Identifier: GPL-2.0

//! The PCIe extended capabilities pfnic relies on, as the guest's config space shows them.

use kernel::{device::Bound, io::Io, pci, prelude::*};

const EXT_CAP_START: usize = 0x100;
const EXT_CAP_ID_ATS: u32 = 0x0f;
const EXT_CAP_ID_PRI: u32 = 0x13;
const EXT_CAP_ID_PASID: u32 = 0x1b;
/// PASID capability register: bits 12:8 hold the maximum PASID width.
const PASID_CAP: usize = 0x04;
/// PRI outstanding page request capacity register.
const PRI_MAX_REQ: usize = 0x08;
/// A well-formed list has at most (4096 - 256) / 4 entries; stop a looping one there.
const MAX_EXT_CAPS: usize = 960;

/// Offsets and parameters of the ATS, PASID and PRI capabilities (`None` when absent).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExtCaps {
    pub(crate) ats: Option<usize>,
    pub(crate) pasid: Option<usize>,
    pub(crate) pri: Option<usize>,
    pub(crate) pasid_width: u32,
    pub(crate) pri_max_requests: u32,
}

impl ExtCaps {
    /// Walks the extended capability list of `pdev`.
    pub(crate) fn read(pdev: &pci::Device<Bound>) -> Result<Self> {
        let cfg = pdev.config_space_extended()?;
        let mut caps = ExtCaps::default();
        let mut pos = EXT_CAP_START;

        for _ in 0..MAX_EXT_CAPS {
            let header = cfg.try_read32(pos)?;
            if header == 0 || header == u32::MAX {
                break;
            }
            match header & 0xffff {
                EXT_CAP_ID_ATS => caps.ats = Some(pos),
                EXT_CAP_ID_PASID => {
                    caps.pasid = Some(pos);
                    caps.pasid_width = u32::from((cfg.try_read16(pos + PASID_CAP)? >> 8) & 0x1f);
                }
                EXT_CAP_ID_PRI => {
                    caps.pri = Some(pos);
                    caps.pri_max_requests = cfg.try_read32(pos + PRI_MAX_REQ)?;
                }
                _ => {}
            }
            pos = (header >> 20) as usize & !3;
            if pos < EXT_CAP_START {
                break;
            }
        }
        Ok(caps)
    }
}
