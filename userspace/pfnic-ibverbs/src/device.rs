//! Devices and contexts: the device list, open/close and the query verbs.

use core::ffi::{c_char, c_int, c_uint, CStr};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pfnic_verbs::pfnic_sys;
use pfnic_verbs::{Context, DeviceAttr};

use crate::ffi::*;
use crate::{errno_of, into_c, set_errno, unbox};

/// `IBV_NODE_CA`.
const NODE_CA: c_int = 1;
/// `IBV_TRANSPORT_IB`.
const TRANSPORT_IB: c_int = 0;
/// `IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN`: what pfnic does of
/// `ibv_device_cap_flags`.
const DEVICE_CAP_FLAGS: u32 = 1 << 11 | 1 << 12;
/// `IBV_PORT_*` physical state "LinkUp".
const PHYS_STATE_LINK_UP: u8 = 5;
/// `IB_PORT_PHYS_STATE_DISABLED`: a wire whose link is down.
const PHYS_STATE_DISABLED: u8 = 3;
/// `IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u32 = 4;

/// A device of the list: the C structure first, then where it is.
#[repr(C)]
pub(crate) struct DeviceEntry {
    pub(crate) ibv: ibv_device,
    path: PathBuf,
}

/// Copies `s` into a C string field, truncated and NUL-terminated.
fn put_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// What every object of an open context shares.
pub(crate) struct Shared {
    pub(crate) ctx: Context,
    /// The port's LID (the source LID of every completion on this loopback port).
    pub(crate) lid: u16,
    /// The live CQs: CQN to the address of their wrapper, to check the `cq_context` a
    /// completion event carries before trusting it.
    pub(crate) cqs: Mutex<HashMap<u32, usize>>,
    /// The asynchronous events (`async_fd`, see `async_event.rs`).
    pub(crate) async_events: pfnic_verbs::AsyncEvents,
}

/// `struct ibv_context` (the end of its `struct verbs_context`) and what is behind it.
#[repr(C)]
pub(crate) struct CtxWrap {
    pub(crate) vctx: verbs_context,
    /// The device this context was opened from (`vctx.context.device` points here): a copy, so the
    /// device list may be freed while the context lives.
    device: ibv_device,
    pub(crate) shared: Arc<Shared>,
}

/// The context wrapper of `ctx`.
///
/// # Safety
///
/// `ctx` is NULL or an `ibv_context` this library returned and not yet closed.
pub(crate) unsafe fn ctx_wrap<'a>(ctx: *mut ibv_context) -> Option<&'a CtxWrap> {
    // SAFETY: a context of this library is the `context` field of the `verbs_context` that is
    // the first field of the `#[repr(C)]` `CtxWrap` that `ibv_open_device` boxed, so the
    // wrapper starts that many bytes before it; the caller guarantees it is alive (or NULL,
    // which stays NULL).
    unsafe { wrap_ptr(ctx).as_ref() }
}

/// The wrapper of `ctx` (NULL for NULL), as a pointer.
fn wrap_ptr(ctx: *mut ibv_context) -> *mut CtxWrap {
    if ctx.is_null() {
        return core::ptr::null_mut();
    }
    ctx.wrapping_byte_sub(core::mem::offset_of!(verbs_context, context))
        .cast()
}

/// The `ibv_context` that `ibv_open_device` hands out for the boxed wrapper `w`.
fn ctx_of(w: *mut CtxWrap) -> *mut ibv_context {
    // SAFETY: `w` points to a live boxed `CtxWrap`; no reference is made.
    unsafe { &raw mut (*w).vctx.context }
}

/// `ibv_get_device_list`: the pfnic devices present.
///
/// # Safety
///
/// `num_devices` is NULL or valid for a write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let paths = match pfnic_sys::devices() {
        Ok(p) => p,
        // No /dev (or no device nodes yet): no devices, as libibverbs reports it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            set_errno(errno_of(&e));
            return core::ptr::null_mut();
        }
    };
    let mut list: Vec<*mut ibv_device> = Vec::with_capacity(paths.len() + 1);
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut e = DeviceEntry {
            ibv: ibv_device {
                _ops: _ibv_device_ops {
                    _dummy1: None,
                    _dummy2: None,
                },
                node_type: NODE_CA,
                transport_type: TRANSPORT_IB,
                name: [0; 64],
                dev_name: [0; 64],
                dev_path: [0; 256],
                ibdev_path: [0; 256],
            },
            path: path.clone(),
        };
        put_str(&mut e.ibv.name, &name);
        put_str(&mut e.ibv.dev_name, &name);
        put_str(&mut e.ibv.dev_path, &path.to_string_lossy());
        put_str(&mut e.ibv.ibdev_path, &format!("/sys/class/misc/{name}"));
        list.push(into_c(e).cast());
    }
    let n = list.len();
    list.push(core::ptr::null_mut());
    if !num_devices.is_null() {
        // SAFETY: the caller passes NULL or a valid `int *`.
        unsafe { *num_devices = n as c_int };
    }
    Box::into_raw(list.into_boxed_slice()).cast()
}

