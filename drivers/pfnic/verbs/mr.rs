// SPDX-License-Identifier: GPL-2.0

//! Memory regions: registration in the device's key table, population of ordinary MRs,
//! prefetch (`ibv_advise_mr`) and mlx5's ODP counters.
//!
//! In the `sva` memory mode nothing is pinned. An ordinary (non-ODP) MR is made present once,
//! at registration, by `PREFETCH` descriptors on the context's own ring; afterwards the kernel may
//! reclaim its pages like any others and the device faults them back in. An ODP MR is
//! populated only by faults and prefetches. In the `pinned` mode an MR's pages are pinned and
//! translated by a table ([`PinnedMr`]); ODP MRs are not supported there. In the `odp` mode
//! every ODP MR is translated by a table the driver fills on demand ([`odp`]), the implicit MR
//! by a sparse table (device ABI 1.10); an ordinary MR is pinned, as in the `pinned` mode (as
//! every RDMA device pins them).

use super::{
    args, cmd,
    file::Mr,
    file::VerbsFile,
    odp,
    pinned::PinnedMr,
    quarantine::{refused, Quarantined},
};
use crate::{
    nic::Nic,
    queue_abi::FAST_MAX_PAGES,
    ring::{self, Desc},
    uapi,
};
use kernel::{
    prelude::*, rbtree::RBTreeNodeReservation, rdma::udata::UData, sync::Arc, types::ScopeGuard,
};

/// Every `IBV_ACCESS_*` bit an MR may have.
const MR_ACCESS: u32 = uapi::PFNIC_ACCESS_LOCAL_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_READ
    | uapi::PFNIC_ACCESS_REMOTE_ATOMIC
    | uapi::PFNIC_ACCESS_ON_DEMAND;

/// Access bits that let the device write the MR's memory.
const WRITE_ACCESS: u32 = uapi::PFNIC_ACCESS_LOCAL_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_WRITE
    | uapi::PFNIC_ACCESS_REMOTE_ATOMIC;

/// `MR_SET` flag: the MR is translated by a table the driver fills (docs/verbs.md).
const MR_FLAG_TABLE: u32 = 1 << 0;
/// `MR_SET` flag, with `TABLE`: a miss waits for the driver instead of failing the work.
const MR_FLAG_FAULT: u32 = 1 << 1;
/// `MR_SET` flag, alone (ABI 1.20): the MR's addresses are the device's own DMA addresses.
const MR_FLAG_DMA: u32 = 1 << 3;
/// `MR_SET` flag, alone (ABI 1.21): a fast-registration MR, free until a `REG_MR` work request.
const MR_FLAG_FAST: u32 = 1 << 4;
/// The only page size of a fast-registration MR's list.
pub(crate) const FAST_PAGE_SIZE: u32 = 4096;

/// One `PREFETCH` descriptor covers at most this much.
const PREFETCH_CHUNK: u64 = ring::MAX_LEN;

