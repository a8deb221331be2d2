// SPDX-License-Identifier: GPL-2.0

//! Device memory (docs/verbs.md, "Device memory"; `ibv_alloc_dm`, `ibv_reg_dm_mr`): the pages
//! of BAR1, handed out to files and mapped into their processes, and MRs over them.
//!
//! Pages go from the device to a file, zeroed, and come back only when the file is released:
//! a file's mappings hold it open, so by then no process maps them any more. A freed
//! allocation's pages stay the file's, for its next allocations: a process that keeps a
//! mapping of them after `ibv_free_dm` reaches only its own memory, never another process's.

use super::{args, cmd, file::Mr, file::VerbsFile, mr::check_local_write, Limits};
use crate::uapi;
use kernel::{
    bitmap::BitmapVec, device::Bound, io::Io, mm::virt::VmaNew, pci, prelude::*,
    rbtree::RBTreeNodeReservation, types::ScopeGuard,
};

/// The BAR that holds device memory.
const BAR: u32 = 1;
/// The granule of allocations and mappings.
pub(crate) const DM_PAGE: usize = 4096;
/// `MR_SET` flag: an MR over device memory, zero-based (ABI 1.13).
const MR_FLAG_DM: u32 = 1 << 2;
/// Access bits a device memory MR may have.
const DM_ACCESS: u32 = uapi::PFNIC_ACCESS_LOCAL_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_READ
    | uapi::PFNIC_ACCESS_REMOTE_ATOMIC;

/// BAR1 of a device with device memory.
pub(crate) struct DeviceMemory {
    /// The device memory, which processes map.
    mem: pci::UserIoRange,
    /// The driver's mapping, to zero pages before a file gets them.
    bar: pci::DevresBar,
}

impl DeviceMemory {
    /// Finds BAR1 of `pdev`, `size` bytes (the device's `DM_SIZE`), and claims and maps it for
    /// as long as the device is bound.
    pub(crate) fn new(pdev: &pci::Device<Bound>, size: u32) -> Result<Self> {
        let len = pdev.resource_len(BAR)?;
        if size == 0 || !(size as usize).is_multiple_of(DM_PAGE) || len < u64::from(size) {
            return Err(EIO);
        }
        let bar = pdev.iomap_region(BAR, c"pfnic/dm")?;
        // SAFETY: `pdev` is a pfnic with `CAPS.DM` (docs/registers.md): the first `size` bytes
        // of BAR1 are its device memory, which the device uses for work requests and which
        // holds no registers, so a process that maps pages of it reaches nothing else. The
        // driver removes every file's mappings at unbind (`Nic::revoke_contexts`), before the
        // BAR is released.
        let mem = unsafe { bar.user_io(0, u64::from(size)) }.map_err(|_| EIO)?;
        Ok(Self {
            mem,
            bar: bar.into_devres()?,
        })
    }

    /// Pages of device memory.
    pub(crate) fn pages(&self) -> u32 {
        (self.mem.len() / DM_PAGE as u64) as u32
    }

    /// Zeroes pages `first..first + pages` (before a file gets them).
    fn zero(&self, first: u32, pages: u32) -> Result {
        let base = first as usize * DM_PAGE;
        self.bar
            .try_access_with(|bar| -> Result {
                for off in (0..pages as usize * DM_PAGE).step_by(4) {
                    bar.try_write32(0, base + off)?;
                }
                Ok(())
            })
            .ok_or(ENODEV)?
    }

    /// Maps pages `first..first + pages` into `vma`, uncached; the vma may map fewer. `EINVAL`
    /// past the device memory.
    fn map(&self, first: u32, pages: u32, vma: &VmaNew) -> Result {
        self.mem.map(
            vma,
            u64::from(first) * DM_PAGE as u64,
            pages as usize * DM_PAGE,
        )
    }
}

/// A run of device memory pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DmRun {
    pub(crate) first: u32,
    pub(crate) pages: u32,
}

