// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The queue formats the driver writes and reads itself for the RDMA core's kernel clients
//! (docs/verbs.md, "Queue formats", "User doorbells", "Fast registration"): byte offsets in a
//! work queue entry and a completion queue entry, their opcodes and flags, the doorbells.
//!
//! They are the device's `qemu-device/hw/pfnic/pfnic_regs.h` (`PfnicWqe`, `PfnicCqe`, the
//! `PFNIC_WR_*`, `PFNIC_WC_*` and `PFNIC_DB_*` values); the host unit tests
//! (`userspace/pfnic-sys`, which compiles this file unchanged) check every value here against
//! that header with the C compiler. Like `cmd_abi.rs`, this file depends only on `core`.

/// Bytes of a work queue entry (send and receive).
pub const WQE_SIZE: usize = 128;
/// Scatter/gather entries a work queue entry holds.
pub const WQE_MAX_SGE: usize = 4;

/// Work queue entry fields: opcode, flags and SGE count (one byte each), then a 32-bit field
/// (immediate data as posted; the key to invalidate of `LOCAL_INV` and `SEND_WITH_INV`).
pub const WQE_OPCODE: usize = 0x00;
/// The send flags (`IBV_SEND_*`).
pub const WQE_FLAGS: usize = 0x01;
/// The SGEs used.
pub const WQE_NUM_SGE: usize = 0x02;
/// Immediate data, or the key to invalidate.
pub const WQE_IMM: usize = 0x04;
/// The consumer's identifier.
pub const WQE_WR_ID: usize = 0x08;
/// RDMA and atomics: the remote address.
pub const WQE_REMOTE_ADDR: usize = 0x10;
/// RDMA and atomics: the remote key.
pub const WQE_RKEY: usize = 0x18;
/// Atomics: the value compared or added.
pub const WQE_COMPARE_ADD: usize = 0x20;
/// Compare-and-swap: the value swapped in.
pub const WQE_SWAP: usize = 0x28;
/// UD: the destination QP.
pub const WQE_UD_REMOTE_QPN: usize = 0x10;
/// UD: the Q_Key.
pub const WQE_UD_REMOTE_QKEY: usize = 0x14;
/// UD: the address vector (`uapi::IbCreateAhResp`), from the destination's IPv4 address to
/// its GID.
pub const WQE_UD_AV: usize = 0x18;
/// `REG_MR`: the MR's first address.
pub const WQE_REG_IOVA: usize = 0x10;
/// `REG_MR`: the key the MR takes.
pub const WQE_REG_KEY: usize = 0x18;
/// `REG_MR`: its access (`IBV_ACCESS_*`).
pub const WQE_REG_ACCESS: usize = 0x1c;
/// `REG_MR`: its length.
pub const WQE_REG_LENGTH: usize = 0x20;
/// `REG_MR`: the DMA address of its page list.
pub const WQE_REG_PBL: usize = 0x28;
/// `REG_MR`: the pages in the list.
pub const WQE_REG_PAGES: usize = 0x30;
/// The first SGE (`u64 addr, u32 length, u32 lkey`, 16 bytes each).
pub const WQE_SGE: usize = 0x40;
/// Bytes of an SGE.
pub const WQE_SGE_SIZE: usize = 16;

/// Send work queue entry opcodes (`IBV_WR_*`; `REG_MR` is the kernel's `IB_WR_REG_MR`).
pub const WR_RDMA_WRITE: u8 = 0;
/// RDMA WRITE with immediate data.
pub const WR_RDMA_WRITE_WITH_IMM: u8 = 1;
/// SEND.
pub const WR_SEND: u8 = 2;
/// SEND with immediate data.
pub const WR_SEND_WITH_IMM: u8 = 3;
/// RDMA READ.
pub const WR_RDMA_READ: u8 = 4;
/// Atomic compare-and-swap.
pub const WR_ATOMIC_CMP_AND_SWP: u8 = 5;
/// Atomic fetch-and-add.
pub const WR_ATOMIC_FETCH_AND_ADD: u8 = 6;
/// Local invalidation (device ABI 1.21).
pub const WR_LOCAL_INV: u8 = 7;
/// SEND that invalidates a key at the responder (ABI 1.21).
pub const WR_SEND_WITH_INV: u8 = 9;
/// Fast registration (ABI 1.21).
pub const WR_REG_MR: u8 = 0x20;

/// The pages of a fast-registration MR's list, at most (ABI 1.21).
pub const FAST_MAX_PAGES: u32 = 512;

/// Completion queue entry fields.
pub const CQE_WR_ID: usize = 0x00;
/// Bytes received or transferred.
pub const CQE_BYTE_LEN: usize = 0x08;
/// Immediate data as posted, or the key a receive invalidated.
pub const CQE_IMM: usize = 0x0c;
/// The local QP.
pub const CQE_QP_NUM: usize = 0x10;
/// The sending QP (receives).
pub const CQE_SRC_QP: usize = 0x14;
/// `IBV_WC_*` status.
pub const CQE_STATUS: usize = 0x18;
/// The completion's opcode (the RDMA core's numbers).
pub const CQE_OPCODE: usize = 0x19;
/// `CQE_FLAG_*`.
pub const CQE_FLAGS: usize = 0x1a;
/// Bit 0: the pass over the ring the entry was written in.
pub const CQE_OWNER: usize = 0x1b;
/// Page requests the work request caused.
pub const CQE_VENDOR_ERR: usize = 0x1c;
/// A UD receive: the buffer's first 40 bytes are the GRH.
pub const CQE_FLAG_GRH: u8 = 1;
/// The entry has immediate data.
pub const CQE_FLAG_WITH_IMM: u8 = 2;
/// A receive invalidated the key in `CQE_IMM` (ABI 1.21).
pub const CQE_FLAG_WITH_INV: u8 = 8;

/// Doorbells of a context's page: `QPN << 16 | send tail`.
pub const DB_SQ: usize = 0x008;
/// `QPN << 16 | receive tail`.
pub const DB_RQ: usize = 0x00c;
/// `CQN << 16 | flags` (bit 0: solicited only).
pub const DB_CQ_ARM: usize = 0x010;
/// `SRQN << 16 | tail` (ABI 1.11).
pub const DB_SRQ: usize = 0x014;