/// `EINVAL` for remote write or remote atomic access without local write, as InfiniBand has it.
pub(crate) fn check_local_write(access: u32) -> Result {
    let needs_local_write = uapi::PFNIC_ACCESS_REMOTE_WRITE | uapi::PFNIC_ACCESS_REMOTE_ATOMIC;
    if access & needs_local_write != 0 && access & uapi::PFNIC_ACCESS_LOCAL_WRITE == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Validates an MR's access flags.
fn check_access(access: u32) -> Result {
    // Binding memory windows is a capability pfnic lacks, not an invalid flag.
    if access & uapi::PFNIC_ACCESS_MW_BIND != 0 {
        return Err(EOPNOTSUPP);
    }
    if access & !MR_ACCESS != 0 {
        return Err(EINVAL);
    }
    check_local_write(access)
}

/// Validates a registration's access flags and range; returns whether it is the implicit MR.
fn check_reg(arg: &args::RegMr) -> Result<bool> {
    check_access(arg.access)?;
    let implicit = arg.addr == 0 && arg.length == u64::MAX;
    if implicit {
        // The whole address space cannot be populated up front.
        if arg.access & uapi::PFNIC_ACCESS_ON_DEMAND == 0 {
            return Err(EINVAL);
        }
        return Ok(true);
    }
    if arg.length == 0 || arg.addr.checked_add(arg.length).is_none() {
        return Err(EINVAL);
    }
    Ok(false)
}

impl VerbsFile {
    /// Fills MR table entry `index` of this file's context (`MR_SET`: `flags` its kind) and
    /// returns the key the device drew for it.
    pub(super) fn mr_set(
        &self,
        index: u32,
        pd: u32,
        access: u32,
        addr: u64,
        length: u64,
        flags: u32,
    ) -> Result<u32> {
        let [addr_lo, addr_hi] = cmd::split(addr);
        let [len_lo, len_hi] = cmd::split(length);
        let reply = self.nic.command(&cmd::MrSet {
            index,
            ctx: self.ctx,
            pd,
            access,
            addr_lo,
            addr_hi,
            len_lo,
            len_hi,
            flags,
        })?;
        Ok(reply.key)
    }

    /// Runs `PREFETCH` descriptors over `[addr, addr + len)` with `key` and waits for them all;
    /// `EFAULT` unless every one succeeded.
    fn prefetch_sync(&self, key: u32, addr: u64, len: u64, flags: u8) -> Result {
        let mut done = 0;
        while done < len {
            let chunk = (len - done).min(PREFETCH_CHUNK);
            let desc = prefetch_desc(key, addr + done, chunk, flags);
            let (completed, _) = self.nic.submit(self.ctx, desc)?;
            if completed.status & 0xff != ring::STATUS_SUCCESS {
                return Err(EFAULT);
            }
            done += chunk;
        }
        Ok(())
    }

    /// `ibv_reg_mr`, in the verb `udata` belongs to (the pinned modes pin through it).
    pub(crate) fn reg_mr(&self, arg: &mut args::RegMr, udata: &UData<'_>) -> Result {
        let verbs = self.nic.verbs()?;
        let implicit = check_reg(arg)?;
        let mode = {
            let mut o = self.objects.lock();
            o.pds.get(&arg.pd).ok_or(EINVAL)?;
            o.mem_mode_fixed = true;
            o.mem_mode
        };
        let on_demand = arg.access & uapi::PFNIC_ACCESS_ON_DEMAND != 0;
        let write = arg.access & WRITE_ACCESS != 0;
        if mode == uapi::PFNIC_MEM_MODE_PINNED && on_demand {
            return Err(EOPNOTSUPP);
        }
        // Ordinary MRs of the `odp` mode are pinned, as on every other RDMA device: a
        // registration larger than `RLIMIT_MEMLOCK` fails at once instead of faulting in more
        // than the memory holds.
        let pin =
            mode == uapi::PFNIC_MEM_MODE_PINNED || (mode == uapi::PFNIC_MEM_MODE_ODP && !on_demand);
        let pinned = if pin {
            // Pinned before the device knows the MR, without holding the object lock.
            Some(PinnedMr::pin(udata, arg.addr, arg.length, arg.access)?)
        } else {
            None
        };
        // The whole address space has a table only on a device that keeps it sparse.
        if mode == uapi::PFNIC_MEM_MODE_ODP && implicit && !self.nic.info.implicit_tables() {
            return Err(EOPNOTSUPP);
        }
        // Taken now: once the device knows the MR, nothing may fail for memory before the MR
        // is in the file (see the end).
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let index = verbs.ids.lock().mrs.alloc()?;
        let free_index = ScopeGuard::new(|| verbs.ids.lock().mrs.free(index));
        // Watching the range before the device can use it: no invalidation is missed.
        let odp = if mode == uapi::PFNIC_MEM_MODE_ODP && pinned.is_none() {
            Some(odp::new(&self.nic, udata, index, arg, implicit, write)?)
        } else {
            None
        };
        let flags = if pinned.is_some() {
            MR_FLAG_TABLE
        } else if odp.is_some() {
            MR_FLAG_TABLE | MR_FLAG_FAULT
        } else {
            0
        };
        let key = self.mr_set(index, arg.pd, arg.access, arg.addr, arg.length, flags)?;
        let cleared = ScopeGuard::new(|| {
            let _ = match &odp {
                Some(odp) => odp::retire(odp),
                None => self.nic.command(&cmd::MrClear { index }),
            };
        });
        // Page-fault events for the MR find it from now on.
        if let Some(odp) = &odp {
            verbs
                .odp_mrs
                .lock()
                .store(index as usize, odp.clone(), GFP_KERNEL)?;
        }
        let published = ScopeGuard::new(|| {
            if odp.is_some() {
                let removed = verbs.odp_mrs.lock().remove(index as usize);
                drop(removed);
            }
        });
        if let Some(pinned) = &pinned {
            pinned.write_table(&self.nic, index)?;
        } else if let Some(odp) = odp.as_ref().filter(|_| !on_demand) {
            // Filled now, as the `sva` mode makes ordinary MRs present (and refills on demand
            // after reclaim).
            odp::prefetch(odp, arg.addr, arg.length, write)?;
        } else if !implicit && !on_demand {
            // Populate now, without holding the object lock (faults take the mmap lock).
            let flags = if write { ring::PREFETCH_WRITE } else { 0 };
            self.prefetch_sync(key, arg.addr, arg.length, flags)?;
        }
        let mut o = self.objects.lock();
        // The PD may have gone while the lock was dropped (another thread of the process).
        let pd = o.pds.get_mut(&arg.pd).ok_or(EINVAL)?;
        pd.mrs += 1;
        // The handle is taken under the same lock as the insertion, so no other registration
        // can take it in between.
        let handle = o.new_handle();
        let mr = Mr {
            index,
            key,
            pd: arg.pd,
            access: arg.access,
            addr: arg.addr,
            length: arg.length,
            pinned,
            odp: odp.clone(),
            dm: None,
        };
        if let Err(mr) = o.insert_mr(handle, mr, node) {
            if let Some(pd) = o.pds.get_mut(&arg.pd) {
                pd.mrs -= 1;
            }
            drop(o);
            // The device forgets the key before the pages it names are unpinned.
            drop(published);
            drop(cleared);
            drop(mr);
            return Err(EEXIST);
        }
        published.dismiss();
        cleared.dismiss();
        free_index.dismiss();
        arg.mr = handle;
        arg.lkey = key;
        arg.rkey = key;
        Ok(())
    }

    /// A registration of MR `handle` as it is (its PD, access and range), for re-registering
    /// it with some of them changed; `EINVAL` for an MR over device memory.
    pub(crate) fn mr_registration(&self, handle: u32) -> Result<args::RegMr> {
        let o = self.objects.lock();
        let mr = o.mrs.get(&handle).ok_or(EINVAL)?;
        if mr.dm.is_some() {
            return Err(EINVAL);
        }
        Ok(args::RegMr {
            pd: mr.pd,
            access: mr.access,
            addr: mr.addr,
            length: mr.length,
            ..Default::default()
        })
    }

    /// Gives MR `handle` the PD `pd` and the access `access` in place (`ibv_rereg_mr` without
    /// a new translation, as mlx5 and rxe do it): its keys, pages and counters stay.
    /// `EOPNOTSUPP` where the MR cannot change so (a device without `MR_MODIFY`, device
    /// memory, or an access that changes whether it is on demand or whether the device may
    /// write its pages, which were pinned or are mirrored for that): the caller registers it
    /// again instead. `EINVAL` for an unknown PD or MR or an invalid access.
    pub(crate) fn modify_mr(&self, handle: u32, pd: u32, access: u32) -> Result {
        self.nic.verbs()?;
        check_access(access)?;
        let mut o = self.objects.lock();
        o.pds.get(&pd).ok_or(EINVAL)?;
        let mr = o.mrs.get(&handle).ok_or(EINVAL)?;
        let same_kind = |a: u32, b: u32| {
            (a & uapi::PFNIC_ACCESS_ON_DEMAND) == (b & uapi::PFNIC_ACCESS_ON_DEMAND)
                && (a & WRITE_ACCESS != 0) == (b & WRITE_ACCESS != 0)
        };
        if !self.nic.has_mr_modify() || mr.dm.is_some() || !same_kind(access, mr.access) {
            return Err(EOPNOTSUPP);
        }
        let (index, old_pd) = (mr.index, mr.pd);
        self.nic.command(&cmd::MrModify { index, pd, access })?;
        if let Some(mr) = o.mrs.get_mut(&handle) {
            mr.pd = pd;
            mr.access = access;
        }
        if old_pd != pd {
            if let Some(p) = o.pds.get_mut(&old_pd) {
                p.mrs -= 1;
            }
            if let Some(p) = o.pds.get_mut(&pd) {
                p.mrs += 1;
            }
        }
        Ok(())
    }

    /// A DMA MR in `pd` (device ABI 1.20): a key over every DMA address of the device, for
    /// the RDMA core's kernel clients (the local DMA key of their PDs), local access only (a
    /// remote key to all of the device's memory is refused, `EOPNOTSUPP`). Returns its handle
    /// and key.
    pub(crate) fn reg_dma_mr(&self, pd: u32, access: u32) -> Result<(u32, u32)> {
        if !self.nic.has_dma_mrs() {
            return Err(EOPNOTSUPP);
        }
        if access & !uapi::PFNIC_ACCESS_LOCAL_WRITE != 0 {
            return Err(EOPNOTSUPP);
        }
        self.reg_kernel_mr(pd, access, 0, u64::MAX, MR_FLAG_DMA)
    }

    /// A fast-registration MR in `pd` (device ABI 1.21) for up to `pages` pages of a kernel
    /// client: its key names nothing until a `REG_MR` work request registers a page list.
    /// Returns its handle and key.
    pub(crate) fn reg_fast_mr(&self, pd: u32, pages: u32) -> Result<(u32, u32)> {
        if !self.nic.has_fast_reg() {
            return Err(EOPNOTSUPP);
        }
        if pages == 0 || pages > FAST_MAX_PAGES {
            return Err(EINVAL);
        }
        let len = u64::from(pages) * u64::from(FAST_PAGE_SIZE);
        self.reg_kernel_mr(pd, 0, 0, len, MR_FLAG_FAST)
    }

    /// An MR of the kernel clients' context (`flags` its kind) in `pd`.
    fn reg_kernel_mr(
        &self,
        pd: u32,
        access: u32,
        addr: u64,
        length: u64,
        flags: u32,
    ) -> Result<(u32, u32)> {
        let verbs = self.nic.verbs()?;
        if !self.kernel {
            return Err(EPERM);
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut o = self.objects.lock();
        o.pds.get(&pd).ok_or(EINVAL)?;
        let index = verbs.ids.lock().mrs.alloc()?;
        let free_index = ScopeGuard::new(|| verbs.ids.lock().mrs.free(index));
        let key = self.mr_set(index, pd, access, addr, length, flags)?;
        let handle = o.new_handle();
        let mr = Mr {
            index,
            key,
            pd,
            access,
            addr,
            length,
            pinned: None,
            odp: None,
            dm: None,
        };
        if o.insert_mr(handle, mr, node).is_err() {
            let _ = self.nic.command(&cmd::MrClear { index });
            return Err(EEXIST);
        }
        free_index.dismiss();
        if let Some(pd) = o.pds.get_mut(&pd) {
            pd.mrs += 1;
        }
        Ok((handle, key))
    }

    /// `ibv_dereg_mr`.
    pub(crate) fn dereg_mr(&self, handle: u32) -> Result {
        let verbs = self.nic.verbs()?;
        let mut o = self.objects.lock();
        let mr = o.mrs.get(&handle).ok_or(EINVAL)?;
        // One the device does not let go of is quarantined, with its pages and key index.
        let refused = refused(&self.nic, &mr.clear(&self.nic));
        let index = mr.index;
        let pd = mr.pd;
        let dm = mr.dm;
        let mut mr = o.mrs.remove(&handle);
        if let Some(pd) = o.pds.get_mut(&pd) {
            pd.mrs -= 1;
        }
        if let Some(dm) = dm.and_then(|h| o.dms.get_mut(&h)) {
            dm.mrs -= 1;
        }
        if refused {
            verbs.quarantine(
                &self.nic,
                &mut o,
                "MR",
                index,
                mr.take().map(Quarantined::mr),
            );
        } else {
            verbs.ids.lock().mrs.free(index);
        }
        drop(o);
        // Unpinned (if pinned) outside the lock: the device no longer uses the pages.
        drop(mr);
        Ok(())
    }

    /// The MR's counters, for `rdma statistic mr`.
    pub(crate) fn query_mr(&self, arg: &mut args::QueryMr) -> Result {
        self.nic.verbs()?;
        let o = self.objects.lock();
        let mr = o.mrs.get(&arg.mr).ok_or(EINVAL)?;
        let r = self.nic.command(&cmd::MrQuery { index: mr.index })?;
        arg.page_faults = cmd::join(r.page_faults_lo, r.page_faults_hi);
        arg.page_faults_handled = cmd::join(r.page_faults_handled_lo, r.page_faults_handled_hi);
        arg.page_invalidations = cmd::join(r.page_invalidations_lo, r.page_invalidations_hi);
        arg.page_invalidations_handled = cmd::join(
            r.page_invalidations_handled_lo,
            r.page_invalidations_handled_hi,
        );
        arg.page_prefetch = cmd::join(r.page_prefetch_lo, r.page_prefetch_hi);
        arg.remote_access_errors = cmd::join(r.remote_access_errors_lo, r.remote_access_errors_hi);
        arg.page_fault_groups = cmd::join(r.page_fault_groups_lo, r.page_fault_groups_hi);
        arg.pages_pinned = mr.pinned.as_ref().map_or(0, |p| p.pages());
        arg.pages_mapped = arg.pages_pinned;
        if let Some(odp) = &mr.odp {
            // The device counts the faults; the driver, the rest.
            let c = odp::counters(odp);
            arg.page_invalidations = c.invalidated;
            arg.page_invalidations_handled = c.invalidated;
            arg.page_prefetch += c.prefetched;
            arg.pages_mapped = c.mapped;
        }
        Ok(())
    }

    /// `ibv_advise_mr`: prefetches ranges of the context's on-demand MRs, of the PD `pd` only
    /// (`EINVAL` for a key of another PD's MR, as mlx5 refuses it), or of any of its MRs. With
    /// `FLUSH` it returns once the pages are present (`EFAULT` if some could not be made
    /// present); without, once the prefetches are queued on the context's ring.
    pub(crate) fn advise_mr_of(&self, arg: &args::AdviseMr, pd: Option<u32>) -> Result {
        self.nic.verbs()?;
        let flags = match arg.advice {
            uapi::PFNIC_ADVISE_PREFETCH => 0,
            uapi::PFNIC_ADVISE_PREFETCH_WRITE => ring::PREFETCH_WRITE,
            uapi::PFNIC_ADVISE_PREFETCH_NO_FAULT => ring::PREFETCH_NO_FAULT,
            _ => return Err(EINVAL),
        };
        if arg.flags & !uapi::PFNIC_ADVISE_FLAG_FLUSH != 0 {
            return Err(EINVAL);
        }
        let n = arg.num_sge as usize;
        if n == 0 || n > uapi::PFNIC_ADVISE_MAX_SGE {
            return Err(EINVAL);
        }
        let sges = &arg.sge[..n];
        // The `odp` mode's MRs, which the driver fills itself.
        let mut odp_mrs = KVec::with_capacity(n, GFP_KERNEL)?;
        {
            let o = self.objects.lock();
            for sge in sges {
                let mr = o.mrs.values().find(|mr| mr.key == sge.lkey).ok_or(EINVAL)?;
                if pd.is_some_and(|pd| pd != mr.pd) {
                    return Err(EINVAL);
                }
                odp_mrs.push(mr.odp.clone(), GFP_KERNEL)?;
                // Like mlx5: only on-demand MRs are advised.
                if mr.access & uapi::PFNIC_ACCESS_ON_DEMAND == 0
                    || !mr.covers(sge.addr, u64::from(sge.length))
                {
                    return Err(EINVAL);
                }
                if flags & ring::PREFETCH_WRITE != 0 && mr.access & WRITE_ACCESS == 0 {
                    return Err(EINVAL);
                }
            }
        }
        if odp_mrs.iter().any(Option::is_some) {
            return advise_odp(sges, &odp_mrs, flags, arg.flags);
        }
        if arg.flags & uapi::PFNIC_ADVISE_FLAG_FLUSH != 0 {
            let mut result = Ok(());
            for sge in sges {
                let r = self.prefetch_sync(sge.lkey, sge.addr, u64::from(sge.length), flags);
                if let Err(e) = r {
                    if e != EFAULT {
                        return Err(e);
                    }
                    result = Err(e);
                }
            }
            return result;
        }
        for sge in sges {
            let mut done = 0;
            let len = u64::from(sge.length);
            while done < len {
                let chunk = (len - done).min(PREFETCH_CHUNK);
                let desc = prefetch_desc(sge.lkey, sge.addr + done, chunk, flags);
                self.nic.post(self.ctx, desc, false)?;
                done += chunk;
            }
        }
        Ok(())
    }
}

/// `advise_mr` on the MRs of the `odp` mode: the driver fills their tables itself, at once
/// (with or without `FLUSH`). The device's pages are the process's: with `NO_FAULT` (make present
/// only what needs no fault) there is nothing to take that a fault would not, and it is a no-op.
fn advise_odp(
    sges: &[args::Sge],
    mrs: &[Option<Arc<odp::OdpMr>>],
    flags: u8,
    advise_flags: u32,
) -> Result {
    if flags & ring::PREFETCH_NO_FAULT != 0 {
        return Ok(());
    }
    let write = flags & ring::PREFETCH_WRITE != 0;
    let mut result = Ok(());
    for (sge, mr) in sges.iter().zip(mrs) {
        let Some(mr) = mr else { continue };
        if let Err(e) = odp::prefetch(mr, sge.addr, u64::from(sge.length), write) {
            // As the device's `PREFETCH`: what cannot be made present is `EFAULT`; pages that
            // invalidations kept taking away are `EBUSY`. Both are advice not taken.
            if e != EFAULT && e != EBUSY {
                return Err(e);
            }
            result = Err(e);
        }
    }
    // Without `FLUSH` a failure is not reported (the prefetch is only advice).
    if advise_flags & uapi::PFNIC_ADVISE_FLAG_FLUSH == 0 {
        return Ok(());
    }
    result
}

impl Mr {
    /// Clears the MR in the device and, in the `odp` mode, removes it from the index that
    /// page-fault events look in; afterwards its index may be freed.
    pub(crate) fn clear(&self, nic: &Nic) -> Result {
        match &self.odp {
            Some(odp) => {
                odp::retire(odp)?;
                if let Ok(verbs) = nic.verbs() {
                    let removed = verbs.odp_mrs.lock().remove(self.index as usize);
                    drop(removed);
                }
            }
            None => {
                nic.command(&cmd::MrClear { index: self.index })?;
            }
        }
        Ok(())
    }
}

fn prefetch_desc(key: u32, addr: u64, len: u64, flags: u8) -> Desc {
    Desc {
        opcode: ring::OP_PREFETCH,
        flags,
        src: u64::from(key),
        dst: addr,
        len,
        ..Default::default()
    }
}