/// A device memory allocation of a file.
pub(crate) struct Dm {
    pub(crate) run: DmRun,
    /// Bytes asked for.
    pub(crate) length: u64,
    /// MRs over it.
    pub(crate) mrs: u32,
    /// `mmap()` token.
    pub(crate) token: u64,
}

/// Whether bit `i` of `bits` is set.
fn bit(bits: &BitmapVec, i: usize) -> bool {
    bits.next_bit(i) == Some(i)
}

/// The set bits of `bits`.
pub(crate) fn set_bits(bits: &BitmapVec) -> impl Iterator<Item = usize> + '_ {
    core::iter::successors(bits.next_bit(0), |&i| bits.next_bit(i + 1))
}

/// The first run of `n` pages, starting at a multiple of `align`, each free on the device
/// (`used` clear) or a spare page of the file (`spare` set).
fn find_run(used: &BitmapVec, spare: &BitmapVec, n: usize, align: usize) -> Option<usize> {
    let len = used.len();
    let usable = |p: usize| !bit(used, p) || bit(spare, p);
    let mut start = 0;
    while start + n <= len {
        match (start..start + n).find(|&p| !usable(p)) {
            // A page in the way: go on after it.
            Some(p) => start = (p + 1).checked_next_multiple_of(align)?,
            None => return Some(start),
        }
    }
    None
}

impl VerbsFile {
    /// Pages of device memory this file holds, allocated or kept after a free.
    fn dm_pages_held(o: &super::file::Objects) -> usize {
        o.dms.values().map(|d| d.run.pages as usize).sum::<usize>() + set_bits(&o.dm_spare).count()
    }

    /// `ibv_alloc_dm`. The run may reuse the file's spare pages (its own, kept as they
    /// are) and take free ones from the device (zeroed first).
    pub(crate) fn alloc_dm(&self, arg: &mut args::AllocDm) -> Result {
        let verbs = self.nic.verbs()?;
        let dmem = verbs.dm.as_ref().ok_or(EOPNOTSUPP)?;
        if arg.dm != 0 || arg.mmap_offset != 0 || arg.mmap_len != 0 {
            return Err(EINVAL);
        }
        let quota = Limits::file_share(dmem.pages());
        if arg.length == 0 || arg.length > (quota * DM_PAGE) as u64 {
            return Err(EINVAL);
        }
        // Page-aligned always; a larger alignment counts in pages.
        if arg.log_align_req >= u64::BITS || 1u64 << arg.log_align_req > dmem.mem.len() {
            return Err(EINVAL);
        }
        let align = ((1u64 << arg.log_align_req) / DM_PAGE as u64).max(1) as usize;
        let pages = arg.length.div_ceil(DM_PAGE as u64) as usize;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut o = self.objects.lock();
        let token = o.new_token()?;
        let first = {
            let mut ids = verbs.ids.lock();
            let first = find_run(&ids.dm_pages, &o.dm_spare, pages, align).ok_or(ENOMEM)?;
            let fresh = (first..first + pages)
                .filter(|&p| !bit(&o.dm_spare, p))
                .count();
            if Self::dm_pages_held(&o) + fresh > quota {
                return Err(EDQUOT);
            }
            for p in first..first + pages {
                if bit(&o.dm_spare, p) {
                    o.dm_spare.clear_bit(p);
                } else {
                    ids.dm_pages.set_bit(p);
                }
            }
            first
        };
        let run = DmRun {
            first: first as u32,
            pages: pages as u32,
        };
        // Another process's data never reaches this one: the pages are zeroed (the file's own
        // spare pages too, which costs little and makes every allocation start clean).
        if let Err(e) = dmem.zero(run.first, run.pages) {
            for p in first..first + pages {
                o.dm_spare.set_bit(p);
            }
            return Err(e);
        }
        let handle = o.new_handle();
        o.dms.insert(node.into_node(
            handle,
            Dm {
                run,
                length: arg.length,
                mrs: 0,
                token,
            },
        ));
        arg.dm = handle;
        arg.mmap_offset = token * DM_PAGE as u64;
        arg.mmap_len = (pages * DM_PAGE) as u64;
        Ok(())
    }

