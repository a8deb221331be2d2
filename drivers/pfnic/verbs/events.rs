// SPDX-License-Identifier: GPL-2.0

//! A queue of events a file's `read()` returns and `poll()` reports: the completion events of
//! one completion channel ([`CompletionEvents`]), or the asynchronous events of one open file
//! ([`super::async_events`]).
//!
//! The event queue's interrupt handler pushes events here (a [`uapi::CqEvent`] when an armed CQ
//! bound to the channel gets a completion); `read()` takes them out, waiting (interruptibly)
//! unless the file is non-blocking. An event leaves the queue only once it was copied to the
//! reader: a reader whose buffer faults loses nothing. Once the queue's context is gone (its
//! file closed or the device unbound) the queue is closed: what is queued can still be read,
//! then `read()` fails with `EIO` instead of waiting for events that cannot come.

use crate::uapi;
use core::num::NonZeroUsize;
use kernel::{
    new_mutex, new_poll_condvar, new_spinlock_irq,
    prelude::*,
    sync::{poll::PollCondVar, Arc, Mutex, SpinLockIrq},
};

/// Completion events one channel can have queued. A CQ queues at most one event per arm, so
/// this only fills up when a process arms many CQs and never reads; further events are dropped
/// (and counted in the device's statistics).
const COMPLETION_CAPACITY: usize = 1024;

/// Events one `read()` returns at most.
const READ_BATCH: usize = 16;

/// A queued event and its sequence number (pushes are numbered in order).
#[derive(Clone, Copy, Default)]
struct Entry<T> {
    seq: u64,
    event: T,
}

struct Ring<T> {
    buf: KVec<Entry<T>>,
    /// `buf`'s length: slots wrap modulo it (never zero, so no division can panic).
    capacity: NonZeroUsize,
    head: usize,
    len: usize,
    next_seq: u64,
    /// No event will come any more (see the module documentation).
    closed: bool,
}

/// A queue of events of type `T`.
#[pin_data]
pub(crate) struct EventFifo<T: Copy + Default> {
    #[pin]
    queue: SpinLockIrq<Ring<T>>,
    /// Serializes readers between looking at the queue and taking what they copied.
    #[pin]
    readers: Mutex<()>,
    /// Readers and pollers wait here.
    #[pin]
    wait: PollCondVar,
}

/// The completion events of one channel.
pub(crate) type CompletionEvents = EventFifo<uapi::CqEvent>;

impl CompletionEvents {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(Self::new_in(COMPLETION_CAPACITY)?, GFP_KERNEL)
    }

    /// Drops the queued events of CQ `cqn` (it is being destroyed: libibverbs users must not
    /// see an event naming a CQ that no longer exists).
    pub(crate) fn purge_cq(&self, cqn: u32) {
        self.purge(|event| event.cqn == cqn, || ());
    }
}

impl<T: Copy + Default> EventFifo<T> {
    /// A queue of `capacity` events.
    pub(crate) fn new_in(capacity: usize) -> Result<impl PinInit<Self, Error>> {
        let mut buf = KVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            buf.push(Entry::default(), GFP_KERNEL)?;
        }
        let capacity = NonZeroUsize::new(capacity).ok_or(EINVAL)?;
        Ok(try_pin_init!(Self {
            queue <- new_spinlock_irq!(Ring {
                buf,
                capacity,
                head: 0,
                len: 0,
                next_seq: 0,
                closed: false,
            }),
            readers <- new_mutex!(()),
            wait <- new_poll_condvar!("pfnic events"),
        }? Error))
    }

    /// Queues an event and wakes readers and pollers; `false` if the queue was full and the
    /// event was dropped. Callable from the interrupt handler.
    pub(crate) fn push(&self, event: T) -> bool {
        {
            let mut q = self.queue.lock();
            let capacity = q.capacity;
            if q.len == capacity.get() || q.closed {
                return false;
            }
            let slot = (q.head + q.len) % capacity;
            let seq = q.next_seq;
            q.buf[slot] = Entry { seq, event };
            q.next_seq += 1;
            q.len += 1;
        }
        self.wait.notify_all();
        true
    }

    /// Drops the queued events `doomed` selects, then runs `then`, both while no reader is
    /// between copying events out and taking them off the queue: what a reader got before is
    /// accounted for by then, and nothing dropped reaches a reader after.
    pub(crate) fn purge<R>(&self, doomed: impl Fn(&T) -> bool, then: impl FnOnce() -> R) -> R {
        let _readers = self.readers.lock();
        {
            let mut q = self.queue.lock();
            let capacity = q.capacity;
            let (head, len) = (q.head, q.len);
            let mut kept = 0;
            for i in 0..len {
                let entry = q.buf[(head + i) % capacity];
                if !doomed(&entry.event) {
                    q.buf[(head + kept) % capacity] = entry;
                    kept += 1;
                }
            }
            q.len = kept;
        }
        then()
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
        copy: impl FnOnce(&[T]) -> usize,
    ) -> Result<usize> {
        let max = max.min(READ_BATCH);
        loop {
            self.wait_ready(nonblocking)?;
            let _reader = self.readers.lock();
            let mut batch = [T::default(); READ_BATCH];
            let mut seqs = [0u64; READ_BATCH];
            let n = {
                let q = self.queue.lock();
                let capacity = q.capacity;
                let n = max.min(q.len);
                for i in 0..n {
                    let entry = q.buf[(q.head + i) % capacity];
                    batch[i] = entry.event;
                    seqs[i] = entry.seq;
                }
                n
            };
            if n == 0 {
                // Another reader took them (or their CQ was destroyed): wait again.
                continue;
            }
            // Copying may fault and sleep: no spinlock held. Pushes only append, and purges
            // wait for readers, so what we copied is still at the head afterwards.
            let delivered = copy(&batch[..n]).min(n);
            if delivered > 0 {
                let last = seqs[delivered - 1];
                let mut q = self.queue.lock();
                let capacity = q.capacity;
                while q.len > 0 && q.buf[q.head].seq <= last {
                    q.head = (q.head + 1) % capacity;
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
