// SPDX-License-Identifier: GPL-2.0

//! Completion channels (`ibv_create_comp_channel`): a file of its own per channel, which reads
//! the completion events of the CQs created with it, and only those.
//!
//! A channel belongs to the file that created it. `CREATE_CQ` accepts only a descriptor of one of
//! that file's channels, found by the identity of the `struct file` behind it, so a channel
//! passed to another process cannot be made to carry the events of that process's CQs. The
//! creating file holds a reference to each of its channels: a `struct file` it compares against
//! cannot be freed and reused meanwhile. When the creating file goes (or the device is unbound)
//! its channels are closed: readers get what is queued, then `EIO`.

use super::{events::CompletionEvents, file::VerbsFile};
use crate::uapi;
use kernel::{
    fs::{
        anon_inode::{self, AnonFile},
        file::{flags, FileDescriptorReservation},
        File, Kiocb, LocalFile,
    },
    iov::IovIterDest,
    prelude::*,
    sync::{
        aref::ARef,
        poll::{PollTable, POLLIN, POLLRDNORM},
        Arc, ArcBorrow,
    },
};
use zerocopy::IntoBytes;

/// One channel of a file: its file, for identity, and its queue.
pub(crate) struct Channel {
    file: ARef<File>,
    pub(crate) events: Arc<CompletionEvents>,
}

/// The file operations of a channel.
pub(crate) struct ChannelFile;

#[vtable]
impl AnonFile for ChannelFile {
    type Ptr = Arc<CompletionEvents>;

    /// Completion events, as [`uapi::CqEvent`] records; at least one must fit (`EINVAL`).
    fn read_iter(kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        let events = kiocb.file();
        let n = iov.len() / size_of::<uapi::CqEvent>();
        if n == 0 {
            return Err(EINVAL);
        }
        // Only events copied whole are taken off the queue: a buffer that faults part way
        // keeps the rest queued.
        let delivered = events.read(n, kiocb.nonblocking(), |batch| {
            iov.copy_to_iter(batch.as_bytes()) / size_of::<uapi::CqEvent>()
        })?;
        if delivered == 0 {
            return Err(EFAULT);
        }
        Ok(delivered * size_of::<uapi::CqEvent>())
    }

    fn poll(events: ArcBorrow<'_, CompletionEvents>, file: &File, table: &PollTable<'_>) -> u32 {
        table.register_wait(file, events.waitqueue());
        if events.ready() {
            POLLIN | POLLRDNORM
        } else {
            0
        }
    }
}

impl VerbsFile {
    /// `PFNIC_IOCTL_CREATE_COMP_CHANNEL`: `publish` copies the argument out to the process; the
    /// descriptor is installed only after it succeeded, since an installed one cannot be taken
    /// back.
    pub(crate) fn create_comp_channel(
        &self,
        publish: impl FnOnce(&uapi::CompChannel) -> Result,
    ) -> Result {
        self.nic.verbs()?;
        let fd = FileDescriptorReservation::get_unused_fd_flags(flags::O_CLOEXEC)?;
        let events = CompletionEvents::new()?;
        let file = anon_inode::new_file::<ChannelFile>(
            c"[pfnic-comp-channel]",
            events.clone(),
            flags::O_RDWR,
        )?;
        {
            let mut o = self.objects.lock();
            if o.channels.len() >= uapi::PFNIC_MAX_COMP_CHANNELS {
                return Err(EDQUOT);
            }
            o.channels.push(
                Channel {
                    file: file.clone(),
                    events,
                },
                GFP_KERNEL,
            )?;
        }
        let arg = uapi::CompChannel {
            fd: fd.reserved_fd() as i32,
            reserved: 0,
        };
        if let Err(e) = publish(&arg) {
            let mut o = self.objects.lock();
            if let Some(i) = o
                .channels
                .iter()
                .position(|c| c.file.as_ptr() == file.as_ptr())
            {
                drop(o.channels.remove(i));
            }
            return Err(e);
        }
        fd.fd_install(file);
        Ok(())
    }

    /// The queue of the channel `fd` names for a new CQ (`-1`: none). `EBADF` if `fd` is not
    /// open, `EINVAL` if it is not a channel of this file.
    pub(crate) fn channel_of(
        channels: &KVec<Channel>,
        fd: i32,
    ) -> Result<Option<Arc<CompletionEvents>>> {
        if fd == -1 {
            return Ok(None);
        }
        let fd = u32::try_from(fd).map_err(|_| EBADF)?;
        let file = LocalFile::fget(fd)?;
        channels
            .iter()
            .find(|c| c.file.as_ptr() == file.as_ptr())
            .map(|c| Some(c.events.clone()))
            .ok_or(EINVAL)
    }
}

impl Drop for Channel {
    /// The creating file is going: nothing will arrive on the channel any more.
    fn drop(&mut self) {
        self.events.close();
    }
}
