//! Asynchronous events: `ibv_get_async_event`.

use std::io;
use std::time::Duration;

use crate::{check, sys, wait_readable, Context};

/// `enum ibv_event_type`'s numbers.
pub mod event_type {
    use crate::sys;

    pub const CQ_ERR: u32 = sys::ibv_event_type_IBV_EVENT_CQ_ERR;
    pub const QP_FATAL: u32 = sys::ibv_event_type_IBV_EVENT_QP_FATAL;
    pub const QP_LAST_WQE_REACHED: u32 = sys::ibv_event_type_IBV_EVENT_QP_LAST_WQE_REACHED;
    pub const SRQ_LIMIT_REACHED: u32 = sys::ibv_event_type_IBV_EVENT_SRQ_LIMIT_REACHED;
    pub const PORT_ACTIVE: u32 = sys::ibv_event_type_IBV_EVENT_PORT_ACTIVE;
    pub const PORT_ERR: u32 = sys::ibv_event_type_IBV_EVENT_PORT_ERR;
    pub const GID_CHANGE: u32 = sys::ibv_event_type_IBV_EVENT_GID_CHANGE;
    pub const DEVICE_FATAL: u32 = sys::ibv_event_type_IBV_EVENT_DEVICE_FATAL;
}

/// What an asynchronous event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    /// A QP: its number and the `qp_context` it was created with.
    Qp { qp_num: u32, qp_context: u64 },
    /// A CQ: its handle and the `cq_context` it was created with.
    Cq { handle: u32, cq_context: u64 },
    /// An SRQ: its handle and the `srq_context` it was created with.
    Srq { handle: u32, srq_context: u64 },
    /// A port.
    Port(u32),
    /// The device.
    Device,
    /// Something this crate does not make (a work queue).
    Other,
}

/// An asynchronous event (`struct ibv_async_event`), acknowledged as it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// `enum ibv_event_type` ([`event_type`]).
    pub event_type: u32,
    pub element: Element,
}

impl Context {
    /// The context's next asynchronous event within `timeout` (`None`: waits for ever),
    /// acknowledged at once (`ibv_get_async_event`, `ibv_ack_async_event`); `Ok(None)` when
    /// none came in time.
    pub fn get_async_event(&self, timeout: Option<Duration>) -> io::Result<Option<AsyncEvent>> {
        // SAFETY: the context is open.
        let fd = unsafe { (*self.as_ptr()).async_fd };
        if !wait_readable(fd, timeout)? {
            return Ok(None);
        }
        // SAFETY: all-zero bytes are a valid `ibv_async_event` (a null pointer and an integer).
        let mut ev: sys::ibv_async_event = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and `ev` writable.
        check(unsafe { sys::ibv_get_async_event(self.as_ptr(), &mut ev) })?;
        let t = ev.event_type;
        // SAFETY: libibverbs set the union's member the event type names; the object stays
        // alive until the event is acknowledged, below (its destroy waits for that).
        let element = unsafe {
            use event_type::*;
            match t {
                CQ_ERR => {
                    let cq = ev.element.cq;
                    Element::Cq {
                        handle: (*cq).handle,
                        cq_context: (*cq).cq_context as u64,
                    }
                }
                SRQ_LIMIT_REACHED | sys::ibv_event_type_IBV_EVENT_SRQ_ERR => {
                    let srq = ev.element.srq;
                    Element::Srq {
                        handle: (*srq).handle,
                        srq_context: (*srq).srq_context as u64,
                    }
                }
                PORT_ACTIVE
                | PORT_ERR
                | GID_CHANGE
                | sys::ibv_event_type_IBV_EVENT_LID_CHANGE
                | sys::ibv_event_type_IBV_EVENT_PKEY_CHANGE
                | sys::ibv_event_type_IBV_EVENT_SM_CHANGE
                | sys::ibv_event_type_IBV_EVENT_CLIENT_REREGISTER => {
                    Element::Port(ev.element.port_num as u32)
                }
                DEVICE_FATAL => Element::Device,
                QP_FATAL
                | QP_LAST_WQE_REACHED
                | sys::ibv_event_type_IBV_EVENT_QP_REQ_ERR
                | sys::ibv_event_type_IBV_EVENT_QP_ACCESS_ERR
                | sys::ibv_event_type_IBV_EVENT_COMM_EST
                | sys::ibv_event_type_IBV_EVENT_SQ_DRAINED
                | sys::ibv_event_type_IBV_EVENT_PATH_MIG
                | sys::ibv_event_type_IBV_EVENT_PATH_MIG_ERR => {
                    let qp = ev.element.qp;
                    Element::Qp {
                        qp_num: (*qp).qp_num,
                        qp_context: (*qp).qp_context as u64,
                    }
                }
                // Work queues (IBV_EVENT_WQ_FATAL), which this crate does not make.
                _ => Element::Other,
            }
        };
        // SAFETY: the event was returned by ibv_get_async_event and is acknowledged once.
        unsafe { sys::ibv_ack_async_event(&mut ev) };
        Ok(Some(AsyncEvent {
            event_type: t,
            element,
        }))
    }
}
