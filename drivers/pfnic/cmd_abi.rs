// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The device's admin commands, typed (docs/verbs.md, "Admin command mailbox"): each command's
//! arguments are a structure laid over the sixteen 32-bit `CMD_ARG` registers, with its opcode
//! and the structure its results come back in ([`Command`]).
//!
//! The layouts are the device's `qemu-device/hw/pfnic/pfnic_cmd.h`, through which the device
//! reads its arguments and writes its results; the host unit tests (`userspace/pfnic-sys`,
//! which compiles this file unchanged) check every size and field offset here against that
//! header with the C compiler. Like `uapi.rs`, this file depends only on `core` and
//! `zerocopy`. A 64-bit value is two words, low first (`_lo`, `_hi`; [`split`], [`join`]).

use zerocopy::{FromBytes, Immutable, IntoBytes};
use zerocopy_derive::{
    FromBytes as DeriveFromBytes, Immutable as DeriveImmutable, IntoBytes as DeriveIntoBytes,
    KnownLayout,
};

/// The argument registers.
pub const CMD_WORDS: usize = 16;

/// An admin command: its opcode, its arguments (`Self`) and what the device leaves in the
/// argument registers when it succeeds ([`Command::Reply`], `()` when nothing).
pub trait Command: IntoBytes + Immutable {
    /// The opcode written to `CMD_OP`.
    const OP: u32;
    /// The results.
    type Reply: FromBytes;
}

/// Splits a 64-bit value into its two words, low first.
pub fn split(value: u64) -> [u32; 2] {
    [value as u32, (value >> 32) as u32]
}

/// Joins two words, low first.
pub fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// What the host unit tests check against `pfnic_cmd.h`: a structure's C name, its fields in
/// order (each a `u32`, so field `i` is at byte `4 * i`), and its opcode if it is a command's
/// arguments.
pub struct Layout {
    /// The Rust structure's name.
    pub name: &'static str,
    /// The C structure's name.
    pub c_name: &'static str,
    /// The fields, in order.
    pub fields: &'static [&'static str],
    /// The command's opcode, if the structure is a command's arguments.
    pub op: Option<u32>,
}

