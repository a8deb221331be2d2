//! Shared receive queues: `ibv_srq`. Receive work requests are written straight into the queue
//! mapped from the driver, as a QP's are; the QPs created with the SRQ take them in order.

use std::io;
use std::sync::{Arc, Mutex};

use pfnic_sys::uapi;
use pfnic_sys::Mapping;

use crate::queue::{map_queue, record_word, write_wqe, Poster, WQE_MAX_SGE, WQE_SIZE};
use crate::types::{PostError, RecvWr};
use crate::{Ctx, DB_SRQ};

/// `ibv_srq_init_attr`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqInitAttr {
    /// Receive work requests it holds at least.
    pub max_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// The limit to arm at once (0: none): see [`Srq::arm_limit`].
    pub srq_limit: u32,
    /// Returned with the SRQ's asynchronous events.
    pub srq_context: u64,
}

pub(crate) struct SrqInner {
    ctx: Arc<Ctx>,
    pub(crate) srqn: u32,
    max_wr: u32,
    max_sge: u32,
    queue: Mapping,
    record_offset: usize,
    /// Work requests posted (free-running; the doorbell carries the low 16 bits).
    tail: Mutex<u32>,
}

impl SrqInner {
    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }
}

/// A shared receive queue of the RDMA core (`ibv_srq`), as the provider posts to it. The core
/// destroys it: dropping this only unmaps the queue.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl Srq {
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

    /// Checks the driver's `layout` and maps the queue.
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
                srqn: l.srqn,
                max_wr,
                max_sge,
                queue,
                record_offset: l.record_offset as usize,
                tail: Mutex::new(0),
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
}
