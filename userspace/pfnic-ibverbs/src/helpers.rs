//! The rest of what libibverbs exports and its tools call: descriptions of completion
//! statuses, node types and port states, link rate conversions, fork support, and reading a
//! sysfs attribute.

use core::ffi::{c_char, c_int, CStr};
use std::ffi::CString;
use std::io::Read;
use std::sync::OnceLock;

/// Interned C strings for a fixed table of descriptions, made from `words` on first use; the
/// last one stands for every number the table does not have.
pub(crate) fn describe(
    table: &'static OnceLock<Vec<CString>>,
    words: impl Iterator<Item = &'static str>,
    i: c_int,
) -> *const c_char {
    let strs = table.get_or_init(|| words.map(|w| CString::new(w).unwrap_or_default()).collect());
    let last = strs.len() - 1;
    let i = usize::try_from(i)
        .ok()
        .filter(|&i| i < last)
        .unwrap_or(last);
    strs[i].as_ptr()
}

/// `ibv_wc_status_str`: libibverbs' description of a completion status ("unknown" for a number
/// that is none).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    static STR: OnceLock<Vec<CString>> = OnceLock::new();
    // Statuses 0..=23 have descriptions; 24 ("unknown") stands for every other number.
    describe(
        &STR,
        (0..=24).map(|i| pfnic_verbs::WcStatus(i).as_str()),
        status,
    )
}

/// `ibv_node_type_str`: libibverbs' name of an `enum ibv_node_type` ("unknown" for others).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    static STR: OnceLock<Vec<CString>> = OnceLock::new();
    // IBV_NODE_UNKNOWN (-1) and numbers past the table are "unknown"; 0 is no type either.
    const NAMES: &[&str] = &[
        "unknown",
        "InfiniBand channel adapter",
        "InfiniBand switch",
        "InfiniBand router",
        "iWARP NIC",
        "usNIC",
        "usNIC UDP",
        "unspecified",
        "unknown",
    ];
    describe(&STR, NAMES.iter().copied(), node_type)
}

/// `ibv_port_state_str`: libibverbs' name of an `enum ibv_port_state`.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    static STR: OnceLock<Vec<CString>> = OnceLock::new();
    const NAMES: &[&str] = &[
        "no state change (NOP)",
        "down",
        "init",
        "armed",
        "active",
        "active defer",
        "unknown",
    ];
    describe(&STR, NAMES.iter().copied(), port_state)
}

/// `ibv_get_sysfs_path`: where sysfs is mounted (`/sys`).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// `IBV_FORK_UNNEEDED`.
const FORK_UNNEEDED: c_int = 2;

/// `ibv_fork_init`: 0. Nothing to set up: no mode of pfnic's pins memory in a way a fork
/// could break (pinned MRs use `FOLL_LONGTERM`, which the kernel keeps from COW sharing).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED`, as for [`ibv_fork_init`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    FORK_UNNEEDED
}

/// `ibv_read_sysfs_file`: reads `dir/file` into `buf` (at most `size` bytes), drops a trailing
/// newline and NUL-terminates it. The number of bytes read, or -1 (with `errno`) if the file
/// cannot be read or does not fit with its terminator.
///
/// # Safety
///
/// `dir` and `file` are NUL-terminated strings; `buf` is valid for `size` bytes of writes.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        crate::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller passes NUL-terminated strings.
    let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let path = format!("{}/{}", dir.to_string_lossy(), file.to_string_lossy());
    // SAFETY: the caller passes `size` writable bytes.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    let mut len = match std::fs::File::open(&path).and_then(|mut f| f.read(out)) {
        Ok(n) => n,
        Err(e) => {
            crate::set_errno(crate::errno_of(&e));
            return -1;
        }
    };
    if len > 0 && out[len - 1] == b'\n' {
        len -= 1;
    } else if len == size {
        // No room for the terminator: the value would be cut short.
        crate::set_errno(libc::EOVERFLOW);
        return -1;
    }
    out[len] = 0;
    c_int::try_from(len).unwrap_or(c_int::MAX)
}

/// `enum ibv_rate`: each rate with its multiple of 2.5 Gb/s (0 for the rates that are none;
/// libibverbs rounds the newer ones, e.g. 28 Gb/s to 11) and its data rate in Mb/s, as
/// libibverbs converts them (`tests/compare_rdma_core.c` checks them against rdma-core's).
const RATES: &[(c_int, c_int, c_int)] = &[
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 0, 14062),
    (12, 0, 56250),
    (13, 0, 112500),
    (14, 0, 168750),
    (15, 0, 25781),
    (16, 0, 103125),
    (17, 0, 206250),
    (18, 0, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];

/// `IBV_RATE_MAX`: no rate.
const RATE_MAX: c_int = 0;

/// `ibv_rate_to_mult`: `rate` as a multiple of 2.5 Gb/s, -1 for the rates that are none.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.0 == rate && r.1 != 0)
        .map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate`: the rate of `mult` times 2.5 Gb/s, `IBV_RATE_MAX` for none.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && r.1 != 0)
        .map_or(RATE_MAX, |r| r.0)
}

/// `ibv_rate_to_mbps`: the data rate of `rate` in Mb/s, -1 for an unknown rate.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`: the rate of exactly `mbps` Mb/s, `IBV_RATE_MAX` for none.
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(RATE_MAX, |r| r.0)
}

/// `ibv_dontfork_range`: 0. Nothing to keep from a child: see [`ibv_fork_init`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_dontfork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}

/// `ibv_dofork_range`: 0, as [`ibv_dontfork_range`].
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_dofork_range(_base: *mut core::ffi::c_void, _size: usize) -> c_int {
    0
}
