//! Asynchronous events (`ibv_get_async_event`, `ibv_ack_async_event`): each context reads the
//! driver's event file of its device file (`context->async_fd`), which becomes readable when
//! an event is queued: a QP that entered the error state for an error no completion reports
//! (`IBV_EVENT_QP_FATAL`), a CQ that overflowed (`IBV_EVENT_CQ_ERR`), an SRQ below its limit
//! (`IBV_EVENT_SRQ_LIMIT_REACHED`), a QP with an SRQ that entered the error state
//! (`IBV_EVENT_QP_LAST_WQE_REACHED`), and, for every context of the device, the port's link
//! coming up or going down (`IBV_EVENT_PORT_ACTIVE`, `IBV_EVENT_PORT_ERR`) and its GID table
//! changing (`IBV_EVENT_GID_CHANGE`), whose `element.port_num` is 1, and the device's end
//! (`IBV_EVENT_DEVICE_FATAL`, the last event before `EIO`: it was unbound).
//!
//! An event names its object by the handle the library gave the driver at creation: the
//! address of the object's wrapper, whose first field is the `ibv_qp`, `ibv_cq` or `ibv_srq`
//! the program knows. The driver drops an object's unread events when it is destroyed and says
//! how many it handed out; destroying waits until the program acknowledged as many
//! ([`AsyncAcks`]), as libibverbs does, so an event's element stays valid until its ack.

use core::ffi::{c_char, c_int};
use std::sync::{Condvar, Mutex, OnceLock};

use pfnic_verbs::event_type;

use crate::cq::cq_wrap;
use crate::device::ctx_wrap;
use crate::ffi::*;
use crate::{errno_of, lock, set_errno};

/// `enum ibv_event_type` values that name a QP, an SRQ or a port (the others name a CQ or
/// the device).
const QP_EVENTS: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 16];
const SRQ_EVENTS: [u32; 2] = [14, 15];

/// The asynchronous events of one object acknowledged so far, for its destruction to wait on.
#[derive(Default)]
pub(crate) struct AsyncAcks {
    acked: Mutex<u32>,
    cond: Condvar,
}

impl AsyncAcks {
    /// `ibv_ack_async_event` of one of the object's events.
    fn ack(&self) {
        *lock(&self.acked) += 1;
        self.cond.notify_all();
    }

    /// Waits until `reported` events (what the driver said it handed out) were acknowledged.
    pub(crate) fn wait_for(&self, reported: u32) {
        let mut acked = lock(&self.acked);
        while *acked < reported {
            acked = self.cond.wait(acked).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// `ibv_destroy_qp` and `ibv_destroy_srq`: destroys the object in `slot` with `destroy`
    /// (which gives it back on failure, to stay in `slot`), then waits for the acks of the
    /// events it reported. 0 (the caller then frees the wrapper), or an errno value.
    pub(crate) fn destroy<T>(
        &self,
        slot: &mut Option<T>,
        destroy: impl FnOnce(T) -> Result<u32, (T, std::io::Error)>,
    ) -> c_int {
        let Some(inner) = slot.take() else {
            return libc::EINVAL;
        };
        match destroy(inner) {
            Ok(reported) => {
                self.wait_for(reported);
                0
            }
            Err((inner, e)) => {
                *slot = Some(inner);
                errno_of(&e)
            }
        }
    }
}

/// `ibv_get_async_event`: waits for the context's next asynchronous event. -1 with `errno`:
/// `EAGAIN` on a non-blocking `async_fd` with no event queued, `EINVAL` for NULL arguments,
/// `EIO` once the device is gone.
///
/// # Safety
///
/// `context` is NULL or a live context of this library; `event` is NULL or writable.
#[cfg_attr(feature = "cabi", no_mangle)]
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
    let ev = match w.shared.async_events.get_event() {
        Ok(ev) => ev,
        Err(e) => {
            set_errno(errno_of(&e));
            return -1;
        }
    };
    // The element is the wrapper's address the library gave at creation (every kind's C
    // object is its wrapper's first field), or the port's number.
    let element = ev.element as usize as *mut core::ffi::c_void;
    // SAFETY: the caller passes a writable event.
    unsafe {
        event.write(ibv_async_event {
            element,
            event_type: ev.event_type as c_int,
        })
    };
    0
}

/// `ibv_ack_async_event`: acknowledges an event `ibv_get_async_event` returned, which lets the
/// destruction of its object go on.
///
/// # Safety
///
/// `event` is NULL or an event `ibv_get_async_event` returned, not yet acknowledged.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    // SAFETY: the caller passes NULL or a returned event.
    let Some(ev) = (unsafe { event.as_ref() }) else {
        return;
    };
    let kind = ev.event_type as u32;
    // SAFETY: an unacknowledged event's object is alive: its destruction waits for this ack.
    let acks = unsafe {
        if kind == event_type::CQ_ERR {
            cq_wrap(ev.element.cast()).map(|w| &w.async_acks)
        } else if QP_EVENTS.contains(&kind) {
            crate::qp::qp_acks(ev.element.cast())
        } else if SRQ_EVENTS.contains(&kind) {
            crate::srq::srq_acks(ev.element.cast())
        } else {
            None
        }
    };
    if let Some(acks) = acks {
        acks.ack();
    }
}

/// `ibv_event_type_str`: libibverbs' description of an `enum ibv_event_type`.
#[cfg_attr(feature = "cabi", no_mangle)]
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
