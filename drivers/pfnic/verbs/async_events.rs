// SPDX-License-Identifier: GPL-2.0

//! The asynchronous events of one open file (`ibv_get_async_event`): QP fatal errors, CQ
//! errors, SRQ limits and last-WQE events of the file's own objects, the port's events (link
//! up and down, GID table changes) and the device's end (unbind), read from a file of their own
//! ([`uapi::PFNIC_IOCTL_GET_ASYNC_FD`]).
//!
//! The event queue's interrupt handler routes each device event to the file that owns its
//! object, and a port's to every file ([`super::eq`]), and pushes a [`uapi::AsyncEvent`] here.
//! libibverbs frees a QP, CQ or SRQ only after the process acknowledged every event of it that
//! it read, so the file counts, per object, the events `read()` returned; destroying the object
//! drops its queued events and returns that count ([`AsyncEvents::forget`]), atomically with
//! respect to readers.

use super::events::EventFifo;
use crate::uapi;
use kernel::{
    fs::{
        anon_inode::{self, AnonFile},
        file::{flags, FileDescriptorReservation},
        File, Kiocb,
    },
    iov::IovIterDest,
    new_mutex,
    prelude::*,
    sync::{
        poll::{PollTable, POLLIN, POLLRDNORM},
        Arc, ArcBorrow, Mutex,
    },
};
use zerocopy::IntoBytes;

/// Events one file can have queued. The device raises at most a few per object (a QP enters
/// ERR once, an SRQ's limit fires once per arm), so this fills only if a process never reads;
/// further events are dropped (and counted in the device's statistics).
const CAPACITY: usize = 256;

/// The kinds of objects events name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    Cq,
    Qp,
    Srq,
    /// The device or its port: nothing is destroyed, so their events are not counted.
    Device,
}

impl ObjectKind {
    /// The kind of object an event of `event_type` names.
    fn of(event_type: u32) -> Self {
        match event_type {
            uapi::PFNIC_EVENT_CQ_ERR => Self::Cq,
            uapi::PFNIC_EVENT_SRQ_LIMIT_REACHED => Self::Srq,
            uapi::PFNIC_EVENT_PORT_ACTIVE
            | uapi::PFNIC_EVENT_PORT_ERR
            | uapi::PFNIC_EVENT_GID_CHANGE
            | uapi::PFNIC_EVENT_DEVICE_FATAL => Self::Device,
            _ => Self::Qp,
        }
    }
}

/// The device's table sizes, to index the per-object counts.
#[derive(Clone, Copy)]
pub(crate) struct ObjectCounts {
    pub(crate) qps: u32,
    pub(crate) cqs: u32,
    pub(crate) srqs: u32,
}

impl ObjectCounts {
    /// The slot of object `num` of `kind` in the counts; `None` out of range.
    fn slot(&self, kind: ObjectKind, num: u32) -> Option<usize> {
        let (base, len) = match kind {
            ObjectKind::Qp => (0, self.qps),
            ObjectKind::Cq => (self.qps, self.cqs),
            ObjectKind::Srq => (self.qps + self.cqs, self.srqs),
            ObjectKind::Device => return None,
        };
        (num < len).then(|| (base + num) as usize)
    }

    fn total(&self) -> usize {
        (self.qps + self.cqs + self.srqs) as usize
    }
}

/// The asynchronous events of one file.
#[pin_data]
pub(crate) struct AsyncEvents {
    #[pin]
    fifo: EventFifo<uapi::AsyncEvent>,
    sizes: ObjectCounts,
    /// Events `read()` returned, per object, since the object was created. Changed only with
    /// the fifo's readers excluded (inside [`EventFifo::read`]'s copy and [`EventFifo::purge`]).
    #[pin]
    delivered: Mutex<KVec<u32>>,
}