/// `ibv_free_device_list`.
///
/// # Safety
///
/// `list` is NULL or a list `ibv_get_device_list` returned, not freed yet.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: the list is NULL-terminated; every entry before the NULL is a boxed
    // `DeviceEntry` (its `ibv` field first), and the array itself is a boxed slice of `n + 1`
    // pointers.
    unsafe {
        while !(*list.add(n)).is_null() {
            unbox((*list.add(n)).cast::<DeviceEntry>());
            n += 1;
        }
        drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
            list,
            n + 1,
        )));
    }
}

/// `ibv_get_device_name`.
///
/// # Safety
///
/// `device` is NULL or a device of a live list, or of a live context.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    if device.is_null() {
        set_errno(libc::EINVAL);
        return core::ptr::null();
    }
    // SAFETY: the caller passes a valid device; `name` is NUL-terminated.
    unsafe { (*device).name.as_ptr() }
}

/// The device node of `device`.
///
/// # Safety
///
/// `device` is a valid `ibv_device`.
unsafe fn device_path(device: *const ibv_device) -> PathBuf {
    // SAFETY: `dev_path` of a device this library made is NUL-terminated.
    let p = unsafe { CStr::from_ptr((*device).dev_path.as_ptr()) };
    PathBuf::from(p.to_string_lossy().into_owned())
}

/// `ibv_get_device_guid`: the node GUID, network byte order (0 with `errno` set on failure).
///
/// # Safety
///
/// `device` is NULL or a device of a live list, or of a live context.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    if device.is_null() {
        set_errno(libc::EINVAL);
        return 0;
    }
    // SAFETY: the caller passes a valid device.
    let path = unsafe { device_path(device) };
    match pfnic_sys::Device::open(&path).and_then(|d| d.query_verbs()) {
        Ok(v) => v.node_guid.to_be(),
        Err(e) => {
            set_errno(errno_of(&e));
            0
        }
    }
}

/// `ibv_open_device`.
///
/// # Safety
///
/// `device` is NULL or a device of a live list, or of a live context.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    if device.is_null() {
        set_errno(libc::EINVAL);
        return core::ptr::null_mut();
    }
    // SAFETY: the caller passes a valid device.
    let path = unsafe { device_path(device) };
    let opened = Context::open_path(&path).and_then(|ctx| {
        let port = ctx.query_port(1)?;
        Ok((ctx, port.lid))
    });
    let opened = opened.and_then(|(ctx, lid)| {
        let events = ctx.async_events()?;
        Ok((ctx, lid, events))
    });
    let (ctx, lid, async_events) = match opened {
        Ok(x) => x,
        Err(e) => {
            set_errno(errno_of(&e));
            return core::ptr::null_mut();
        }
    };
    let fd = ctx.device().as_raw_fd();
    // SAFETY: `verbs_context` is function pointers (`Option`s: all zeroes is `None`), raw
    // pointers, integers and a `pthread_mutex_t`, for which all zeroes is glibc's
    // `PTHREAD_MUTEX_INITIALIZER`.
    let mut vctx: verbs_context = unsafe { core::mem::zeroed() };
    vctx.query_port = Some(query_port);
    vctx.advise_mr = Some(crate::mr::advise_mr);
    vctx.query_device_ex = Some(query_device_ex);
    vctx.create_cq_ex = Some(crate::cq::create_cq_ex);
    vctx.create_qp_ex = Some(crate::qp::create_qp_ex);
    vctx.query_rt_values = Some(query_rt_values);
    vctx.alloc_dm = Some(crate::dm::alloc_dm);
    vctx.free_dm = Some(crate::dm::free_dm);
    vctx.reg_dm_mr = Some(crate::dm::reg_dm_mr);
    vctx.sz = core::mem::size_of::<verbs_context>();
    vctx.context.ops.poll_cq = Some(crate::cq::poll_cq);
    vctx.context.ops.req_notify_cq = Some(crate::cq::req_notify_cq);
    vctx.context.ops.post_send = Some(crate::qp::post_send);
    vctx.context.ops.post_recv = Some(crate::qp::post_recv);
    vctx.context.ops.post_srq_recv = Some(crate::srq::post_srq_recv);
    vctx.context.cmd_fd = fd;
    vctx.context.async_fd = async_events.fd();
    vctx.context.num_comp_vectors = 1;
    vctx.context.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    vctx.context.abi_compat = VERBS_ABI_IS_EXTENDED;
    let w = into_c(CtxWrap {
        vctx,
        // SAFETY: the caller passes a valid device; `ibv_device` is plain data.
        device: unsafe { core::ptr::read(device) },
        shared: Arc::new(Shared {
            ctx,
            lid,
            cqs: Mutex::new(HashMap::new()),
            async_events,
        }),
    });
    // SAFETY: `w` was just boxed; the device copy lives as long as the wrapper.
    unsafe { (*w).vctx.context.device = &raw mut (*w).device };
    ctx_of(w)
}

