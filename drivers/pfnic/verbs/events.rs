// SPDX-License-Identifier: GPL-2.0

//! Completion events of one open file: what `read()` returns and `poll()` reports.
//!
//! The event queue's interrupt handler pushes a [`uapi::CqEvent`] here when an armed CQ of the
//! file gets a completion; `read()` takes them out, waiting (interruptibly) unless the file is
//! non-blocking.

use crate::uapi;
use kernel::{
    new_poll_condvar, new_spinlock_irq,
    prelude::*,
    sync::{poll::PollCondVar, Arc, SpinLockIrq},
};

/// Events one file can have queued. A CQ queues at most one event per arm, so this only fills
/// up when a process arms many CQs and never reads; further events are dropped (and counted in
/// the device's statistics).
const CAPACITY: usize = 1024;

/// Events one `read()` returns at most.
pub(crate) const READ_BATCH: usize = 16;

struct Ring {
    buf: KVec<uapi::CqEvent>,
    head: usize,
    len: usize,
}

/// The completion events of one open file.
#[pin_data]
pub(crate) struct CompletionEvents {
    #[pin]
    queue: SpinLockIrq<Ring>,
    /// Readers and pollers wait here.
    #[pin]
    wait: PollCondVar,
}

impl CompletionEvents {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut buf = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
        for _ in 0..CAPACITY {
            buf.push(uapi::CqEvent::default(), GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                queue <- new_spinlock_irq!(Ring {
                    buf,
                    head: 0,
                    len: 0,
                }),
                wait <- new_poll_condvar!("pfnic completion events"),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues an event and wakes readers and pollers; `false` if the queue was full and the
    /// event was dropped. Callable from the interrupt handler.
    pub(crate) fn push(&self, event: uapi::CqEvent) -> bool {
        {
            let mut q = self.queue.lock();
            if q.len == CAPACITY {
                return false;
            }
            let slot = (q.head + q.len) % CAPACITY;
            q.buf[slot] = event;
            q.len += 1;
        }
        self.wait.notify_all();
        true
    }

    /// Drops the queued events of CQ `cqn` (it is being destroyed: libibverbs users must not
    /// see an event naming a CQ that no longer exists).
    pub(crate) fn purge(&self, cqn: u32) {
        let mut q = self.queue.lock();
        let (head, len) = (q.head, q.len);
        let mut kept = 0;
        for i in 0..len {
            let event = q.buf[(head + i) % CAPACITY];
            if event.cqn != cqn {
                q.buf[(head + kept) % CAPACITY] = event;
                kept += 1;
            }
        }
        q.len = kept;
    }

    /// Whether an event is queued.
    pub(crate) fn ready(&self) -> bool {
        self.queue.lock().len != 0
    }

    /// Takes up to `out.len()` events, waiting for the first unless `nonblocking` (then
    /// `EAGAIN`). A signal ends the wait with `ERESTARTSYS`.
    pub(crate) fn take(&self, out: &mut [uapi::CqEvent], nonblocking: bool) -> Result<usize> {
        let mut q = self.queue.lock();
        while q.len == 0 {
            if nonblocking {
                return Err(EAGAIN);
            }
            if self.wait.wait_interruptible(&mut q) {
                return Err(ERESTARTSYS);
            }
        }
        let n = out.len().min(q.len);
        for e in out.iter_mut().take(n) {
            *e = q.buf[q.head];
            q.head = (q.head + 1) % CAPACITY;
            q.len -= 1;
        }
        Ok(n)
    }

    /// The condition variable `poll()` registers with.
    pub(crate) fn waitqueue(&self) -> &PollCondVar {
        &self.wait
    }
}
