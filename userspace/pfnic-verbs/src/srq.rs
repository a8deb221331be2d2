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
    _pd: Arc<PdInner>,
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
        let bytes = u64::from(arg.entries) * WQE_SIZE as u64;
        // The doorbell and the record count WQEs in 16 bits.
        let consistent = if !arg.entries.is_power_of_two()
            || arg.entries > 1 << 15
            || arg.record_offset < bytes
            || !arg.record_offset.is_multiple_of(4)
            || arg.record_offset + 16 > arg.mmap_len
            || arg.max_sge as usize > WQE_MAX_SGE
        {
            Err(format!("SRQ layout: {arg:?}"))
        } else {
            Ok(())
        };
        let queue = map_queue(ctx, consistent, arg.mmap_offset, arg.mmap_len, || {
            let _ = ctx.dev.destroy_srq(arg.srqn);
        })?;
        Ok(Self {
            inner: Arc::new(SrqInner {
                ctx: ctx.clone(),
                _pd: pd.inner.clone(),
                srqn: arg.srqn,
                max_wr: arg.max_wr,
                max_sge: arg.max_sge,
                queue,
                record_offset: arg.record_offset as usize,
                tail: Mutex::new(0),
                destroyed: AtomicBool::new(false),
            }),
        })
    }

    /// The SRQ number.
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
