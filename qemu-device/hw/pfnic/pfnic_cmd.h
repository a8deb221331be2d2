/*
 * pfnic admin commands: the arguments and results of each, as the sixteen
 * 32-bit CMD_ARG registers hold them (docs/verbs.md, "Admin command
 * mailbox"; docs/wire.md for QP_MODIFY's and QP_QUERY's wire words).
 *
 * This header is the one definition of the commands' layouts: the device
 * reads its arguments and writes its results through these structures,
 * and the driver's drivers/pfnic/cmd_abi.rs is checked against it, field
 * by field, by the host unit tests (userspace/pfnic-sys). A 64-bit value
 * is two words, low first (_lo, _hi).
 *
 * Copyright (c) 2026 The pfnic authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_PFNIC_CMD_H
#define HW_PFNIC_CMD_H

/* MR_SET (0x01) */
typedef struct PfnicCmdMrSet {
    uint32_t index, ctx, pd, access;
    uint32_t addr_lo, addr_hi, len_lo, len_hi;
    uint32_t flags;
} PfnicCmdMrSet;

typedef struct PfnicCmdMrSetReply {
    uint32_t key;
} PfnicCmdMrSetReply;

/*
 * MR_CLEAR (0x02), CQ_DESTROY (0x11), QP_DESTROY (0x23), SRQ_DESTROY (0x43),
 * MR_QUERY (0x03), QP_QUERY (0x22), SRQ_QUERY (0x42), CTX_QUERY (0x30)
 */
typedef struct PfnicCmdIndex {
    uint32_t index;
} PfnicCmdIndex;

/* MR_QUERY's results: mlx5's per-MR counters and two of pfnic's */
typedef struct PfnicCmdMrQueryReply {
    uint32_t page_faults_lo, page_faults_hi;
    uint32_t page_faults_handled_lo, page_faults_handled_hi;
    uint32_t page_invalidations_lo, page_invalidations_hi;
    uint32_t page_invalidations_handled_lo, page_invalidations_handled_hi;
    uint32_t page_prefetch_lo, page_prefetch_hi;
    uint32_t remote_access_errors_lo, remote_access_errors_hi;
    uint32_t page_fault_groups_lo, page_fault_groups_hi;
} PfnicCmdMrQueryReply;

/* MTT_WRITE (0x04) */
typedef struct PfnicCmdMttWrite {
    uint32_t index, first, count;
    uint32_t entries_lo, entries_hi;
    uint32_t first_hi;
} PfnicCmdMttWrite;

/* MTT_INVALIDATE (0x05) */
typedef struct PfnicCmdMttInvalidate {
    uint32_t index, first, count, first_hi;
} PfnicCmdMttInvalidate;

/* FAULT_RESUME (0x06) */
typedef struct PfnicCmdFaultResume {
    uint32_t index, first, count, status, first_hi;
} PfnicCmdFaultResume;

/* MR_MODIFY (0x07) */
typedef struct PfnicCmdMrModify {
    uint32_t index, pd, access;
} PfnicCmdMrModify;

/* CQ_CREATE (0x10) */
typedef struct PfnicCmdCqCreate {
    uint32_t cqn, ctx;
    uint32_t ring_lo, ring_hi, log2_entries;
    uint32_t record_lo, record_hi;
    uint32_t flags;
} PfnicCmdCqCreate;

/* QP_CREATE (0x20) */
typedef struct PfnicCmdQpCreate {
    uint32_t qpn, ctx, pd, send_cqn, recv_cqn;
    uint32_t sq_lo, sq_hi, sq_log2;
    uint32_t rq_lo, rq_hi, rq_log2;
    uint32_t record_lo, record_hi;
    uint32_t flags, srqn;
} PfnicCmdQpCreate;

/*
 * QP_MODIFY (0x21): a UD QP takes dest_qpn as its Q_Key and, of the rest,
 * sq_psn only
 */
typedef struct PfnicCmdQpModify {
    uint32_t qpn, state, access, dest_qpn;
    uint32_t min_rnr_timer, rnr_retry, retry_cnt;
    uint32_t dest_ip, sq_psn, rq_psn, path_mtu, timeout;
    uint32_t max_dest_rd_atomic, hop_limit_tclass, max_rd_atomic, wire_flags;
} PfnicCmdQpModify;

/* QP_QUERY's results */
typedef struct PfnicCmdQpQueryReply {
    uint32_t state, sq_head, rq_head, page_requests, rnr_waits;
    uint32_t completed, bytes_lo, bytes_hi, refused;
    uint32_t next_psn, expected_psn, retransmits, rnr_naks_sent;
    uint32_t rnr_naks_received, seq_naks_sent, duplicates;
} PfnicCmdQpQueryReply;

/*
 * QP_QUERY's first result alone, the state: what a driver reads when that is
 * all it needs (each register read traps into the device model)
 */
typedef struct PfnicCmdQpStateReply {
    uint32_t state;
} PfnicCmdQpStateReply;

/* QP_SET_DMAC (0x24) */
typedef struct PfnicCmdQpSetDmac {
    uint32_t qpn, mac_hi, mac_lo;
} PfnicCmdQpSetDmac;

/* CTX_QUERY's results */
typedef struct PfnicCmdCtxQueryReply {
    uint32_t access_errors_lo, access_errors_hi;
} PfnicCmdCtxQueryReply;

/* BACKUP_SET (0x31) */
typedef struct PfnicCmdBackupSet {
    uint32_t addr_lo, addr_hi, bytes;
} PfnicCmdBackupSet;

/* SRQ_CREATE (0x40) */
typedef struct PfnicCmdSrqCreate {
    uint32_t srqn, ctx, pd;
    uint32_t ring_lo, ring_hi, log2_entries;
    uint32_t record_lo, record_hi;
} PfnicCmdSrqCreate;

/* SRQ_MODIFY (0x41) */
typedef struct PfnicCmdSrqModify {
    uint32_t srqn, limit;
} PfnicCmdSrqModify;

/* SRQ_QUERY's results */
typedef struct PfnicCmdSrqQueryReply {
    uint32_t limit, head, tail, users, limit_events;
} PfnicCmdSrqQueryReply;

/* The argument registers, as words and as each command's structure */
typedef union PfnicCmdArgs {
    uint32_t word[16];
    PfnicCmdIndex index;
    PfnicCmdMrSet mr_set;
    PfnicCmdMrSetReply mr_set_reply;
    PfnicCmdMrQueryReply mr_query_reply;
    PfnicCmdMttWrite mtt_write;
    PfnicCmdMttInvalidate mtt_invalidate;
    PfnicCmdFaultResume fault_resume;
    PfnicCmdMrModify mr_modify;
    PfnicCmdCqCreate cq_create;
    PfnicCmdQpCreate qp_create;
    PfnicCmdQpModify qp_modify;
    PfnicCmdQpQueryReply qp_query_reply;
    PfnicCmdQpStateReply qp_state_reply;
    PfnicCmdQpSetDmac qp_set_dmac;
    PfnicCmdCtxQueryReply ctx_query_reply;
    PfnicCmdBackupSet backup_set;
    PfnicCmdSrqCreate srq_create;
    PfnicCmdSrqModify srq_modify;
    PfnicCmdSrqQueryReply srq_query_reply;
} PfnicCmdArgs;

/* A 64-bit argument or result from its two words */
static inline uint64_t pfnic_cmd_u64(uint32_t lo, uint32_t hi)
{
    return lo | (uint64_t)hi << 32;
}

#endif
