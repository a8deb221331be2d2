//! The verbs pfnic does not have: shared receive queues, address handles (pfnic has RC queue
//! pairs only), multicast and enhanced connection establishment (ECE). They are exported, so that a program which references them
//! loads and runs its other paths, and each call fails as libibverbs documents a verb the
//! device does not support: constructors return NULL with `errno` `EOPNOTSUPP`, the others
//! return `EOPNOTSUPP` (`EINVAL` for an object that cannot exist).

use core::ffi::{c_int, c_void};

use crate::set_errno;

/// `ibv_query_ece`: `EOPNOTSUPP` (no enhanced connection establishment).
#[no_mangle]
pub extern "C" fn ibv_query_ece(_qp: *mut c_void, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_set_ece`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_set_ece(_qp: *mut c_void, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_create_srq`: NULL, `errno` `EOPNOTSUPP` (`max_srq` is 0).
#[no_mangle]
pub extern "C" fn ibv_create_srq(_pd: *mut c_void, _srq_init_attr: *mut c_void) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

/// `ibv_modify_srq`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_modify_srq(_srq: *mut c_void, _attr: *mut c_void, _mask: c_int) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_query_srq`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_query_srq(_srq: *mut c_void, _attr: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_destroy_srq`: `EINVAL`, as no SRQ of this library exists.
#[no_mangle]
pub extern "C" fn ibv_destroy_srq(_srq: *mut c_void) -> c_int {
    libc::EINVAL
}

/// `ibv_create_ah`: NULL, `errno` `EOPNOTSUPP` (`max_ah` is 0: no UD queue pairs).
#[no_mangle]
pub extern "C" fn ibv_create_ah(_pd: *mut c_void, _attr: *mut c_void) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

/// `ibv_create_ah_from_wc`: as [`ibv_create_ah`].
#[no_mangle]
pub extern "C" fn ibv_create_ah_from_wc(
    _pd: *mut c_void,
    _wc: *mut c_void,
    _grh: *mut c_void,
    _port_num: u8,
) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

/// `ibv_destroy_ah`: `EINVAL`, as no address handle of this library exists.
#[no_mangle]
pub extern "C" fn ibv_destroy_ah(_ah: *mut c_void) -> c_int {
    libc::EINVAL
}

/// `ibv_attach_mcast`: `EOPNOTSUPP` (`max_mcast_grp` is 0).
#[no_mangle]
pub extern "C" fn ibv_attach_mcast(_qp: *mut c_void, _gid: *const c_void, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_detach_mcast`: `EOPNOTSUPP`.
#[no_mangle]
pub extern "C" fn ibv_detach_mcast(_qp: *mut c_void, _gid: *const c_void, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}