/// `ibv_close_device`: 0, or -1 with `errno` set. Objects still open keep the device file open
/// until they are destroyed.
///
/// # Safety
///
/// `context` is NULL or a context this library opened, not closed yet.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    if context.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller passes a live context of this library, not used after this: its
    // wrapper is the box `ibv_open_device` made.
    unsafe { unbox(wrap_ptr(context)) };
    0
}

/// The fields `ibv_query_device` and `ibv_query_device_ex` share, from the device's answer.
fn common_attr(a: &DeviceAttr) -> ibv_device_attr {
    let (d, v) = (&a.device, &a.verbs);
    // SAFETY: `ibv_device_attr` is plain integers and characters: all zeroes is valid.
    let mut out: ibv_device_attr = unsafe { core::mem::zeroed() };
    let fw = d.fw_version;
    put_str(
        &mut out.fw_ver,
        &format!("{}.{}.{}", fw >> 24, (fw >> 16) & 0xff, fw & 0xffff),
    );
    out.node_guid = v.node_guid.to_be();
    out.sys_image_guid = v.node_guid.to_be();
    out.max_mr_size = v.max_mr_size;
    out.page_size_cap = v.page_size_cap;
    out.vendor_id = d.vendor_id.into();
    out.vendor_part_id = d.device_id.into();
    out.hw_ver = d.revision;
    let int = |x: u32| c_int::try_from(x).unwrap_or(c_int::MAX);
    out.max_qp = int(v.max_qp);
    out.max_qp_wr = int(v.max_qp_wr);
    out.device_cap_flags = DEVICE_CAP_FLAGS;
    out.max_sge = int(v.max_sge);
    out.max_sge_rd = int(v.max_sge);
    out.max_cq = int(v.max_cq);
    out.max_cqe = int(v.max_cqe);
    out.max_mr = int(v.max_mr);
    out.max_pd = int(v.max_pd);
    out.max_qp_rd_atom = int(v.max_qp_rd_atom);
    out.max_qp_init_rd_atom = int(v.max_qp_rd_atom);
    out.max_res_rd_atom = int(v.max_qp_rd_atom.saturating_mul(v.max_qp));
    out.atomic_cap = int(v.atomic_cap);
    out.max_srq = int(v.max_srq);
    out.max_srq_wr = int(v.max_srq_wr);
    out.max_srq_sge = int(v.max_srq_sge);
    out.max_pkeys = 1;
    out.phys_port_cnt = 1;
    out
}

