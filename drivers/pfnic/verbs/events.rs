// SPDX-License-Identifier: GPL-2.0

//! The queued events of one completion channel: what its `read()` returns and `poll()` reports.
//!
//! The event queue's interrupt handler pushes a [`uapi::CqEvent`] here when an armed CQ bound to
//! the channel gets a completion; `read()` takes them out, waiting (interruptibly) unless the
//! file is non-blocking. An event leaves the queue only once it was copied to the reader: a
//! reader whose buffer faults loses nothing. Once the channel's context is gone (its file closed
//! or the device unbound) the queue is closed: what is queued can still be read, then `read()`
//! fails with `EIO` instead of waiting for events that cannot come.

use crate::uapi;
use kernel::{
    new_mutex, new_poll_condvar, new_spinlock_irq,
    prelude::*,
    sync::{poll::PollCondVar, Arc, Mutex, SpinLockIrq},
};

/// Events one channel can have queued. A CQ queues at most one event per arm, so this only
/// fills up when a process arms many CQs and never reads; further events are dropped (and
/// counted in the device's statistics).
const CAPACITY: usize = 1024;

/// Events one `read()` returns at most.
const READ_BATCH: usize = 16;

/// A queued event and its sequence number (pushes are numbered in order).
#[derive(Clone, Copy, Default)]
struct Entry {
    seq: u64,
    event: uapi::CqEvent,
}

struct Ring {
    buf: KVec<Entry>,
    head: usize,
    len: usize,
    next_seq: u64,
    /// No event will come any more (see the module documentation).
    closed: bool,
}

/// The completion events of one channel.
#[pin_data]
pub(crate) struct CompletionEvents {
    #[pin]
    queue: SpinLockIrq<Ring>,
    /// Serializes readers between looking at the queue and taking what they copied.
    #[pin]
    readers: Mutex<()>,
    /// Readers and pollers wait here.
    #[pin]
    wait: PollCondVar,
}

impl CompletionEvents {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut buf = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
        for _ in 0..CAPACITY {
            buf.push(Entry::default(), GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                queue <- new_spinlock_irq!(Ring {
                    buf,
                    head: 0,
                    len: 0,
                    next_seq: 0,
                    closed: false,
                }),
                readers <- new_mutex!(()),
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
            if q.len == CAPACITY || q.closed {
                return false;
            }
            let slot = (q.head + q.len) % CAPACITY;
            let seq = q.next_seq;
            q.buf[slot] = Entry { seq, event };
            q.next_seq += 1;
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
            let entry = q.buf[(head + i) % CAPACITY];
            if entry.event.cqn != cqn {
                q.buf[(head + kept) % CAPACITY] = entry;
                kept += 1;
            }
        }
        q.len = kept;
    }

    /// Closes the queue and wakes its readers and pollers (see the module documentation).
    pub(crate) fn close(&self) {
        self.queue.lock().closed = true;
        self.wait.notify_all();
    }

    /// Whether `read()` would not wait: an event is queued, or the queue is closed.
    pub(crate) fn ready(&self) -> bool {
        let q = self.queue.lock();
        q.len != 0 || q.closed
    }

    /// Hands up to `max` queued events (at most [`READ_BATCH`]) to `copy`, waiting for the first
    /// unless `nonblocking` (then `EAGAIN`); a signal ends the wait with `ERESTARTSYS`, and a
    /// closed queue with nothing left in it fails with `EIO`. `copy`
    /// returns how many of them it delivered, and only those leave the queue; the rest stay at
    /// its head, in order. Returns what `copy` returned.
    pub(crate) fn read(
        &self,
        max: usize,
        nonblocking: bool,
        copy: impl FnOnce(&[uapi::CqEvent]) -> usize,
    ) -> Result<usize> {
        let max = max.min(READ_BATCH);
        loop {
            self.wait_ready(nonblocking)?;
            let _reader = self.readers.lock();
            let mut batch = [uapi::CqEvent::default(); READ_BATCH];
            let mut seqs = [0u64; READ_BATCH];
            let n = {
                let q = self.queue.lock();
                let n = max.min(q.len);
                for i in 0..n {
                    let entry = q.buf[(q.head + i) % CAPACITY];
                    batch[i] = entry.event;
                    seqs[i] = entry.seq;
                }
                n
            };
            if n == 0 {
                // Another reader took them (or their CQ was destroyed): wait again.
                continue;
            }
            // Copying may fault and sleep: no spinlock held. Pushes only append, and a purge
            // only removes, so what we copied is still at the head unless purged.
            let delivered = copy(&batch[..n]).min(n);
            if delivered > 0 {
                let last = seqs[delivered - 1];
                let mut q = self.queue.lock();
                while q.len > 0 && q.buf[q.head].seq <= last {
                    q.head = (q.head + 1) % CAPACITY;
                    q.len -= 1;
                }
            }
            return Ok(delivered);
        }
    }

    /// Waits until an event is queued (see [`CompletionEvents::read`]).
    fn wait_ready(&self, nonblocking: bool) -> Result {
        let mut q = self.queue.lock();
        while q.len == 0 {
            if q.closed {
                return Err(EIO);
            }
            if nonblocking {
                return Err(EAGAIN);
            }
            if self.wait.wait_interruptible(&mut q) {
                return Err(ERESTARTSYS);
            }
        }
        Ok(())
    }

    /// The condition variable `poll()` registers with.
    pub(crate) fn waitqueue(&self) -> &PollCondVar {
        &self.wait
    }
}
