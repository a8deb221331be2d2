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
    fs::file::FileMappings,
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
    pasid: u32,
    /// The owner's address space. Only compared, never entered: the IOMMU reaches it through
    /// the bond. The reference keeps the `mm_struct` (not its mappings) alive, so the comparison
    /// cannot be fooled by a new address space at the same address.
    mm: ARef<Mm>,
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
    /// Creates a context for the address space `mm` on `nic`.
    ///
    /// Fails with `EOPNOTSUPP` when the device lacks ATS, PASID or PRI or the IOMMU did not
    /// enable them, with the IOMMU's error (`ENODEV` without SVA support) when the address space
    /// cannot be bound, and with `EBUSY` when every hardware context is in use.
    pub(crate) fn new(nic: &Arc<Nic>, mm: &MmWithUser, mappings: FileMappings) -> Result<Self> {
        let failed = ScopeGuard::new(|| {
            nic.counters.context_failures.fetch_add(1, Relaxed);
        });
        if nic.info.caps & NEEDED_CAPS != NEEDED_CAPS {
            dev_warn!(
                nic.device(),
                "pfnic{}: cannot create a context: the device has no ATS, PASID or PRI, which \
                 faulting DMA into process memory needs\n",
                nic.info.index
            );
            return Err(EOPNOTSUPP);
        }
        // Bound and started under one proof that the device is bound: unbinding waits, then
        // finds the context (and unbinds its PASID) or refuses it.
        let (pasid, index) = nic.with_bound(|dev| {
            let bond = SvaBond::bind(dev, mm).inspect_err(|e| {
                // Running out of memory says nothing about the platform.
                if *e == ENOMEM {
                    return;
                }
                dev_warn!(
                    dev,
                    "pfnic{}: cannot bind the process's address space (SVA): {:?}; \
                     the device needs an IOMMU with PASID and page requests, and its ATS, \
                     PASID and PRI capabilities\n",
                    nic.info.index,
                    e
                )
            })?;
            let pasid = bond.pasid();
            Ok((pasid, nic.start_context(bond, mappings)?))
        })?;
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
        if nic.first_sva_bind() {
            dev_info!(
                nic.device(),
                "pfnic{}: SVA bound, PASID {} in context {} (later binds at debug level)\n",
                nic.info.index,
                pasid,
                index
            );
        } else {
            dev_dbg!(
                nic.device(),
                "pfnic{}: SVA bound, PASID {} in context {}\n",
                nic.info.index,
                pasid,
                index
            );
        }
        Ok(Self {
            nic: nic.clone(),
            index,
            pasid,
            mm: ARef::from(&**mm),
            exit_stop: Some(exit_stop),
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
        mm.is_some_and(|mm| core::ptr::eq(mm.as_raw(), self.mm.as_raw()))
    }

    /// Executes one DMA operation in the owner's address space (`PFNIC_IOCTL_SUBMIT`).
    pub(crate) fn submit(&self, op: &mut uapi::Submit) -> Result {
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
            pasid: self.pasid,
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

impl Drop for Context {
    fn drop(&mut self) {
        // When the address space dies, the IOMMU driver tears the PASID down itself, from
        // whichever thread drops the last user (possibly its page fault worker), and that must
        // not race with our unbind. So either keep the address space alive across the unbind,
        // or, if it is already dying, wait until its release callbacks (ours and the IOMMU's
        // run in one pass) are done: ours completes `released`, and unregistering ours then
        // waits for the rest of that pass.
        let users = self.mm.mmget_not_zero();
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
