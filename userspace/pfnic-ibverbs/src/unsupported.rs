//! The verbs pfnic does not have: address handles (pfnic has RC queue pairs only), multicast,
//! enhanced connection establishment (ECE), resizing CQs, re-registering MRs, dma-buf MRs, and
//! importing objects of another process's context. They are exported, so that a program which
//! references them loads and runs its other paths, and each call fails as libibverbs documents
//! a verb the device does not support: constructors return NULL with `errno` `EOPNOTSUPP`, the
//! others return `EOPNOTSUPP` (`EINVAL` for an object that cannot exist).

use core::ffi::{c_int, c_void};

use crate::set_errno;

/// `ibv_query_ece`: `EOPNOTSUPP` (no enhanced connection establishment).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_query_ece(_qp: *mut c_void, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_set_ece`: `EOPNOTSUPP`.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_set_ece(_qp: *mut c_void, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_create_ah`: NULL, `errno` `EOPNOTSUPP` (`max_ah` is 0: no UD queue pairs).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_create_ah(_pd: *mut c_void, _attr: *mut c_void) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

/// `ibv_create_ah_from_wc`: as [`ibv_create_ah`].
#[cfg_attr(feature = "cabi", no_mangle)]
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
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_destroy_ah(_ah: *mut c_void) -> c_int {
    libc::EINVAL
}

/// `ibv_attach_mcast`: `EOPNOTSUPP` (`max_mcast_grp` is 0).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_attach_mcast(_qp: *mut c_void, _gid: *const c_void, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_detach_mcast`: `EOPNOTSUPP`.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_detach_mcast(_qp: *mut c_void, _gid: *const c_void, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_resize_cq`: `EOPNOTSUPP` (the CQ keeps its size).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_resize_cq(_cq: *mut c_void, _cqe: c_int) -> c_int {
    libc::EOPNOTSUPP
}

/// `IBV_REREG_MR_ERR_INPUT`: the old MR is still valid.
const REREG_MR_ERR_INPUT: c_int = -1;

/// `ibv_rereg_mr`: `IBV_REREG_MR_ERR_INPUT` with `errno` `EOPNOTSUPP`: the MR stays as it
/// was (deregister and register instead).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_rereg_mr(
    _mr: *mut c_void,
    _flags: c_int,
    _pd: *mut c_void,
    _addr: *mut c_void,
    _length: usize,
    _access: c_int,
) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    REREG_MR_ERR_INPUT
}

/// `ibv_reg_dmabuf_mr`: NULL, `errno` `EOPNOTSUPP` (pfnic's MRs are process memory).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut c_void,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut c_void {
    set_errno(libc::EOPNOTSUPP);
    core::ptr::null_mut()
}

/// Defines the importers of another context's objects: NULL with `errno` `EOPNOTSUPP` (a
/// pfnic context belongs to the process that opened it).
macro_rules! no_import {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        /// An `ibv_import_*` verb (see [`no_import!`]).
        #[cfg_attr(feature = "cabi", no_mangle)]
        pub extern "C" fn $name($(_: $t),*) -> *mut c_void {
            set_errno(libc::EOPNOTSUPP);
            core::ptr::null_mut()
        }
    )*};
}

no_import! {
    ibv_import_device(cmd_fd: c_int);
    ibv_import_pd(context: *mut c_void, handle: u32);
    ibv_import_mr(pd: *mut c_void, handle: u32);
    ibv_import_dm(context: *mut c_void, handle: u32);
}

/// `ibv_unimport_pd`, `_mr`, `_dm`: nothing, as nothing is ever imported.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_unimport_pd(_pd: *mut c_void) {}

/// See [`ibv_unimport_pd`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_unimport_mr(_mr: *mut c_void) {}

/// See [`ibv_unimport_pd`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_unimport_dm(_dm: *mut c_void) {}

/// `ibv_query_qp_data_in_order`: 0, the answer for "not known to be in order" (the caller
/// must not rely on data arriving in order before the completion).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut c_void, _op: c_int, _flags: u32) -> c_int {
    0
}

/// `ibv_init_ah_from_wc`: -1, `errno` `EOPNOTSUPP` (address handles are UD's; pfnic has RC
/// only).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_init_ah_from_wc(
    _context: *mut c_void,
    _port_num: u8,
    _wc: *mut c_void,
    _grh: *mut c_void,
    _ah_attr: *mut c_void,
) -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

/// `ibv_resolve_eth_l2_from_gid`: `EOPNOTSUPP` (as [`ibv_init_ah_from_wc`]).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_resolve_eth_l2_from_gid(
    _context: *mut c_void,
    _attr: *mut c_void,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> c_int {
    libc::EOPNOTSUPP
}