/// `ibv_query_device`: 0 or an errno value.
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `device_attr` is NULL or valid for
/// a write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return libc::EINVAL;
    };
    if device_attr.is_null() {
        return libc::EINVAL;
    }
    match w.shared.ctx.query_device_ex() {
        Ok(a) => {
            // SAFETY: the caller passes a writable `ibv_device_attr`.
            unsafe { device_attr.write(common_attr(&a)) };
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// Copies the first `len` bytes of `v` (at most all of it) to `dst`: what a caller built
/// against an older, shorter version of the structure has room for.
///
/// # Safety
///
/// `dst` is valid for `len` bytes of writes.
unsafe fn write_prefix<T: Copy>(dst: *mut T, v: &T, len: usize) {
    let n = len.min(core::mem::size_of::<T>());
    // SAFETY: `v` is `n` readable bytes; the caller gives `len >= n` writable ones.
    unsafe { core::ptr::copy_nonoverlapping(core::ptr::from_ref(v).cast::<u8>(), dst.cast(), n) };
}

/// `verbs_context.query_device_ex` (what `ibv_query_device_ex` calls): 0 or an errno value
/// (`EINVAL` for a nonzero `input->comp_mask`). Writes `attr_size` bytes at most.
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `input` is NULL or valid for a read;
/// `attr` is NULL or valid for `attr_size` bytes of writes.
unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return libc::EINVAL;
    };
    // SAFETY: the caller passes NULL or a readable input.
    if attr.is_null() || unsafe { input.as_ref() }.is_some_and(|i| i.comp_mask != 0) {
        return libc::EINVAL;
    }
    if attr_size < core::mem::size_of::<ibv_device_attr>() {
        return libc::EINVAL;
    }
    let a = match w.shared.ctx.query_device_ex() {
        Ok(a) => a,
        Err(e) => return errno_of(&e),
    };
    // SAFETY: `ibv_device_attr_ex` is plain integers and characters: all zeroes is valid.
    let mut out: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    out.orig_attr = common_attr(&a);
    out.odp_caps.general_caps = a.verbs.odp_general_caps;
    out.odp_caps.per_transport_caps.rc_odp_caps = a.verbs.odp_rc_caps;
    out.completion_timestamp_mask = a.verbs.completion_timestamp_mask;
    out.hca_core_clock = a.verbs.hca_core_clock;
    out.max_dm_size = a.verbs.max_dm_size.into();
    out.phys_port_cnt_ex = 1;
    // SAFETY: the caller passes `attr_size` writable bytes.
    unsafe { write_prefix(attr, &out, attr_size) };
    0
}

/// `IBV_VALUES_MASK_RAW_CLOCK`, the one value pfnic has.
const VALUES_MASK_RAW_CLOCK: u32 = 1;

/// `verbs_context.query_rt_values` (what `ibv_query_rt_values_ex` calls): with
/// `IBV_VALUES_MASK_RAW_CLOCK`, the device clock (ns) as seconds and nanoseconds, read from
/// the doorbell page without a system call. 0 with `comp_mask` the values filled, or an
/// errno value (`EINVAL` for other bits, `EOPNOTSUPP` on a device without a clock).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `values` is NULL or valid for
/// reads and writes.
unsafe extern "C" fn query_rt_values(
    context: *mut ibv_context,
    values: *mut ibv_values_ex,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL, and NULL or a valid `values`.
    let (Some(w), Some(v)) = (unsafe { ctx_wrap(context) }, unsafe { values.as_mut() }) else {
        return libc::EINVAL;
    };
    rt_values(&w.shared.ctx, v)
}

/// `ibv_query_rt_values_ex` on `ctx`, for pfnic's library and its provider: see
/// [`query_rt_values`].
pub fn rt_values(ctx: &pfnic_verbs::Context, v: &mut ibv_values_ex) -> c_int {
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

/// The port's attributes, as libibverbs reports them.
fn port_attributes(w: &CtxWrap, port_num: u8) -> Result<ibv_port_attr, c_int> {
    let p = w
        .shared
        .ctx
        .query_port(port_num)
        .map_err(|e| errno_of(&e))?;
    // SAFETY: `ibv_port_attr` is plain integers: all zeroes is valid.
    let mut out: ibv_port_attr = unsafe { core::mem::zeroed() };
    let int = |x: u32| c_int::try_from(x).unwrap_or(c_int::MAX);
    out.state = int(p.state);
    out.max_mtu = int(p.max_mtu);
    out.active_mtu = int(p.active_mtu);
    out.gid_tbl_len = int(p.gid_tbl_len);
    out.max_msg_sz = p.max_msg_sz;
    out.pkey_tbl_len = 1;
    out.lid = p.lid;
    out.sm_lid = p.sm_lid;
    out.max_vl_num = 1;
    out.active_width = p.active_width;
    out.active_speed = p.active_speed;
    out.phys_state = if p.state == PORT_ACTIVE {
        PHYS_STATE_LINK_UP
    } else {
        PHYS_STATE_DISABLED
    };
    out.link_layer = u8::try_from(p.link_layer).unwrap_or(0);
    Ok(out)
}

/// `verbs_context.query_port` (what `ibv_query_port` calls): 0 or an errno value (`EINVAL`
/// for a port other than 1). Writes `port_attr_len` bytes at most.
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `port_attr` is NULL or valid for
/// `port_attr_len` bytes of writes.
unsafe extern "C" fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return libc::EINVAL;
    };
    if port_attr.is_null() || port_attr_len < core::mem::size_of::<_compat_ibv_port_attr>() {
        return libc::EINVAL;
    }
    match port_attributes(w, port_num) {
        Ok(out) => {
            // SAFETY: the caller passes `port_attr_len` writable bytes.
            unsafe { write_prefix(port_attr, &out, port_attr_len) };
            0
        }
        Err(e) => e,
    }
}

