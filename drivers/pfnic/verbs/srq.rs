// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (docs/verbs.md, "Shared receive queues"): a ring of receive WQEs
//! followed by a 16-byte record, in one coherent allocation the process maps (or, for the
//! kernel clients, the driver writes: `kverbs::KernelSrq`); QPs of the same context take their
//! receives from it. Its `SRQ_LIMIT` events go to the RDMA core's SRQ.

use super::{
    args, cmd,
    eq::OwnerRoute,
    file::{ring_bytes, Ring, Srq, VerbsFile},
};
use crate::{queue_abi::WQE_SIZE, uapi};
use kernel::{page::PAGE_SIZE, prelude::*, rdma::ObjectEvents, types::ScopeGuard};

/// Bytes of the SRQ record.
const RECORD_SIZE: usize = 16;

impl VerbsFile {
    /// `ibv_create_srq`, with the asynchronous events of the SRQ going to `core`, the RDMA
    /// core's; the SRQ's ring, which the driver writes itself for a kernel client.
    pub(crate) fn create_srq_for(
        &self,
        arg: &mut args::CreateSrq,
        core: Option<ObjectEvents>,
    ) -> Result<Ring> {
        let verbs = self.nic.verbs()?;
        let l = verbs.limits;
        if l.max_srqs == 0 {
            return Err(EOPNOTSUPP);
        }
        if arg.max_wr == 0 || arg.max_wr > l.max_wqes || arg.max_sge > l.max_sge {
            return Err(EINVAL);
        }
        // libibverbs: a limit above the SRQ's size is `EINVAL`.
        if arg.srq_limit > arg.max_wr {
            return Err(EINVAL);
        }
        let entries = arg.max_wr.next_power_of_two();
        let record_offset = entries as usize * WQE_SIZE;
        let bytes = ring_bytes(record_offset + RECORD_SIZE)?;
        if self.objects.lock().pds.get(&arg.pd).is_none() {
            return Err(EINVAL);
        }
        let ring = Ring::new(&self.nic, bytes)?;
        let mem = ring.mem.clone();

        let mut o = self.objects.lock();
        // Checked again: the lock was dropped for the allocation.
        if o.pds.get(&arg.pd).is_none() {
            return Err(EINVAL);
        }
        let srqn = verbs.ids.lock().srqns.alloc()?;
        let free_srqn = ScopeGuard::new(|| verbs.ids.lock().srqns.free(srqn));
        // Route events before the SRQ exists, so none is lost.
        verbs.eq.set_srq_owner(srqn, Some(OwnerRoute { core }));
        let unroute = ScopeGuard::new(|| verbs.eq.set_srq_owner(srqn, None));
        let base = mem.dma_address();
        let [ring_lo, ring_hi] = cmd::split(base);
        let [rec_lo, rec_hi] = cmd::split(base + record_offset as u64);
        self.nic.command(&cmd::SrqCreate {
            srqn,
            ctx: self.ctx,
            pd: arg.pd,
            ring_lo,
            ring_hi,
            log2_entries: entries.trailing_zeros(),
            record_lo: rec_lo,
            record_hi: rec_hi,
        })?;
        let destroy = ScopeGuard::new(|| {
            let _ = self.nic.command(&cmd::SrqDestroy { index: srqn });
        });
        if arg.srq_limit != 0 {
            self.nic.command(&cmd::SrqModify {
                srqn,
                limit: arg.srq_limit,
            })?;
        }
        // A clone: on failure, `mem` outlives the guards that destroy the object in the device.
        let token = o.add_ring(mem.clone())?;
        let srq = Srq {
            pd: arg.pd,
            qps: 0,
            max_wr: entries,
            max_sge: l.max_sge,
            ring: token,
        };
        if let Err(e) = o.srqs.try_create_and_insert(srqn, srq, GFP_KERNEL) {
            o.remove_ring(token);
            return Err(e);
        }
        // Cannot fail from here on.
        if let Some(pd) = o.pds.get_mut(&arg.pd) {
            pd.srqs += 1;
        }
        destroy.dismiss();
        unroute.dismiss();
        free_srqn.dismiss();
        arg.srqn = srqn;
        arg.entries = entries;
        arg.max_wr = entries;
        arg.max_sge = l.max_sge;
        arg.mmap_offset = token * PAGE_SIZE as u64;
        arg.mmap_len = bytes as u64;
        arg.record_offset = record_offset as u64;
        Ok(ring)
    }

    /// `ibv_modify_srq`: arms or disarms the limit; resizing is `EOPNOTSUPP`.
    pub(crate) fn modify_srq(&self, arg: &args::ModifySrq) -> Result {
        self.nic.verbs()?;
        let known = uapi::PFNIC_SRQ_MAX_WR | uapi::PFNIC_SRQ_LIMIT;
        if arg.attr_mask & !known != 0 {
            return Err(EINVAL);
        }
        let o = self.objects.lock();
        let srq = o.srqs.get(&arg.srqn).ok_or(EINVAL)?;
        if arg.attr_mask & uapi::PFNIC_SRQ_MAX_WR != 0 {
            return Err(EOPNOTSUPP);
        }
        if arg.attr_mask & uapi::PFNIC_SRQ_LIMIT == 0 {
            return Ok(());
        }
        if arg.srq_limit > srq.max_wr {
            return Err(EINVAL);
        }
        self.nic.command(&cmd::SrqModify {
            srqn: arg.srqn,
            limit: arg.srq_limit,
        })?;
        Ok(())
    }

    /// `ibv_query_srq`.
    pub(crate) fn query_srq(&self, arg: &mut args::QuerySrq) -> Result {
        self.nic.verbs()?;
        let o = self.objects.lock();
        let srq = o.srqs.get(&arg.srqn).ok_or(EINVAL)?;
        let r = self.nic.command(&cmd::SrqQuery { index: arg.srqn })?;
        *arg = args::QuerySrq {
            srqn: arg.srqn,
            max_wr: srq.max_wr,
            max_sge: srq.max_sge,
            srq_limit: r.limit,
        };
        Ok(())
    }

    /// `ibv_destroy_srq` of SRQ `num`: `EBUSY` while a QP uses it. Its ring memory goes once no
    /// mapping uses it.
    pub(crate) fn destroy_srq(&self, num: u32) -> Result {
        let verbs = self.nic.verbs()?;
        let mut o = self.objects.lock();
        let srq = o.srqs.get(&num).ok_or(EINVAL)?;
        if srq.qps != 0 {
            return Err(EBUSY);
        }
        // One the device does not let go of is quarantined (its ring and SRQN kept).
        let Some(srq) = o.srqs.remove(&num) else {
            return Err(EINVAL);
        };
        let released = verbs.destroy_queue(
            &self.nic,
            &mut o,
            &cmd::SrqDestroy { index: num },
            "SRQ",
            srq.ring,
        );
        if let Some(pd) = o.pds.get_mut(&srq.pd) {
            pd.srqs -= 1;
        }
        verbs.eq.set_srq_owner(num, None);
        // Without the object lock, the SRQN still taken: see `destroy_cq`.
        drop(o);
        if released {
            verbs.ids.lock().srqns.free(num);
        }
        Ok(())
    }
}
