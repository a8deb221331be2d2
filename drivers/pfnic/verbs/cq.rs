// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of 32-byte CQEs (64-byte ones with timestamps) followed by a
//! 16-byte record, in one coherent allocation the process maps; completion events and
//! `CQ_ERROR` events go to the RDMA core's CQ (its completion channel, its context's
//! asynchronous events).

use super::{
    args, cmd,
    eq::Route,
    file::{ring_bytes, Cq, Ring, VerbsFile},
};
use crate::uapi;
use kernel::{page::PAGE_SIZE, prelude::*, rdma::CqNotifier, types::ScopeGuard};

/// Bytes of a CQE, and of one with a timestamp (docs/verbs.md, "Completion queue entry").
const CQE_SIZE: usize = 32;
const CQE_SIZE_TIMESTAMP: usize = 64;
/// `CQ_CREATE` a7: 64-byte CQEs with the completion's time.
const CQ_CREATE_TIMESTAMP: u32 = 1 << 0;
/// Bytes of the CQ record.
const RECORD_SIZE: usize = 16;

impl VerbsFile {
    /// `ibv_create_cq`: a CQ whose completion events go to `core`, the RDMA core's completion
    /// channel of the CQ (`None`: nowhere; the argument's channel must be -1).
    pub(crate) fn create_cq_for(
        &self,
        arg: &mut args::CreateCq,
        core: Option<CqNotifier>,
    ) -> Result<Ring> {
        let verbs = self.nic.verbs()?;
        if arg.cqe == 0
            || arg.cqe > verbs.limits.max_cqes
            || arg.flags & !uapi::PFNIC_CQ_CREATE_TIMESTAMP != 0
            || arg.cqe_size != 0
        {
            return Err(EINVAL);
        }
        let timestamp = arg.flags & uapi::PFNIC_CQ_CREATE_TIMESTAMP != 0;
        if timestamp && self.nic.info.caps & uapi::PFNIC_CAP_TIMESTAMPS == 0 {
            return Err(EOPNOTSUPP);
        }
        let cqe_size = if timestamp {
            CQE_SIZE_TIMESTAMP
        } else {
            CQE_SIZE
        };
        let entries = arg.cqe.next_power_of_two();
        let log2 = entries.trailing_zeros();
        let record_offset = entries as usize * cqe_size;
        let bytes = ring_bytes(record_offset + RECORD_SIZE)?;
        let view = Ring::new(&self.nic, bytes)?;
        let mem = view.mem.clone();

        let mut o = self.objects.lock();
        if arg.channel != -1 {
            return Err(EINVAL);
        }
        let cqn = verbs.ids.lock().cqns.alloc()?;
        let free_cqn = ScopeGuard::new(|| verbs.ids.lock().cqns.free(cqn));
        // Route events before the CQ exists, so none is lost.
        verbs.eq.set_route(cqn, Some(Route { events: core }));
        let unroute = ScopeGuard::new(|| verbs.eq.set_route(cqn, None));
        let ring = mem.dma_address();
        let record = ring + record_offset as u64;
        let [ring_lo, ring_hi] = cmd::split(ring);
        let [rec_lo, rec_hi] = cmd::split(record);
        let flags = if timestamp { CQ_CREATE_TIMESTAMP } else { 0 };
        self.nic.command(&cmd::CqCreate {
            cqn,
            ctx: self.ctx,
            ring_lo,
            ring_hi,
            log2_entries: log2,
            record_lo: rec_lo,
            record_hi: rec_hi,
            flags,
        })?;
        let destroy = ScopeGuard::new(|| {
            let _ = self.nic.command(&cmd::CqDestroy { index: cqn });
        });
        // A clone: on failure, `mem` outlives the guards that destroy the object in the device.
        let token = o.add_ring(mem.clone())?;
        if let Err(e) = o.cqs.try_create_and_insert(
            cqn,
            Cq {
                qps: 0,
                ring: token,
            },
            GFP_KERNEL,
        ) {
            o.remove_ring(token);
            return Err(e);
        }
        destroy.dismiss();
        unroute.dismiss();
        free_cqn.dismiss();
        arg.cqn = cqn;
        arg.entries = entries;
        arg.mmap_offset = token * PAGE_SIZE as u64;
        arg.mmap_len = bytes as u64;
        arg.record_offset = record_offset as u64;
        arg.cqe_size = cqe_size as u32;
        Ok(view)
    }

    /// `ibv_destroy_cq` of CQ `num`: `EBUSY` while a QP uses it. Its ring memory goes once no
    /// mapping uses it.
    pub(crate) fn destroy_cq(&self, num: u32) -> Result {
        let verbs = self.nic.verbs()?;
        let mut o = self.objects.lock();
        let cq = o.cqs.get(&num).ok_or(EINVAL)?;
        if cq.qps != 0 {
            return Err(EBUSY);
        }
        let ring = cq.ring;
        // One the device does not let go of is quarantined (its ring and CQN kept).
        let cq = o.cqs.remove(&num);
        let released = verbs.destroy_queue(
            &self.nic,
            &mut o,
            &cmd::CqDestroy { index: num },
            "CQ",
            ring,
        );
        verbs.eq.set_route(num, None);
        drop((o, cq));
        if released {
            verbs.ids.lock().cqns.free(num);
        }
        Ok(())
    }
}