/// `ibv_query_port` as exported (`IBVERBS_1.1`): the attributes older headers knew, for the
/// programs that call it directly. The header's `ibv_query_port` goes through
/// [`query_port`].
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `port_attr` is NULL or valid for a
/// write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut _compat_ibv_port_attr,
) -> c_int {
    // SAFETY: forwarded; a `_compat_ibv_port_attr` is that many writable bytes.
    unsafe {
        query_port(
            context,
            port_num,
            port_attr.cast(),
            core::mem::size_of::<_compat_ibv_port_attr>(),
        )
    }
}

/// `ibv_query_gid`: 0, or -1 with `errno` set (`EINVAL`: port other than 1 or an index beyond
/// the port's `gid_tbl_len`).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `gid` is NULL or valid for a write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let Ok(index) = u32::try_from(index) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if gid.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    match w.shared.ctx.query_gid(port_num, index) {
        Ok(raw) => {
            // SAFETY: the caller passes a writable `union ibv_gid`.
            unsafe { gid.write(ibv_gid { raw }) };
            0
        }
        Err(e) => {
            set_errno(errno_of(&e));
            -1
        }
    }
}

/// The port's one P_Key: the default, full membership.
const DEFAULT_PKEY: u16 = 0xffff;

/// `ibv_query_pkey`: P_Key `index` of the port (one: the default), network byte order. 0,
/// or -1 with `errno` (`EINVAL`: port other than 1, index other than 0).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `pkey` is NULL or valid for a
/// write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if let Err(e) = port_attributes(w, port_num) {
        set_errno(e);
        return -1;
    }
    if index != 0 || pkey.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller passes a writable `__be16`.
    unsafe { pkey.write(DEFAULT_PKEY.to_be()) };
    0
}

/// `ibv_get_pkey_index`: the index of `pkey` (network byte order) in the port's P_Key table
/// (0 for the default 0xffff), or -1.
///
/// # Safety
///
/// `context` is a live context of this library (or NULL).
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return -1;
    };
    if port_attributes(w, port_num).is_err() || u16::from_be(pkey) != DEFAULT_PKEY {
        return -1;
    }
    0
}

/// `ibv_get_device_index`: the kernel's index of an RDMA device, -1 for a device that has
/// none, as every pfnic device (the driver is not an `ib_core` driver).
#[cfg_attr(feature = "cabi", no_mangle)]
pub extern "C" fn ibv_get_device_index(_device: *mut ibv_device) -> c_int {
    -1
}

/// `IBV_GID_TYPE_IB`, `IBV_GID_TYPE_ROCE_V2` (`enum ibv_gid_type`).
const GID_ENTRY_TYPE_IB: u32 = 0;
const GID_ENTRY_TYPE_ROCE_V2: u32 = 2;

