// SPDX-License-Identifier: GPL-2.0

//! Objects the device did not let go of: a QP, SRQ or CQ destroy, or an MR clear, that the
//! device refused. The device may still use such an object, so its memory (ring memory, pinned
//! pages, an ODP mirror) and its number stay out of use until the device is reset at unbind,
//! as a context that does not stop keeps its PASID (`Nic::stop_context`). Its owner's destroy
//! succeeds: there is nothing the owner could do about it, and the RDMA core treats a failed
//! destroy at close as a driver bug.

use super::{
    cmd::{Command, Index},
    file, Verbs,
};
use crate::nic::Nic;
use kernel::{prelude::*, sync::atomic::Relaxed};

/// What a refused destroy leaves the device to use, held only to keep it alive.
pub(crate) enum Quarantined {
    /// A QP's, SRQ's or CQ's ring memory.
    Ring { _mem: file::RingMem },
    /// An MR, with its pinned pages or its ODP mirror.
    Mr { _mr: file::Mr },
}

impl Quarantined {
    pub(crate) fn ring(mem: file::RingMem) -> Self {
        Self::Ring { _mem: mem }
    }

    pub(crate) fn mr(mr: file::Mr) -> Self {
        Self::Mr { _mr: mr }
    }
}

/// Whether a destroy command's result `r` is the device's refusal: it failed while the device
/// is bound. Once it is unbound, its reset emptied its tables, and commands fail harmlessly.
pub(crate) fn refused<T>(nic: &Nic, r: &Result<T>) -> bool {
    r.is_err() && nic.with_bar(|_| ()).is_ok()
}

impl Verbs {
    /// Destroys a queue of `kind` (a QP, SRQ or CQ of the file whose objects are `o`) with
    /// the device's destroy command `destroy`, and returns whether the device let go of it:
    /// then its ring (`ring`, its token) is retired, else the ring is quarantined with it and
    /// the caller leaves the number allocated.
    pub(crate) fn destroy_queue<C: Command<Reply = ()> + Index>(
        &self,
        nic: &Nic,
        o: &mut file::Objects,
        destroy: &C,
        kind: &str,
        ring: u64,
    ) -> bool {
        let num = destroy.index();
        if refused(nic, &nic.command(destroy)) {
            let mem = o.rings.remove(&ring).map(Quarantined::ring);
            self.quarantine(nic, o, kind, num, mem);
            false
        } else {
            o.remove_ring(ring);
            true
        }
    }

    /// Keeps `what`, of `kind` `num` of the file whose objects are `o` (the caller leaves the
    /// number allocated), until the device is reset, and marks the file's context to be kept
    /// too once it stops (`VerbsFile`'s drop); counts it (`objects_quarantined`) and says so.
    pub(crate) fn quarantine(
        &self,
        nic: &Nic,
        o: &mut file::Objects,
        kind: &str,
        num: u32,
        what: Option<Quarantined>,
    ) {
        nic.counters.objects_quarantined.add(1, Relaxed);
        o.device_keeps_objects = true;
        dev_warn!(
            nic.device(),
            "pfnic{}: the device did not destroy {} {}: it stays out of use until the device \
             is reset\n",
            nic.info.index,
            kind,
            num
        );
        let Some(what) = what else {
            return;
        };
        let mut q = self.quarantined.lock();
        if q.reserve(1, GFP_KERNEL).is_err() {
            // Never freed rather than freed under the device.
            core::mem::forget(what);
            return;
        }
        if let Err(e) = q.push_within_capacity(what) {
            core::mem::forget(e);
        }
    }
}