    /// Gives pages back to the device.
    pub(crate) fn release_dm_run(&self, run: DmRun) {
        if let Ok(verbs) = self.nic.verbs() {
            let mut ids = verbs.ids.lock();
            for p in run.first..run.first + run.pages {
                ids.dm_pages.clear_bit(p as usize);
            }
        }
    }

    /// `ibv_free_dm`: `EBUSY` while an MR uses it. Its pages stay the file's (see the
    /// module documentation).
    pub(crate) fn free_dm(&self, handle: u32) -> Result {
        self.nic.verbs()?;
        let mut o = self.objects.lock();
        let dm = o.dms.get(&handle).ok_or(EINVAL)?;
        if dm.mrs != 0 {
            return Err(EBUSY);
        }
        let run = dm.run;
        for p in run.first..run.first + run.pages {
            o.dm_spare.set_bit(p as usize);
        }
        o.dms.remove(&handle);
        Ok(())
    }

    /// Maps the allocation whose token is `token`, if there is one: `None` if no allocation has
    /// it.
    pub(crate) fn map_dm(
        &self,
        o: &super::file::Objects,
        token: u64,
        vma: &VmaNew,
    ) -> Option<Result> {
        let dm = o.dms.values().find(|d| d.token == token)?;
        let dmem = self.nic.verbs().ok()?.dm.as_ref()?;
        Some(dmem.map(dm.run.first, dm.run.pages, vma))
    }

    /// Whether `token` is the mapping offset of one of the file's device memory allocations.
    pub(crate) fn is_dm_token(&self, token: u64) -> bool {
        self.objects.lock().dms.values().any(|d| d.token == token)
    }

    /// `ibv_reg_dm_mr`: an MR over part of an allocation, zero-based.
    pub(crate) fn reg_dm_mr(&self, arg: &mut args::RegDmMr) -> Result {
        let verbs = self.nic.verbs()?;
        if arg.access & !DM_ACCESS != 0 {
            return Err(EINVAL);
        }
        check_local_write(arg.access)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut o = self.objects.lock();
        o.pds.get(&arg.pd).ok_or(EINVAL)?;
        let dm = o.dms.get(&arg.dm).ok_or(EINVAL)?;
        let end = arg.dm_offset.checked_add(arg.length).ok_or(EINVAL)?;
        // An empty MR (a key that covers no byte, as rdma-core lets a program register) needs
        // a device that takes one (ABI 1.18).
        if (arg.length == 0 && !self.nic.has_mr_modify())
            || end > dm.length
            || arg.dm_offset >= dm.length
            || arg.dm_offset % uapi::PFNIC_DM_ALIGN != 0
        {
            return Err(EINVAL);
        }
        let start = u64::from(dm.run.first) * DM_PAGE as u64 + arg.dm_offset;
        let index = verbs.ids.lock().mrs.alloc()?;
        let free_index = ScopeGuard::new(|| verbs.ids.lock().mrs.free(index));
        let key = self.mr_set(index, arg.pd, arg.access, start, arg.length, MR_FLAG_DM)?;
        let handle = o.new_handle();
        let mr = Mr {
            index,
            key,
            pd: arg.pd,
            access: arg.access,
            // Zero-based: the MR's addresses are offsets into it.
            addr: 0,
            length: arg.length,
            pinned: None,
            odp: None,
            dm: Some(arg.dm),
        };
        if o.insert_mr(handle, mr, node).is_err() {
            let _ = self.nic.command(&cmd::MrClear { index });
            return Err(EEXIST);
        }
        free_index.dismiss();
        if let Some(pd) = o.pds.get_mut(&arg.pd) {
            pd.mrs += 1;
        }
        if let Some(dm) = o.dms.get_mut(&arg.dm) {
            dm.mrs += 1;
        }
        arg.mr = handle;
        arg.lkey = key;
        arg.rkey = key;
        Ok(())
    }
}