/// `_ibv_query_gid_ex` (what `ibv_query_gid_ex` calls): GID `gid_index` of the port with its
/// type. 0, or an errno value: `EINVAL` (port, index beyond the table, `flags`, an entry
/// smaller than rdma-core's), `ENODATA` (an entry of the table with no GID: GID 1 while the
/// port has no IPv4 address).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `entry` is NULL or valid for
/// `entry_size` bytes of writes.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return libc::EINVAL;
    };
    let Ok(port) = u8::try_from(port_num) else {
        return libc::EINVAL;
    };
    if flags != 0 || entry.is_null() || entry_size < core::mem::size_of::<ibv_gid_entry>() {
        return libc::EINVAL;
    }
    let attr = match port_attributes(w, port) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let gid = match w.shared.ctx.query_gid(port, gid_index) {
        Ok(g) => g,
        Err(e) => return errno_of(&e),
    };
    if gid == [0; 16] {
        return libc::ENODATA;
    }
    let out = ibv_gid_entry {
        gid: ibv_gid { raw: gid },
        gid_index,
        port_num,
        gid_type: if u32::from(attr.link_layer) == pfnic_verbs::LINK_LAYER_ETHERNET {
            GID_ENTRY_TYPE_ROCE_V2
        } else {
            GID_ENTRY_TYPE_IB
        },
        // The port has no netdev: the wire is the device's own.
        ndev_ifindex: 0,
    };
    // SAFETY: the caller passes a writable entry of at least this size (checked above).
    unsafe { entry.write(out) };
    0
}

/// `_ibv_query_gid_table` (what `ibv_query_gid_table` calls): the valid GIDs of the device's
/// port into `entries` (`entry_size` bytes apart): how many, or a negative errno value
/// (`-EINVAL` for `flags`, an entry smaller than rdma-core's, or more valid GIDs than
/// `max_entries`).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `entries` is NULL or valid for
/// `max_entries * entry_size` bytes of writes.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    const EINVAL: isize = -(libc::EINVAL as isize);
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        return EINVAL;
    };
    if flags != 0 || entries.is_null() || entry_size < core::mem::size_of::<ibv_gid_entry>() {
        return EINVAL;
    }
    let tbl_len = match port_attributes(w, 1) {
        Ok(a) => u32::try_from(a.gid_tbl_len).unwrap_or(0),
        Err(e) => return -(e as isize),
    };
    let mut n = 0;
    for index in 0..tbl_len {
        let mut entry = core::mem::MaybeUninit::<ibv_gid_entry>::uninit();
        // SAFETY: a live context; `entry` is writable and of rdma-core's size.
        let r = unsafe {
            _ibv_query_gid_ex(
                context,
                1,
                index,
                entry.as_mut_ptr(),
                0,
                core::mem::size_of::<ibv_gid_entry>(),
            )
        };
        match r {
            0 => {}
            libc::ENODATA => continue,
            e => return -(e as isize),
        }
        if n == max_entries {
            return EINVAL;
        }
        // SAFETY: `_ibv_query_gid_ex` returned 0: it wrote the entry. Entry `n` of the
        // caller's array is in its `max_entries * entry_size` writable bytes.
        unsafe {
            entries
                .byte_add(n * entry_size)
                .write_unaligned(entry.assume_init())
        };
        n += 1;
    }
    n as isize
}

/// `IBV_GID_TYPE_SYSFS_IB_ROCE_V1` and `IBV_GID_TYPE_SYSFS_ROCE_V2` (rdma-core's
/// `enum ibv_gid_type_sysfs`).
const GID_TYPE_IB_ROCE_V1: c_int = 0;
const GID_TYPE_ROCE_V2: c_int = 1;

/// `ibv_query_gid_type` (rdma-core's private `IBVERBS_PRIVATE_34`, which `ibv_devinfo` calls):
/// the type of GID `index`, RoCEv2 on an Ethernet port (the only RoCE pfnic speaks), else
/// "IB/RoCEv1". 0, or -1 with `errno` (`EINVAL`: port other than 1, index beyond the table).
///
/// # Safety
///
/// `context` is a live context of this library (or NULL); `gid_type` is NULL or valid for a
/// write.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: c_uint,
    gid_type: *mut c_int,
) -> c_int {
    // SAFETY: the caller passes a live context or NULL.
    let Some(w) = (unsafe { ctx_wrap(context) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let port = match port_attributes(w, port_num) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    if gid_type.is_null() || c_int::try_from(index).map_or(true, |i| i >= port.gid_tbl_len) {
        set_errno(libc::EINVAL);
        return -1;
    }
    let t = if u32::from(port.link_layer) == pfnic_verbs::LINK_LAYER_ETHERNET {
        GID_TYPE_ROCE_V2
    } else {
        GID_TYPE_IB_ROCE_V1
    };
    // SAFETY: the caller passes a writable `enum ibv_gid_type_sysfs`.
    unsafe { gid_type.write(t) };
    0
}
