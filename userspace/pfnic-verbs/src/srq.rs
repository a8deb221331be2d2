//! Shared receive queues: `ibv_srq`. Receive work requests are written straight into the queue
//! mapped from the driver, as a QP's are; the QPs created with the SRQ take them in order.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pfnic_sys::uapi;
use pfnic_sys::Mapping;

use crate::queue::{map_queue, record_word, write_wqe, Poster, WQE_MAX_SGE, WQE_SIZE};
use crate::types::{PostError, RecvWr};
use crate::{errno, Ctx, Pd, PdInner, DB_SRQ};

/// `ibv_srq_init_attr`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqInitAttr {
    /// Receive work requests it holds at least.
    pub max_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// The limit to arm at once (0: none): see [`Srq::arm_limit`].
    pub srq_limit: u32,
    /// Returned with the SRQ's asynchronous events ([`crate::AsyncEvent::element`]).
    pub srq_context: u64,
}

/// What `ibv_query_srq` reports, with the device's view of the queue.
pub type SrqAttr = uapi::QuerySrq;

pub(crate) struct SrqInner {
    ctx: Arc<Ctx>,
    /// `None` for an SRQ the RDMA core created (it holds the PD).
    _pd: Option<Arc<PdInner>>,
    pub(crate) srqn: u32,
    max_wr: u32,
    max_sge: u32,
    queue: Mapping,
    record_offset: usize,
    /// Work requests posted (free-running; the doorbell carries the low 16 bits).
    tail: Mutex<u32>,
    destroyed: AtomicBool,
}

impl SrqInner {
    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        if !self.destroyed.load(Ordering::Relaxed) {
            // Every QP that used it held this `Arc`, so none does now; the file's release
            // destroys it anyway if this fails.
            let _ = self.ctx.dev.destroy_srq(self.srqn);
        }
    }
}

