// SPDX-License-Identifier: GPL-2.0

//! Memory regions: registration in the device's key table, population of ordinary MRs,
//! prefetch (`ibv_advise_mr`) and mlx5's ODP counters.
//!
//! In the `sva` memory mode nothing is pinned. An ordinary (non-ODP) MR is made present once,
//! at registration, by `PREFETCH` descriptors on the file's own ring; afterwards the kernel may
//! reclaim its pages like any others and the device faults them back in. An ODP MR is
//! populated only by faults and prefetches. In the `pinned` mode an MR's pages are pinned and
//! translated by a table ([`PinnedMr`]); ODP MRs are not supported there.

use super::{cmd, file::Mr, file::VerbsFile, pinned::PinnedMr, Limits};
use crate::{
    ring::{self, Desc},
    uapi,
};
use kernel::{prelude::*, rbtree::RBTreeNodeReservation};

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

/// One `PREFETCH` descriptor covers at most this much.
const PREFETCH_CHUNK: u64 = ring::MAX_LEN;

/// Validates a registration's access flags and range; returns whether it is the implicit MR.
fn check_reg(arg: &uapi::RegMr) -> Result<bool> {
    if arg.reserved != 0 || arg.mr != 0 || arg.lkey != 0 || arg.rkey != 0 {
        return Err(EINVAL);
    }
    if arg.access & !MR_ACCESS != 0 {
        return Err(EINVAL);
    }
    // As in InfiniBand: remote write and remote atomic need local write.
    let needs_local_write = uapi::PFNIC_ACCESS_REMOTE_WRITE | uapi::PFNIC_ACCESS_REMOTE_ATOMIC;
    if arg.access & needs_local_write != 0 && arg.access & uapi::PFNIC_ACCESS_LOCAL_WRITE == 0 {
        return Err(EINVAL);
    }
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

    /// `PFNIC_IOCTL_REG_MR`.
    pub(crate) fn reg_mr(&self, arg: &mut uapi::RegMr) -> Result {
        let verbs = self.nic.verbs()?;
        let implicit = check_reg(arg)?;
        let share = Limits::file_share(verbs.limits.max_mrs);
        let mode = {
            let mut o = self.objects.lock();
            o.pds.get(&arg.pd).ok_or(EINVAL)?;
            if o.mrs.iter().count() >= share {
                return Err(EDQUOT);
            }
            o.mem_mode_fixed = true;
            o.mem_mode
        };
        let on_demand = arg.access & uapi::PFNIC_ACCESS_ON_DEMAND != 0;
        let pinned = if mode == uapi::PFNIC_MEM_MODE_PINNED {
            if on_demand {
                return Err(EOPNOTSUPP);
            }
            // Pinned before the device knows the MR, without holding the object lock.
            Some(PinnedMr::pin(
                &self.nic,
                arg.addr,
                arg.length,
                arg.access & WRITE_ACCESS != 0,
            )?)
        } else {
            None
        };
        // Taken now: once the device knows the MR, nothing may fail for memory before the MR
        // is in the file (see the end).
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let index = verbs.ids.lock().mrs.alloc()?;
        let free_index = kernel::types::ScopeGuard::new(|| verbs.ids.lock().mrs.free(index));
        let [addr_lo, addr_hi] = cmd::split(arg.addr);
        let [len_lo, len_hi] = cmd::split(arg.length);
        let flags = if pinned.is_some() { MR_FLAG_TABLE } else { 0 };
        let res = self.nic.command(
            cmd::MR_SET,
            &[
                index, self.ctx, arg.pd, arg.access, addr_lo, addr_hi, len_lo, len_hi, flags,
            ],
        )?;
        let key = res[0];
        let cleared = kernel::types::ScopeGuard::new(|| {
            let _ = self.nic.command(cmd::MR_CLEAR, &[index]);
        });
        if let Some(pinned) = &pinned {
            pinned.write_table(&self.nic, index)?;
        } else if !implicit && !on_demand {
            // Populate now, without holding the object lock (faults take the mmap lock).
            let flags = if arg.access & WRITE_ACCESS != 0 {
                ring::PREFETCH_WRITE
            } else {
                0
            };
            self.prefetch_sync(key, arg.addr, arg.length, flags)?;
        }
        let mut o = self.objects.lock();
        // The PD may have gone while the lock was dropped (another thread of the process).
        // Counted again: other threads may have registered while the lock was dropped.
        if o.mrs.iter().count() >= share {
            return Err(EDQUOT);
        }
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
        };
        if let Err(mr) = o.insert_mr(handle, mr, node) {
            if let Some(pd) = o.pds.get_mut(&arg.pd) {
                pd.mrs -= 1;
            }
            drop(o);
            // The device forgets the key before the pages it names are unpinned.
            drop(cleared);
            drop(mr);
            return Err(EEXIST);
        }
        cleared.dismiss();
        free_index.dismiss();
        arg.mr = handle;
        arg.lkey = key;
        arg.rkey = key;
        Ok(())
    }

    /// `PFNIC_IOCTL_DEREG_MR`.
    pub(crate) fn dereg_mr(&self, arg: &uapi::MrHandle) -> Result {
        let verbs = self.nic.verbs()?;
        if arg.reserved != 0 {
            return Err(EINVAL);
        }
        let mut o = self.objects.lock();
        let mr = o.mrs.get(&arg.mr).ok_or(EINVAL)?;
        self.nic.command(cmd::MR_CLEAR, &[mr.index])?;
        let index = mr.index;
        let pd = mr.pd;
        let mr = o.mrs.remove(&arg.mr);
        if let Some(pd) = o.pds.get_mut(&pd) {
            pd.mrs -= 1;
        }
        verbs.ids.lock().mrs.free(index);
        drop(o);
        // Unpinned (if pinned) outside the lock: the device no longer uses the pages.
        drop(mr);
        Ok(())
    }

    /// `PFNIC_IOCTL_QUERY_MR`.
    pub(crate) fn query_mr(&self, arg: &mut uapi::QueryMr) -> Result {
        self.nic.verbs()?;
        if arg.reserved != 0 {
            return Err(EINVAL);
        }
        let o = self.objects.lock();
        let mr = o.mrs.get(&arg.mr).ok_or(EINVAL)?;
        let r = self.nic.command(cmd::MR_QUERY, &[mr.index])?;
        arg.page_faults = cmd::join(r[0], r[1]);
        arg.page_faults_handled = cmd::join(r[2], r[3]);
        arg.page_invalidations = cmd::join(r[4], r[5]);
        arg.page_invalidations_handled = cmd::join(r[6], r[7]);
        arg.page_prefetch = cmd::join(r[8], r[9]);
        arg.remote_access_errors = cmd::join(r[10], r[11]);
        arg.page_fault_groups = cmd::join(r[12], r[13]);
        arg.pages_pinned = mr.pinned.as_ref().map_or(0, |p| p.pages());
        Ok(())
    }

    /// `PFNIC_IOCTL_ADVISE_MR`: prefetches ranges of this file's ODP MRs. With `FLUSH` it
    /// returns once the pages are present (`EFAULT` if some could not be made present);
    /// without, once the prefetches are queued on the file's ring.
    pub(crate) fn advise_mr(&self, arg: &uapi::AdviseMr) -> Result {
        self.nic.verbs()?;
        let flags = match arg.advice {
            uapi::PFNIC_ADVISE_PREFETCH => 0,
            uapi::PFNIC_ADVISE_PREFETCH_WRITE => ring::PREFETCH_WRITE,
            uapi::PFNIC_ADVISE_PREFETCH_NO_FAULT => ring::PREFETCH_NO_FAULT,
            _ => return Err(EINVAL),
        };
        if arg.flags & !uapi::PFNIC_ADVISE_FLAG_FLUSH != 0 || arg.reserved != 0 {
            return Err(EINVAL);
        }
        let n = arg.num_sge as usize;
        if n == 0 || n > uapi::PFNIC_ADVISE_MAX_SGE {
            return Err(EINVAL);
        }
        let sges = &arg.sge[..n];
        {
            let o = self.objects.lock();
            for sge in sges {
                let mr = o.mrs.values().find(|mr| mr.key == sge.lkey).ok_or(EINVAL)?;
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