macro_rules! layouts {
    (@op) => { None };
    (@op $op:literal) => { Some($op) };
    ($(
        $(#[$m:meta])* $name:ident as $c:literal $(= $op:literal => $reply:ty)?
            { $($(#[$fm:meta])* $field:ident),* $(,)? }
    )*) => {
        $(
            $(#[$m])*
            // The fields are the words docs/verbs.md describes, named as in pfnic_cmd.h.
            #[allow(missing_docs)]
            #[repr(C)]
            #[derive(
                Clone, Copy, Debug, Default, DeriveFromBytes, DeriveIntoBytes, DeriveImmutable,
                KnownLayout,
            )]
            pub struct $name {
                $($(#[$fm])* pub $field: u32,)*
            }

            $(
                impl Command for $name {
                    const OP: u32 = $op;
                    type Reply = $reply;
                }
            )?

            const _: () = assert!(core::mem::size_of::<$name>() <= CMD_WORDS * 4);
        )*

        /// Every structure of this file.
        pub const LAYOUTS: &[Layout] = &[$(
            Layout {
                name: stringify!($name),
                c_name: $c,
                fields: &[$(stringify!($field)),*],
                op: layouts!(@op $($op)?),
            },
        )*];
    };
}

layouts! {
    /// `MR_SET`: fills MR table entry `index`; its key comes back.
    MrSet as "PfnicCmdMrSet" = 0x01 => MrSetReply {
        index, ctx, pd, access, addr_lo, addr_hi, len_lo, len_hi,
        /// `TABLE`, `FAULT`, `DM` (docs/verbs.md).
        flags,
    }
    /// `MR_SET`'s result.
    MrSetReply as "PfnicCmdMrSetReply" { key }
    /// `MR_CLEAR`.
    MrClear as "PfnicCmdIndex" = 0x02 => () { index }
    /// `MR_QUERY`.
    MrQuery as "PfnicCmdIndex" = 0x03 => MrQueryReply { index }
    /// `MR_QUERY`'s results: mlx5's per-MR counters, then pfnic's two.
    MrQueryReply as "PfnicCmdMrQueryReply" {
        page_faults_lo, page_faults_hi, page_faults_handled_lo, page_faults_handled_hi,
        page_invalidations_lo, page_invalidations_hi, page_invalidations_handled_lo,
        page_invalidations_handled_hi, page_prefetch_lo, page_prefetch_hi,
        remote_access_errors_lo, remote_access_errors_hi, page_fault_groups_lo,
        page_fault_groups_hi,
    }
    /// `MTT_WRITE`: `count` entries from driver memory at `entries` into table MR `index`
    /// from entry `first` (its high word `first_hi`).
    MttWrite as "PfnicCmdMttWrite" = 0x04 => () {
        index, first, count, entries_lo, entries_hi, first_hi,
    }
    /// `MTT_INVALIDATE`.
    MttInvalidate as "PfnicCmdMttInvalidate" = 0x05 => () { index, first, count, first_hi }
    /// `FAULT_RESUME`: `status` 0, the pages are in the table; 1, they cannot be.
    FaultResume as "PfnicCmdFaultResume" = 0x06 => () {
        index, first, count, status, first_hi,
    }
    /// `MR_MODIFY`: another PD and access for a valid MR.
    MrModify as "PfnicCmdMrModify" = 0x07 => () { index, pd, access }
    /// `CQ_CREATE`.
    CqCreate as "PfnicCmdCqCreate" = 0x10 => () {
        cqn, ctx, ring_lo, ring_hi, log2_entries, record_lo, record_hi,
        /// `TIMESTAMP`.
        flags,
    }
    /// `CQ_DESTROY`.
    CqDestroy as "PfnicCmdIndex" = 0x11 => () { index }
    /// `QP_CREATE`.
    QpCreate as "PfnicCmdQpCreate" = 0x20 => () {
        qpn, ctx, pd, send_cqn, recv_cqn, sq_lo, sq_hi, sq_log2, rq_lo, rq_hi, rq_log2,
        record_lo, record_hi,
        /// Signal all, `SRQ`, `UD`.
        flags,
        srqn,
    }
    /// `QP_MODIFY`; a UD QP takes `dest_qpn` as its Q_Key and, of the rest, `sq_psn` only.
    QpModify as "PfnicCmdQpModify" = 0x21 => () {
        qpn, state, access, dest_qpn, min_rnr_timer, rnr_retry, retry_cnt,
        /// The wire's (docs/wire.md): 0 loops back.
        dest_ip,
        sq_psn, rq_psn, path_mtu, timeout, max_dest_rd_atomic,
        /// Hop limit in bits 7:0, traffic class in 15:8.
        hop_limit_tclass,
        max_rd_atomic,
        /// `BACKUP`.
        wire_flags,
    }
    /// `QP_QUERY`.
    QpQuery as "PfnicCmdIndex" = 0x22 => QpQueryReply { index }
    /// `QP_QUERY`'s results (docs/verbs.md; the wire's from `next_psn` on, docs/wire.md).
    QpQueryReply as "PfnicCmdQpQueryReply" {
        state, sq_head, rq_head, page_requests, rnr_waits, completed, bytes_lo, bytes_hi,
        refused, next_psn, expected_psn, retransmits, rnr_naks_sent, rnr_naks_received,
        seq_naks_sent, duplicates,
    }
    /// `QP_QUERY`'s first result, the state: read alone when that is all a caller needs
    /// ([`PrefixOf`]).
    QpStateReply as "PfnicCmdQpStateReply" { state }
    /// `QP_DESTROY`.
    QpDestroy as "PfnicCmdIndex" = 0x23 => () { index }
    /// `QP_SET_DMAC`: MAC bytes 0-3 in `mac_hi` (byte 0 in bits 31:24), 4-5 in `mac_lo`'s
    /// bits 31:16.
    QpSetDmac as "PfnicCmdQpSetDmac" = 0x24 => () { qpn, mac_hi, mac_lo }
    /// `CTX_QUERY`.
    CtxQuery as "PfnicCmdIndex" = 0x30 => CtxQueryReply { index }
    /// `CTX_QUERY`'s result: the context's refused remote accesses.
    CtxQueryReply as "PfnicCmdCtxQueryReply" { access_errors_lo, access_errors_hi }
    /// `BACKUP_SET`: the receive-fault backup buffer.
    BackupSet as "PfnicCmdBackupSet" = 0x31 => () { addr_lo, addr_hi, bytes }
    /// `SRQ_CREATE`.
    SrqCreate as "PfnicCmdSrqCreate" = 0x40 => () {
        srqn, ctx, pd, ring_lo, ring_hi, log2_entries, record_lo, record_hi,
    }
    /// `SRQ_MODIFY`: arm with `limit`, or disarm (0).
    SrqModify as "PfnicCmdSrqModify" = 0x41 => () { srqn, limit }
    /// `SRQ_QUERY`.
    SrqQuery as "PfnicCmdIndex" = 0x42 => SrqQueryReply { index }
    /// `SRQ_QUERY`'s results.
    SrqQueryReply as "PfnicCmdSrqQueryReply" { limit, head, tail, users, limit_events }
    /// `SRQ_DESTROY`.
    SrqDestroy as "PfnicCmdIndex" = 0x43 => () { index }
}

/// `Self` is the first words of the results `R`: a caller that needs only those reads only
/// those (each register read is a trap into the device model).
pub trait PrefixOf<R> {}

impl<T> PrefixOf<T> for T {}

/// `QP_QUERY`'s state alone (`pfnic_cmd.h` asserts that it is the first word).
impl PrefixOf<QpQueryReply> for QpStateReply {}

const _: () = assert!(core::mem::size_of::<QpStateReply>() <= core::mem::size_of::<QpQueryReply>());

/// A command that names one object by its number alone.
pub trait Index {
    /// The object's number.
    fn index(&self) -> u32;
}

macro_rules! index {
    ($($name:ident),*) => {$(
        impl Index for $name {
            fn index(&self) -> u32 {
                self.index
            }
        }
    )*};
}

index!(MrClear, MrQuery, CqDestroy, QpQuery, QpDestroy, CtxQuery, SrqQuery, SrqDestroy);