/// A shared receive queue. Destroyed when it and every QP created with it are dropped.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl Srq {
    pub(crate) fn create(pd: &Pd, attr: &SrqInitAttr) -> io::Result<Self> {
        let ctx = &pd.inner.ctx;
        let mut arg = uapi::CreateSrq {
            pd: pd.inner.handle,
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
            srq_context: attr.srq_context,
            ..Default::default()
        };
        ctx.dev.create_srq(&mut arg)?;
        let layout = arg.layout();
        let mut srq = Self::map(ctx, &layout, arg.max_wr, arg.max_sge).inspect_err(|_| {
            let _ = ctx.dev.destroy_srq(arg.srqn);
        })?;
        let inner = Arc::get_mut(&mut srq.inner).expect("just made");
        inner._pd = Some(pd.inner.clone());
        inner.destroyed = AtomicBool::new(false);
        Ok(srq)
    }

    /// An SRQ the RDMA core created for a user context of [`crate::Context::from_core`], of
    /// `max_wr` work requests of `max_sge` SGEs (as it granted them); `layout` is the driver's
    /// answer. The core destroys it: dropping this only unmaps the queue.
    pub fn from_core(
        ctx: &crate::Context,
        layout: &uapi::IbCreateSrqResp,
        max_wr: u32,
        max_sge: u32,
    ) -> io::Result<Self> {
        Self::map(&ctx.inner, layout, max_wr, max_sge)
    }

    /// Checks the driver's `layout` and maps the queue; the SRQ is not destroyed on drop and
    /// has no PD until the caller says so.
    fn map(
        ctx: &Arc<Ctx>,
        l: &uapi::IbCreateSrqResp,
        max_wr: u32,
        max_sge: u32,
    ) -> io::Result<Self> {
        let bytes = u64::from(l.entries) * WQE_SIZE as u64;
        let consistent = if !l.entries.is_power_of_two()
            || l.entries > 1 << 15
            || l.record_offset < bytes
            || !l.record_offset.is_multiple_of(4)
            || l.record_offset + 16 > l.mmap_len
            || max_sge as usize > WQE_MAX_SGE
        {
            Err(format!("SRQ layout: {l:?}, {max_sge} SGEs"))
        } else {
            Ok(())
        };
        let queue = map_queue(ctx, consistent, l.mmap_offset, l.mmap_len, || {})?;
        Ok(Self {
            inner: Arc::new(SrqInner {
                ctx: ctx.clone(),
                _pd: None,
                srqn: l.srqn,
                max_wr,
                max_sge,
                queue,
                record_offset: l.record_offset as usize,
                tail: Mutex::new(0),
                destroyed: AtomicBool::new(true),
            }),
        })
    }

    pub fn srq_num(&self) -> u32 {
        self.inner.srqn
    }

    /// Work requests it holds, and SGEs per work request.
    pub fn cap(&self) -> (u32, u32) {
        (self.inner.max_wr, self.inner.max_sge)
    }

    /// `ibv_modify_srq` with `IBV_SRQ_LIMIT`: the next time a QP's take leaves fewer than
    /// `limit` work requests, the SRQ raises `IBV_EVENT_SRQ_LIMIT_REACHED` once and disarms
    /// (0 disarms it now). `EINVAL` above the SRQ's size.
    pub fn arm_limit(&self, limit: u32) -> io::Result<()> {
        self.inner.ctx.dev.modify_srq(&uapi::ModifySrq {
            srqn: self.inner.srqn,
            attr_mask: uapi::PFNIC_SRQ_LIMIT,
            max_wr: 0,
            srq_limit: limit,
        })
    }

    /// `ibv_modify_srq` with the raw attribute mask (`PFNIC_SRQ_*`): resizing is `EOPNOTSUPP`.
    pub fn modify(&self, attr_mask: u32, max_wr: u32, srq_limit: u32) -> io::Result<()> {
        self.inner.ctx.dev.modify_srq(&uapi::ModifySrq {
            srqn: self.inner.srqn,
            attr_mask,
            max_wr,
            srq_limit,
        })
    }

    /// `ibv_query_srq`, with the device's head, tail and counters.
    pub fn query(&self) -> io::Result<SrqAttr> {
        self.inner.ctx.dev.query_srq(self.inner.srqn)
    }

    /// `ibv_post_srq_recv`: as [`crate::Qp::post_recv`], into the shared queue.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.post_recv_iter(wrs.iter().map(|wr| Some(*wr)))
    }

    /// [`Srq::post_recv`] of work requests made one at a time (a `None` fails with `EINVAL`).
    pub fn post_recv_iter<'b>(
        &self,
        wrs: impl IntoIterator<Item = Option<RecvWr<'b>>>,
    ) -> Result<(), PostError> {
        let s = &*self.inner;
        let mut tail = s.tail.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the record is 16 bytes at a 4-byte aligned offset inside the mapping
        // (checked at creation), alive as long as `self`.
        let head = unsafe { record_word(&s.queue, s.record_offset) };
        let (result, posted) = Poster {
            tail: &mut tail,
            entries: s.max_wr,
            head,
        }
        .post_recv(wrs, s.max_sge, |slot, wqe| {
            // SAFETY: `slot` is below the queue's entries, so the WQE lies inside the mapping
            // (checked at creation); the device reads it only after the doorbell below.
            unsafe { write_wqe(&s.queue, slot as usize * WQE_SIZE, wqe) }
        });
        if posted {
            s.ctx.ring(DB_SRQ, s.srqn << 16 | (*tail & 0xffff));
        }
        result
    }

    /// `ibv_destroy_srq`: `EBUSY` (and the SRQ back) while a QP uses it; on success, the
    /// SRQ's asynchronous events the context read. A QP created with it holds it, so this
    /// fails with `EBUSY` while such a QP is alive in this process.
    #[allow(clippy::result_large_err)]
    pub fn destroy(self) -> Result<u32, (Srq, io::Error)> {
        if Arc::strong_count(&self.inner) > 1 {
            return Err((self, errno(libc::EBUSY)));
        }
        match self.inner.ctx.dev.destroy_srq(self.inner.srqn) {
            Ok(events) => {
                self.inner.destroyed.store(true, Ordering::Relaxed);
                Ok(events)
            }
            Err(e) => Err((self, e)),
        }
    }
}
