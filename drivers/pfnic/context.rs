// SPDX-License-Identifier: GPL-2.0

//! Hardware contexts: the device's view of one process.
//!
//! Every open file gets one. Creating it binds the device to the opener's address space through
//! the IOMMU (SVA), then programs a free hardware context with the bond's PASID. Tearing it down
//! runs in the opposite order: the hardware context is stopped first, so the device no longer
//! uses the PASID, and only then is the PASID unbound (it may be reused right after).

use crate::{
    nic::Nic,
    ring::{self, Desc},
    uapi,
};
use kernel::{
    iommu::sva::SvaBond,
    mm::{
        mmu_notifier::{self, MmuNotifier},
        Mm, MmWithUser,
    },
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{AtomicFlag, Relaxed},
        Arc, Completion,
    },
    types::ScopeGuard,
};

/// What a context needs from the device: translated DMA in a PASID whose faults it reports.
const NEEDED_CAPS: u64 = uapi::PFNIC_CAP_ATS | uapi::PFNIC_CAP_PASID | uapi::PFNIC_CAP_PRI;

/// One process's hardware context. Dropping it stops the context and unbinds its PASID (the
/// bond itself lives in the device's context table, see [`Nic::start_context`]).
pub(crate) struct Context {
    nic: Arc<Nic>,
    index: u32,
    /// `None`: the context has no PASID and no SVA bond; only translation tables reach memory.
    pasid: Option<u32>,
    /// The owner's address space. Only compared, never entered: the IOMMU reaches it through
    /// the bond. The reference keeps the `mm_struct` (not its mappings) alive, so the comparison
    /// cannot be fooled by a new address space at the same address. `None` for the RDMA
    /// core's kernel clients' context, which has no process.
    mm: Option<ARef<Mm>>,
    /// Stops the hardware context when the address space is torn down. `None` only while
    /// dropping: it is unregistered before the context's slot is freed.
    exit_stop: Option<Pin<KBox<mmu_notifier::Registration<ExitStop>>>>,
}

/// The MMU notifier of a context: an exiting (or exec'ing) owner tears its address space down
/// before its files are closed, so the device must stop first.
#[pin_data]
struct ExitStop {
    nic: Arc<Nic>,
    index: u32,
    /// Completed once `release` has run.
    #[pin]
    released: Completion,
    /// Set when the file is closed: `release` then comes from unregistering, not from the
    /// address space dying.
    closing: AtomicFlag,
}

#[vtable]
impl MmuNotifier for ExitStop {
    fn release(&self, _mm: &Mm) {
        self.released.complete_all();
        if self.closing.load(Relaxed) {
            return; // the close stops the context itself
        }
        self.nic.quiesce_context(self.index);
        self.nic
            .counters
            .contexts_stopped_by_exit
            .fetch_add(1, Relaxed);
    }
}

