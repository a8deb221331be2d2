//! Asynchronous events (`ibv_get_async_event`, `ibv_ack_async_event`): each context has an
//! event file, `context->async_fd`, which becomes readable when an event is queued.
//!
//! pfnic's driver reports no asynchronous event yet (no QP or CQ errors outside
//! completions, no port changes), so no event is ever queued: the file is an eventfd nobody
//! signals, and `ibv_get_async_event` blocks on it as libibverbs does on an idle device, or
//! fails with `EAGAIN` when the caller made it non-blocking. Programs that watch for events
//! (`ibv_asyncwatch`, MPI libraries) load, and wait.

use core::ffi::{c_char, c_int};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use crate::device::ctx_wrap;
use crate::ffi::*;
use crate::set_errno;

/// A context's event file.
pub(crate) fn new_event_file() -> io::Result<OwnedFd> {
    // SAFETY: `eventfd` takes no pointers; a valid result is a new descriptor we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `ibv_get_async_event`: waits for the context's next asynchronous event. -1 with `errno`:
/// `EAGAIN` on a non-blocking `async_fd` (or a wake-up without an event), `EINTR` for a
/// signal, `EINVAL` for NULL arguments. No event is queued (see the module), so it never
/// returns 0.
///
/// # Safety
///
/// `context` is NULL or a live context of this library; `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let mut count = 0u64;
    // SAFETY: the context's event file (`async_fd`) is open while the context lives; the
    // read writes the 8 bytes of `count`.
    let n = unsafe {
        libc::read(
            w.shared.async_file.as_raw_fd(),
            (&raw mut count).cast(),
            core::mem::size_of::<u64>(),
        )
    };
    if n < 0 {
        set_errno(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        );
    } else {
        // Signalled without an event queued.
        set_errno(libc::EAGAIN);
    }
    -1
}

/// `ibv_ack_async_event`: acknowledges an event `ibv_get_async_event` returned; as none is
/// ever returned, there is nothing to count.
#[no_mangle]
pub extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

/// `ibv_event_type_str`: libibverbs' description of an `enum ibv_event_type`.
#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    static STR: OnceLock<Vec<std::ffi::CString>> = OnceLock::new();
    const NAMES: &[&str] = &[
        "CQ error",
        "local work queue catastrophic error",
        "invalid request local work queue error",
        "local access violation work queue error",
        "communication established",
        "send queue drained",
        "path migrated",
        "path migration request error",
        "local catastrophic error",
        "port active",
        "port error",
        "LID change",
        "P_Key change",
        "SM change",
        "SRQ catastrophic error",
        "SRQ limit reached",
        "last WQE reached",
        "client reregistration",
        "GID table change",
        "WQ fatal",
        "unknown",
    ];
    crate::helpers::describe(&STR, NAMES.iter().copied(), event)
}