impl AsyncEvents {
    pub(crate) fn new(sizes: ObjectCounts) -> Result<Arc<Self>> {
        let mut delivered = KVec::with_capacity(sizes.total(), GFP_KERNEL)?;
        for _ in 0..sizes.total() {
            delivered.push(0, GFP_KERNEL)?;
        }
        Arc::pin_init(
            try_pin_init!(Self {
                fifo <- EventFifo::new_in(CAPACITY)?,
                sizes,
                delivered <- new_mutex!(delivered),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// Queues an event; `false` if the queue was full (or closed) and it was dropped. Callable
    /// from the interrupt handler.
    pub(crate) fn push(&self, element: u64, event_type: u32, object: u32) -> bool {
        self.fifo.push(uapi::AsyncEvent {
            element,
            event_type,
            object,
        })
    }

    /// The object is being destroyed (its events are no longer routed here): drops its queued
    /// events and returns how many of its events `read()` returned, which the caller reports to
    /// the process.
    pub(crate) fn forget(&self, kind: ObjectKind, num: u32) -> u32 {
        self.fifo.purge(
            |e| ObjectKind::of(e.event_type) == kind && e.object == num,
            || {
                let mut delivered = self.delivered.lock();
                self.sizes
                    .slot(kind, num)
                    .and_then(|i| delivered.get_mut(i))
                    .map_or(0, core::mem::take)
            },
        )
    }

    /// Closes the queue: its readers get what is queued, then `EIO`.
    pub(crate) fn close(&self) {
        self.fifo.close();
    }

    /// The device is gone: queues `IBV_EVENT_DEVICE_FATAL` as the last event (unless the queue
    /// is full), then closes the queue.
    pub(crate) fn device_gone(&self) {
        self.push(0, uapi::PFNIC_EVENT_DEVICE_FATAL, 0);
        self.close();
    }
}

/// The file operations of the event file.
pub(crate) struct AsyncEventFile;

#[vtable]
impl AnonFile for AsyncEventFile {
    type Ptr = Arc<AsyncEvents>;

    /// Asynchronous events, as [`uapi::AsyncEvent`] records; at least one must fit (`EINVAL`).
    fn read_iter(kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        let events = kiocb.file();
        let n = iov.len() / size_of::<uapi::AsyncEvent>();
        if n == 0 {
            return Err(EINVAL);
        }
        let delivered = events.fifo.read(n, kiocb.nonblocking(), |batch| {
            let copied = iov.copy_to_iter(batch.as_bytes()) / size_of::<uapi::AsyncEvent>();
            let mut counts = events.delivered.lock();
            for e in &batch[..copied.min(batch.len())] {
                let slot = events.sizes.slot(ObjectKind::of(e.event_type), e.object);
                if let Some(count) = slot.and_then(|i| counts.get_mut(i)) {
                    *count = count.saturating_add(1);
                }
            }
            copied
        })?;
        if delivered == 0 {
            return Err(EFAULT);
        }
        Ok(delivered * size_of::<uapi::AsyncEvent>())
    }

    fn poll(events: ArcBorrow<'_, AsyncEvents>, file: &File, table: &PollTable<'_>) -> u32 {
        table.register_wait(file, events.fifo.waitqueue());
        if events.fifo.ready() {
            POLLIN | POLLRDNORM
        } else {
            0
        }
    }
}

/// Opens the event file of `events`: `publish` copies the argument out to the process, and the
/// descriptor is installed only after it succeeded, since an installed one cannot be taken back.
pub(crate) fn open_event_file(
    events: &Arc<AsyncEvents>,
    publish: impl FnOnce(&uapi::AsyncFd) -> Result,
) -> Result {
    let fd = FileDescriptorReservation::get_unused_fd_flags(flags::O_CLOEXEC)?;
    let file = anon_inode::new_file::<AsyncEventFile>(
        c"[pfnic-async-events]",
        events.clone(),
        flags::O_RDWR,
    )?;
    publish(&uapi::AsyncFd {
        fd: fd.reserved_fd() as i32,
        reserved: 0,
    })?;
    fd.fd_install(file);
    Ok(())
}