impl Context {
    /// Creates a context for the address space `mm` on `nic`: bound to it through the IOMMU
    /// (SVA) where the platform can, else, on a device with translation tables, without a
    /// PASID (the `odp` and `pinned` memory modes only).
    ///
    /// Fails with `EOPNOTSUPP` when neither works (no ATS, PASID or PRI, or an IOMMU that does
    /// not bind the process, and no translation tables), with `ENOMEM`, and with `EBUSY` when
    /// every hardware context is in use.
    pub(crate) fn new(nic: &Arc<Nic>, mm: &MmWithUser) -> Result<Self> {
        let failed = ScopeGuard::new(|| {
            nic.counters.context_failures.fetch_add(1, Relaxed);
        });
        let tables = nic.info.caps & uapi::PFNIC_CAP_TABLES != 0;
        let sva = nic.info.caps & NEEDED_CAPS == NEEDED_CAPS;
        if !sva && !tables {
            dev_warn!(
                nic.device(),
                "pfnic{}: cannot create a context: the device has no ATS, PASID or PRI, which \
                 faulting DMA into process memory needs, and no translation tables\n",
                nic.info.index
            );
            return Err(EOPNOTSUPP);
        }
        // Bound and started under one proof that the device is bound: unbinding waits, then
        // finds the context (and unbinds its PASID) or refuses it.
        let started = nic.with_bound(|dev| {
            if !sva {
                return Ok(None);
            }
            let bond = match SvaBond::bind(dev, mm) {
                Ok(bond) => bond,
                // Running out of memory says nothing about the platform.
                Err(e) if e == ENOMEM || !tables => {
                    if e != ENOMEM {
                        warn_no_sva(nic, e);
                    }
                    return Err(e);
                }
                Err(e) => {
                    warn_no_sva(nic, e);
                    return Ok(None);
                }
            };
            let pasid = bond.pasid();
            match nic.start_context(Some(bond)) {
                Ok(index) => Ok(Some((pasid, index))),
                // The IOMMU bound the process but did not enable page requests.
                Err(e) if e == EOPNOTSUPP && tables => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let (pasid, index) = match started {
            Some((pasid, index)) => (Some(pasid), index),
            None => (None, nic.start_context(None)?),
        };
        let started = ScopeGuard::new(|| nic.stop_context(index));
        let exit_stop = KBox::pin_init(
            mmu_notifier::Registration::register(
                mm,
                pin_init!(ExitStop {
                    nic: nic.clone(),
                    index,
                    released <- Completion::new(),
                    closing: AtomicFlag::new(false),
                }),
            ),
            GFP_KERNEL,
        )?;
        started.dismiss();
        failed.dismiss();
        nic.counters.contexts_created.fetch_add(1, Relaxed);
        match pasid {
            Some(pasid) if nic.first_sva_bind() => dev_info!(
                nic.device(),
                "pfnic{}: SVA bound, PASID {} in context {} (later binds at debug level)\n",
                nic.info.index,
                pasid,
                index
            ),
            Some(pasid) => dev_dbg!(
                nic.device(),
                "pfnic{}: SVA bound, PASID {} in context {}\n",
                nic.info.index,
                pasid,
                index
            ),
            None if nic.first_context_without_pasid() => dev_info!(
                nic.device(),
                "pfnic{}: context {} runs without a PASID (no SVA here): memory modes odp and pinned \
                 (later ones at debug level)\n",
                nic.info.index,
                index
            ),
            None => dev_dbg!(
                nic.device(),
                "pfnic{}: context {} without a PASID\n",
                nic.info.index,
                index
            ),
        }
        Ok(Self {
            nic: nic.clone(),
            index,
            pasid,
            mm: Some(ARef::from(&**mm)),
            exit_stop: Some(exit_stop),
        })
    }

    /// The context of the RDMA core's kernel clients (ib_mad's QP1, the connection manager):
    /// no process, no PASID; their memory is reached through DMA MRs and tables. `EOPNOTSUPP`
    /// on a device without DMA MRs.
    pub(crate) fn new_kernel(nic: &Arc<Nic>) -> Result<Self> {
        if nic.info.caps & uapi::PFNIC_CAP_TABLES == 0 || !nic.has_dma_mrs() {
            return Err(EOPNOTSUPP);
        }
        let index = nic.start_context(None)?;
        nic.counters.contexts_created.fetch_add(1, Relaxed);
        dev_dbg!(
            nic.device(),
            "pfnic{}: context {} for the RDMA core's kernel clients\n",
            nic.info.index,
            index
        );
        Ok(Self {
            nic: nic.clone(),
            index,
            pasid: None,
            mm: None,
            exit_stop: None,
        })
    }

    /// The hardware context's number.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// Whether `mm` is the address space this context was created for.
    ///
    /// A child that inherited the file across fork has another address space and must not use
    /// the parent's context (its DMA would land in the parent's memory).
    pub(crate) fn owned_by(&self, mm: Option<&MmWithUser>) -> bool {
        match (mm, &self.mm) {
            (Some(mm), Some(own)) => core::ptr::eq(mm.as_raw(), own.as_raw()),
            _ => false,
        }
    }

    /// Whether the context works in the owner's address space through a PASID (SVA).
    pub(crate) fn has_pasid(&self) -> bool {
        self.pasid.is_some()
    }

    /// Executes one DMA operation in the owner's address space (`PFNIC_IOCTL_SUBMIT`);
    /// `EOPNOTSUPP` for a context without a PASID, which has no address space.
    pub(crate) fn submit(&self, op: &mut uapi::Submit) -> Result {
        if self.pasid.is_none() {
            return Err(EOPNOTSUPP);
        }
        let opcode = match op.opcode {
            uapi::PFNIC_OP_COPY => ring::OP_COPY,
            uapi::PFNIC_OP_FILL => ring::OP_FILL,
            uapi::PFNIC_OP_COMPARE => ring::OP_COMPARE,
            _ => return Err(EINVAL),
        };
        if op.flags != 0 || op.len > ring::MAX_LEN {
            return Err(EINVAL);
        }
        let desc = Desc {
            opcode,
            src: op.src,
            dst: op.dst,
            len: op.len,
            pattern: op.pattern,
            ..Default::default()
        };
        let (done, elapsed) = self.nic.submit(self.index, desc)?;
        op.status = done.status & 0xff;
        op.page_requests = done.page_requests;
        op.result = done.result;
        op.latency_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        Ok(())
    }

    /// The answer to `PFNIC_IOCTL_QUERY_CONTEXT`.
    pub(crate) fn query(&self) -> Result<uapi::QueryContext> {
        Ok(uapi::QueryContext {
            context: self.index,
            pasid: self.pasid.unwrap_or(0),
            translation: self.nic.context_stats(self.index)?,
            // Reading the count re-arms the device's report of the next refusal.
            remote_access_errors: match self.nic.remote_access_errors(self.index) {
                Ok(n) => n,
                Err(e) if e == EOPNOTSUPP => 0,
                Err(e) => return Err(e),
            },
            ..Default::default()
        })
    }
}

/// Says why a context gets no SVA bond (once per reason is enough for a reader of the log).
fn warn_no_sva(nic: &Nic, e: Error) {
    dev_warn!(
        nic.device(),
        "pfnic{}: cannot bind the process's address space (SVA): {:?}; the device needs an \
         IOMMU with PASID and page requests, and its ATS, PASID and PRI capabilities\n",
        nic.info.index,
        e
    );
}

impl Drop for Context {
    fn drop(&mut self) {
        // When the address space dies, the IOMMU driver tears the PASID down itself, from
        // whichever thread drops the last user (possibly its page fault worker), and that must
        // not race with our unbind. So either keep the address space alive across the unbind,
        // or, if it is already dying, wait until its release callbacks (ours and the IOMMU's
        // run in one pass) are done: ours completes `released`, and unregistering ours then
        // waits for the rest of that pass.
        let users = self.mm.as_ref().and_then(|mm| mm.mmget_not_zero());
        if let Some(exit_stop) = &self.exit_stop {
            if users.is_none() {
                exit_stop.data().released.wait_for_completion();
            }
            exit_stop.data().closing.store(true, Relaxed);
        }
        // Unregistering also waits for a running `release`, so none can stop the slot's next
        // owner.
        drop(self.exit_stop.take());
        self.nic.stop_context(self.index);
        // May be the last user: the address space is torn down here, after the unbind.
        drop(users);
    }
}
