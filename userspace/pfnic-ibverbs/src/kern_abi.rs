//! Conversions from the kernel's uverbs structures (`<rdma/ib_user_verbs.h>`,
//! `<rdma/ib_user_sa.h>`) to libibverbs', which libibverbs exports for librdmacm: Debian's
//! `librdmacm.so.1` (which perftest links) needs them to load. pfnic's contexts never get
//! these structures from a kernel, but librdmacm's callers may.

#![allow(non_camel_case_types)]

use crate::ffi::*;

/// `struct ib_uverbs_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ib_uverbs_global_route {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ib_uverbs_ah_attr {
    pub grh: ib_uverbs_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_qp_attr`.
#[repr(C)]
pub struct ib_uverbs_qp_attr {
    pub qp_attr_mask: u32,
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub ah_attr: ib_uverbs_ah_attr,
    pub alt_ah_attr: ib_uverbs_ah_attr,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 5],
}

/// `struct ib_user_path_rec`.
#[repr(C)]
pub struct ib_user_path_rec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: u32,
    pub flow_label: u32,
    pub reversible: u32,
    pub mtu: u32,
    pub pkey: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub numb_path: u8,
    pub sl: u8,
    pub mtu_selector: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct ibv_sa_path_rec` (rdma-core's `<infiniband/sa.h>`).
#[repr(C)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: core::ffi::c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: core::ffi::c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

fn ah_attr(src: &ib_uverbs_ah_attr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: src.grh.dgid },
            flow_label: src.grh.flow_label,
            sgid_index: src.grh.sgid_index,
            hop_limit: src.grh.hop_limit,
            traffic_class: src.grh.traffic_class,
        },
        dlid: src.dlid,
        sl: src.sl,
        src_path_bits: src.src_path_bits,
        static_rate: src.static_rate,
        is_global: src.is_global,
        port_num: src.port_num,
    }
}

/// `ibv_copy_ah_attr_from_kern`.
///
/// # Safety
///
/// `dst` is valid for a write, `src` for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(
    dst: *mut ibv_ah_attr,
    src: *const ib_uverbs_ah_attr,
) {
    // SAFETY: the caller passes valid structures.
    unsafe { dst.write(ah_attr(&*src)) };
}

/// `ibv_copy_qp_attr_from_kern`.
///
/// # Safety
///
/// `dst` is valid for a write, `src` for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(
    dst: *mut ibv_qp_attr,
    src: *const ib_uverbs_qp_attr,
) {
    // SAFETY: the caller passes a readable `src`.
    let s = unsafe { &*src };
    // The kernel's enums fit libibverbs' `int` enums.
    let e = |v: u32| v as core::ffi::c_int;
    let out = ibv_qp_attr {
        qp_state: e(s.qp_state),
        cur_qp_state: e(s.cur_qp_state),
        path_mtu: e(s.path_mtu),
        path_mig_state: e(s.path_mig_state),
        qkey: s.qkey,
        rq_psn: s.rq_psn,
        sq_psn: s.sq_psn,
        dest_qp_num: s.dest_qp_num,
        qp_access_flags: s.qp_access_flags,
        cap: ibv_qp_cap {
            max_send_wr: s.max_send_wr,
            max_recv_wr: s.max_recv_wr,
            max_send_sge: s.max_send_sge,
            max_recv_sge: s.max_recv_sge,
            max_inline_data: s.max_inline_data,
        },
        ah_attr: ah_attr(&s.ah_attr),
        alt_ah_attr: ah_attr(&s.alt_ah_attr),
        pkey_index: s.pkey_index,
        alt_pkey_index: s.alt_pkey_index,
        en_sqd_async_notify: s.en_sqd_async_notify,
        sq_draining: s.sq_draining,
        max_rd_atomic: s.max_rd_atomic,
        max_dest_rd_atomic: s.max_dest_rd_atomic,
        min_rnr_timer: s.min_rnr_timer,
        port_num: s.port_num,
        timeout: s.timeout,
        retry_cnt: s.retry_cnt,
        rnr_retry: s.rnr_retry,
        alt_port_num: s.alt_port_num,
        alt_timeout: s.alt_timeout,
        rate_limit: 0,
    };
    // SAFETY: the caller passes a writable `dst`.
    unsafe { dst.write(out) };
}

/// `ibv_copy_path_rec_from_kern`.
///
/// # Safety
///
/// `dst` is valid for a write, `src` for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ibv_sa_path_rec,
    src: *const ib_user_path_rec,
) {
    // SAFETY: the caller passes a readable `src`.
    let s = unsafe { &*src };
    let out = ibv_sa_path_rec {
        dgid: ibv_gid { raw: s.dgid },
        sgid: ibv_gid { raw: s.sgid },
        dlid: s.dlid,
        slid: s.slid,
        raw_traffic: s.raw_traffic as core::ffi::c_int,
        flow_label: s.flow_label,
        hop_limit: s.hop_limit,
        traffic_class: s.traffic_class,
        reversible: s.reversible as core::ffi::c_int,
        numb_path: s.numb_path,
        pkey: s.pkey,
        sl: s.sl,
        mtu_selector: s.mtu_selector,
        mtu: s.mtu as u8,
        rate_selector: s.rate_selector,
        rate: s.rate,
        packet_life_time_selector: s.packet_life_time_selector,
        packet_life_time: s.packet_life_time,
        preference: s.preference,
    };
    // SAFETY: the caller passes a writable `dst`.
    unsafe { dst.write(out) };
}

/// `ibv_copy_path_rec_to_kern`: the inverse of [`ibv_copy_path_rec_from_kern`].
///
/// # Safety
///
/// `dst` is valid for a write, `src` for a read.
#[cfg_attr(feature = "cabi", no_mangle)]
pub unsafe extern "C" fn ibv_copy_path_rec_to_kern(
    dst: *mut ib_user_path_rec,
    src: *const ibv_sa_path_rec,
) {
    // SAFETY: the caller passes a readable `src`.
    let s = unsafe { &*src };
    let out = ib_user_path_rec {
        dgid: s.dgid.raw,
        sgid: s.sgid.raw,
        dlid: s.dlid,
        slid: s.slid,
        raw_traffic: s.raw_traffic as u32,
        flow_label: s.flow_label,
        reversible: s.reversible as u32,
        mtu: u32::from(s.mtu),
        pkey: s.pkey,
        hop_limit: s.hop_limit,
        traffic_class: s.traffic_class,
        numb_path: s.numb_path,
        sl: s.sl,
        mtu_selector: s.mtu_selector,
        rate_selector: s.rate_selector,
        rate: s.rate,
        packet_life_time_selector: s.packet_life_time_selector,
        packet_life_time: s.packet_life_time,
        preference: s.preference,
    };
    // SAFETY: the caller passes a writable `dst`.
    unsafe { dst.write(out) };
}
