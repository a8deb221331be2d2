//! The device clock: `ibv_query_rt_values_ex`.

use core::ffi::c_int;

use pfnic_verbs::Context;

use crate::errno_of;
use crate::ffi::ibv_values_ex;

/// `IBV_VALUES_MASK_RAW_CLOCK`, the one value pfnic has.
const VALUES_MASK_RAW_CLOCK: u32 = 1;

/// `ibv_query_rt_values_ex` on `ctx`: with `IBV_VALUES_MASK_RAW_CLOCK`, the device clock (ns)
/// as seconds and nanoseconds, read from the doorbell page without a system call. 0 with
/// `comp_mask` the values filled, or an errno value (`EINVAL` for other bits, `EOPNOTSUPP` on
/// a device without a clock).
pub(crate) fn rt_values(ctx: &Context, v: &mut ibv_values_ex) -> c_int {
    if v.comp_mask & !VALUES_MASK_RAW_CLOCK != 0 {
        return libc::EINVAL;
    }
    if v.comp_mask & VALUES_MASK_RAW_CLOCK != 0 {
        let ns = match ctx.read_clock() {
            Ok(ns) => ns,
            Err(e) => return errno_of(&e),
        };
        v.raw_clock = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
    }
    0
}
